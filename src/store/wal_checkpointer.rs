//! The WAL checkpoint thread: copies committed pages from the WAL back into the database
//! on a connection of its own, so the writer's commits do not pay for it. (Not to be
//! confused with [`super::checkpoints`], the sources' stored read positions.)

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use rusqlite::{Connection, OpenFlags};

/// WAL size (pages) past which the writer checkpoints itself, in case the checkpoint thread
/// falls behind under sustained load.
pub(super) const WRITER_CHECKPOINT_PAGES: i64 = 16_384;
/// At most one checkpoint per this interval, however often the writer commits.
const CHECKPOINT_EVERY: std::time::Duration = std::time::Duration::from_millis(100);

pub(super) type Checkpointer = (Arc<AtomicBool>, JoinHandle<()>);

/// A thread with its own connection that runs a PASSIVE checkpoint (never blocking the
/// writer or readers) after commits: the writer unparks it after each commit, and it
/// checkpoints at most once per [`CHECKPOINT_EVERY`] (commits in between coalesce into
/// one wake-up). With nothing committed it sleeps: an idle store wakes no thread.
pub(super) fn start(db_path: &Path) -> std::io::Result<Checkpointer> {
    let stop = Arc::new(AtomicBool::new(false));
    let flag = stop.clone();
    let path = db_path.to_path_buf();
    let handle = std::thread::Builder::new()
        .name("task-plane-checkpoint".into())
        .spawn(move || {
            let Ok(conn) = Connection::open_with_flags(
                &path,
                OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
            ) else {
                return;
            };
            let _ = conn.busy_timeout(std::time::Duration::from_millis(100));
            let _ = conn.pragma_update(None, "synchronous", "FULL");
            // This connection never writes, so it never checkpoints on its own.
            let _ = conn.pragma_update(None, "wal_autocheckpoint", 0);
            let stopped = || flag.load(Ordering::SeqCst);
            let mut failing = false;
            while !stopped() {
                // Until a commit (or close()) unparks it.
                std::thread::park();
                if stopped() {
                    break;
                }
                match conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |r| r.get::<_, i64>(1)) {
                    Ok(_) => failing = false,
                    // Logged once per run of failures: the writer still checkpoints past
                    // a large WAL, so nothing is lost, but the operator should know.
                    Err(e) if !failing => {
                        failing = true;
                        crate::log::warn(
                            "a2a_checkpoint_failed",
                            serde_json::json!({ "path": path.display().to_string(), "error": e.to_string() }),
                        );
                    }
                    Err(_) => {}
                }
                // The rest of the interval: commits meanwhile leave one unpark token,
                // so the next checkpoint follows right after; close() ends the wait.
                let until = std::time::Instant::now() + CHECKPOINT_EVERY;
                while !stopped() {
                    let left = until.saturating_duration_since(std::time::Instant::now());
                    if left.is_zero() {
                        break;
                    }
                    std::thread::sleep(left.min(std::time::Duration::from_millis(20)));
                }
            }
        })?;
    Ok((stop, handle))
}

pub(super) fn stop(slot: &Mutex<Option<Checkpointer>>) {
    let taken = slot.lock().unwrap_or_else(|p| p.into_inner()).take();
    if let Some((stop, handle)) = taken {
        stop.store(true, Ordering::SeqCst);
        handle.thread().unpark();
        let _ = handle.join();
    }
}
