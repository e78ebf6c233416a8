//! The store root's lock: one process per root, held by an exclusive `flock` on
//! `<root>/lock` for as long as the store is open, with the holder's pid written in it
//! so that a second opener's error names the holder.

use std::fs::{self, File, OpenOptions};
use std::io::{Read, Seek, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use super::{durable, Faults, StoreError, LOCK_FILE};

/// How long an opener waits for a root whose holder is letting go.
const LOCK_GRACE: std::time::Duration = std::time::Duration::from_millis(500);

/// Takes the root's lock, waiting up to [`LOCK_GRACE`] for a holder that is letting go. A
/// lock is held by the open file, and a child process forked by any thread of this
/// process (Pi's tools run shells) holds a copy of every open file until it execs: a
/// root closed at that moment stays locked for a few milliseconds more, and a reopen
/// must not be refused for it. A root really in use is still refused, after the grace.
fn try_lock_briefly(file: &File) -> Result<(), fs::TryLockError> {
    let deadline = std::time::Instant::now() + LOCK_GRACE;
    loop {
        match file.try_lock() {
            Err(fs::TryLockError::WouldBlock) if std::time::Instant::now() < deadline => {
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            other => return other,
        }
    }
}

pub(super) fn take(root: &Path, trace: Option<&Faults>) -> Result<File, StoreError> {
    let path = root.join(LOCK_FILE);
    let mut file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .open(&path)
        .map_err(|e| StoreError::Io {
            path: path.clone(),
            message: format!("cannot open the lock file: {e}"),
        })?;
    match try_lock_briefly(&file) {
        Ok(()) => {}
        Err(fs::TryLockError::WouldBlock) => {
            let mut holder = String::new();
            let _ = file.read_to_string(&mut holder);
            let holder = match holder.trim() {
                "" => "by another opener".to_string(),
                pid => format!("held by pid {pid}"),
            };
            return Err(StoreError::Locked {
                root: root.to_path_buf(),
                holder,
            });
        }
        Err(fs::TryLockError::Error(e)) => {
            return Err(StoreError::Io {
                path,
                message: format!("cannot lock: {e}"),
            })
        }
    }
    // Record the holder for the next opener's error message, durably, so that "held by
    // pid" stays true after a crash.
    let pid = std::process::id().to_string();
    let written = file
        .set_len(0)
        .and_then(|()| file.rewind())
        .and_then(|()| file.write_all(pid.as_bytes()))
        .and_then(|()| durable::sync_file(&file, &path, trace));
    written.map_err(|e| StoreError::Io {
        path,
        message: format!("cannot record the holder in the lock file: {e}"),
    })?;
    Ok(file)
}
