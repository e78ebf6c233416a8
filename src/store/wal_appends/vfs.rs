//! The VFS: SQLite's C interface for files, around the platform's default VFS. A WAL
//! file's writes go to its [`Appends`]; every other call hands the held bytes on first
//! where the file could tell them missing, then goes straight to the real file or VFS.

use std::ffi::{c_char, c_int, c_void};
use std::sync::OnceLock;

use rusqlite::ffi;

use super::{Appends, HOLD_AT_MOST, VFS_NAME};
use crate::store::StoreError;

/// One open file: SQLite's `sqlite3_file` header, then the real VFS's file in the same
/// allocation (SQLite allocates `szOsFile` bytes and never moves them).
#[repr(C)]
struct File {
    base: ffi::sqlite3_file,
    real: *mut ffi::sqlite3_file,
    /// `Box<Appends>` for a WAL file, null for any other.
    appends: *mut Appends,
}

pub(super) fn register() -> Result<(), StoreError> {
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
        .map_err(StoreError::sqlite)
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
