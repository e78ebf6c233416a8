//! The durable store: one SQLite database per store root, written by one thread.
//!
//! - **One writer.** A dedicated thread ([`writer`]) owns the only write connection and is
//!   fed jobs through a bounded queue ([`jobs`]). It drains whatever is queued into one
//!   transaction (one job's failure does not undo another's: see
//!   [`writer::writer_loop`]), commits once, and only then answers every caller:
//!   concurrent intakes share one fsync (group commit), and no caller hears "done" before
//!   its records are durable.
//! - **Readers** use their own read-only connections (WAL lets them run beside the writer
//!   and see only committed data).
//! - **One process per root.** Opening takes an exclusive `flock` on `<root>/lock`
//!   ([`root_lock`]); a second opener (another process, or the same one before `close()`)
//!   fails at once with an error naming the root and the holder's pid.
//! - WAL with `synchronous=FULL` (connections set up in [`connections`]); the writer's WAL
//!   appends reach the file in one write per commit ([`wal_appends`]); checkpoints on
//!   their own thread ([`wal_checkpointer`]); the root is mode 0700 and its files 0600.
//! - **Every statement lives here**, behind typed functions, one module per table or
//!   concern: [`tasks`] (with history and artifacts, listings, and the SQL forms of the
//!   state sets), [`claims`] (the activation journal), [`contexts`], [`evidence`],
//!   [`anchors`], [`checkpoints`], [`deliveries`], [`retention`] (compaction) and
//!   [`inspect`] (the operator's read-only checks). They take the connection of a writer
//!   job or a read and return native records; the rules that combine them are the plane's.
//!
//! Who owns what (the writer, readers, checkpoints): `docs/architecture.md`.

pub mod anchors;
pub mod checkpoints;
pub mod claims;
mod connections;
pub mod contexts;
pub mod deliveries;
pub mod durable;
pub mod evidence;
mod faults;
pub mod inspect;
mod jobs;
pub mod retention;
mod root_lock;
mod schema;
pub mod tasks;
mod wal_appends;
mod wal_checkpointer;
mod writer;

use std::fmt;
use std::fs::{self, File, OpenOptions};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

/// The connection type store functions take (a writer transaction's or a reader's).
pub use rusqlite::Connection;
use rusqlite::OpenFlags;

pub use connections::open_read_only;
pub use faults::{FaultAction, Faults, ACCEPTANCE_STEPS};
pub use jobs::{at_batch_end, wait_for_reply, Blocked, InOrder, OnCommit, Reply};
pub use schema::{secret, SCHEMA_VERSION};
pub use writer::{Statements, WriteTx};

/// The database file inside a store root.
pub const DB_FILE: &str = "task-plane.sqlite3";
/// The lock file inside a store root.
pub const LOCK_FILE: &str = "lock";

/// Read connections kept open for reuse. Sized for the listener's concurrency: opening one
/// means parsing the schema again, which showed up in profiles of concurrent reads.
const MAX_IDLE_READERS: usize = 64;

/// A failure of the store itself (not of a rule).
#[derive(Debug, Clone)]
pub enum StoreError {
    /// Another process (or this one, before `close()`) holds the root.
    Locked { root: PathBuf, holder: String },
    /// The root or a file in it could not be created, opened or locked.
    Io { path: PathBuf, message: String },
    /// SQLite refused (disk full, I/O error, read-only, busy, corrupt).
    Sqlite(String),
    /// The schema is newer than this build.
    Schema(String),
    /// A stored record could not be decoded.
    Corrupt(String),
    /// The disk (or the store's size cap) is full: nothing was recorded, and the same
    /// write succeeds once space is freed.
    Full(String),
    /// The store was closed.
    Closed,
    /// A failure injected by a test (`Faults`).
    Injected(String),
}

impl fmt::Display for StoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StoreError::Locked { root, holder } => write!(
                f,
                "task-plane store {} is already open ({holder}); only one process may open a store root at a time: \
                 close the other Pi, or give this one its own root with CHANNELS_TASK_STORE_PATH",
                root.display()
            ),
            StoreError::Io { path, message } => write!(f, "task-plane store: {}: {message}", path.display()),
            StoreError::Sqlite(message) => write!(f, "task-plane store: {message}"),
            StoreError::Full(message) => write!(
                f,
                "task-plane store: the disk is full ({message}); nothing was recorded; free space on the store's disk, then retry"
            ),
            StoreError::Schema(message) => write!(f, "task-plane store: {message}"),
            StoreError::Corrupt(message) => write!(f, "task-plane store: a stored record is unreadable: {message}"),
            StoreError::Closed => write!(f, "task-plane store is closed"),
            StoreError::Injected(step) => write!(f, "task-plane store: injected failure at step `{step}`"),
        }
    }
}

impl std::error::Error for StoreError {}

impl From<rusqlite::Error> for StoreError {
    fn from(err: rusqlite::Error) -> Self {
        match err.sqlite_error_code() {
            Some(rusqlite::ErrorCode::DiskFull) => StoreError::Full(err.to_string()),
            _ => StoreError::Sqlite(err.to_string()),
        }
    }
}

impl From<serde_json::Error> for StoreError {
    fn from(err: serde_json::Error) -> Self {
        StoreError::Corrupt(err.to_string())
    }
}

/// Options for [`Store::open`].
#[derive(Clone, Default)]
pub struct StoreOptions {
    /// Test-only failure injection at named steps of a write.
    pub faults: Option<Arc<Faults>>,
}
struct Shared {
    root: PathBuf,
    db_path: PathBuf,
    sender: Mutex<Option<jobs::Queue>>,
    writer: Mutex<Option<JoinHandle<()>>>,
    checkpointer: Mutex<Option<wal_checkpointer::Checkpointer>>,
    readers: Mutex<Vec<Connection>>,
    lock: Mutex<Option<File>>,
    /// Test-only: failure injection and the trace of syncs.
    faults: Option<Arc<Faults>>,
}

/// A handle on an open store root. Cheap to clone; `close()` on any clone closes it.
#[derive(Clone)]
pub struct Store {
    shared: Arc<Shared>,
}

impl Store {
    /// Opens (creating if needed) the store at `root`, takes its lock, migrates the schema
    /// and starts the writer thread.
    pub fn open(root: &Path, options: StoreOptions) -> Result<Store, StoreError> {
        let io = |path: &Path, what: &str, err: std::io::Error| StoreError::Io {
            path: path.to_path_buf(),
            message: format!("{what}: {err}"),
        };
        let trace = options.faults.as_deref();
        // The root and its missing parents, each parent fsynced: a power cut right after
        // the first start must not lose the root with what it acknowledged.
        durable::create_dir_all(root, 0o700, trace)
            .map_err(|e| io(root, "cannot create the store directory", e))?;
        let meta =
            fs::metadata(root).map_err(|e| io(root, "cannot read the store directory", e))?;
        if !meta.is_dir() {
            return Err(StoreError::Io {
                path: root.to_path_buf(),
                message: "is not a directory; CHANNELS_TASK_STORE_PATH must name a directory"
                    .into(),
            });
        }
        fs::set_permissions(root, fs::Permissions::from_mode(0o700))
            .map_err(|e| io(root, "cannot set mode 0700 on the store directory", e))?;

        let lock = root_lock::take(root, trace)?;

        let db_path = root.join(DB_FILE);
        // Create the database file 0600 ourselves: SQLite gives its -wal and -shm files the
        // database file's mode.
        OpenOptions::new()
            .create(true)
            .append(true)
            .mode(0o600)
            .open(&db_path)
            .map_err(|e| io(&db_path, "cannot create the database file", e))?;
        // The lock and database files' entries in the root are durable before anything
        // is acknowledged (SQLite syncs the directory only for the journals it creates).
        durable::sync_dir(root, trace)
            .map_err(|e| io(root, "cannot fsync the store directory", e))?;

        connections::configure_sqlite();
        // The writer's WAL appends reach the file in one write per commit (wal_appends).
        let mut conn = wal_appends::open_writer(
            &db_path,
            OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )?;
        connections::configure(&conn)?;
        let mode: String = conn.query_row("PRAGMA journal_mode=WAL", [], |r| r.get(0))?;
        if !mode.eq_ignore_ascii_case("wal") {
            return Err(StoreError::Sqlite(format!(
                "{} could not be switched to WAL mode (got {mode})",
                db_path.display()
            )));
        }
        schema::migrate(&mut conn, &db_path)?;
        for suffix in ["", "-wal", "-shm"] {
            let path = PathBuf::from(format!("{}{suffix}", db_path.display()));
            if path.exists() {
                fs::set_permissions(&path, fs::Permissions::from_mode(0o600))
                    .map_err(|e| io(&path, "cannot set mode 0600", e))?;
            }
        }

        // Checkpoints run on their own thread (below), so the writer's commits do not pay
        // for copying the WAL back; the writer checkpoints itself only past a large WAL.
        conn.pragma_update(
            None,
            "wal_autocheckpoint",
            wal_checkpointer::WRITER_CHECKPOINT_PAGES,
        )?;
        let live = tasks::LiveRows::following(&mut conn)?;
        let checkpointer = wal_checkpointer::start(&db_path)
            .map_err(|e| io(root, "cannot start the checkpoint thread", e))?;
        let (sender, receiver) = jobs::queue();
        let faults = options.faults.clone();
        let checkpoint_thread = checkpointer.1.thread().clone();
        let writer = std::thread::Builder::new()
            .name("task-plane-writer".into())
            .spawn(move || writer::writer_loop(conn, live, receiver, faults, checkpoint_thread))
            .map_err(|e| io(root, "cannot start the writer thread", e))?;

        Ok(Store {
            shared: Arc::new(Shared {
                root: root.to_path_buf(),
                db_path,
                sender: Mutex::new(Some(sender)),
                writer: Mutex::new(Some(writer)),
                checkpointer: Mutex::new(Some(checkpointer)),
                readers: Mutex::new(Vec::new()),
                lock: Mutex::new(Some(lock)),
                faults: options.faults.clone(),
            }),
        })
    }

    pub fn root(&self) -> &Path {
        &self.shared.root
    }

    pub fn db_path(&self) -> &Path {
        &self.shared.db_path
    }

    /// Creates `dir` (inside the root) and any missing parents, mode 0700, each new
    /// directory's parent fsynced before this returns (see [`durable`]).
    pub fn create_dir_durably(&self, dir: &Path) -> Result<(), StoreError> {
        durable::create_dir_all(dir, 0o700, self.shared.faults.as_deref()).map_err(|e| {
            StoreError::Io {
                path: dir.to_path_buf(),
                message: format!("cannot create the directory: {e}"),
            }
        })?;
        Ok(())
    }

    /// Queues `work` for the writer without waiting: `reply` is called on the writer thread
    /// once its outcome is durable (after `on_commit`), or at once if the store is closed.
    /// When the queue is full the write comes back as [`Blocked`] for the caller to send
    /// from a thread that may wait.
    pub fn submit<F, R, E>(
        &self,
        work: F,
        on_commit: Option<OnCommit<R>>,
        reply: Reply<R, E>,
    ) -> Option<Blocked>
    where
        F: FnMut(&WriteTx<'_, '_>) -> Result<R, E> + Send + 'static,
        R: Send + 'static,
        E: From<StoreError> + Send + 'static,
    {
        let queue = self
            .shared
            .sender
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        jobs::submit(queue, work, on_commit, reply)
    }

    /// Runs `work` in the writer's transaction and waits until it is committed (fsynced).
    /// Must not be called from inside an async runtime: async callers use [`Store::submit`]
    /// and await its reply.
    pub fn write<F, R, E>(&self, work: F) -> Result<R, E>
    where
        F: FnMut(&WriteTx<'_, '_>) -> Result<R, E> + Send + 'static,
        R: Send + 'static,
        E: From<StoreError> + Send + 'static,
    {
        wait_for_reply(|reply| self.submit(work, None, reply))
    }

    /// Runs `read` on a read-only connection (committed data only).
    pub fn read<R, E>(&self, read: impl FnOnce(&Connection) -> Result<R, E>) -> Result<R, E>
    where
        E: From<StoreError>,
    {
        if self
            .shared
            .sender
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .is_none()
        {
            return Err(E::from(StoreError::Closed));
        }
        let pooled = self
            .shared
            .readers
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .pop();
        let conn = match pooled {
            Some(conn) => conn,
            None => connections::open_reader(&self.shared.db_path).map_err(E::from)?,
        };
        // One read transaction: every statement of `read` sees the same snapshot (a Task
        // row and its history are never from two different commits).
        let mut reusable = true;
        let result = match connections::savepoint(&conn, "BEGIN") {
            Ok(()) => {
                let result = read(&conn);
                if let Err(err) = connections::savepoint(&conn, "COMMIT") {
                    // The read itself is complete; a connection left inside its read
                    // transaction would pin an old snapshot, so it is not pooled again.
                    crate::log::warn(
                        "a2a_read_commit_failed",
                        serde_json::json!({ "error": err.to_string() }),
                    );
                    reusable = false;
                }
                result
            }
            Err(err) => Err(E::from(StoreError::from(err))),
        };
        let closed = self.is_closed() || !reusable;
        let mut idle = self
            .shared
            .readers
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        // A read that overlapped close() must not put its connection back in the pool.
        if !closed && idle.len() < MAX_IDLE_READERS {
            idle.push(conn);
        }
        result
    }

    /// Stops the writer after the writes already queued, closes every connection and
    /// releases the root's lock. Idempotent.
    pub fn close(&self) {
        wal_checkpointer::stop(&self.shared.checkpointer);
        let sender = self
            .shared
            .sender
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        drop(sender);
        let writer = self
            .shared
            .writer
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        if let Some(writer) = writer {
            let _ = writer.join();
        }
        self.shared
            .readers
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clear();
        // Closing the file releases the flock.
        self.shared
            .lock
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
    }

    pub fn is_closed(&self) -> bool {
        self.shared
            .sender
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .is_none()
    }
}

impl Drop for Shared {
    fn drop(&mut self) {
        wal_checkpointer::stop(&self.checkpointer);
        // The last handle went away without close(): stop the writer all the same.
        self.sender
            .get_mut()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        if let Some(writer) = self
            .writer
            .get_mut()
            .unwrap_or_else(|p| p.into_inner())
            .take()
        {
            let _ = writer.join();
        }
    }
}
/// `('a', 'b')`: store names as an SQL list for `IN`. The names are the enums' own (never
/// caller text), so quoting them is safe.
fn sql_list<'a>(names: impl Iterator<Item = &'a str>) -> String {
    let names: Vec<String> = names.map(|n| format!("'{n}'")).collect();
    format!("({})", names.join(", "))
}
