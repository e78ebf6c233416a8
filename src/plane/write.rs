//! [`WriteJob`]: a plane write built and checked but not yet queued, and the three ways to
//! run it. The rule's checks that need no store run when the job is built (a refusal is
//! carried in the job); its transaction runs on the writer thread when the job is queued.
//!
//! - [`WriteJob::wait`] blocks the calling thread until the commit (Rust callers, the libuv
//!   pool, a runtime's blocking pool);
//! - [`WriteJob::done`] awaits the commit without holding a thread (the listener's and the
//!   addon's async workers);
//! - [`WriteJob::then`] has the writer thread hand the outcome on itself, right after the
//!   commit: the addon settles a Promise that way, so a write from JS crosses two threads
//!   (JS → writer → JS) instead of four through libuv's pool.

use tokio::sync::oneshot;

use super::PlaneError;
use crate::store::{Blocked, OnCommit, Reply, Store, StoreError, WriteTx};

type Submit<R> = Box<dyn FnOnce(Reply<R, PlaneError>) -> Option<Blocked> + Send>;

/// A plane write ready to queue (see the module doc). Nothing is written until it is
/// waited for, awaited or given a reply.
#[must_use = "a write does nothing until it is waited for, awaited or given a reply"]
pub struct WriteJob<R> {
    submit: Result<Submit<R>, PlaneError>,
}

impl<R: Send + 'static> WriteJob<R> {
    pub(super) fn new(
        store: &Store,
        work: impl FnMut(&dyn WriteTx) -> Result<R, PlaneError> + Send + 'static,
        on_commit: Option<OnCommit<R>>,
    ) -> Self {
        let store = store.clone();
        WriteJob {
            submit: Ok(Box::new(move |reply| store.submit(work, on_commit, reply))),
        }
    }

    /// A write refused before it reached the store (a check that needs no store failed).
    pub(super) fn refused(err: PlaneError) -> Self {
        WriteJob { submit: Err(err) }
    }

    /// The same write, its result passed through `f` (on the writer thread).
    pub(super) fn map<T: Send + 'static>(
        self,
        f: impl FnOnce(R) -> T + Send + 'static,
    ) -> WriteJob<T> {
        match self.submit {
            Ok(submit) => WriteJob {
                submit: Ok(Box::new(move |reply: Reply<T, PlaneError>| {
                    submit(Box::new(move |result| reply(result.map(f))))
                })),
            },
            Err(err) => WriteJob::refused(err),
        }
    }

    /// Queues the write and blocks until it is committed. Never on an async worker.
    pub fn wait(self) -> Result<R, PlaneError> {
        crate::store::wait_for_reply(|reply| self.then(reply))
    }

    /// Queues the write and awaits its commit, holding no thread. Must run inside a tokio
    /// runtime: a full queue is waited on from that runtime's blocking pool.
    pub async fn done(self) -> Result<R, PlaneError> {
        let (reply, outcome) = channel();
        if let Some(blocked) = self.then(reply) {
            tokio::task::spawn_blocking(move || blocked.send());
        }
        outcome
            .await
            .unwrap_or_else(|_| Err(PlaneError::Store(StoreError::Closed)))
    }

    /// Queues the write; `reply` gets its outcome on the writer thread right after the
    /// commit (or at once, on the calling thread, for a refused write or a closed store).
    /// A full queue gives the write back as [`Blocked`], to send from a thread that may
    /// wait.
    pub fn then(self, reply: Reply<R, PlaneError>) -> Option<Blocked> {
        match self.submit {
            Ok(submit) => submit(reply),
            Err(err) => {
                reply(Err(err));
                None
            }
        }
    }
}

type Outcome<R> = oneshot::Receiver<Result<R, PlaneError>>;

fn channel<R: Send + 'static>() -> (Reply<R, PlaneError>, Outcome<R>) {
    let (sender, receiver) = oneshot::channel();
    (
        Box::new(move |result| {
            let _ = sender.send(result);
        }),
        receiver,
    )
}
