//! The writer's WAL appends reach the file in one write per commit.
//!
//! SQLite appends a commit's WAL frames one `pwrite` per frame header and one per page,
//! then fsyncs: ~97 system calls for the ~48 frames of a one-core `message:send` batch,
//! ~6% of the core in the kernel's per-call work alone. The writer's connection opens its
//! files through [`VFS_NAME`], a VFS around the platform's default one: for a WAL file it
//! gathers contiguous appends in memory ([`Appends`]) and hands them to the real file in
//! writes of at most 128 KiB (the unix VFS's limit: ~2 for that batch) before SQLite syncs,
//! reads, truncates, sizes or closes that file, or writes anywhere else in it. Every other file, and every other call, goes straight through.
//!
//! Why nothing acknowledged can be lost or read torn: a WAL frame becomes visible to any
//! other connection only when the writer publishes the WAL index after the commit's frames
//! are written *and synced*, and with `synchronous=FULL` (which [`open_writer`] sets and
//! checks) every commit syncs; the sync hands the gathered frames on first and fails the
//! commit if they could not be written. A crash before the sync loses only frames of a
//! commit that was never acknowledged, as it always could.
//!
//! Here: what is held ([`Appends`]) and the writer's connection ([`open_writer`]); the VFS
//! itself, SQLite's C interface around the default VFS, is in `vfs.rs`.

mod vfs;

use rusqlite::ffi;
use rusqlite::{Connection, OpenFlags};
use std::ffi::{c_int, CStr};
use std::path::Path;

/// The name the VFS is registered under (once per process, like SQLite's own).
pub const VFS_NAME: &CStr = c"task-plane-wal-appends";

/// At most this many bytes are held; a commit larger than that is handed on in pieces of
/// this size. Each is written in calls of at most `vfs::WRITE_AT_MOST` bytes (~31 frames).
const HOLD_AT_MOST: usize = 1 << 20;

/// Opens the writer's connection through the VFS, with `synchronous=FULL`: the VFS is
/// only sound when every commit syncs (see the module documentation), so a connection
/// that does not is refused here rather than trusted.
pub fn open_writer(path: &Path, flags: OpenFlags) -> Result<Connection, super::StoreError> {
    vfs::register()?;
    let conn = Connection::open_with_flags_and_vfs(path, flags, VFS_NAME)?;
    conn.pragma_update(None, "synchronous", "FULL")?;
    let level: i64 = conn.query_row("PRAGMA synchronous", [], |r| r.get(0))?;
    if level < 2 {
        return Err(super::StoreError::sqlite(format!(
            "{}: the writer needs synchronous=FULL to hold WAL appends until the commit's \
             sync, but SQLite reports level {level}",
            path.display()
        )));
    }
    Ok(conn)
}

// ---- What is held ---------------------------------------------------------------------

/// Contiguous writes to one file not yet handed to it: `bytes` belong at offset `at`.
#[derive(Debug, Default)]
struct Appends {
    at: i64,
    bytes: Vec<u8>,
}

impl Appends {
    /// Takes a write of `data` at `offset`: gathered when it continues the held bytes (or
    /// nothing is held); otherwise the held bytes go to `sink` first, so the file sees every
    /// write in the order SQLite made it. A write larger than [`HOLD_AT_MOST`] goes
    /// straight to `sink` once the held bytes have.
    fn write(
        &mut self,
        offset: i64,
        data: &[u8],
        mut sink: impl FnMut(i64, &[u8]) -> c_int,
    ) -> c_int {
        let continues = offset == self.at + self.bytes.len() as i64;
        if !self.bytes.is_empty() && (!continues || self.bytes.len() + data.len() > HOLD_AT_MOST) {
            let rc = self.hand_on(&mut sink);
            if rc != ffi::SQLITE_OK {
                return rc;
            }
        }
        if data.len() > HOLD_AT_MOST {
            return sink(offset, data);
        }
        if self.bytes.is_empty() {
            self.at = offset;
        }
        self.bytes.extend_from_slice(data);
        ffi::SQLITE_OK
    }

    /// Hands the held bytes to `sink` in one write. They are dropped whatever it answers:
    /// after a failed write SQLite fails the commit, and bytes kept would land later at a
    /// place the file no longer expects.
    fn hand_on(&mut self, mut sink: impl FnMut(i64, &[u8]) -> c_int) -> c_int {
        if self.bytes.is_empty() {
            return ffi::SQLITE_OK;
        }
        let rc = sink(self.at, &self.bytes);
        self.bytes.clear();
        rc
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Records what reached the file.
    fn recorder(log: &mut Vec<(i64, Vec<u8>)>) -> impl FnMut(i64, &[u8]) -> c_int + '_ {
        move |at, bytes| {
            log.push((at, bytes.to_vec()));
            ffi::SQLITE_OK
        }
    }

    #[test]
    fn contiguous_appends_reach_the_file_as_one_write() {
        let mut held = Appends::default();
        let mut log = Vec::new();
        for (at, data) in [(32_i64, &b"head"[..]), (36, b"page-1"), (42, b"page-2")] {
            assert_eq!(held.write(at, data, recorder(&mut log)), ffi::SQLITE_OK);
        }
        assert!(
            log.is_empty(),
            "nothing is written before the file is synced"
        );
        assert_eq!(held.hand_on(recorder(&mut log)), ffi::SQLITE_OK);
        assert_eq!(log, vec![(32, b"headpage-1page-2".to_vec())]);
        assert_eq!(held.hand_on(recorder(&mut log)), ffi::SQLITE_OK);
        assert_eq!(log.len(), 1, "held bytes are handed on once");
    }

    #[test]
    fn a_write_elsewhere_lands_after_the_held_bytes_in_the_order_sqlite_made_them() {
        let mut held = Appends::default();
        let mut log = Vec::new();
        held.write(100, b"aaaa", recorder(&mut log));
        held.write(104, b"bbbb", recorder(&mut log));
        // A frame rewritten in place (SQLite does so within one transaction).
        held.write(100, b"AAAA", recorder(&mut log));
        assert_eq!(log, vec![(100, b"aaaabbbb".to_vec())]);
        held.hand_on(recorder(&mut log));
        assert_eq!(log[1], (100, b"AAAA".to_vec()));
    }

    #[test]
    fn no_more_than_the_limit_is_held() {
        let mut held = Appends::default();
        let mut log = Vec::new();
        let page = vec![7_u8; HOLD_AT_MOST / 2];
        held.write(0, &page, recorder(&mut log));
        held.write(page.len() as i64, &page, recorder(&mut log));
        assert!(log.is_empty());
        held.write(2 * page.len() as i64, b"x", recorder(&mut log));
        assert_eq!(log.len(), 1);
        assert_eq!(log[0].1.len(), HOLD_AT_MOST);
        let big = vec![1_u8; HOLD_AT_MOST + 1];
        held.write(5_000_000, &big, recorder(&mut log));
        assert_eq!(
            log.len(),
            3,
            "the held byte first, then the oversized write itself"
        );
        assert_eq!(log[1], (2 * page.len() as i64, b"x".to_vec()));
        assert_eq!(log[2].0, 5_000_000);
    }

    #[test]
    fn held_bytes_that_failed_to_write_are_not_written_again() {
        let mut held = Appends::default();
        held.write(0, b"frame", |_, _| ffi::SQLITE_OK);
        assert_eq!(held.hand_on(|_, _| ffi::SQLITE_FULL), ffi::SQLITE_FULL);
        let mut log = Vec::new();
        assert_eq!(held.hand_on(recorder(&mut log)), ffi::SQLITE_OK);
        assert!(log.is_empty());
    }

    /// End to end through SQLite: every commit of the writer (through the VFS) is read by
    /// a connection on the default VFS as soon as COMMIT returns, and all of it is there
    /// after the writer closes without a checkpoint.
    #[test]
    fn a_commit_through_the_wal_appends_vfs_is_readable_as_soon_as_it_returns() {
        let dir = std::env::temp_dir().join(format!("a2a-wal-appends-{}", crate::ids::mint()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("t.sqlite3");
        let flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_CREATE;
        let writer = open_writer(&path, flags).unwrap();
        let mode: String = writer
            .query_row("PRAGMA journal_mode=WAL", [], |r| r.get(0))
            .unwrap();
        assert_eq!(mode, "wal");
        writer.pragma_update(None, "wal_autocheckpoint", 0).unwrap();
        writer
            .execute_batch("CREATE TABLE t (n INTEGER PRIMARY KEY, body BLOB NOT NULL)")
            .unwrap();
        let reader = Connection::open(&path).unwrap();
        let mut n = 0_i64;
        for commit in 0..40 {
            writer.execute_batch("BEGIN IMMEDIATE").unwrap();
            // A few pages per commit, one commit of ~2 MiB (more than is ever held).
            let rows = if commit == 20 { 500 } else { 8 };
            for _ in 0..rows {
                n += 1;
                writer
                    .execute(
                        "INSERT INTO t VALUES (?1, ?2)",
                        rusqlite::params![n, vec![n as u8; 4000]],
                    )
                    .unwrap();
            }
            writer.execute_batch("COMMIT").unwrap();
            let (count, last): (i64, Vec<u8>) = reader
                .query_row(
                    "SELECT COUNT(*), (SELECT body FROM t WHERE n = ?1) FROM t",
                    [n],
                    |r| Ok((r.get(0)?, r.get(1)?)),
                )
                .unwrap();
            assert_eq!(count, n, "commit {commit}");
            assert_eq!(last, vec![n as u8; 4000], "commit {commit}");
        }
        drop(reader);
        // A crash right after the last COMMIT returned: the files as they are now, WAL
        // included, opened elsewhere, hold every commit.
        let copy = dir.join("copy");
        std::fs::create_dir(&copy).unwrap();
        for suffix in ["", "-wal"] {
            std::fs::copy(
                format!("{}{suffix}", path.display()),
                copy.join(format!("t.sqlite3{suffix}")),
            )
            .unwrap();
        }
        drop(writer);
        let again = Connection::open(copy.join("t.sqlite3")).unwrap();
        let count: i64 = again
            .query_row("SELECT COUNT(*) FROM t", [], |r| r.get(0))
            .unwrap();
        assert_eq!(count, n);
        let check: String = again
            .query_row("PRAGMA integrity_check", [], |r| r.get(0))
            .unwrap();
        assert_eq!(check, "ok");
        drop(again);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
