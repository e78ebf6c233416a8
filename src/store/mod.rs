//! The durable store, behind a boundary (architecture decision 11).
//!
//! - **The boundary** ([`boundary`]): the plane, the wake queue and everything outside
//!   `store` see typed transactions only, [`ReadTx`] (reads) and [`WriteTx`] (the writes
//!   of one write transaction), and the handle [`Store`]: `submit` (a write job answered
//!   after its commit, with an `on_commit` hook), `write`, `read`, `close`. No SQL,
//!   connection or statement crosses it; a backend is a [`Backend`] plus the two
//!   transaction traits ([`Store::with_backend`]).
//! - **SQLite** ([`sqlite`]) is the embedded default: one database per store root,
//!   written by one thread ([`writer`]) fed through a bounded queue ([`jobs`]). It drains
//!   whatever is queued into one transaction (one job's failure does not undo another's:
//!   see [`writer::writer_loop`]), commits once, and only then answers every caller:
//!   concurrent intakes share one fsync (group commit), and no caller hears "done" before
//!   its records are durable. Readers use their own read-only connections (WAL lets them
//!   run beside the writer and see only committed data).
//! - **One process per root.** Opening takes an exclusive `flock` on `<root>/lock`
//!   ([`root_lock`]); a second opener (another process, or the same one before `close()`)
//!   fails at once with an error naming the root and the holder's pid.
//! - WAL with `synchronous=FULL` (connections set up in [`connections`]); the writer's WAL
//!   appends reach the file in one write per commit ([`wal_appends`]); checkpoints on
//!   their own thread ([`wal_checkpointer`]); the root is mode 0700 and its files 0600.
//! - **Every SQLite statement lives here**, behind typed functions, one module per table
//!   or concern: [`tasks`] (with history and artifacts, listings, and the SQL forms of the
//!   state sets), [`claims`] (the activation journal), [`contexts`], [`evidence`],
//!   [`anchors`], [`checkpoints`], [`deliveries`], [`retention`] (compaction) and
//!   [`inspect`] (the operator's read-only checks). The SQLite transactions' trait
//!   methods call them; the records they return are the boundary's; the rules that
//!   combine them are the plane's.
//!
//! Who owns what (the writer, readers, checkpoints): `docs/architecture.md`.

pub mod anchors;
pub mod boundary;
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
pub mod sqlite;
pub mod tasks;
mod wal_appends;
mod wal_checkpointer;
mod writer;

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

pub use boundary::{
    Backend, EvidenceRow, KeptSessionFile, LocalSessionFile, ReadJob, ReadTx, SessionFile,
    TaskChange, TaskChanges, WriteTx,
};
pub use faults::{FaultAction, Faults, ACCEPTANCE_STEPS};
pub use jobs::{answer_batch, Queue, Reply};
pub use jobs::{at_batch_end, queue, wait_for_reply, Blocked, InOrder, Job, Jobs, OnCommit};
pub use schema::SCHEMA_VERSION;
pub use sqlite::{ReadOnly, SqliteStore};

/// The database file inside a store root.
pub const DB_FILE: &str = "task-plane.sqlite3";
/// The lock file inside a store root.
pub const LOCK_FILE: &str = "lock";

/// A failure of the store itself (not of a rule).
#[derive(Debug, Clone)]
pub enum StoreError {
    /// Another process (or this one, before `close()`) holds the root.
    Locked { root: PathBuf, holder: String },
    /// The root or a file in it could not be created, opened or locked.
    Io { path: PathBuf, message: String },
    /// The database refused (an I/O error, read-only, busy, corrupt, a lost connection);
    /// `backend` names which database ("SQLite", "PostgreSQL").
    Database {
        backend: &'static str,
        message: String,
    },
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
            StoreError::Database { backend, message } => {
                write!(f, "task-plane store ({backend}): {message}")
            }
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

impl StoreError {
    /// SQLite refused: [`StoreError::Database`] naming SQLite.
    pub fn sqlite(message: impl Into<String>) -> StoreError {
        StoreError::Database {
            backend: "SQLite",
            message: message.into(),
        }
    }
}

impl From<rusqlite::Error> for StoreError {
    fn from(err: rusqlite::Error) -> Self {
        match err.sqlite_error_code() {
            Some(rusqlite::ErrorCode::DiskFull) => StoreError::Full(err.to_string()),
            _ => StoreError::sqlite(err.to_string()),
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
/// A handle on an open store, whichever backend holds it. Cheap to clone; `close()` on
/// any clone closes it.
#[derive(Clone)]
pub struct Store {
    backend: Arc<dyn Backend>,
    /// Test-only: failure injection and the trace of syncs (for the root's directories).
    faults: Option<Arc<Faults>>,
    /// The root's lock when the backend does not hold it itself (a database elsewhere,
    /// [`Store::open_with_backend`]): released on `close()`.
    root_lock: Arc<Mutex<Option<std::fs::File>>>,
}

impl Store {
    /// Opens (creating if needed) the SQLite store at `root`: takes its lock, migrates the
    /// schema and starts the writer thread (see [`SqliteStore::open`]).
    pub fn open(root: &Path, options: StoreOptions) -> Result<Store, StoreError> {
        let faults = options.faults.clone();
        let sqlite = SqliteStore::open(root, options)?;
        Ok(Store::with_backend(Arc::new(sqlite), faults))
    }

    /// A handle on a store some other backend opened (its root already set up).
    pub fn with_backend(backend: Arc<dyn Backend>, faults: Option<Arc<Faults>>) -> Store {
        Store {
            backend,
            faults,
            root_lock: Arc::default(),
        }
    }

    /// A store whose database lives elsewhere (a fleet's PostgreSQL: `pg::open_store`),
    /// for this node, whose local store `root` (Pi sessions, logs, the control socket) is
    /// created if needed and locked first, one process per root as with SQLite; then
    /// `open_backend` opens the backend.
    pub fn open_with_backend(
        root: &Path,
        options: StoreOptions,
        open_backend: impl FnOnce() -> Result<Arc<dyn Backend>, StoreError>,
    ) -> Result<Store, StoreError> {
        let trace = options.faults.as_deref();
        durable::create_dir_all(root, 0o700, trace).map_err(|e| StoreError::Io {
            path: root.to_path_buf(),
            message: format!("cannot create the store directory: {e}"),
        })?;
        let lock = root_lock::take(root, trace)?;
        let store = Store::with_backend(open_backend()?, options.faults);
        *store.root_lock.lock().unwrap_or_else(|p| p.into_inner()) = Some(lock);
        Ok(store)
    }

    pub fn root(&self) -> &Path {
        self.backend.root()
    }

    /// Whether the Tasks' Pi sessions are kept in the database ([`Backend::keeps_sessions`]).
    pub fn keeps_sessions(&self) -> bool {
        self.backend.keeps_sessions()
    }

    /// The SQLite store behind this handle, if SQLite holds it (its own tests and tools:
    /// the database path).
    pub fn sqlite(&self) -> Option<&SqliteStore> {
        self.backend.as_any().downcast_ref::<SqliteStore>()
    }

    /// The backend behind this handle (a backend's own module finds itself in it with
    /// [`Backend::as_any`], e.g. `pg::of`).
    pub fn backend(&self) -> &dyn Backend {
        &*self.backend
    }

    /// Creates `dir` (inside the root) and any missing parents, mode 0700, each new
    /// directory's parent fsynced before this returns (see [`durable`]).
    pub fn create_dir_durably(&self, dir: &Path) -> Result<(), StoreError> {
        durable::create_dir_all(dir, 0o700, self.faults.as_deref()).map_err(|e| {
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
        F: FnMut(&dyn WriteTx) -> Result<R, E> + Send + 'static,
        R: Send + 'static,
        E: From<StoreError> + Send + 'static,
    {
        jobs::submit(self.backend.queue(), work, on_commit, reply)
    }

    /// Runs `work` in a write transaction and waits until it is committed (durable).
    /// Must not be called from inside an async runtime: async callers use [`Store::submit`]
    /// and await its reply.
    pub fn write<F, R, E>(&self, work: F) -> Result<R, E>
    where
        F: FnMut(&dyn WriteTx) -> Result<R, E> + Send + 'static,
        R: Send + 'static,
        E: From<StoreError> + Send + 'static,
    {
        wait_for_reply(|reply| self.submit(work, None, reply))
    }

    /// Runs `read` in one read transaction (committed data only; every read of it sees
    /// the same snapshot). Once `read` has run its result is the answer, even if ending
    /// the read transaction failed (the backend logs that).
    pub fn read<R, E>(&self, read: impl FnOnce(&dyn ReadTx) -> Result<R, E>) -> Result<R, E>
    where
        E: From<StoreError>,
    {
        let mut read = Some(read);
        let mut result = None;
        let ran = self.backend.read(&mut |tx| {
            if let Some(read) = read.take() {
                result = Some(read(tx));
            }
            Ok(())
        });
        match result {
            Some(result) => result,
            None => Err(E::from(ran.err().unwrap_or_else(|| StoreError::Database {
                backend: "store",
                message: "a read finished without running (a bug in the store's backend)".into(),
            }))),
        }
    }

    /// Stops the writer after the writes already queued, closes every connection and
    /// releases the root's lock. Idempotent.
    /// The space the store takes, in bytes (SQLite's files; PostgreSQL's database).
    pub fn bytes(&self) -> Result<u64, StoreError> {
        self.backend.bytes()
    }

    pub fn close(&self) {
        self.backend.close();
        // Closing the file releases the flock (after the backend let go of the root).
        self.root_lock
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
    }

    pub fn is_closed(&self) -> bool {
        self.backend.is_closed()
    }
}

/// The bytes of the SQLite database under `root`: the file, its WAL and shared memory
/// (readable without opening the store: the offline inspector's figure too).
pub fn file_bytes(root: &Path) -> u64 {
    let db = root.join(DB_FILE);
    ["", "-wal", "-shm"]
        .iter()
        .filter_map(|suffix| {
            let mut name = db.as_os_str().to_owned();
            name.push(suffix);
            std::fs::metadata(PathBuf::from(name)).ok()
        })
        .map(|m| m.len())
        .sum()
}

/// `('a', 'b')`: store names as an SQL list for `IN`. The names are the enums' own (never
/// caller text), so quoting them is safe.
fn sql_list<'a>(names: impl Iterator<Item = &'a str>) -> String {
    let names: Vec<String> = names.map(|n| format!("'{n}'")).collect();
    format!("({})", names.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Root(PathBuf);
    impl Drop for Root {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn open(tag: &str) -> (Root, Store) {
        let root = Root(std::env::temp_dir().join(format!("tp-{tag}-{}", crate::ids::mint())));
        let store = Store::open(&root.0, StoreOptions::default()).unwrap();
        (root, store)
    }

    /// `Store::read` over the boundary: the read runs once and its own answer (value or
    /// error) comes back as it gave it; a closed store answers `Closed` without running it.
    #[test]
    fn a_read_answers_what_it_returned_and_a_closed_store_runs_none() {
        let (_root, store) = open("read-contract");
        let mut runs = 0;
        let found = store.read(|tx| {
            runs += 1;
            tx.task_by_id("t-missing")
        });
        assert!(matches!(found, Ok(None)), "{found:?}");
        let refused: Result<(), StoreError> =
            store.read(|_| Err(StoreError::Corrupt("the read's own error".into())));
        assert!(matches!(refused, Err(StoreError::Corrupt(m)) if m == "the read's own error"));
        store.close();
        let closed = store.read(|_| {
            runs += 1;
            Ok::<_, StoreError>(())
        });
        assert!(matches!(closed, Err(StoreError::Closed)), "{closed:?}");
        assert_eq!(runs, 1);
    }

    /// A SQLite refusal names SQLite (the boundary's errors name their backend).
    #[test]
    fn a_database_error_names_its_backend() {
        let err = StoreError::from(rusqlite::Error::InvalidQuery);
        assert!(
            err.to_string().starts_with("task-plane store (SQLite): "),
            "{err}"
        );
    }

    /// The handle finds SQLite behind it (its tests' way to the database file); writes go
    /// through the boundary and are read back through it.
    #[test]
    fn the_sqlite_handle_is_reachable_and_writes_cross_the_boundary() {
        let (root, store) = open("handle");
        let sqlite = store.sqlite().expect("SQLite holds the store");
        assert_eq!(sqlite.db_path(), root.0.join(DB_FILE));
        store
            .write(|tx| tx.set_checkpoint("alice", "src", "cursor-1", 1_000))
            .unwrap();
        let cursor = store.read(|tx| tx.checkpoint("alice", "src")).unwrap();
        assert_eq!(cursor.as_deref(), Some("cursor-1"));
        store.close();
    }
}
