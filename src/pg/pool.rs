//! The PostgreSQL store's worker threads and connection pool.
//!
//! N worker threads take jobs from one queue; each runs its job as one transaction on a
//! connection from an `r2d2` pool of N (which replaces a connection found broken), commits,
//! and only then replies. The caller waits on a oneshot reply, blocking or async, so a
//! caller on an async runtime never runs a PostgreSQL round trip on its own thread.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use postgres::{Client, NoTls, Transaction};
use r2d2_postgres::PostgresConnectionManager;

use super::{describe, schema, target, PgError};
use crate::config::PostgresUrl;

type Pool = r2d2::Pool<PostgresConnectionManager<NoTls>>;
type Job = Box<dyn FnOnce(Result<&mut Client, PgError>) + Send>;

/// Options for [`PgStore::open`].
#[derive(Debug, Clone)]
pub struct PgOptions {
    /// Worker threads, and connections in the pool (one each).
    pub connections: u32,
    /// How long connecting may take, at open and when the pool replaces a connection.
    pub connect_timeout: Duration,
}

impl Default for PgOptions {
    fn default() -> Self {
        PgOptions {
            connections: 4,
            connect_timeout: Duration::from_secs(10),
        }
    }
}

/// An open PostgreSQL store: migrated, with its workers running until [`PgStore::close`].
pub struct PgStore {
    target: String,
    jobs: Mutex<Option<mpsc::Sender<Job>>>,
    workers: Mutex<Vec<JoinHandle<()>>>,
}

impl PgStore {
    /// Connects to the database `url` names, migrates it to [`schema::SCHEMA_VERSION`]
    /// (refusing a newer one), and starts the workers with their connections.
    pub fn open(url: &PostgresUrl, options: PgOptions) -> Result<PgStore, PgError> {
        let mut config: postgres::Config = url.as_str().parse().map_err(|e| PgError::Connect {
            target: url.redacted(),
            message: format!("the URL does not parse: {e}"),
        })?;
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(options.connect_timeout);
        }
        if config.get_application_name().is_none() {
            config.application_name("a2a-task-plane");
        }
        let target = target(&config);
        let connect_error = |message: String| PgError::Connect {
            target: target.clone(),
            message,
        };
        let mut client = config
            .connect(NoTls)
            .map_err(|e| connect_error(describe(&e)))?;
        schema::migrate(&mut client, &target)?;
        drop(client);

        let connections = options.connections.max(1);
        let pool = r2d2::Pool::builder()
            .max_size(connections)
            .min_idle(Some(connections))
            // A broken connection is noticed by the job that uses it (and replaced); a
            // round trip per checkout would add latency to every job.
            .test_on_check_out(false)
            .connection_timeout(options.connect_timeout)
            .build(PostgresConnectionManager::new(config, NoTls))
            .map_err(|e| connect_error(e.to_string()))?;
        let (sender, receiver) = mpsc::channel::<Job>();
        let receiver = Arc::new(Mutex::new(receiver));
        let workers = (0..connections)
            .map(|n| {
                let (pool, receiver) = (pool.clone(), receiver.clone());
                std::thread::Builder::new()
                    .name(format!("a2a-pg-{n}"))
                    .spawn(move || worker_loop(&pool, &receiver))
                    .map_err(|e| connect_error(format!("could not start a worker thread: {e}")))
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(PgStore {
            target,
            jobs: Mutex::new(Some(sender)),
            workers: Mutex::new(workers),
        })
    }

    /// The database this store writes to (host, port, name, user; no password).
    pub fn target(&self) -> &str {
        &self.target
    }

    /// Queues `job` to run as one transaction; the reply comes after its commit (or with
    /// the error that rolled it back).
    pub fn submit<R, F>(&self, job: F) -> PgReply<R>
    where
        R: Send + 'static,
        F: FnOnce(&mut Transaction<'_>) -> Result<R, PgError> + Send + 'static,
    {
        let (reply, receiver) = tokio::sync::oneshot::channel();
        let job: Job = Box::new(move |client| {
            let _ = reply.send(client.and_then(|client| in_transaction(client, job)));
        });
        let jobs = self.jobs.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(jobs) = jobs.as_ref() {
            // A send fails only when every worker is gone; the dropped reply says Closed.
            let _ = jobs.send(job);
        }
        PgReply(receiver)
    }

    /// Runs `job` as one transaction and waits for its committed result. Not on an async
    /// runtime's thread: use [`PgStore::submit`] and await the reply there.
    pub fn call<R, F>(&self, job: F) -> Result<R, PgError>
    where
        R: Send + 'static,
        F: FnOnce(&mut Transaction<'_>) -> Result<R, PgError> + Send + 'static,
    {
        self.submit(job).wait()
    }

    /// Stops taking jobs, lets the workers finish the queued ones, and closes every
    /// connection. Later jobs get [`PgError::Closed`].
    pub fn close(&self) {
        self.jobs.lock().unwrap_or_else(|p| p.into_inner()).take();
        let workers = std::mem::take(&mut *self.workers.lock().unwrap_or_else(|p| p.into_inner()));
        for worker in workers {
            let _ = worker.join();
        }
    }
}

impl Drop for PgStore {
    fn drop(&mut self) {
        self.close();
    }
}

/// The reply to one job: wait for it blocking ([`PgReply::wait`]) or `.await` it.
pub struct PgReply<R>(tokio::sync::oneshot::Receiver<Result<R, PgError>>);

impl<R> PgReply<R> {
    /// Blocks until the job's transaction committed or failed.
    pub fn wait(self) -> Result<R, PgError> {
        self.0.blocking_recv().unwrap_or(Err(PgError::Closed))
    }
}

impl<R> std::future::Future for PgReply<R> {
    type Output = Result<R, PgError>;

    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Self::Output> {
        std::pin::Pin::new(&mut self.0)
            .poll(cx)
            .map(|reply| reply.unwrap_or(Err(PgError::Closed)))
    }
}

fn in_transaction<R>(
    client: &mut Client,
    job: impl FnOnce(&mut Transaction<'_>) -> Result<R, PgError>,
) -> Result<R, PgError> {
    let mut tx = client.transaction()?;
    let result = job(&mut tx)?;
    tx.commit()?;
    Ok(result)
}

/// One worker: takes the next job, runs it on a pooled connection, until the queue closes.
/// A job that panics loses only its own reply (its caller hears Closed).
fn worker_loop(pool: &Pool, receiver: &Mutex<mpsc::Receiver<Job>>) {
    loop {
        let job = match receiver.lock().unwrap_or_else(|p| p.into_inner()).recv() {
            Ok(job) => job,
            Err(_) => return,
        };
        let _ = catch_unwind(AssertUnwindSafe(|| match pool.get() {
            Ok(mut conn) => job(Ok(&mut *conn)),
            Err(e) => job(Err(PgError::Sql(format!(
                "no database connection became available: {e}"
            )))),
        }));
    }
}
