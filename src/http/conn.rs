//! Who gets a connection slot, and what a slow or idle client may hold.
//!
//! - **Short requests always get served.** At most `max_connections` connections are served
//!   at once. When a new connection arrives at the limit, the connection that has been idle
//!   the longest (between requests, or connected without sending one) is closed to make
//!   room; only when every slot is busy does the newcomer wait for one.
//! - **Streams do not take connection slots.** An SSE response's connection leaves the
//!   connection pool while it carries the stream (whose place in the stream pool,
//!   `max_streams` overall and `max_streams_per_principal` per caller, is the handler's:
//!   `handler::streams`). When the stream ends the connection returns to the connection
//!   pool, or closes if that pool is full.
//! - **A client that stops reading is dropped.** [`WriteDeadline`] fails a connection whose
//!   writes make no progress for `write_timeout` (see `sse.rs` for what a slow stream holds).

use std::collections::HashMap;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore};
use tokio::time::Sleep;

/// A socket whose writes fail with `TimedOut` once they make no progress for `timeout`
/// (the peer stopped reading and every buffer is full). Reads are untouched: an idle
/// keep-alive connection writes nothing, so it never stalls.
pub struct WriteDeadline<S> {
    inner: S,
    timeout: Duration,
    stalled: Option<Pin<Box<Sleep>>>,
}

impl<S> WriteDeadline<S> {
    pub fn new(inner: S, timeout: Duration) -> Self {
        WriteDeadline {
            inner,
            timeout,
            stalled: None,
        }
    }

    /// Called when a write returned `Pending`: starts the stall clock (or checks it).
    fn check_stall(&mut self, cx: &mut Context<'_>) -> Poll<io::Error> {
        let timeout = self.timeout;
        let sleep = self
            .stalled
            .get_or_insert_with(|| Box::pin(tokio::time::sleep(timeout)));
        match sleep.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(io::Error::new(io::ErrorKind::TimedOut, WriteStalled)),
            Poll::Pending => Poll::Pending,
        }
    }

    fn progress<T>(
        &mut self,
        cx: &mut Context<'_>,
        poll: Poll<io::Result<T>>,
    ) -> Poll<io::Result<T>> {
        match poll {
            Poll::Ready(result) => {
                self.stalled = None;
                Poll::Ready(result)
            }
            Poll::Pending => match self.check_stall(cx) {
                Poll::Ready(err) => Poll::Ready(Err(err)),
                Poll::Pending => Poll::Pending,
            },
        }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for WriteDeadline<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for WriteDeadline<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let poll = Pin::new(&mut self.inner).poll_write(cx, buf);
        self.progress(cx, poll)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let poll = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        self.progress(cx, poll)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let poll = Pin::new(&mut self.inner).poll_flush(cx);
        self.progress(cx, poll)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let poll = Pin::new(&mut self.inner).poll_shutdown(cx);
        self.progress(cx, poll)
    }
}

/// How long a newcomer waits for the connection asked to make room before it asks the next
/// idle one as well; and how long a connection asked to close may take before it is dropped
/// (unless it is serving a request).
pub const ROOM_PATIENCE: Duration = Duration::from_millis(500);
/// Log lines about dropped or closed connections are one per burst, this long after its
/// first event, with the count.
const BURST_WINDOW: Duration = Duration::from_secs(1);

/// Counts events of one kind and writes one log line per burst of them.
struct BurstLog {
    event: &'static str,
    count: AtomicU64,
    scheduled: AtomicBool,
}

impl BurstLog {
    const fn new(event: &'static str) -> Self {
        BurstLog {
            event,
            count: AtomicU64::new(0),
            scheduled: AtomicBool::new(false),
        }
    }

    /// Counts one event; the first of a burst schedules the line (and `then`, once the
    /// burst's line is written). Must run on the listener's runtime.
    fn note_then(self: &Arc<Self>, fields: serde_json::Value, then: Option<fn()>) {
        self.count.fetch_add(1, Ordering::Relaxed);
        if self.scheduled.swap(true, Ordering::AcqRel) {
            return;
        }
        let log = self.clone();
        tokio::spawn(async move {
            tokio::time::sleep(BURST_WINDOW).await;
            log.scheduled.store(false, Ordering::Release);
            let count = log.count.swap(0, Ordering::Relaxed);
            let mut fields = fields;
            fields["connections"] = count.into();
            crate::log::event(log.event, fields);
            if let Some(then) = then {
                let _ = tokio::task::spawn_blocking(then).await;
            }
        });
    }
}

/// The listener's connections: slots and idle order.
pub struct Connections {
    max_connections: usize,
    permits: Arc<Semaphore>,
    state: Mutex<State>,
    /// Signalled when a connection becomes idle (a candidate to close at the limit), while
    /// `admitting` says a newcomer waits for one.
    became_idle: Notify,
    admitting: AtomicBool,
    /// Orders idle connections: the lowest mark has been idle the longest.
    idle_marks: AtomicU64,
    /// Signalled when the last connection is gone.
    all_closed: Notify,
    /// Connections closed to make room, and connections dropped for stalling.
    closed_for_room: Arc<BurstLog>,
    stalled: Arc<BurstLog>,
}

#[derive(Default)]
struct State {
    next_id: u64,
    open: HashMap<u64, Arc<Slot>>,
}

/// One accepted connection.
pub struct Slot {
    id: u64,
    pool: Mutex<Pool>,
    /// Requests whose response has not been fully written yet.
    in_flight: AtomicUsize,
    /// When the connection last became idle (accepted, or its last response written), as a
    /// mark of [`Connections::idle_marks`].
    idle_since: AtomicU64,
    /// Asks the connection to close once its current response (if any) is written.
    close: Notify,
}

/// Where a connection stands in the connection pool.
struct Pool {
    /// Its permit; `None` while it carries a stream (or once it has ended).
    permit: Option<OwnedSemaphorePermit>,
    /// Asked to close to make room: not a candidate again.
    closing: bool,
    /// The connection has ended: a stream ending after it takes no permit.
    ended: bool,
}

impl Slot {
    /// Resolves when the listener asks this connection to make room.
    pub async fn close_requested(&self) {
        self.close.notified().await
    }

    /// Whether a request is being served (read, handled, or its response written).
    pub fn is_serving(&self) -> bool {
        self.in_flight.load(Ordering::SeqCst) != 0
    }

    fn pool(&self) -> std::sync::MutexGuard<'_, Pool> {
        self.pool.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn is_idle(&self) -> bool {
        // SeqCst with the guard's decrement and `admitting`: an admit that scans while a
        // request ends either sees the connection idle or is woken by it.
        if self.in_flight.load(Ordering::SeqCst) != 0 {
            return false;
        }
        let pool = self.pool();
        pool.permit.is_some() && !pool.closing
    }
}

impl Connections {
    pub fn new(max_connections: usize) -> Arc<Connections> {
        Arc::new(Connections {
            permits: Arc::new(Semaphore::new(max_connections)),
            max_connections,
            state: Mutex::new(State::default()),
            became_idle: Notify::new(),
            admitting: AtomicBool::new(false),
            idle_marks: AtomicU64::new(0),
            all_closed: Notify::new(),
            closed_for_room: Arc::new(BurstLog::new("a2a_idle_connections_closed")),
            stalled: Arc::new(BurstLog::new("a2a_slow_clients_dropped")),
        })
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A connection slot for a just-accepted connection. At the limit, the longest-idle
    /// connection is asked to close; when none is idle, this waits until one is (or until a
    /// slot frees up).
    pub async fn admit(self: &Arc<Self>) -> Arc<Slot> {
        let permit = self.wait_for_permit().await;
        let mut state = self.state();
        state.next_id += 1;
        let slot = Arc::new(Slot {
            id: state.next_id,
            pool: Mutex::new(Pool {
                permit: Some(permit),
                closing: false,
                ended: false,
            }),
            in_flight: AtomicUsize::new(0),
            idle_since: AtomicU64::new(self.idle_marks.fetch_add(1, Ordering::Relaxed)),
            close: Notify::new(),
        });
        state.open.insert(slot.id, slot.clone());
        slot
    }

    async fn wait_for_permit(self: &Arc<Self>) -> OwnedSemaphorePermit {
        if let Ok(permit) = self.permits.clone().try_acquire_owned() {
            return permit;
        }
        self.admitting.store(true, Ordering::SeqCst);
        let permit = loop {
            if let Ok(permit) = self.permits.clone().try_acquire_owned() {
                break permit;
            }
            let idle = self.became_idle.notified();
            tokio::pin!(idle);
            idle.as_mut().enable();
            // The asked connection returns its permit once closed. Meanwhile another may go
            // idle; and one asked may close slowly (a partial request head, a response still
            // flushing), so after a while the next idle one is asked too.
            let asked = self.close_longest_idle();
            tokio::select! {
                permit = self.permits.clone().acquire_owned() => match permit {
                    Ok(permit) => break permit,
                    Err(_) => continue,
                },
                _ = idle => {}
                _ = tokio::time::sleep(ROOM_PATIENCE), if asked => {}
            }
        };
        self.admitting.store(false, Ordering::SeqCst);
        permit
    }

    /// Asks the connection idle the longest to close; `false` when none is idle.
    fn close_longest_idle(&self) -> bool {
        let state = self.state();
        let oldest = state
            .open
            .values()
            .filter(|slot| slot.is_idle())
            .min_by_key(|slot| slot.idle_since.load(Ordering::Relaxed));
        match oldest {
            Some(slot) => {
                slot.pool().closing = true;
                slot.close.notify_one();
                self.closed_for_room.note_then(
                    serde_json::json!({
                        "why": "A2A_MAX_CONNECTIONS reached: the longest-idle connections made room",
                        "max_connections": self.max_connections,
                    }),
                    None,
                );
                true
            }
            None => false,
        }
    }

    /// The connection `slot` has ended: its permit returns now, even if a stream it
    /// carried is dropped later.
    pub fn closed(&self, slot: &Slot) {
        {
            let mut pool = slot.pool();
            pool.ended = true;
            pool.permit = None;
        }
        let mut state = self.state();
        state.open.remove(&slot.id);
        if state.open.is_empty() {
            self.all_closed.notify_waiters();
        }
    }

    /// A connection was dropped because its client stopped reading. Its buffers are freed,
    /// but glibc keeps large freed buffers in the heap once it has raised its mmap
    /// threshold, so a burst of slow readers would leave the process larger after each
    /// burst. One trim after the burst (with its log line) hands that memory back to the OS.
    pub fn dropped_for_stalling(self: &Arc<Self>, write_timeout: Duration) {
        self.stalled.note_then(
            serde_json::json!({
                "why": "the client read nothing of its response or stream for A2A_WRITE_TIMEOUT_MS",
                "write_timeout_ms": write_timeout.as_millis() as u64,
            }),
            Some(trim_heap),
        );
    }

    /// Waits until every connection has ended.
    pub async fn wait_all_closed(&self) {
        loop {
            let closed = self.all_closed.notified();
            tokio::pin!(closed);
            closed.as_mut().enable();
            if self.state().open.is_empty() {
                return;
            }
            closed.await;
        }
    }

    /// Marks a request on `slot` as started; the returned guard marks it done when dropped
    /// (once its response has been written).
    pub fn request_started(self: &Arc<Self>, slot: &Arc<Slot>) -> RequestGuard {
        slot.in_flight.fetch_add(1, Ordering::AcqRel);
        RequestGuard {
            connections: self.clone(),
            slot: slot.clone(),
        }
    }

    /// Takes `slot` out of the connection pool while it carries a stream (whose place in
    /// the stream pool the caller holds already).
    pub fn carry_stream(self: &Arc<Self>, slot: &Arc<Slot>) -> Carrying {
        // The connection no longer counts against max_connections until its stream ends.
        slot.pool().permit = None;
        Carrying {
            connections: self.clone(),
            slot: slot.clone(),
        }
    }
}

/// The error of a write that made no progress for the write timeout.
#[derive(Debug)]
struct WriteStalled;

impl std::fmt::Display for WriteStalled {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the client read nothing for A2A_WRITE_TIMEOUT_MS")
    }
}

impl std::error::Error for WriteStalled {}

/// Whether a connection ended because its writes stalled ([`WriteDeadline`]).
pub fn is_write_stall(err: &hyper::Error) -> bool {
    let mut source = std::error::Error::source(err);
    while let Some(err) = source {
        if let Some(io) = err.downcast_ref::<io::Error>() {
            return io.get_ref().is_some_and(|inner| inner.is::<WriteStalled>());
        }
        source = err.source();
    }
    false
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn trim_heap() {
    // SAFETY: malloc_trim only releases free memory of the allocator's own arenas.
    unsafe {
        libc::malloc_trim(0);
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn trim_heap() {}

/// Ends a connection's accounting when its task ends (normally, or by a panic).
pub struct ConnectionEnd {
    connections: Arc<Connections>,
    slot: Arc<Slot>,
}

impl ConnectionEnd {
    pub fn new(connections: Arc<Connections>, slot: Arc<Slot>) -> Self {
        ConnectionEnd { connections, slot }
    }

    pub fn dropped_for_stalling(&self, write_timeout: Duration) {
        self.connections.dropped_for_stalling(write_timeout);
    }
}

impl Drop for ConnectionEnd {
    fn drop(&mut self) {
        self.connections.closed(&self.slot);
    }
}

/// A request in flight on a connection.
pub struct RequestGuard {
    connections: Arc<Connections>,
    slot: Arc<Slot>,
}

impl Drop for RequestGuard {
    fn drop(&mut self) {
        // The mark first, so a scan never sees this connection idle with an old mark.
        let mark = self.connections.idle_marks.fetch_add(1, Ordering::Relaxed);
        self.slot.idle_since.store(mark, Ordering::Relaxed);
        if self.slot.in_flight.fetch_sub(1, Ordering::SeqCst) == 1
            && self.connections.admitting.load(Ordering::SeqCst)
        {
            self.connections.became_idle.notify_waiters();
        }
    }
}

/// A connection carrying a stream; dropping it (once hyper has written the whole stream)
/// moves the connection back to the connection pool, or closes it when that pool is full.
pub struct Carrying {
    connections: Arc<Connections>,
    slot: Arc<Slot>,
}

impl Drop for Carrying {
    fn drop(&mut self) {
        let mut pool = self.slot.pool();
        if !pool.ended {
            match self.connections.permits.clone().try_acquire_owned() {
                Ok(permit) => pool.permit = Some(permit),
                // Over the limit now: close once the stream's response is complete.
                Err(_) => {
                    pool.closing = true;
                    self.slot.close.notify_one();
                }
            }
        }
    }
}
