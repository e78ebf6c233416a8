//! The PostgreSQL [`Backend`]: worker threads that run write jobs, reads on the caller's
//! thread, one `r2d2` pool of connections for both.
//!
//! - **Writes.** N worker threads share the store's job queue ([`crate::store::Jobs`]).
//!   Each runs one job as one transaction ([`PgTx::write`]), writes its Task count changes,
//!   commits (`synchronous_commit` on: durable) and only then answers it. A job whose
//!   transaction lost a race to another node's — a unique constraint (two acceptances of
//!   one messageId), a deadlock, a serialization failure — runs again in a new
//!   transaction (the boundary allows it: a job is a function of the store's state), up
//!   to [`ATTEMPTS`] times, and then finds what the other one committed. So does a job
//!   whose connection was lost or ended by the server before its COMMIT was sent (a
//!   database restart): the pool replaces the connection. A COMMIT whose answer was lost
//!   is reported as a failure, never run again: it may have been recorded.
//! - **Reads** run on the caller's thread in a read-only REPEATABLE READ transaction: every
//!   read of one call sees one committed snapshot.
//! - A statement PostgreSQL refused inside a job that then reported success still rolls
//!   the job back (PostgreSQL would turn its COMMIT into a ROLLBACK without an error).
//! - A job that panics is rolled back and answered with an error; its writer goes on.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use postgres::error::SqlState;
use postgres::{Client, IsolationLevel, NoTls, Transaction};
use r2d2_postgres::PostgresConnectionManager;

use super::tx::{may_succeed_again, store_error, PgTx, Statements, BACKEND};
use super::{describe, schema, target};
use crate::config::PostgresUrl;
use crate::store::{
    answer_batch, queue, Backend, Faults, Job, Jobs, Queue, ReadJob, StoreError, WriteTx,
};

type Pool = r2d2::Pool<Manager>;

/// A pooled connection and the statements prepared on it.
pub struct PgConnection {
    client: Client,
    statements: Statements,
}

/// `r2d2_postgres`'s manager (connect, check, notice a broken connection), with each
/// connection's prepared statements kept beside it.
struct Manager(PostgresConnectionManager<NoTls>);

impl r2d2::ManageConnection for Manager {
    type Connection = PgConnection;
    type Error = postgres::Error;

    fn connect(&self) -> Result<PgConnection, postgres::Error> {
        Ok(PgConnection {
            client: self.0.connect()?,
            statements: Statements::new(),
        })
    }

    fn is_valid(&self, conn: &mut PgConnection) -> Result<(), postgres::Error> {
        self.0.is_valid(&mut conn.client)
    }

    fn has_broken(&self, conn: &mut PgConnection) -> bool {
        self.0.has_broken(&mut conn.client)
    }
}

/// How many times a write job runs when its transaction keeps losing races.
pub const ATTEMPTS: u32 = 8;

/// Options for [`PgStore::open`].
#[derive(Debug, Clone)]
pub struct PgOptions {
    /// Worker threads for write jobs, each with a connection of its own. One by default:
    /// a caller's writes queued one after another (an agent's `startWork` then `complete`,
    /// not awaited in between) must be applied in that order, as SQLite's one writer
    /// applies them, and several writers taking jobs from one queue run them at once and
    /// may commit the later first (`writes_queued_one_after_another_are_applied_in_that_order`).
    /// More than one is for tests and benches of independent writes only.
    pub writers: u32,
    /// Further connections for reads (on the callers' threads).
    pub readers: u32,
    /// How long connecting may take, at open and when the pool replaces a connection.
    pub connect_timeout: Duration,
    /// Test-only failure injection at the named steps of a write ([`WriteTx::step`]).
    pub faults: Option<Arc<Faults>>,
    /// The node that writes ([`crate::ids::mint_node_id`]; the plane's own id): each
    /// change of a Task records it, and so does its `a2a_task` notification.
    pub node: Arc<str>,
}

impl Default for PgOptions {
    fn default() -> Self {
        PgOptions {
            writers: 1,
            readers: 8,
            connect_timeout: Duration::from_secs(10),
            faults: None,
            node: crate::ids::mint_node_id().into(),
        }
    }
}

/// An open PostgreSQL store: migrated, its workers running until [`Backend::close`].
pub struct PgStore {
    root: PathBuf,
    target: String,
    /// How to connect (for the node's LISTEN connection, [`PgStore::listen`]).
    config: postgres::Config,
    pool: Pool,
    queue: Mutex<Option<Queue>>,
    workers: Mutex<Vec<JoinHandle<()>>>,
    closed: AtomicBool,
}

fn database_error(message: String) -> StoreError {
    StoreError::Database {
        backend: BACKEND,
        message,
    }
}

impl PgStore {
    /// Connects to the database `url` names, migrates it to [`schema::SCHEMA_VERSION`]
    /// (refusing a newer one) and starts the workers. `root` is this node's local store
    /// root (Pi sessions), created mode 0700.
    pub fn open(url: &PostgresUrl, root: &Path, options: PgOptions) -> Result<PgStore, StoreError> {
        let mut config: postgres::Config = url.as_str().parse().map_err(|e| {
            database_error(format!(
                "A2A_STORE_URL `{}` does not parse: {e}",
                url.redacted()
            ))
        })?;
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(options.connect_timeout);
        }
        if config.get_application_name().is_none() {
            config.application_name("a2a-task-plane");
        }
        let target = target(&config);
        let connect_error = |message: String| {
            database_error(format!(
                "cannot connect to {target}: {message}; check that the server runs and accepts \
                 this user, and A2A_STORE_URL"
            ))
        };
        fs::create_dir_all(root)
            .and_then(|()| fs::set_permissions(root, fs::Permissions::from_mode(0o700)))
            .map_err(|e| StoreError::Io {
                path: root.to_path_buf(),
                message: format!("cannot create the store directory: {e}"),
            })?;
        let mut client = config
            .connect(NoTls)
            .map_err(|e| connect_error(describe(&e)))?;
        schema::migrate(&mut client, &target)?;
        drop(client);

        let writers = options.writers.max(1);
        let pool = r2d2::Pool::builder()
            .max_size(writers + options.readers)
            .min_idle(Some(writers))
            // A broken connection is noticed by the job that uses it (and replaced); a
            // round trip per checkout would add latency to every job.
            .test_on_check_out(false)
            .connection_timeout(options.connect_timeout)
            .build(Manager(PostgresConnectionManager::new(
                config.clone(),
                NoTls,
            )))
            .map_err(|e| connect_error(e.to_string()))?;
        let (sender, jobs) = queue();
        let jobs = Arc::new(Mutex::new(jobs));
        let workers = (0..writers)
            .map(|n| {
                let (pool, jobs, faults) = (pool.clone(), jobs.clone(), options.faults.clone());
                let node = options.node.clone();
                std::thread::Builder::new()
                    .name(format!("a2a-pg-writer-{n}"))
                    .spawn(move || worker_loop(&pool, &jobs, faults.as_deref(), &node))
                    .map_err(|e| database_error(format!("cannot start a writer thread: {e}")))
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(PgStore {
            root: root.to_path_buf(),
            target,
            config,
            pool,
            queue: Mutex::new(Some(sender)),
            workers: Mutex::new(workers),
            closed: AtomicBool::new(false),
        })
    }

    /// The database this store writes to (hosts, name, user; never the password).
    pub fn target(&self) -> &str {
        &self.target
    }

    /// Starts this node's LISTEN connection on `channels` ([`super::listen::Listener`]).
    pub fn listen(
        &self,
        channels: &[&str],
        heard: Box<dyn FnMut(super::listen::Heard) + Send>,
    ) -> Result<super::listen::Listener, StoreError> {
        super::listen::Listener::start(self.config.clone(), self.target.clone(), channels, heard)
            .map_err(|e| database_error(format!("cannot start the LISTEN thread: {e}")))
    }

    /// Runs `work` in one transaction of its own on the calling thread, committed when it
    /// returns `Ok`: the raw SQL of tools and tests (the plane uses the typed operations).
    pub fn with_transaction<R>(
        &self,
        work: impl FnOnce(&mut Transaction<'_>) -> Result<R, postgres::Error>,
    ) -> Result<R, StoreError> {
        if self.is_closed() {
            return Err(StoreError::Closed);
        }
        off_the_runtime(|| {
            let mut conn = self.connection()?;
            let mut tx = conn.client.transaction().map_err(|e| store_error(&e))?;
            let result = work(&mut tx).map_err(|e| store_error(&e))?;
            tx.commit().map_err(|e| store_error(&e))?;
            Ok(result)
        })
    }

    /// [`Backend::read`] on a thread that may block.
    fn read_here(&self, read: ReadJob<'_>) -> Result<(), StoreError> {
        let mut conn = self.connection()?;
        let PgConnection { client, statements } = &mut *conn;
        let tx = client
            .build_transaction()
            .read_only(true)
            .isolation_level(IsolationLevel::RepeatableRead)
            .start()
            .map_err(|e| store_error(&e))?;
        let tx = PgTx::read(tx, statements);
        let result = read(&tx);
        // The read has run: its result is the answer whatever ending the snapshot does.
        if let Err(e) = tx.into_inner().commit() {
            crate::log::warn(
                "a2a_store_read_end_failed",
                serde_json::json!({ "backend": BACKEND, "error": describe(&e) }),
            );
        }
        result
    }

    fn connection(&self) -> Result<r2d2::PooledConnection<Manager>, StoreError> {
        self.pool.get().map_err(|e| {
            database_error(format!(
                "no connection to {} became available: {e}",
                self.target
            ))
        })
    }
}

impl Backend for PgStore {
    fn keeps_sessions(&self) -> bool {
        true
    }

    fn bytes(&self) -> Result<u64, StoreError> {
        let bytes = self.with_transaction(|tx| {
            tx.query_one("SELECT pg_database_size(current_database())", &[])
                .map(|row| row.get::<_, i64>(0))
        })?;
        Ok(u64::try_from(bytes).unwrap_or(0))
    }

    fn root(&self) -> &Path {
        &self.root
    }

    fn queue(&self) -> Option<Queue> {
        self.queue.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    fn read(&self, read: ReadJob<'_>) -> Result<(), StoreError> {
        if self.is_closed() {
            return Err(StoreError::Closed);
        }
        off_the_runtime(|| self.read_here(read))
    }

    fn close(&self) {
        self.closed.store(true, Ordering::SeqCst);
        // The workers finish the jobs queued so far, then find the queue closed.
        self.queue.lock().unwrap_or_else(|p| p.into_inner()).take();
        let workers = std::mem::take(&mut *self.workers.lock().unwrap_or_else(|p| p.into_inner()));
        for worker in workers {
            let _ = worker.join();
        }
    }

    fn is_closed(&self) -> bool {
        self.closed.load(Ordering::SeqCst)
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

impl Drop for PgStore {
    fn drop(&mut self) {
        self.close();
    }
}

/// One writer: takes the next job and runs it, until the queue closes.
fn worker_loop(pool: &Pool, jobs: &Mutex<Jobs>, faults: Option<&Faults>, node: &str) {
    loop {
        let job = match jobs.lock().unwrap_or_else(|p| p.into_inner()).recv() {
            Ok(job) => job,
            Err(_) => return,
        };
        run_job(pool, job, faults, node);
    }
}

/// What one attempt at a job came to.
enum Attempt {
    Committed,
    /// Rolled back: the job's own error (`None`) or the store's; whether to run it again.
    RolledBack(Option<StoreError>, bool),
}

fn run_job(pool: &Pool, mut job: Box<dyn Job>, faults: Option<&Faults>, node: &str) {
    for attempt in 1..=ATTEMPTS {
        let mut conn = match pool.get() {
            Ok(conn) => conn,
            Err(e) => {
                job.abort(database_error(format!(
                    "no database connection became available: {e}"
                )));
                return;
            }
        };
        let PgConnection { client, statements } = &mut *conn;
        let outcome = match client.transaction() {
            Ok(tx) => attempt_job(&mut *job, PgTx::write(tx, statements, faults, node)),
            Err(e) => Attempt::RolledBack(Some(store_error(&e)), may_succeed_again(&e)),
        };
        match outcome {
            Attempt::Committed => {
                answer_batch(|| job.complete(None));
                return;
            }
            Attempt::RolledBack(_, true) if attempt < ATTEMPTS => continue,
            Attempt::RolledBack(error, _) => {
                answer_batch(|| job.complete(error));
                return;
            }
        }
    }
}

fn attempt_job(job: &mut dyn Job, tx: PgTx<'_>) -> Attempt {
    // A job that panics is answered with an error and rolled back; its writer goes on.
    let ran = match catch_unwind(AssertUnwindSafe(|| job.run(&tx))) {
        Ok(ran) => ran,
        Err(_) => {
            return Attempt::RolledBack(
                Some(database_error(
                    "a write panicked (a bug in the code that made it); nothing was recorded"
                        .into(),
                )),
                false,
            )
        }
    };
    let refused = tx.refused();
    let again = refused.as_ref().is_some_and(|r| r.again);
    if !ran {
        // Dropping the transaction rolls it back; the job answers with its own error.
        return Attempt::RolledBack(None, again);
    }
    if let Some(refused) = refused {
        return Attempt::RolledBack(
            Some(database_error(format!(
                "a write went on after PostgreSQL refused one of its statements ({}); nothing was recorded",
                refused.what
            ))),
            again,
        );
    }
    if let Err(e) = tx.write_counts().and_then(|()| tx.notify_task_changes()) {
        let again = tx.refused().is_some_and(|r| r.again);
        return Attempt::RolledBack(Some(e), again);
    }
    // The last named step of a write, as SQLite's writer marks it before its COMMIT.
    if let Err(e) = tx.step("commit") {
        return Attempt::RolledBack(Some(e), false);
    }
    match tx.into_inner().commit() {
        Ok(()) => Attempt::Committed,
        Err(e) => {
            // Only a serialization failure at commit is sure to have rolled back; any
            // other failure (a lost connection) leaves the outcome unknown: say so.
            let retry = e.code() == Some(&SqlState::T_R_SERIALIZATION_FAILURE);
            Attempt::RolledBack(Some(store_error(&e)), retry)
        }
    }
}

/// Runs `work`, which blocks on the network, where blocking is allowed. The synchronous
/// client drives each call on a runtime of its own, which tokio refuses inside another
/// runtime's thread: the listener's handlers read on theirs (a SQLite read is a quick local
/// call there). On a multi-thread runtime the worker hands its other tasks to another
/// thread for as long as `work` runs (`block_in_place`); outside any runtime (the writer
/// threads, a blocking pool's thread) it simply runs.
fn off_the_runtime<R>(work: impl FnOnce() -> Result<R, StoreError>) -> Result<R, StoreError> {
    use tokio::runtime::{Handle, RuntimeFlavor};
    match Handle::try_current().map(|h| h.runtime_flavor()) {
        Ok(RuntimeFlavor::CurrentThread) => Err(database_error(
            "a PostgreSQL store was called on a current-thread tokio runtime, whose only thread \
             cannot wait for the database; call it from a multi-thread runtime or a blocking \
             thread (tokio::task::spawn_blocking)"
                .into(),
        )),
        Ok(_) => tokio::task::block_in_place(work),
        Err(_) => work(),
    }
}
