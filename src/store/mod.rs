//! The durable store: one SQLite database per store root, written by one thread.
//!
//! - **One writer.** A dedicated thread owns the only write connection and is fed jobs
//!   through a channel. It drains whatever is queued into one transaction (one job's
//!   failure does not undo another's: see [`writer_loop`]), commits once, and only
//!   then answers every caller: concurrent intakes share one fsync (group commit), and no
//!   caller hears "done" before its records are durable.
//! - **Readers** use their own read-only connections (WAL lets them run beside the writer
//!   and see only committed data).
//! - **One process per root.** Opening takes an exclusive `flock` on `<root>/lock`; a
//!   second opener (another process, or the same one before `close()`) fails at once with
//!   an error naming the root and the holder's pid.
//! - WAL with `synchronous=FULL`; checkpoints on their own thread; the root is mode 0700
//!   and its files 0600.
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
pub mod contexts;
pub mod deliveries;
pub mod durable;
pub mod evidence;
mod faults;
pub mod inspect;
pub mod retention;
mod schema;
pub mod tasks;
mod wal_appends;

use std::cell::RefCell;
use std::fmt;
use std::fs::{self, File, OpenOptions};
use std::io::{Read, Seek, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::mpsc::{self, Receiver, SyncSender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

/// The connection type store functions take (a writer transaction's or a reader's).
pub use rusqlite::Connection;
use rusqlite::OpenFlags;
use tokio::sync::oneshot;

pub use faults::{FaultAction, Faults, ACCEPTANCE_STEPS};
pub use schema::{secret, SCHEMA_VERSION};

/// The database file inside a store root.
pub const DB_FILE: &str = "task-plane.sqlite3";
/// The lock file inside a store root.
pub const LOCK_FILE: &str = "lock";

/// How many queued writes one commit may carry.
const MAX_BATCH: usize = 512;
/// Queued writes beyond this make callers wait (back-pressure instead of unbounded memory).
const QUEUE_DEPTH: usize = 4096;
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

/// A write transaction as a job sees it: the writer's connection and its kept statements
/// ([`Prepared`]) plus the fault-injection hook.
pub struct WriteTx<'a, 'c> {
    prepared: &'a Prepared<'c>,
    faults: Option<&'a Faults>,
    /// The transaction's changes to the kept Task counts, written just before it commits
    /// (`tasks::write_counts`).
    counts: RefCell<tasks::CountChanges>,
    /// The writer's rows of live Tasks (kept across its transactions; see
    /// [`tasks::LiveRows`]).
    live: &'a RefCell<tasks::LiveRows>,
}

impl<'c> WriteTx<'_, 'c> {
    /// The writer's connection, for statements the typed store functions do not cover. A
    /// write to the `tasks` table made here must call [`WriteTx::forget_live_rows`]: the
    /// writer keeps live Tasks' rows ([`tasks::LiveRows`]) and would not see it.
    pub fn conn(&self) -> &'c Connection {
        self.prepared.conn
    }

    /// Runs `f` with the writer's prepared statement for `sql` (see [`Prepared`]).
    pub(crate) fn with_statement<R>(
        &self,
        sql: &'static str,
        f: impl FnOnce(&mut rusqlite::Statement<'c>) -> rusqlite::Result<R>,
    ) -> Result<R, StoreError> {
        self.prepared.run(sql, f)
    }

    /// The writer's rows of live Tasks ([`tasks::LiveRows`]).
    pub(crate) fn live_rows(&self) -> &RefCell<tasks::LiveRows> {
        self.live
    }

    /// Forgets the writer's rows of live Tasks (after something it cannot follow).
    pub fn forget_live_rows(&self) {
        self.live.borrow_mut().clear();
    }

    /// Counts one Task more (`by` 1) or fewer (`by` -1) of `principal` in `state`, as of
    /// this transaction's commit.
    pub(crate) fn count(&self, principal: &str, state: crate::record::TaskState, by: i64) {
        self.counts.borrow_mut().add(principal, state, by);
    }

    /// Marks a named step of the write; a test's [`Faults`] may crash or fail the process
    /// here. Free when no faults are configured.
    pub fn step(&self, name: &str) -> Result<(), StoreError> {
        match self.faults {
            Some(faults) => faults.at(name),
            None => Ok(()),
        }
    }
}

/// Where a store function runs a statement: a reader's [`Connection`] (rusqlite's
/// statement cache) or the writer's [`WriteTx`] (its kept statements, [`Prepared`]). A
/// read that both readers and writer jobs make takes `&impl Statements`, so the writer's
/// hot reads skip rusqlite's cache like its writes do.
pub trait Statements {
    fn statement<R>(
        &self,
        sql: &'static str,
        f: impl FnOnce(&mut rusqlite::Statement<'_>) -> rusqlite::Result<R>,
    ) -> Result<R, StoreError>;

    /// The writer's rows of live Tasks, when this is the writer.
    fn writer_rows(&self) -> Option<&RefCell<tasks::LiveRows>> {
        None
    }
}

impl Statements for Connection {
    fn statement<R>(
        &self,
        sql: &'static str,
        f: impl FnOnce(&mut rusqlite::Statement<'_>) -> rusqlite::Result<R>,
    ) -> Result<R, StoreError> {
        let mut statement = self.prepare_cached(sql)?;
        Ok(f(&mut statement)?)
    }
}

impl Statements for WriteTx<'_, '_> {
    fn statement<R>(
        &self,
        sql: &'static str,
        f: impl FnOnce(&mut rusqlite::Statement<'_>) -> rusqlite::Result<R>,
    ) -> Result<R, StoreError> {
        self.prepared.run(sql, f)
    }

    fn writer_rows(&self) -> Option<&RefCell<tasks::LiveRows>> {
        Some(self.live)
    }
}

/// How a queued write's outcome reaches its caller: called once, on the writer thread,
/// after the commit that made the result durable (or with the error that kept it from
/// being so). It must not block: it hands the outcome on (a channel, a Promise).
pub type Reply<R, E> = Box<dyn FnOnce(Result<R, E>) + Send>;

/// The writer's own prepared statements for the statements it runs for every Task, each
/// found by the address of its SQL text (a `&'static str` literal). rusqlite's statement
/// cache is keyed by the text itself: every use copies the SQL into a new `Arc<str>`, hashes
/// it twice and clears the bindings on return (callgrind, one-core blocking `message:send`:
/// 524k -> 513k instructions per request with the writer's hot statements here). A
/// statement in use is taken out, so a nested use of the same SQL gets a second one rather
/// than a conflict. Every use binds all of a statement's parameters (rusqlite checks the
/// count), and `execute` resets it, so nothing of one use reaches the next.
pub(crate) struct Prepared<'c> {
    conn: &'c Connection,
    idle: RefCell<Vec<(usize, rusqlite::Statement<'c>)>>,
}

impl<'c> Prepared<'c> {
    fn new(conn: &'c Connection) -> Self {
        Prepared {
            conn,
            idle: RefCell::new(Vec::with_capacity(16)),
        }
    }

    fn run<R>(
        &self,
        sql: &'static str,
        f: impl FnOnce(&mut rusqlite::Statement<'c>) -> rusqlite::Result<R>,
    ) -> Result<R, StoreError> {
        let key = sql.as_ptr() as usize;
        let idle = {
            let mut idle = self.idle.borrow_mut();
            let at = idle.iter().position(|(k, _)| *k == key);
            at.map(|at| idle.swap_remove(at).1)
        };
        let mut statement = match idle {
            Some(statement) => statement,
            None => self
                .conn
                .prepare_with_flags(sql, rusqlite::PrepFlags::SQLITE_PREPARE_PERSISTENT)?,
        };
        let out = f(&mut statement);
        self.idle.borrow_mut().push((key, statement));
        Ok(out?)
    }
}

/// A queued write, type-erased.
trait Job: Send {
    /// Runs inside the batch transaction and keeps its result; returns whether it
    /// succeeded. May run a second time, in a new transaction, when the first one is
    /// rolled back for another job's sake (see [`writer_loop`]).
    fn run(&mut self, tx: &WriteTx<'_, '_>) -> bool;
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
    F: FnMut(&WriteTx<'_, '_>) -> Result<R, E> + Send,
    R: Send + 'static,
    E: From<StoreError> + Send + 'static,
{
    fn run(&mut self, tx: &WriteTx<'_, '_>) -> bool {
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
            (None, None) => Err(E::from(StoreError::Sqlite(
                "a write was committed without being run (a bug in the store's writer)".into(),
            ))),
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

/// Submits a write through `submit` (which hands the reply on to [`Store::submit`]) and
/// blocks the calling thread until its outcome: waiting for room in a full queue, then for
/// the commit. Never on an async worker or Node's JS thread.
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
    sender: SyncSender<Box<dyn Job>>,
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
/// full. [`Store::submit`] alone keeps that order only while there is room: a write that
/// comes back [`Blocked`] is sent later from another thread, and a write the caller makes
/// meanwhile could find room first. Through `InOrder`, once one write is blocked every
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

struct Shared {
    root: PathBuf,
    db_path: PathBuf,
    sender: Mutex<Option<SyncSender<Box<dyn Job>>>>,
    writer: Mutex<Option<JoinHandle<()>>>,
    checkpointer: Mutex<Option<(Arc<std::sync::atomic::AtomicBool>, JoinHandle<()>)>>,
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

        let lock = take_lock(root, trace)?;

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

        configure_sqlite();
        // The writer's WAL appends reach the file in one write per commit (wal_appends).
        let mut conn = wal_appends::open_writer(
            &db_path,
            OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )?;
        configure(&conn)?;
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
        conn.pragma_update(None, "wal_autocheckpoint", WRITER_CHECKPOINT_PAGES)?;
        let checkpointer = start_checkpointer(&db_path)
            .map_err(|e| io(root, "cannot start the checkpoint thread", e))?;
        let (sender, receiver) = mpsc::sync_channel::<Box<dyn Job>>(QUEUE_DEPTH);
        let faults = options.faults.clone();
        let checkpoint_thread = checkpointer.1.thread().clone();
        let writer = std::thread::Builder::new()
            .name("task-plane-writer".into())
            .spawn(move || writer_loop(conn, receiver, faults, checkpoint_thread))
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
        let job: Box<dyn Job> = Box::new(TypedJob {
            work,
            on_commit,
            reply,
            result: None,
        });
        let sender = self
            .shared
            .sender
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        let Some(sender) = sender else {
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
            None => open_reader(&self.shared.db_path).map_err(E::from)?,
        };
        // One read transaction: every statement of `read` sees the same snapshot (a Task
        // row and its history are never from two different commits).
        let mut reusable = true;
        let result = match savepoint(&conn, "BEGIN") {
            Ok(()) => {
                let result = read(&conn);
                if let Err(err) = savepoint(&conn, "COMMIT") {
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
        stop_checkpointer(&self.shared.checkpointer);
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
        stop_checkpointer(&self.checkpointer);
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

/// WAL size (pages) past which the writer checkpoints itself, in case the checkpoint thread
/// falls behind under sustained load.
const WRITER_CHECKPOINT_PAGES: i64 = 16_384;
/// At most one checkpoint per this interval, however often the writer commits.
const CHECKPOINT_EVERY: std::time::Duration = std::time::Duration::from_millis(100);

type Checkpointer = (Arc<std::sync::atomic::AtomicBool>, JoinHandle<()>);

/// A thread with its own connection that runs a PASSIVE checkpoint (never blocking the
/// writer or readers) after commits: the writer unparks it after each commit, and it
/// checkpoints at most once per [`CHECKPOINT_EVERY`] (commits in between coalesce into
/// one wake-up). With nothing committed it sleeps: an idle store wakes no thread.
fn start_checkpointer(db_path: &Path) -> std::io::Result<Checkpointer> {
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
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
            let stopped = || flag.load(std::sync::atomic::Ordering::SeqCst);
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

fn stop_checkpointer(slot: &Mutex<Option<Checkpointer>>) {
    let taken = slot.lock().unwrap_or_else(|p| p.into_inner()).take();
    if let Some((stop, handle)) = taken {
        stop.store(true, std::sync::atomic::Ordering::SeqCst);
        handle.thread().unpark();
        let _ = handle.join();
    }
}

/// SQLite's process-wide settings, made once before its first connection (afterwards
/// SQLite refuses them, which only costs the speed-up). Memory statistics off: with them on,
/// every allocation SQLite makes takes a global mutex to count it, and a profile of
/// one-core `message:send` spent ~4% of all CPU in that mutex and its bookkeeping. The
/// store never reads the statistics.
fn configure_sqlite() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        // SAFETY: a documented start-up configuration call with an int argument, made
        // before any connection exists in this process (or refused harmlessly if not).
        unsafe {
            rusqlite::ffi::sqlite3_config(
                rusqlite::ffi::SQLITE_CONFIG_MEMSTATUS,
                0 as std::ffi::c_int,
            );
        }
    });
}

fn configure(conn: &Connection) -> Result<(), StoreError> {
    conn.busy_timeout(std::time::Duration::from_secs(5))?;
    conn.pragma_update(None, "synchronous", "FULL")?;
    conn.pragma_update(None, "foreign_keys", "OFF")?;
    // 4 MiB of page cache for the writer (SQLite's default is 2 MiB): the hot index pages
    // of a large store stay in memory instead of being re-read for every insert. Larger
    // costs more than it saves: SQLite scans the cache's hash table at the end of every
    // write transaction, and the cache counts against the resident's memory. 16 MiB put a
    // one-core message:send at 99-108 MB peak RSS, 8 MiB at 94-99 MB; 4 MiB at 90-95 MB
    // with no loss of rate (paired runs of benches/http.rs, and cargo bench --bench
    // intake at 100,000 Tasks, 2026-12-04).
    conn.pragma_update(None, "cache_size", -4_096)?;
    conn.pragma_update(None, "temp_store", "MEMORY")?;
    cache_statements(conn);
    stable_plans(conn)?;
    Ok(())
}

/// Room for every statement the store prepares, so none is compiled twice. rusqlite's
/// cache holds 16 by default and evicts the least recently used: the writer runs more
/// distinct statements than that for each accepted message (Task, claim, evidence,
/// history, counts, contexts, deliveries), so a default cache re-parsed several of them
/// on every Task (a callgrind profile of a blocking `message:send` spent 6% of all
/// instructions in `sqlite3_prepare_v3`).
fn cache_statements(conn: &Connection) {
    conn.set_prepared_statement_cache_capacity(STATEMENT_CACHE);
}

/// Statements a connection keeps compiled (every distinct SQL text the store runs fits).
const STATEMENT_CACHE: usize = 128;

/// Query plans that do not depend on bound values (SQLite's query planner stability
/// guarantee). Without it, the STAT4 build recompiles a cached statement on the first step
/// after any parameter compared to an indexed column (or used as a LIMIT) is rebound:
/// every Task read re-parsed its history and artifact queries (a profile of
/// `GET /tasks/{id}` spent 10.6% of its CPU in `sqlite3Reprepare`). The store
/// never runs ANALYZE, so no plan is lost.
fn stable_plans(conn: &Connection) -> Result<(), StoreError> {
    conn.set_db_config(
        rusqlite::config::DbConfig::SQLITE_DBCONFIG_ENABLE_QPSG,
        true,
    )?;
    Ok(())
}

/// Opens the store at `root` for inspection only: read-only, no root lock, no migration,
/// no writer; it works while the resident has the store open (WAL readers never block the
/// writer). Refuses a root without a store and a store written by a newer build.
pub fn open_read_only(root: &Path) -> Result<Connection, StoreError> {
    let db_path = root.join(DB_FILE);
    if !db_path.is_file() {
        return Err(StoreError::Io {
            path: db_path,
            message: "there is no task-plane store here (no database file); check the root (CHANNELS_TASK_STORE_PATH or --store)".into(),
        });
    }
    let conn = open_reader(&db_path)?;
    match schema::readable_version(&conn, &db_path)? {
        0 => Err(StoreError::Schema(format!(
            "{} is not an initialized task-plane store (schema version 0)",
            db_path.display()
        ))),
        _ => Ok(conn),
    }
}

fn open_reader(db_path: &Path) -> Result<Connection, StoreError> {
    configure_sqlite();
    let conn = Connection::open_with_flags(
        db_path,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )?;
    // Readers keep SQLite's small default cache: after every commit a reader starts with
    // an empty cache anyway (WAL), and clearing a large one costs more than it saves.
    conn.busy_timeout(std::time::Duration::from_secs(5))?;
    cache_statements(&conn);
    stable_plans(&conn)?;
    Ok(conn)
}

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

fn take_lock(root: &Path, trace: Option<&Faults>) -> Result<File, StoreError> {
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

/// `('a', 'b')`: store names as an SQL list for `IN`. The names are the enums' own (never
/// caller text), so quoting them is safe.
fn sql_list<'a>(names: impl Iterator<Item = &'a str>) -> String {
    let names: Vec<String> = names.map(|n| format!("'{n}'")).collect();
    format!("({})", names.join(", "))
}

/// Runs a transaction-control statement through the statement cache (one per job or read:
/// parsing it each time is measurable at thousands of requests per second).
fn savepoint(conn: &Connection, sql: &str) -> rusqlite::Result<()> {
    conn.prepare_cached(sql)?.execute([]).map(|_| ())
}

/// The writer: takes whatever is queued (up to [`MAX_BATCH`] jobs) into one transaction,
/// commits once, then answers every job.
///
/// One job's failure must not undo the others' writes. A job in its own savepoint would
/// guarantee that, but SQLite then copies every page a job touches into the savepoint's
/// journal first (a profile of one-core `message:send` put ~30% of the writer's work in
/// those copies, their allocations and the savepoint statements). So the jobs run without
/// savepoints, and the rare failure that leaves writes behind is undone by the
/// transaction: a job that fails having changed rows, or any job after which SQLite itself
/// had rolled the transaction back (disk full, I/O error; even one that went on without
/// the failed read), sends the batch through [`run_isolated`], which starts over with each
/// job in its own savepoint. A job that fails without changing anything (a refused rule,
/// checked before it writes) needs nothing undone.
fn writer_loop(
    conn: Connection,
    receiver: Receiver<Box<dyn Job>>,
    faults: Option<Arc<Faults>>,
    checkpointer: std::thread::Thread,
) {
    let faults = faults.as_deref();
    let prepared = Prepared::new(&conn);
    // One list for every batch, emptied by each: a new one per batch grew by reallocation
    // to the batch's size, and at a few hundred jobs each growth was a large allocation
    // that made glibc consolidate its free lists (~3% of the writer's time in a profile of
    // one-core `message:send`).
    let mut batch: Vec<Box<dyn Job>> = Vec::with_capacity(MAX_BATCH);
    let live = RefCell::new(tasks::LiveRows::default());
    while let Ok(first) = receiver.recv() {
        batch.push(first);
        while batch.len() < MAX_BATCH {
            match receiver.try_recv() {
                Ok(job) => batch.push(job),
                Err(_) => break,
            }
        }
        if let Err(err) = conn.execute_batch("BEGIN IMMEDIATE") {
            let err = StoreError::from(err);
            for job in batch.drain(..) {
                job.abort(err.clone());
            }
            continue;
        }
        let tx = WriteTx {
            prepared: &prepared,
            faults,
            counts: RefCell::default(),
            live: &live,
        };
        let mut spoiled = None;
        for (at, job) in batch.iter_mut().enumerate() {
            let before = conn.total_changes();
            let ok = job.run(&tx);
            if conn.is_autocommit() {
                // The transaction itself is gone (SQLite rolls it back on some I/O and
                // memory errors, even in a read a job went on without): what ran before
                // is undone, and whatever ran next would commit statement by statement.
                // Every job runs again, this one too unless it failed.
                spoiled = Some((!ok).then_some(at));
                break;
            }
            if !ok && conn.total_changes() != before {
                spoiled = Some(Some(at));
                break;
            }
        }
        let outcome = match spoiled {
            Some(failed) => run_isolated(&tx, &mut batch, failed),
            None => Ok(()),
        };
        let outcome = outcome.and_then(|()| {
            tasks::write_counts(&tx)?;
            tx.step("commit")
                .and_then(|_| conn.execute_batch("COMMIT").map_err(StoreError::from))
        });
        BATCH_END.with(|hooks| hooks.borrow_mut().replace(Vec::new()));
        match outcome {
            Ok(()) => {
                checkpointer.unpark();
                batch.drain(..).for_each(|job| job.complete(None));
            }
            Err(err) => {
                // Nothing of this batch is durable: every caller hears the error.
                if !conn.is_autocommit() {
                    let _ = conn.execute_batch("ROLLBACK");
                }
                tx.forget_live_rows();
                batch
                    .drain(..)
                    .for_each(|job| job.complete(Some(err.clone())));
            }
        }
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
    // Fold the WAL back into the database so the root is compact when closed.
    let _ = conn.execute_batch("PRAGMA wal_checkpoint(TRUNCATE)");
}

/// The batch again, each job in its own savepoint, after job `failed` failed and left
/// writes behind, or after the transaction was lost: rolls the transaction back and starts
/// a new one in which every other job runs again (a job is a function of the store's
/// state, so running it again gives its answer against the state it will commit with),
/// and job `failed` (if one failed) keeps its error without running again. Any failure
/// here is isolated by its savepoint; an error that ends the transaction itself is
/// returned for every job.
fn run_isolated(
    tx: &WriteTx<'_, '_>,
    batch: &mut [Box<dyn Job>],
    failed: Option<usize>,
) -> Result<(), StoreError> {
    let conn = tx.conn();
    // Whatever happens next, the rows the writer kept may be ahead of the store now.
    tx.forget_live_rows();
    if !conn.is_autocommit() {
        conn.execute_batch("ROLLBACK")?;
    }
    // What the rolled-back jobs counted went with their rows.
    tx.counts.borrow_mut().clear();
    conn.execute_batch("BEGIN IMMEDIATE")?;
    for (at, job) in batch.iter_mut().enumerate() {
        if Some(at) == failed {
            continue;
        }
        savepoint(conn, "SAVEPOINT job")?;
        let counted = tx.counts.borrow().clone();
        let end = if job.run(tx) {
            savepoint(conn, "RELEASE job")
        } else {
            *tx.counts.borrow_mut() = counted;
            tx.forget_live_rows();
            savepoint(conn, "ROLLBACK TO job").and_then(|_| savepoint(conn, "RELEASE job"))
        };
        end?;
    }
    Ok(())
}
