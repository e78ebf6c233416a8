//! The writer thread: the one connection that writes, what a job sees of it
//! ([`SqliteWriteTx`], the SQLite [`super::WriteTx`],
//! with the statements the writer keeps compiled, [`Prepared`]), and the loop that runs
//! queued jobs in batches, one transaction and one fsync per batch ([`writer_loop`]).
//!
//! Everything here runs on the writer thread; jobs reach it through the queue
//! ([`super::jobs`]) and callers hear back only after the commit that made their writes
//! durable.

use std::cell::RefCell;
use std::sync::Arc;

use rusqlite::Connection;

use super::connections::savepoint;
use super::jobs::{self, Job};
use super::{tasks, Faults, StoreError};

/// How many queued writes one commit may carry.
const MAX_BATCH: usize = 512;

/// The writer's transaction, which jobs see as a [`super::WriteTx`]: the writer's connection
/// and its kept statements ([`Prepared`]) plus the fault-injection hook.
pub struct SqliteWriteTx<'a, 'c> {
    prepared: &'a Prepared<'c>,
    faults: Option<&'a Faults>,
    /// The transaction's changes to the kept Task counts, written just before it commits
    /// ([`tasks::write_counts`]).
    pub(super) counts: RefCell<tasks::CountChanges>,
    /// The writer's rows of live Tasks (kept across its transactions; see
    /// [`tasks::LiveRows`]).
    live: &'a RefCell<tasks::LiveRows>,
}

impl<'c> SqliteWriteTx<'_, 'c> {
    /// The writer's connection, for statements the typed store functions do not cover.
    /// Any statement may run here: the writer's kept rows of live Tasks
    /// ([`tasks::LiveRows`]) follow every change SQLite makes to the `tasks` table. One
    /// exception: SQLite reports nothing for the rows a `ROLLBACK TO <savepoint>` restores,
    /// so a job that rolls back to a savepoint of its own calls
    /// [`SqliteWriteTx::forget_live_rows`] after it.
    pub(crate) fn conn(&self) -> &'c Connection {
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

    /// Forgets the writer's rows of live Tasks. Needed after a rollback only: SQLite
    /// reports the rows it changes ([`tasks::LiveRows`] follows them), not the rows a
    /// rollback restores.
    pub(crate) fn forget_live_rows(&self) {
        self.live.borrow_mut().clear();
    }

    /// Counts one Task more (`by` 1) or fewer (`by` -1) of `principal` in `state`, as of
    /// this transaction's commit.
    pub(crate) fn count(&self, principal: &str, state: crate::record::TaskState, by: i64) {
        self.counts.borrow_mut().add(principal, state, by);
    }

    /// Marks a named step of the write; a test's [`Faults`] may crash or fail the process
    /// here. Free when no faults are configured.
    pub(crate) fn step(&self, name: &str) -> Result<(), StoreError> {
        match self.faults {
            Some(faults) => faults.at(name),
            None => Ok(()),
        }
    }
}

/// Where a store function runs a statement: a reader's [`Connection`] (rusqlite's
/// statement cache) or the writer's [`SqliteWriteTx`] (its kept statements, [`Prepared`]).
/// A read that both readers and writer jobs make takes `&impl Statements`, so the writer's
/// hot reads skip rusqlite's cache like its writes do. Whatever is `Statements` is a
/// [`super::ReadTx`] (`super::sqlite`).
pub trait Statements {
    /// The connection itself, for the functions that run statements on it directly.
    fn connection(&self) -> &Connection;

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
    fn connection(&self) -> &Connection {
        self
    }

    fn statement<R>(
        &self,
        sql: &'static str,
        f: impl FnOnce(&mut rusqlite::Statement<'_>) -> rusqlite::Result<R>,
    ) -> Result<R, StoreError> {
        let mut statement = self.prepare_cached(sql)?;
        Ok(f(&mut statement)?)
    }
}

impl Statements for SqliteWriteTx<'_, '_> {
    fn connection(&self) -> &Connection {
        self.prepared.conn
    }

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
pub(super) fn writer_loop(
    conn: Connection,
    live: tasks::LiveRows,
    receiver: jobs::Jobs,
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
    let live = RefCell::new(live);
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
        let tx = SqliteWriteTx {
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
        jobs::answer_batch(|| match outcome {
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
        });
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
    tx: &SqliteWriteTx<'_, '_>,
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
