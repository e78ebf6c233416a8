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

use rusqlite::ffi;
use rusqlite::{Connection, OpenFlags};
use std::ffi::{c_char, c_int, c_void, CStr};
use std::path::Path;
use std::sync::OnceLock;

/// The name the VFS is registered under (once per process, like SQLite's own).
pub const VFS_NAME: &CStr = c"task-plane-wal-appends";

/// At most this many bytes are held; a commit larger than that is handed on in pieces of
/// this size. Each is written in calls of at most [`WRITE_AT_MOST`] bytes (~31 frames).
const HOLD_AT_MOST: usize = 1 << 20;

/// Opens the writer's connection through the VFS, with `synchronous=FULL`: the VFS is
/// only sound when every commit syncs (see the module documentation), so a connection
/// that does not is refused here rather than trusted.
pub fn open_writer(path: &Path, flags: OpenFlags) -> Result<Connection, super::StoreError> {
    register()?;
    let conn = Connection::open_with_flags_and_vfs(path, flags, VFS_NAME)?;
    conn.pragma_update(None, "synchronous", "FULL")?;
    let level: i64 = conn.query_row("PRAGMA synchronous", [], |r| r.get(0))?;
    if level < 2 {
        return Err(super::StoreError::Sqlite(format!(
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

// ---- The VFS --------------------------------------------------------------------------

/// One open file: SQLite's `sqlite3_file` header, then the real VFS's file in the same
/// allocation (SQLite allocates `szOsFile` bytes and never moves them).
#[repr(C)]
struct File {
    base: ffi::sqlite3_file,
    real: *mut ffi::sqlite3_file,
    /// `Box<Appends>` for a WAL file, null for any other.
    appends: *mut Appends,
}

fn register() -> Result<(), super::StoreError> {
    static REGISTERED: OnceLock<Result<(), String>> = OnceLock::new();
    REGISTERED
        .get_or_init(|| {
            // SAFETY: sqlite3_vfs_find(NULL) returns the default VFS, which lives as long as
            // the process; the leaked struct below does too, as sqlite3_vfs_register needs.
            unsafe {
                let real = ffi::sqlite3_vfs_find(std::ptr::null());
                if real.is_null() {
                    return Err("SQLite has no default VFS to wrap".to_string());
                }
                let vfs = Box::leak(Box::new(ffi::sqlite3_vfs {
                    iVersion: (*real).iVersion.min(3),
                    szOsFile: (std::mem::size_of::<File>() as c_int) + (*real).szOsFile,
                    mxPathname: (*real).mxPathname,
                    pNext: std::ptr::null_mut(),
                    zName: VFS_NAME.as_ptr(),
                    pAppData: real.cast(),
                    xOpen: Some(x_open),
                    xDelete: Some(x_delete),
                    xAccess: Some(x_access),
                    xFullPathname: Some(x_full_pathname),
                    xDlOpen: Some(x_dl_open),
                    xDlError: Some(x_dl_error),
                    xDlSym: Some(x_dl_sym),
                    xDlClose: Some(x_dl_close),
                    xRandomness: Some(x_randomness),
                    xSleep: Some(x_sleep),
                    xCurrentTime: Some(x_current_time),
                    xGetLastError: Some(x_get_last_error),
                    xCurrentTimeInt64: Some(x_current_time_int64),
                    xSetSystemCall: None,
                    xGetSystemCall: None,
                    xNextSystemCall: None,
                }));
                match ffi::sqlite3_vfs_register(vfs, 0) {
                    ffi::SQLITE_OK => Ok(()),
                    rc => Err(format!(
                        "SQLite refused to register the WAL VFS (code {rc})"
                    )),
                }
            }
        })
        .clone()
        .map_err(super::StoreError::Sqlite)
}

/// The wrapped VFS of `vfs`.
unsafe fn real_vfs(vfs: *mut ffi::sqlite3_vfs) -> *mut ffi::sqlite3_vfs {
    (*vfs).pAppData.cast()
}

/// The real file inside `file` and its methods.
unsafe fn real(
    file: *mut ffi::sqlite3_file,
) -> (*mut ffi::sqlite3_file, &'static ffi::sqlite3_io_methods) {
    let real = (*file.cast::<File>()).real;
    (real, &*(*real).pMethods)
}

/// Hands `file`'s held appends (if any) to the real file.
unsafe fn hand_on(file: *mut ffi::sqlite3_file) -> c_int {
    let appends = (*file.cast::<File>()).appends;
    if appends.is_null() {
        return ffi::SQLITE_OK;
    }
    let (real, methods) = real(file);
    (*appends).hand_on(|at, bytes| write_real(real, methods, at, bytes))
}

/// The most SQLite's unix VFS writes in one call: it masks a write's length to 17 bits.
const WRITE_AT_MOST: usize = 0x1ffff;

unsafe fn write_real(
    real: *mut ffi::sqlite3_file,
    methods: &ffi::sqlite3_io_methods,
    at: i64,
    bytes: &[u8],
) -> c_int {
    let Some(write) = methods.xWrite else {
        return ffi::SQLITE_IOERR_WRITE;
    };
    let mut at = at;
    for piece in bytes.chunks(WRITE_AT_MOST) {
        // A piece is at most WRITE_AT_MOST bytes: it fits a c_int.
        let rc = write(real, piece.as_ptr().cast(), piece.len() as c_int, at);
        if rc != ffi::SQLITE_OK {
            return rc;
        }
        at += piece.len() as i64;
    }
    ffi::SQLITE_OK
}

static METHODS: ffi::sqlite3_io_methods = ffi::sqlite3_io_methods {
    iVersion: 3,
    xClose: Some(x_close),
    xRead: Some(x_read),
    xWrite: Some(x_write),
    xTruncate: Some(x_truncate),
    xSync: Some(x_sync),
    xFileSize: Some(x_file_size),
    xLock: Some(x_lock),
    xUnlock: Some(x_unlock),
    xCheckReservedLock: Some(x_check_reserved_lock),
    xFileControl: Some(x_file_control),
    xSectorSize: Some(x_sector_size),
    xDeviceCharacteristics: Some(x_device_characteristics),
    xShmMap: Some(x_shm_map),
    xShmLock: Some(x_shm_lock),
    xShmBarrier: Some(x_shm_barrier),
    xShmUnmap: Some(x_shm_unmap),
    xFetch: Some(x_fetch),
    xUnfetch: Some(x_unfetch),
};

unsafe extern "C" fn x_open(
    vfs: *mut ffi::sqlite3_vfs,
    name: ffi::sqlite3_filename,
    file: *mut ffi::sqlite3_file,
    flags: c_int,
    out_flags: *mut c_int,
) -> c_int {
    let shim = file.cast::<File>();
    let inner = file
        .cast::<u8>()
        .add(std::mem::size_of::<File>())
        .cast::<ffi::sqlite3_file>();
    (*shim).base.pMethods = std::ptr::null();
    (*shim).real = inner;
    (*shim).appends = std::ptr::null_mut();
    (*inner).pMethods = std::ptr::null();
    let real = real_vfs(vfs);
    let Some(open) = (*real).xOpen else {
        return ffi::SQLITE_CANTOPEN;
    };
    let rc = open(real, name, inner, flags, out_flags);
    if rc != ffi::SQLITE_OK {
        // SQLite closes a file whose open failed only if it has methods; ours has none,
        // so the real one is closed here if it got any.
        if let Some(close) = (*inner).pMethods.as_ref().and_then(|m| m.xClose) {
            close(inner);
        }
        return rc;
    }
    if flags & ffi::SQLITE_OPEN_WAL != 0 {
        // All of it at once, kept until close: a buffer grown by doubling past malloc's
        // mmap threshold would free mmapped blocks, and glibc answers that by raising the
        // threshold and trimming less (a few MB more resident for the whole process).
        (*shim).appends = Box::into_raw(Box::new(Appends {
            at: 0,
            bytes: Vec::with_capacity(HOLD_AT_MOST),
        }));
    }
    (*shim).base.pMethods = &METHODS;
    ffi::SQLITE_OK
}

unsafe extern "C" fn x_close(file: *mut ffi::sqlite3_file) -> c_int {
    let held = hand_on(file);
    let shim = file.cast::<File>();
    if !(*shim).appends.is_null() {
        drop(Box::from_raw((*shim).appends));
        (*shim).appends = std::ptr::null_mut();
    }
    let (real, methods) = real(file);
    let closed = methods.xClose.map_or(ffi::SQLITE_OK, |close| close(real));
    if held != ffi::SQLITE_OK {
        held
    } else {
        closed
    }
}

unsafe extern "C" fn x_read(
    file: *mut ffi::sqlite3_file,
    buf: *mut c_void,
    amt: c_int,
    off: i64,
) -> c_int {
    let rc = hand_on(file);
    if rc != ffi::SQLITE_OK {
        return rc;
    }
    let (real, methods) = real(file);
    methods
        .xRead
        .map_or(ffi::SQLITE_IOERR_READ, |read| read(real, buf, amt, off))
}

unsafe extern "C" fn x_write(
    file: *mut ffi::sqlite3_file,
    buf: *const c_void,
    amt: c_int,
    off: i64,
) -> c_int {
    let appends = (*file.cast::<File>()).appends;
    let (real, methods) = real(file);
    if appends.is_null() {
        return write_real(
            real,
            methods,
            off,
            std::slice::from_raw_parts(buf.cast(), amt as usize),
        );
    }
    let data = std::slice::from_raw_parts(buf.cast::<u8>(), amt as usize);
    (*appends).write(off, data, |at, bytes| write_real(real, methods, at, bytes))
}

unsafe extern "C" fn x_truncate(file: *mut ffi::sqlite3_file, size: i64) -> c_int {
    let rc = hand_on(file);
    if rc != ffi::SQLITE_OK {
        return rc;
    }
    let (real, methods) = real(file);
    methods
        .xTruncate
        .map_or(ffi::SQLITE_IOERR_TRUNCATE, |truncate| truncate(real, size))
}

unsafe extern "C" fn x_sync(file: *mut ffi::sqlite3_file, flags: c_int) -> c_int {
    let rc = hand_on(file);
    if rc != ffi::SQLITE_OK {
        return rc;
    }
    let (real, methods) = real(file);
    methods
        .xSync
        .map_or(ffi::SQLITE_IOERR_FSYNC, |sync| sync(real, flags))
}

unsafe extern "C" fn x_file_size(file: *mut ffi::sqlite3_file, size: *mut i64) -> c_int {
    let rc = hand_on(file);
    if rc != ffi::SQLITE_OK {
        return rc;
    }
    let (real, methods) = real(file);
    methods
        .xFileSize
        .map_or(ffi::SQLITE_IOERR_FSTAT, |file_size| file_size(real, size))
}

unsafe extern "C" fn x_file_control(
    file: *mut ffi::sqlite3_file,
    op: c_int,
    arg: *mut c_void,
) -> c_int {
    // Some controls size or sync the file (SIZE_HINT, SYNC, ...): the held bytes go first.
    let rc = hand_on(file);
    if rc != ffi::SQLITE_OK {
        return rc;
    }
    let (real, methods) = real(file);
    methods
        .xFileControl
        .map_or(ffi::SQLITE_NOTFOUND, |control| control(real, op, arg))
}

unsafe extern "C" fn x_lock(file: *mut ffi::sqlite3_file, level: c_int) -> c_int {
    let (real, methods) = real(file);
    methods
        .xLock
        .map_or(ffi::SQLITE_IOERR_LOCK, |lock| lock(real, level))
}

unsafe extern "C" fn x_unlock(file: *mut ffi::sqlite3_file, level: c_int) -> c_int {
    let (real, methods) = real(file);
    methods
        .xUnlock
        .map_or(ffi::SQLITE_IOERR_UNLOCK, |unlock| unlock(real, level))
}

unsafe extern "C" fn x_check_reserved_lock(file: *mut ffi::sqlite3_file, out: *mut c_int) -> c_int {
    let (real, methods) = real(file);
    methods
        .xCheckReservedLock
        .map_or(ffi::SQLITE_IOERR_CHECKRESERVEDLOCK, |check| {
            check(real, out)
        })
}

unsafe extern "C" fn x_sector_size(file: *mut ffi::sqlite3_file) -> c_int {
    let (real, methods) = real(file);
    methods.xSectorSize.map_or(4096, |size| size(real))
}

unsafe extern "C" fn x_device_characteristics(file: *mut ffi::sqlite3_file) -> c_int {
    let (real, methods) = real(file);
    methods
        .xDeviceCharacteristics
        .map_or(0, |chars| chars(real))
}

unsafe extern "C" fn x_shm_map(
    file: *mut ffi::sqlite3_file,
    region: c_int,
    size: c_int,
    extend: c_int,
    out: *mut *mut c_void,
) -> c_int {
    let (real, methods) = real(file);
    methods.xShmMap.map_or(ffi::SQLITE_IOERR_SHMMAP, |map| {
        map(real, region, size, extend, out)
    })
}

unsafe extern "C" fn x_shm_lock(
    file: *mut ffi::sqlite3_file,
    offset: c_int,
    n: c_int,
    flags: c_int,
) -> c_int {
    let (real, methods) = real(file);
    methods.xShmLock.map_or(ffi::SQLITE_IOERR_SHMLOCK, |lock| {
        lock(real, offset, n, flags)
    })
}

unsafe extern "C" fn x_shm_barrier(file: *mut ffi::sqlite3_file) {
    let (real, methods) = real(file);
    if let Some(barrier) = methods.xShmBarrier {
        barrier(real);
    }
}

unsafe extern "C" fn x_shm_unmap(file: *mut ffi::sqlite3_file, delete: c_int) -> c_int {
    let (real, methods) = real(file);
    methods
        .xShmUnmap
        .map_or(ffi::SQLITE_OK, |unmap| unmap(real, delete))
}

unsafe extern "C" fn x_fetch(
    file: *mut ffi::sqlite3_file,
    off: i64,
    amt: c_int,
    out: *mut *mut c_void,
) -> c_int {
    let (real, methods) = real(file);
    if methods.iVersion < 3 {
        *out = std::ptr::null_mut();
        return ffi::SQLITE_OK;
    }
    methods.xFetch.map_or_else(
        || {
            *out = std::ptr::null_mut();
            ffi::SQLITE_OK
        },
        |fetch| fetch(real, off, amt, out),
    )
}

unsafe extern "C" fn x_unfetch(file: *mut ffi::sqlite3_file, off: i64, page: *mut c_void) -> c_int {
    let (real, methods) = real(file);
    if methods.iVersion < 3 {
        return ffi::SQLITE_OK;
    }
    methods
        .xUnfetch
        .map_or(ffi::SQLITE_OK, |unfetch| unfetch(real, off, page))
}

// The VFS-level calls go to the wrapped VFS, which must be handed itself.

unsafe extern "C" fn x_delete(
    vfs: *mut ffi::sqlite3_vfs,
    name: *const c_char,
    sync_dir: c_int,
) -> c_int {
    let real = real_vfs(vfs);
    (*real).xDelete.map_or(ffi::SQLITE_IOERR_DELETE, |delete| {
        delete(real, name, sync_dir)
    })
}

unsafe extern "C" fn x_access(
    vfs: *mut ffi::sqlite3_vfs,
    name: *const c_char,
    flags: c_int,
    out: *mut c_int,
) -> c_int {
    let real = real_vfs(vfs);
    (*real).xAccess.map_or(ffi::SQLITE_IOERR_ACCESS, |access| {
        access(real, name, flags, out)
    })
}

unsafe extern "C" fn x_full_pathname(
    vfs: *mut ffi::sqlite3_vfs,
    name: *const c_char,
    n: c_int,
    out: *mut c_char,
) -> c_int {
    let real = real_vfs(vfs);
    (*real)
        .xFullPathname
        .map_or(ffi::SQLITE_CANTOPEN, |full| full(real, name, n, out))
}

unsafe extern "C" fn x_dl_open(vfs: *mut ffi::sqlite3_vfs, name: *const c_char) -> *mut c_void {
    let real = real_vfs(vfs);
    (*real)
        .xDlOpen
        .map_or(std::ptr::null_mut(), |open| open(real, name))
}

unsafe extern "C" fn x_dl_error(vfs: *mut ffi::sqlite3_vfs, n: c_int, out: *mut c_char) {
    let real = real_vfs(vfs);
    if let Some(error) = (*real).xDlError {
        error(real, n, out);
    }
}

unsafe extern "C" fn x_dl_sym(
    vfs: *mut ffi::sqlite3_vfs,
    handle: *mut c_void,
    symbol: *const c_char,
) -> Option<unsafe extern "C" fn(*mut ffi::sqlite3_vfs, *mut c_void, *const c_char)> {
    let real = real_vfs(vfs);
    (*real).xDlSym.and_then(|sym| sym(real, handle, symbol))
}

unsafe extern "C" fn x_dl_close(vfs: *mut ffi::sqlite3_vfs, handle: *mut c_void) {
    let real = real_vfs(vfs);
    if let Some(close) = (*real).xDlClose {
        close(real, handle);
    }
}

unsafe extern "C" fn x_randomness(vfs: *mut ffi::sqlite3_vfs, n: c_int, out: *mut c_char) -> c_int {
    let real = real_vfs(vfs);
    (*real).xRandomness.map_or(0, |random| random(real, n, out))
}

unsafe extern "C" fn x_sleep(vfs: *mut ffi::sqlite3_vfs, micros: c_int) -> c_int {
    let real = real_vfs(vfs);
    (*real).xSleep.map_or(0, |sleep| sleep(real, micros))
}

unsafe extern "C" fn x_current_time(vfs: *mut ffi::sqlite3_vfs, out: *mut f64) -> c_int {
    let real = real_vfs(vfs);
    (*real)
        .xCurrentTime
        .map_or(ffi::SQLITE_ERROR, |now| now(real, out))
}

unsafe extern "C" fn x_get_last_error(
    vfs: *mut ffi::sqlite3_vfs,
    n: c_int,
    out: *mut c_char,
) -> c_int {
    let real = real_vfs(vfs);
    (*real).xGetLastError.map_or(0, |last| last(real, n, out))
}

unsafe extern "C" fn x_current_time_int64(vfs: *mut ffi::sqlite3_vfs, out: *mut i64) -> c_int {
    let real = real_vfs(vfs);
    match (*real).xCurrentTimeInt64 {
        Some(now) if (*real).iVersion >= 2 => now(real, out),
        _ => ffi::SQLITE_ERROR,
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
