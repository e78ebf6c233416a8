//! The queue between callers and the writer thread: a write as a job ([`Job`], answered
//! through its [`Reply`] after the commit that made it durable), the bounded queue and its
//! back-pressure ([`Blocked`]), one caller's writes kept in call order when the queue is
//! full ([`InOrder`]), blocking callers' wait ([`wait_for_reply`]) and the hooks a batch's
//! replies leave to its end ([`at_batch_end`]).
//!
//! A backend's writer threads (SQLite's one, [`super::writer`]) take the jobs and run
//! them; nothing here touches a database.

use std::sync::mpsc::{self, Receiver, SyncSender};
use std::sync::{Arc, Mutex};

use tokio::sync::oneshot;

use super::{StoreError, WriteTx};

/// Queued writes beyond this make callers wait (back-pressure instead of unbounded memory).
const QUEUE_DEPTH: usize = 4096;

/// How a queued write's outcome reaches its caller: called once, on the writer thread,
/// after the commit that made the result durable (or with the error that kept it from
/// being so). It must not block: it hands the outcome on (a channel, a Promise).
pub type Reply<R, E> = Box<dyn FnOnce(Result<R, E>) + Send>;

/// The backend's end of the queue (SQLite's one writer takes jobs from it; a backend
/// with several writers shares it among them).
pub type Jobs = Receiver<Box<dyn Job>>;

/// The callers' end of the queue.
pub type Queue = SyncSender<Box<dyn Job>>;

/// A new queue of at most [`QUEUE_DEPTH`] writes.
pub fn queue() -> (Queue, Jobs) {
    mpsc::sync_channel(QUEUE_DEPTH)
}

/// Queues `work` on `queue` (`None`: the store is closed), or answers it at once when it
/// cannot be: see [`super::Store::submit`].
pub(super) fn submit<F, R, E>(
    queue: Option<Queue>,
    work: F,
    on_commit: Option<OnCommit<R>>,
    reply: Reply<R, E>,
) -> Option<Blocked>
where
    F: FnMut(&dyn WriteTx) -> Result<R, E> + Send + 'static,
    R: Send + 'static,
    E: From<StoreError> + Send + 'static,
{
    let job: Box<dyn Job> = Box::new(TypedJob {
        work,
        on_commit,
        reply,
        result: None,
    });
    let Some(sender) = queue else {
        job.abort(StoreError::Closed);
        return None;
    };
    match sender.try_send(job) {
        Ok(()) => None,
        Err(mpsc::TrySendError::Full(job)) => Some(Blocked { job, sender }),
        Err(mpsc::TrySendError::Disconnected(job)) => {
            job.abort(StoreError::Closed);
            None
        }
    }
}

/// A queued write, type-erased. A backend runs it inside a write transaction, commits,
/// and then completes it (or completes it with the error that kept the commit from
/// happening); it never answers before the commit.
pub trait Job: Send {
    /// Runs inside the write transaction and keeps its result; returns whether it
    /// succeeded. May run a second time, in a new transaction, when the first one is
    /// rolled back for another job's sake (see [`super::writer::writer_loop`]).
    fn run(&mut self, tx: &dyn WriteTx) -> bool;
    /// Answers with the kept result once the commit's fate is known (`Some` error: the
    /// commit failed).
    fn complete(self: Box<Self>, commit_error: Option<StoreError>);
    /// The batch could not start: answer with this error.
    fn abort(self: Box<Self>, err: StoreError);
}

/// Runs on the writer thread right after the commit that made a job's result durable, in
/// commit order (used to publish events; it may take what it publishes out of the result).
pub type OnCommit<R> = Box<dyn FnOnce(&mut R) + Send>;

struct TypedJob<F, R, E> {
    work: F,
    on_commit: Option<OnCommit<R>>,
    reply: Reply<R, E>,
    result: Option<Result<R, E>>,
}

impl<F, R, E> Job for TypedJob<F, R, E>
where
    F: FnMut(&dyn WriteTx) -> Result<R, E> + Send,
    R: Send + 'static,
    E: From<StoreError> + Send + 'static,
{
    fn run(&mut self, tx: &dyn WriteTx) -> bool {
        let result = (self.work)(tx);
        let ok = result.is_ok();
        self.result = Some(result);
        ok
    }

    fn complete(self: Box<Self>, commit_error: Option<StoreError>) {
        let TypedJob {
            on_commit,
            reply,
            result,
            ..
        } = *self;
        let result = match (result, commit_error) {
            (_, Some(err)) => Err(E::from(err)),
            (Some(result), None) => result,
            (None, None) => Err(E::from(StoreError::Database {
                backend: "store",
                message: "a write was committed without being run (a bug in the store's writer)"
                    .into(),
            })),
        };
        // A panic in either hook must not take the writer thread down with it.
        let mut result = result;
        let handed_on = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || {
            if let (Ok(value), Some(on_commit)) = (&mut result, on_commit) {
                on_commit(value);
            }
            // The caller may have gone away; its records are committed (or not) either
            // way.
            reply(result);
        }));
        if handed_on.is_err() {
            crate::log::warn(
                "a2a_write_reply_failed",
                serde_json::json!({
                    "error": "a write's commit hook or reply panicked; the write is committed, its caller may not hear back",
                }),
            );
        }
    }

    fn abort(self: Box<Self>, err: StoreError) {
        (self.reply)(Err(E::from(err)));
    }
}

/// What runs once a batch's replies have all been called ([`at_batch_end`]).
type BatchEndHooks = Vec<Box<dyn FnOnce()>>;

thread_local! {
    /// On the writer thread while it answers a batch: its [`BatchEndHooks`].
    static BATCH_END: std::cell::RefCell<Option<BatchEndHooks>> =
        const { std::cell::RefCell::new(None) };
}

/// Runs `answer` (the writer answering a batch's jobs), then the hooks its replies left to
/// the end of the batch ([`at_batch_end`]).
pub fn answer_batch(answer: impl FnOnce()) {
    BATCH_END.with(|hooks| hooks.borrow_mut().replace(Vec::new()));
    answer();
    let hooks = BATCH_END.with(|hooks| hooks.borrow_mut().take());
    for hook in hooks.into_iter().flatten() {
        if std::panic::catch_unwind(std::panic::AssertUnwindSafe(hook)).is_err() {
            crate::log::warn(
                "a2a_write_reply_failed",
                serde_json::json!({ "error": "a hook run after a commit's replies panicked" }),
            );
        }
    }
}

/// Runs `hook` once the replies of the commit being answered have all been called, when
/// called from a reply on the writer thread; anywhere else, at once. A reply that wakes
/// another thread can leave the waking to one hook per batch, so a commit of many jobs
/// wakes that thread once instead of once per job.
pub fn at_batch_end(hook: impl FnOnce() + 'static) {
    let hook: Box<dyn FnOnce()> = Box::new(hook);
    let hook = BATCH_END.with(|hooks| match hooks.borrow_mut().as_mut() {
        Some(hooks) => {
            hooks.push(hook);
            None
        }
        None => Some(hook),
    });
    if let Some(hook) = hook {
        hook();
    }
}

/// Submits a write through `submit` (which hands the reply on to
/// [`Store::submit`](super::Store::submit)) and blocks the calling thread until its
/// outcome: waiting for room in a full queue, then for the commit. Never on an async
/// worker or Node's JS thread.
pub fn wait_for_reply<R, E>(submit: impl FnOnce(Reply<R, E>) -> Option<Blocked>) -> Result<R, E>
where
    R: Send + 'static,
    E: From<StoreError> + Send + 'static,
{
    let (reply, outcome) = oneshot::channel();
    if let Some(blocked) = submit(Box::new(move |result| {
        let _ = reply.send(result);
    })) {
        blocked.send();
    }
    outcome
        .blocking_recv()
        .unwrap_or_else(|_| Err(E::from(StoreError::Closed)))
}

/// A write the queue had no room for (it holds [`QUEUE_DEPTH`] jobs): [`Blocked::send`]
/// queues it from a thread that may wait for room (back-pressure), never from an async
/// worker or Node's JS thread.
#[must_use = "the write is queued only when sent"]
pub struct Blocked {
    job: Box<dyn Job>,
    sender: Queue,
}

impl Blocked {
    /// Waits for room in the queue and queues the write (or answers it with
    /// [`StoreError::Closed`] if the store closed meanwhile).
    pub fn send(self) {
        if let Err(mpsc::SendError(job)) = self.sender.send(self.job) {
            job.abort(StoreError::Closed);
        }
    }
}

/// One caller's writes, queued in the order the caller made them even when the queue is
/// full. [`Store::submit`](super::Store::submit) alone keeps that order only while there
/// is room: a write that comes back [`Blocked`] is sent later from another thread, and a
/// write the caller makes meanwhile could find room first. Through `InOrder`, once one write is blocked every
/// later one waits behind it, and a thread of its own (started for that backlog, ended
/// with it) sends them one by one, each waiting for room. The caller never blocks, so
/// Node's JS thread may use it: an agent can issue `startWork` and `complete` without
/// awaiting the first, and the writer applies them in that order.
#[derive(Default)]
pub struct InOrder {
    backlog: Mutex<Backlog>,
}

/// A write not tried yet: it queues itself (or answers at once) and gives itself back
/// as [`Blocked`] when the queue is full.
type Deferred = Box<dyn FnOnce() -> Option<Blocked> + Send>;

#[derive(Default)]
struct Backlog {
    /// A thread is sending `waiting`, oldest first; new writes go behind them.
    draining: bool,
    waiting: std::collections::VecDeque<Deferred>,
}

impl InOrder {
    /// Queues the write `submit` makes (see [`crate::plane::WriteJob::then`]) after every
    /// write this caller made before it. Never blocks.
    pub fn submit(self: &Arc<Self>, submit: impl FnOnce() -> Option<Blocked> + Send + 'static) {
        let mut backlog = self.backlog.lock().unwrap_or_else(|p| p.into_inner());
        if backlog.draining {
            backlog.waiting.push_back(Box::new(submit));
            return;
        }
        // Tried under the lock, so no later write of this caller can pass it; trying
        // never blocks.
        let Some(blocked) = submit() else { return };
        backlog.draining = true;
        backlog.waiting.push_back(Box::new(move || Some(blocked)));
        drop(backlog);
        let this = self.clone();
        let started = std::thread::Builder::new()
            .name("task-plane-backlog".into())
            .spawn(move || this.drain());
        if let Err(err) = started {
            // No thread to wait on: wait here rather than lose or reorder a write.
            crate::log::warn(
                "a2a_backlog_thread_failed",
                serde_json::json!({ "error": err.to_string(), "effect": "the caller waits for room in the write queue itself" }),
            );
            self.drain();
        }
    }

    /// Sends the backlog oldest first, waiting for room for each, until it is empty.
    fn drain(&self) {
        loop {
            let next = {
                let mut backlog = self.backlog.lock().unwrap_or_else(|p| p.into_inner());
                match backlog.waiting.pop_front() {
                    Some(next) => next,
                    None => {
                        backlog.draining = false;
                        return;
                    }
                }
            };
            if let Some(blocked) = next() {
                blocked.send();
            }
        }
    }
}
