//! The PostgreSQL [`Backend`]: worker threads that run write jobs, reads on the caller's
//! thread, one `r2d2` pool of connections for both.
//!
//! - **Writes.** N worker threads (one by default) share the store's job queue
//!   ([`crate::store::Jobs`]). Each takes every job queued, up to [`MAX_BATCH`], and runs
//!   them in queue order in one transaction, each job in a savepoint of its own, writes
//!   their Task count changes, commits once (`synchronous_commit` on: durable) and only
//!   then answers them: one WAL flush for the batch instead of one per job. A job that
//!   fails — its own error, a statement PostgreSQL refused, a panic — is rolled back to its
//!   savepoint (its count changes with it); the others commit. A lone job runs in a
//!   transaction of its own, without a savepoint.
//! - **Lost races.** A job whose statement lost a race to another node's transaction — a
//!   unique constraint (two acceptances of one messageId), a deadlock, a serialization
//!   failure — runs again in a new transaction (the boundary allows it: a job is a function
//!   of the store's state), up to [`ATTEMPTS`] times, and then finds what the other one
//!   committed. So does a job whose connection was lost or ended by the server before its
//!   COMMIT was sent (a database restart): the pool replaces the connection. In a batch,
//!   such a failure (of a job, of the count writes, of the COMMIT with a serialization
//!   failure, of the connection) rolls the whole batch back, and every job of it runs
//!   again in a transaction of its own, in order, so one job's repeated race fails no
//!   other. A COMMIT whose answer was lost is reported as a failure to every job it
//!   carried, never run again: it may have been recorded. So is a fault at the `commit`
//!   step (tests).
//! - **Reads** run on the caller's thread in a read-only REPEATABLE READ transaction: every
//!   read of one call sees one committed snapshot.
//! - A statement PostgreSQL refused inside a job that then reported success still rolls
//!   the job back (PostgreSQL would turn its COMMIT into a ROLLBACK without an error).
//! - A job that panics is rolled back (to its savepoint, in a batch) and answered with an
//!   error; its writer goes on.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use postgres::error::SqlState;
use postgres::{Client, IsolationLevel, Transaction};
use r2d2_postgres::PostgresConnectionManager;
use tokio_postgres_rustls::MakeRustlsConnect;

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
struct Manager(PostgresConnectionManager<MakeRustlsConnect>);

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
    /// More than one is for tests and benches of independent writes only; each of several
    /// writers takes one job at a time (one writer takes every job queued, [`MAX_BATCH`]).
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
    /// TLS as the URL's `sslmode` says ([`super::tls`]), for every connection.
    tls: MakeRustlsConnect,
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
        let mut config: postgres::Config = url.client_str().parse().map_err(|e| {
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
        let (tls, ssl_mode) = super::tls::connector(url)?;
        config.ssl_mode(ssl_mode);
        let target = target(&config);
        let connect_error = |message: String| {
            database_error(match super::tls::explain(url, &message) {
                Some(tls) => format!("cannot connect to {target}: {tls} ({message})"),
                None => format!(
                    "cannot connect to {target}: {message}; check that the server runs and \
                     accepts this user, and A2A_STORE_URL"
                ),
            })
        };
        fs::create_dir_all(root)
            .and_then(|()| fs::set_permissions(root, fs::Permissions::from_mode(0o700)))
            .map_err(|e| StoreError::Io {
                path: root.to_path_buf(),
                message: format!("cannot create the store directory: {e}"),
            })?;
        let mut client = config
            .connect(tls.clone())
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
                tls.clone(),
            )))
            .map_err(|e| connect_error(e.to_string()))?;
        let (sender, jobs) = queue();
        let jobs = Arc::new(Mutex::new(jobs));
        // Several writers take a job each, so that they run at once.
        let most = if writers == 1 { MAX_BATCH } else { 1 };
        let workers = (0..writers)
            .map(|n| {
                let (pool, jobs, faults) = (pool.clone(), jobs.clone(), options.faults.clone());
                let node = options.node.clone();
                std::thread::Builder::new()
                    .name(format!("a2a-pg-writer-{n}"))
                    .spawn(move || worker_loop(&pool, &jobs, faults.as_deref(), most, &node))
                    .map_err(|e| database_error(format!("cannot start a writer thread: {e}")))
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(PgStore {
            root: root.to_path_buf(),
            target,
            config,
            tls,
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
        super::listen::Listener::start(
            self.config.clone(),
            self.tls.clone(),
            self.target.clone(),
            channels,
            heard,
        )
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

/// How many queued writes one commit may carry. Each job of a batch runs in a savepoint
/// of its own, a subtransaction, and PostgreSQL keeps the ids of at most 64 of a session's
/// subtransactions in shared memory (`PGPROC_MAX_CACHED_SUBXIDS`): a transaction with more
/// that wrote makes every other session's snapshot "suboverflowed", to be checked against
/// `pg_subtrans` on disk, slowing every reader of the database while it runs.
pub const MAX_BATCH: usize = 64;

/// One writer: takes every job queued (up to `most`) and runs them in one transaction
/// ([`run_batch`]; a lone job, [`run_job`]), until the queue closes.
fn worker_loop(pool: &Pool, jobs: &Mutex<Jobs>, faults: Option<&Faults>, most: usize, node: &str) {
    let mut batch: Vec<Box<dyn Job>> = Vec::with_capacity(most);
    loop {
        {
            let jobs = jobs.lock().unwrap_or_else(|p| p.into_inner());
            match jobs.recv() {
                Ok(job) => batch.push(job),
                Err(_) => return,
            }
            while batch.len() < most {
                match jobs.try_recv() {
                    Ok(job) => batch.push(job),
                    Err(_) => break,
                }
            }
        }
        if batch.len() == 1 {
            if let Some(job) = batch.pop() {
                run_job(pool, job, faults, 0, node);
            }
        } else {
            run_batch(pool, &mut batch, faults, node);
        }
    }
}

/// What one attempt at a job came to.
enum Attempt {
    Committed,
    /// Rolled back: the job's own error (`None`) or the store's; whether to run it again.
    RolledBack(Option<StoreError>, bool),
}

/// Runs `job` in transactions of its own until one commits or it has run [`ATTEMPTS`]
/// times (`used` of them already spent, in a batch), then answers it.
fn run_job(pool: &Pool, mut job: Box<dyn Job>, faults: Option<&Faults>, used: u32, node: &str) {
    let first = used.min(ATTEMPTS - 1) + 1;
    for attempt in first..=ATTEMPTS {
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
    if let Err(Failed { error, again, .. }) = run_one(job, &tx) {
        // Dropping the transaction rolls it back.
        return Attempt::RolledBack(error, again);
    }
    match commit(tx) {
        Ok(()) => Attempt::Committed,
        Err(Failed { error, again, .. }) => Attempt::RolledBack(error, again),
    }
}

/// Why a job, or a batch's commit, must be rolled back.
struct Failed {
    /// The job's own error (`None`: its kept result says it) or the store's.
    error: Option<StoreError>,
    /// Whether the same work in a new transaction may succeed ([`may_succeed_again`]).
    again: bool,
    /// The job panicked: it is answered with `error` and never run again.
    panicked: bool,
}

impl Failed {
    fn store(error: StoreError, again: bool) -> Failed {
        Failed {
            error: Some(error),
            again,
            panicked: false,
        }
    }
}

/// Runs `job` in `tx`: whether it succeeded with every statement of its accepted.
fn run_one(job: &mut dyn Job, tx: &PgTx<'_>) -> Result<(), Failed> {
    // A job that panics is answered with an error and rolled back; its writer goes on.
    let ran = match catch_unwind(AssertUnwindSafe(|| job.run(tx))) {
        Ok(ran) => ran,
        Err(_) => {
            return Err(Failed {
                error: Some(database_error(
                    "a write panicked (a bug in the code that made it); nothing was recorded"
                        .into(),
                )),
                again: false,
                panicked: true,
            })
        }
    };
    let refused = tx.refused();
    let again = refused.as_ref().is_some_and(|r| r.again);
    if !ran {
        // The job answers with its own error.
        return Err(Failed {
            error: None,
            again,
            panicked: false,
        });
    }
    if let Some(refused) = refused {
        return Err(Failed::store(
            database_error(format!(
                "a write went on after PostgreSQL refused one of its statements ({}); nothing was recorded",
                refused.what
            )),
            again,
        ));
    }
    Ok(())
}

/// Writes `tx`'s Task count changes and commits it.
fn commit(tx: PgTx<'_>) -> Result<(), Failed> {
    if let Err(e) = tx.write_counts().and_then(|()| tx.notify_task_changes()) {
        let again = tx.refused().is_some_and(|r| r.again);
        return Err(Failed::store(e, again));
    }
    // The last named step of a write, as SQLite's writer marks it before its COMMIT.
    tx.step("commit").map_err(|e| Failed::store(e, false))?;
    tx.into_inner().commit().map_err(|e| {
        // Only a serialization failure at commit is sure to have rolled back; any other
        // failure (a lost connection) leaves the outcome unknown: say so, never run again.
        let again = e.code() == Some(&SqlState::T_R_SERIALIZATION_FAILURE);
        Failed::store(store_error(&e), again)
    })
}

/// How a batch's transaction ended.
enum BatchEnd {
    /// Committed: every job is answered with its own outcome.
    Committed,
    /// Not committed, and not to be run again (a COMMIT whose answer was lost, a fault):
    /// every job is answered with this error.
    Failed(StoreError),
    /// Rolled back by a lost race or a lost connection (nothing committed): every job runs
    /// again in a transaction of its own; job `.0` (if one) has run once already.
    RunAlone(Option<usize>),
}

/// Runs `batch` (two or more jobs, in queue order) in one transaction, each job in a
/// savepoint of its own, commits once, then answers every job. A job that fails (its own
/// error, a refused statement, a panic) is rolled back to its savepoint alone: the others
/// commit. When the transaction itself loses a race or its connection
/// ([`may_succeed_again`]) each job runs again, in order, in a transaction of its own
/// ([`run_job`]), so one job's repeated race fails no other.
fn run_batch(pool: &Pool, batch: &mut Vec<Box<dyn Job>>, faults: Option<&Faults>, node: &str) {
    let mut outcomes: Vec<Option<Failed>> = Vec::with_capacity(batch.len());
    let end = match pool.get() {
        Err(e) => BatchEnd::Failed(database_error(format!(
            "no database connection became available: {e}"
        ))),
        Ok(mut conn) => {
            let PgConnection { client, statements } = &mut *conn;
            match client.transaction() {
                Ok(tx) => attempt_batch(
                    PgTx::write(tx, statements, faults, node),
                    batch,
                    &mut outcomes,
                ),
                Err(e) if may_succeed_again(&e) => BatchEnd::RunAlone(None),
                Err(e) => BatchEnd::Failed(store_error(&e)),
            }
        }
    };
    match end {
        BatchEnd::Committed => answer_batch(|| {
            for (job, outcome) in batch.drain(..).zip(outcomes.drain(..)) {
                job.complete(outcome.and_then(|failed| failed.error));
            }
        }),
        BatchEnd::Failed(error) => answer_batch(|| {
            for job in batch.drain(..) {
                job.complete(Some(error.clone()));
            }
        }),
        BatchEnd::RunAlone(raced) => {
            for (at, job) in batch.drain(..).enumerate() {
                match outcomes.get_mut(at).and_then(Option::take) {
                    Some(Failed {
                        error,
                        panicked: true,
                        ..
                    }) => answer_batch(|| job.complete(error)),
                    _ => run_job(pool, job, faults, u32::from(raced == Some(at)), node),
                }
            }
        }
    }
}

/// One attempt at a batch in `tx`; `outcomes` gets each job's failure, if it failed.
fn attempt_batch(
    tx: PgTx<'_>,
    batch: &mut [Box<dyn Job>],
    outcomes: &mut Vec<Option<Failed>>,
) -> BatchEnd {
    let broken = |e: postgres::Error| match may_succeed_again(&e) {
        true => BatchEnd::RunAlone(None),
        false => BatchEnd::Failed(store_error(&e)),
    };
    // The savepoint `job` marks where the next job starts; after a job rolled back to it,
    // it still does.
    let mut mark = "SAVEPOINT job";
    for (at, job) in batch.iter_mut().enumerate() {
        if !mark.is_empty() {
            if let Err(e) = tx.run_plain(mark) {
                return broken(e);
            }
        }
        let kept = tx.pending();
        match run_one(&mut **job, &tx) {
            Ok(()) => {
                outcomes.push(None);
                mark = "RELEASE SAVEPOINT job; SAVEPOINT job";
            }
            Err(Failed { again: true, .. }) => return BatchEnd::RunAlone(Some(at)),
            Err(failed) => {
                if let Err(e) = tx.run_plain("ROLLBACK TO SAVEPOINT job") {
                    // Whatever the job did is gone with the transaction; a panic stays
                    // answered as one.
                    outcomes.push(Some(failed));
                    return broken(e);
                }
                tx.restore_pending(kept);
                outcomes.push(Some(failed));
                mark = "";
            }
        }
    }
    match commit(tx) {
        Ok(()) => BatchEnd::Committed,
        Err(Failed { again: true, .. }) => BatchEnd::RunAlone(None),
        Err(Failed { error, .. }) => BatchEnd::Failed(
            error.unwrap_or_else(|| database_error("the batch's commit failed".into())),
        ),
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
