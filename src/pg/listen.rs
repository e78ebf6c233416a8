//! The one `LISTEN` connection of a node (docs/fleet.md): notifications other nodes'
//! transactions send on commit (`a2a_wake`: a wake may be there to take), handed to the
//! node on a thread of its own, which reconnects with backoff when the connection is lost.
//!
//! A notification sent while the connection was down is lost: every (re)connection is
//! reported ([`Heard::Connected`]) so the node reads again what it may have missed. The
//! thread also reports [`Heard::Tick`] a few times a second (no database round trip) so
//! the node can act on a timer of its own and notice `close`.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use postgres::fallible_iterator::FallibleIterator;
use postgres::Client;
use tokio_postgres_rustls::MakeRustlsConnect;

use super::describe;

/// How long the thread waits for a notification before a [`Heard::Tick`].
const TICK: Duration = Duration::from_millis(100);
/// Reconnection backoff bounds.
const BACKOFF_START: Duration = Duration::from_millis(100);
const BACKOFF_MAX: Duration = Duration::from_secs(5);

/// What the LISTEN thread reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Heard {
    /// Listening (first time, or again after the connection was lost): read what may
    /// have been missed.
    Connected,
    /// A notification on `channel`.
    Notification { channel: String, payload: String },
    /// Nothing heard for a moment.
    Tick,
}

/// A running LISTEN thread; [`Listener::close`] (or dropping it) stops it.
pub struct Listener {
    stop: Arc<AtomicBool>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl Listener {
    /// Starts listening on `channels` of the database `config` names (over TLS as the
    /// store's other connections, `tls`), calling `heard` on the listening thread for
    /// each event.
    pub fn start(
        config: postgres::Config,
        tls: MakeRustlsConnect,
        target: String,
        channels: &[&str],
        mut heard: Box<dyn FnMut(Heard) + Send>,
    ) -> std::io::Result<Listener> {
        let stop = Arc::new(AtomicBool::new(false));
        let listen: String = channels.iter().map(|c| format!("LISTEN {c};")).collect();
        let thread = {
            let stop = stop.clone();
            std::thread::Builder::new()
                .name("a2a-pg-listen".into())
                .spawn(move || {
                    let mut backoff = BACKOFF_START;
                    while !stop.load(Ordering::SeqCst) {
                        match connect(&config, &tls, &listen) {
                            Ok(mut client) => {
                                backoff = BACKOFF_START;
                                heard(Heard::Connected);
                                if let Err(why) = listen_until_lost(&mut client, &stop, &mut heard)
                                {
                                    crate::log::warn(
                                        "a2a_listen_lost",
                                        serde_json::json!({ "database": target, "error": why }),
                                    );
                                }
                            }
                            Err(why) => {
                                crate::log::warn(
                                    "a2a_listen_failed",
                                    serde_json::json!({ "database": target, "error": why, "retryInMs": backoff.as_millis() as u64 }),
                                );
                                sleep_unless_stopped(backoff, &stop);
                                backoff = (backoff * 2).min(BACKOFF_MAX);
                            }
                        }
                    }
                })?
        };
        Ok(Listener {
            stop,
            thread: Mutex::new(Some(thread)),
        })
    }

    /// Stops the thread and closes its connection (waits for it; at most one tick).
    /// Idempotent.
    pub fn close(&self) {
        self.stop.store(true, Ordering::SeqCst);
        let thread = self.thread.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(thread) = thread {
            if thread.thread().id() != std::thread::current().id() {
                let _ = thread.join();
            }
        }
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        self.close();
    }
}

fn connect(
    config: &postgres::Config,
    tls: &MakeRustlsConnect,
    listen: &str,
) -> Result<Client, String> {
    let mut client = config.connect(tls.clone()).map_err(|e| describe(&e))?;
    client.batch_execute(listen).map_err(|e| describe(&e))?;
    Ok(client)
}

/// Reports what the connection hears until it is lost (`Err`: why) or `stop` is set.
fn listen_until_lost(
    client: &mut Client,
    stop: &AtomicBool,
    heard: &mut Box<dyn FnMut(Heard) + Send>,
) -> Result<(), String> {
    while !stop.load(Ordering::SeqCst) {
        let next = client.notifications().timeout_iter(TICK).next();
        match next {
            Ok(Some(n)) => heard(Heard::Notification {
                channel: n.channel().to_string(),
                payload: n.payload().to_string(),
            }),
            Ok(None) if client.is_closed() => return Err("the server closed the connection".into()),
            Ok(None) => heard(Heard::Tick),
            Err(e) => return Err(describe(&e)),
        }
    }
    Ok(())
}

fn sleep_unless_stopped(wait: Duration, stop: &AtomicBool) {
    let until = std::time::Instant::now() + wait;
    while !stop.load(Ordering::SeqCst) {
        let left = until.saturating_duration_since(std::time::Instant::now());
        if left.is_zero() {
            return;
        }
        std::thread::sleep(left.min(TICK));
    }
}
