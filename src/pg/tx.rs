//! The storage boundary's typed operations on PostgreSQL: [`PgTx`] is a [`ReadTx`] (a
//! read-only snapshot, or a worker's write transaction) and a [`WriteTx`].
//!
//! Each method mirrors the SQLite function of the same operation (`store::tasks`,
//! `store::claims`, …) with the same semantics; where SQLite relies on its one writer,
//! this relies on PostgreSQL's constraints and row locks instead:
//! - a write job's reads of a Task or a claim lock the row (`FOR UPDATE`), so two nodes'
//!   changes to one Task happen one after the other, each seeing the other's result;
//! - idempotency is the unique constraint on (principal, dedupe key): a concurrent second
//!   acceptance fails its insert, its job runs again (see `backend`), and then finds the
//!   first one's claim;
//! - the conversation → context mapping is one `INSERT … ON CONFLICT … DO UPDATE …
//!   RETURNING`;
//! - the kept Task counts are summed in the transaction and written once, in key order,
//!   just before commit ([`PgTx::write_counts`]), as SQLite does.
//!
//! The state sets come from the store's own SQL forms (`store::tasks::live_states_sql`,
//! …), so a rule's definition stays in one place for both backends.

use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, HashMap};

use postgres::error::SqlState;
use postgres::types::ToSql;
use postgres::{Row, Statement, Transaction};
use serde_json::Value;

use crate::record::{
    ArtifactRecord, ClaimState, Continuation, DeliveryState, EvidenceKind, MessageRecord,
    TaskRecord, TaskState,
};
use crate::store::anchors::Anchor;
use crate::store::claims::{self, Deliverable, NewClaim, PriorClaim, WakeClaim, WakeLease};
use crate::store::deliveries::{NewDelivery, StoredDelivery};
use crate::store::evidence::Evidence;
use crate::store::tasks::{
    awaits_caller_sql, interrupted_states_sql, known_states_sql, live_states_sql,
    terminal_states_sql, InputRequest, NewTask, Page, PageCursor, PageQuery, SummaryFilter,
    TaskRow, TaskSummary,
};
use crate::store::{
    EvidenceRow, Faults, KeptSessionFile, LocalSessionFile, ReadTx, SessionFile, StoreError,
    TaskChange, TaskChanges, WriteTx,
};

/// Names this backend in [`StoreError::Database`].
pub const BACKEND: &str = "PostgreSQL";

type Params<'p> = [&'p (dyn ToSql + Sync)];

/// A statement PostgreSQL, or the connection, refused inside a transaction.
#[derive(Debug, Clone)]
pub struct Refusal {
    /// What was refused, in PostgreSQL's words.
    pub what: String,
    /// Whether the same work in a new transaction may succeed ([`may_succeed_again`]).
    pub again: bool,
}

/// Whether work refused with `err` before its COMMIT was sent may succeed in a new
/// transaction: it lost a race with another transaction (a unique constraint another one
/// just took, a deadlock, a serialization failure), or its connection was lost or ended
/// by the server (a restart): nothing of that transaction was committed.
pub fn may_succeed_again(err: &postgres::Error) -> bool {
    // The connection was closed, or broke under the statement (a server that ended it
    // may be seen as "connection reset by peer"): the statement did not commit anything.
    let broken = std::error::Error::source(err).is_some_and(|s| s.is::<std::io::Error>());
    if err.is_closed() || broken {
        return true;
    }
    let Some(code) = err.code() else {
        return false;
    };
    [
        SqlState::UNIQUE_VIOLATION,
        SqlState::T_R_SERIALIZATION_FAILURE,
        SqlState::T_R_DEADLOCK_DETECTED,
        SqlState::ADMIN_SHUTDOWN,
        SqlState::CRASH_SHUTDOWN,
        SqlState::CANNOT_CONNECT_NOW,
    ]
    .contains(code)
        || code.code().starts_with("08")
}

/// A PostgreSQL error as a [`StoreError`].
pub fn store_error(err: &postgres::Error) -> StoreError {
    StoreError::Database {
        backend: BACKEND,
        message: super::describe(err),
    }
}

/// For migrations and tools; the typed operations record the refusal first ([`PgTx`]).
impl From<postgres::Error> for StoreError {
    fn from(err: postgres::Error) -> Self {
        store_error(&err)
    }
}

/// A connection's prepared statements, by SQL text: each statement is parsed and planned
/// once per connection, then every run of it is one round trip instead of two.
pub type Statements = HashMap<String, Statement>;

/// A transaction's changes to the kept Task counts: (principal, state) → Tasks more or
/// fewer.
pub type CountChanges = BTreeMap<(String, &'static str), i64>;

/// Task seq → (task id, the version a transaction gives it, its changes so far).
pub type VersionChanges = BTreeMap<i64, (String, i64, i32)>;

/// What a transaction keeps in memory for its commit (count changes, the Tasks it moved
/// on a version): kept before a job of a batch runs, put back when that job is rolled
/// back to its savepoint ([`PgTx::pending`], [`PgTx::restore_pending`]), so its changes
/// leave no trace in the counts written or the notifications sent.
#[derive(Clone)]
pub struct Pending {
    counts: CountChanges,
    versions: VersionChanges,
}

/// One transaction as the boundary's typed operations.
pub struct PgTx<'c> {
    tx: RefCell<Transaction<'c>>,
    statements: RefCell<&'c mut Statements>,
    /// A write job's transaction: reads of a Task or a claim lock the row.
    write: bool,
    /// The last statement PostgreSQL (or the connection) refused, if one was.
    refused: Cell<Option<Refusal>>,
    /// (principal, state) → Tasks more or fewer, written before commit.
    counts: RefCell<CountChanges>,
    /// Test-only failure injection at named steps ([`WriteTx::step`]).
    faults: Option<&'c Faults>,
    /// The node that writes (a write job's changes carry it, and so does its notification).
    node: &'c str,
    /// Task seq → (task id, the version this transaction gives it, its changes so far):
    /// each changed Task moves on by one version per transaction, announced before commit
    /// ([`PgTx::notify_task_changes`]).
    versions: RefCell<VersionChanges>,
}

impl<'c> PgTx<'c> {
    pub fn read(tx: Transaction<'c>, statements: &'c mut Statements) -> PgTx<'c> {
        PgTx::new(tx, statements, false, None, "")
    }

    /// A write job's transaction on behalf of `node`.
    pub fn write(
        tx: Transaction<'c>,
        statements: &'c mut Statements,
        faults: Option<&'c Faults>,
        node: &'c str,
    ) -> PgTx<'c> {
        PgTx::new(tx, statements, true, faults, node)
    }

    fn new(
        tx: Transaction<'c>,
        statements: &'c mut Statements,
        write: bool,
        faults: Option<&'c Faults>,
        node: &'c str,
    ) -> PgTx<'c> {
        PgTx {
            faults,
            node,
            versions: RefCell::new(BTreeMap::new()),
            tx: RefCell::new(tx),
            statements: RefCell::new(statements),
            write,
            refused: Cell::new(None),
            counts: RefCell::new(BTreeMap::new()),
        }
    }

    /// The last refused statement, if any.
    pub fn refused(&self) -> Option<Refusal> {
        self.refused.take()
    }

    pub fn into_inner(self) -> Transaction<'c> {
        self.tx.into_inner()
    }

    fn fail(&self, err: postgres::Error) -> StoreError {
        self.refused.set(Some(Refusal {
            what: super::describe(&err),
            again: may_succeed_again(&err),
        }));
        store_error(&err)
    }

    /// `sql` prepared on this connection (once; a statement outlives a rolled-back
    /// transaction, since preparing is not transactional).
    fn statement(&self, sql: &str) -> Result<Statement, StoreError> {
        if let Some(statement) = self.statements.borrow().get(sql) {
            return Ok(statement.clone());
        }
        let statement = self
            .tx
            .borrow_mut()
            .prepare(sql)
            .map_err(|e| self.fail(e))?;
        self.statements
            .borrow_mut()
            .insert(sql.to_string(), statement.clone());
        Ok(statement)
    }

    fn query(&self, sql: &str, params: &Params<'_>) -> Result<Vec<Row>, StoreError> {
        let statement = self.statement(sql)?;
        self.tx
            .borrow_mut()
            .query(&statement, params)
            .map_err(|e| self.fail(e))
    }

    fn query_opt(&self, sql: &str, params: &Params<'_>) -> Result<Option<Row>, StoreError> {
        let statement = self.statement(sql)?;
        self.tx
            .borrow_mut()
            .query_opt(&statement, params)
            .map_err(|e| self.fail(e))
    }

    fn query_one(&self, sql: &str, params: &Params<'_>) -> Result<Row, StoreError> {
        let statement = self.statement(sql)?;
        self.tx
            .borrow_mut()
            .query_one(&statement, params)
            .map_err(|e| self.fail(e))
    }

    fn execute(&self, sql: &str, params: &Params<'_>) -> Result<u64, StoreError> {
        let statement = self.statement(sql)?;
        self.tx
            .borrow_mut()
            .execute(&statement, params)
            .map_err(|e| self.fail(e))
    }

    /// ` FOR UPDATE` in a write job (the row stays ours until commit), else nothing.
    fn lock(&self) -> &'static str {
        if self.write {
            " FOR UPDATE"
        } else {
            ""
        }
    }

    fn count(&self, principal: &str, state: TaskState, by: i64) {
        *self
            .counts
            .borrow_mut()
            .entry((principal.to_string(), state.as_str()))
            .or_insert(0) += by;
    }

    /// What this transaction keeps for its commit so far (kept before a job runs in a
    /// batch, put back if it is rolled back to its savepoint: [`PgTx::restore_pending`]).
    pub fn pending(&self) -> Pending {
        Pending {
            counts: self.counts.borrow().clone(),
            versions: self.versions.borrow().clone(),
        }
    }

    /// Puts back what [`PgTx::pending`] kept.
    pub fn restore_pending(&self, kept: Pending) {
        *self.counts.borrow_mut() = kept.counts;
        *self.versions.borrow_mut() = kept.versions;
    }

    /// Runs `sql` (savepoint statements, several in one round trip) in the transaction.
    pub fn run_plain(&self, sql: &str) -> Result<(), postgres::Error> {
        self.tx.borrow_mut().batch_execute(sql)
    }

    /// Writes the transaction's count changes, each non-zero sum once, in key order (two
    /// transactions lock the count rows they share in the same order: no deadlock).
    pub fn write_counts(&self) -> Result<(), StoreError> {
        let changes = std::mem::take(&mut *self.counts.borrow_mut());
        for ((principal, state), by) in changes {
            if by == 0 {
                continue;
            }
            self.execute(
                "INSERT INTO task_counts (principal, state, n) VALUES ($1, $2, $3) \
                 ON CONFLICT (principal, state) DO UPDATE SET n = task_counts.n + EXCLUDED.n",
                &[&principal, &state, &by],
            )?;
        }
        Ok(())
    }

    /// The version and step of the next change of `task` in this transaction: the first
    /// change moves the Task's version on by one (its row is locked: a write job read it
    /// `FOR UPDATE`), later ones take the next step of that version.
    fn next_change(&self, task: &TaskRow) -> Result<(i64, i32), StoreError> {
        if let Some((_, version, steps)) = self.versions.borrow_mut().get_mut(&task.seq) {
            *steps += 1;
            return Ok((*version, *steps - 1));
        }
        let version: i64 = get(
            &self.query_one(
                "UPDATE tasks SET version = version + 1 WHERE seq = $1 RETURNING version",
                &[&task.seq],
            )?,
            0,
        )?;
        self.versions
            .borrow_mut()
            .insert(task.seq, (task.record.task_id.clone(), version, 1));
        Ok((version, 0))
    }

    /// `NOTIFY a2a_task, '<taskId> <version> <writer node>'` for each Task this
    /// transaction changed (delivered to the listening nodes when it commits, in commit
    /// order): the other nodes publish the changes to their own subscribers.
    pub fn notify_task_changes(&self) -> Result<(), StoreError> {
        let changed = std::mem::take(&mut *self.versions.borrow_mut());
        for (task_id, version, _) in changed.into_values() {
            let payload = format!("{task_id} {version} {}", self.node);
            self.query_one("SELECT pg_notify($1, $2)", &[&TASK_CHANNEL, &payload])?;
        }
        Ok(())
    }

    fn tasks_where(
        &self,
        condition: &str,
        params: &Params<'_>,
    ) -> Result<Vec<TaskRow>, StoreError> {
        self.query(
            &format!("SELECT {TASK_COLUMNS} FROM tasks WHERE {condition}"),
            params,
        )?
        .iter()
        .map(task_from_row)
        .collect()
    }

    fn bodies<T: serde::de::DeserializeOwned>(
        &self,
        sql: &str,
        params: &Params<'_>,
    ) -> Result<Vec<T>, StoreError> {
        self.query(sql, params)?
            .iter()
            .map(|row| Ok(serde_json::from_str(row.get::<_, &str>(0))?))
            .collect()
    }

    /// Appends a state record to a claim (its current state unchanged).
    fn append_claim_record(
        &self,
        activation_id: &str,
        kind: ClaimState,
        count: Option<i64>,
        detail: Option<&str>,
        now_ms: i64,
    ) -> Result<(), StoreError> {
        self.execute(
            "INSERT INTO claim_states (activation_id, n, kind, count, at_ms, detail) \
             VALUES ($1, (SELECT COUNT(*) FROM claim_states WHERE activation_id = $1), $2, $3, $4, $5)",
            &[&activation_id, &kind.as_str(), &count, &now_ms, &detail],
        )?;
        Ok(())
    }

    /// For each live Task not waiting for its caller, its newest activation when still
    /// deliverable and `condition` (on claim `c`) holds, oldest first.
    fn deliverable_where(
        &self,
        condition: &str,
        params: &Params<'_>,
    ) -> Result<Vec<Deliverable>, StoreError> {
        self.query(
            &format!(
                "SELECT c.activation_id, c.task_id, c.context_id FROM tasks t JOIN claims c \
                 ON c.activation_id = (SELECT MAX(c2.activation_id) FROM claims c2 WHERE c2.task_id = t.task_id) \
                 WHERE t.state IN {} AND c.state IN {} AND NOT {} AND {condition} \
                 ORDER BY c.activation_id",
                live_states_sql(),
                claims::states_sql(ClaimState::is_deliverable),
                awaits_caller_sql("t"),
            ),
            params,
        )?
        .iter()
        .map(|row| {
            Ok(Deliverable {
                activation_id: get(row, 0)?,
                task_id: get(row, 1)?,
                context_id: get(row, 2)?,
            })
        })
        .collect()
    }

    /// `NOTIFY a2a_wake` in this transaction (delivered to the listening nodes when it
    /// commits; several in one transaction arrive as one): a wake may be there to take.
    pub fn notify_wake(&self) -> Result<(), StoreError> {
        self.query_one("SELECT pg_notify($1, '')", &[&WAKE_CHANNEL])?;
        Ok(())
    }
}

/// The channel on which a transaction that leaves a wake to take (an acceptance, a
/// released lease) tells the other nodes.
pub const WAKE_CHANNEL: &str = "a2a_wake";

/// The channel on which a transaction that changes a Task's status or artifacts tells the
/// other nodes: `<taskId> <version> <writer node id>` ([`PgTx::notify_task_changes`]).
pub const TASK_CHANNEL: &str = "a2a_task";

/// The first key of the advisory lock under which one Task's deliveries take turns (the
/// second is the hash of its id): `a2a_` in ASCII.
const TASK_DELIVERY_LOCK: i32 = 0x6132_615f;

/// SQL for the ms from now (the database's clock) until the TIMESTAMPTZ `at` (negative
/// once past; NULL when `at` is).
fn remaining_ms_sql(at: &str) -> String {
    format!("(EXTRACT(EPOCH FROM ({at} - clock_timestamp())) * 1000)::BIGINT")
}

const TASK_COLUMNS: &str =
    "seq, task_id, principal, context_id, source, continuation, state, status_message, \
     status_ms, created_ms, input_request_seq, input_request_open, extensions, input_schema";

fn get<'r, T: postgres::types::FromSql<'r>>(row: &'r Row, i: usize) -> Result<T, StoreError> {
    row.try_get(i)
        .map_err(|e| StoreError::Corrupt(format!("column {i}: {e}")))
}

fn parse_task_state(task_id: &str, state: &str) -> Result<TaskState, StoreError> {
    TaskState::parse(state)
        .ok_or_else(|| StoreError::Corrupt(format!("task {task_id}: unknown state `{state}`")))
}

fn parse_claim_state(activation_id: &str, state: &str) -> Result<ClaimState, StoreError> {
    ClaimState::parse(state).ok_or_else(|| {
        StoreError::Corrupt(format!("claim {activation_id}: unknown state `{state}`"))
    })
}

fn task_from_row(row: &Row) -> Result<TaskRow, StoreError> {
    let task_id: String = get(row, 1)?;
    let continuation: &str = get(row, 5)?;
    let continuation = Continuation::parse(continuation).ok_or_else(|| {
        StoreError::Corrupt(format!(
            "task {task_id}: unknown continuation `{continuation}`"
        ))
    })?;
    let state = parse_task_state(&task_id, get(row, 6)?)?;
    let status_message = get::<Option<&str>>(row, 7)?
        .map(serde_json::from_str::<MessageRecord>)
        .transpose()?;
    let extensions: Vec<String> = match get::<&str>(row, 12)? {
        "[]" => Vec::new(),
        listed => serde_json::from_str(listed)?,
    };
    let input_schema: Option<Value> = get::<Option<&str>>(row, 13)?
        .map(serde_json::from_str)
        .transpose()?;
    Ok(TaskRow {
        seq: get(row, 0)?,
        record: TaskRecord {
            task_id,
            principal: get(row, 2)?,
            context_id: get(row, 3)?,
            source: get(row, 4)?,
            continuation,
            state,
            status_message,
            status_ms: get(row, 8)?,
            created_ms: get(row, 9)?,
            input_request_open: get::<i16>(row, 11)? != 0,
            extensions,
            history: Vec::new(),
            artifacts: Vec::new(),
        },
        input_request_seq: get(row, 10)?,
        input_schema,
    })
}

impl ReadTx for PgTx<'_> {
    fn task_session_files(
        &self,
        task_id: &str,
        local: &[LocalSessionFile],
    ) -> Result<Vec<KeptSessionFile>, StoreError> {
        let names: Vec<&str> = local.iter().map(|f| f.name.as_str()).collect();
        let digests: Vec<&str> = local.iter().map(|f| f.digest.as_str()).collect();
        Ok(self
            .query(
                "SELECT s.name, CASE WHEN s.digest = l.digest THEN NULL ELSE s.body END \
                 FROM task_sessions s \
                 LEFT JOIN unnest($2::text[], $3::text[]) AS l(name, digest) ON l.name = s.name \
                 WHERE s.task_id = $1 ORDER BY s.name",
                &[&task_id, &names, &digests],
            )?
            .into_iter()
            .map(|row| KeptSessionFile {
                name: row.get(0),
                body: row.get(1),
            })
            .collect())
    }

    fn task_changes(
        &self,
        task_id: &str,
        after: i64,
        upto: Option<i64>,
        not_by: &str,
    ) -> Result<Option<TaskChanges>, StoreError> {
        let Some(found) = self.query_opt(
            &format!("SELECT {TASK_COLUMNS}, version FROM tasks WHERE task_id = $1"),
            &[&task_id],
        )?
        else {
            return Ok(None);
        };
        let row = task_from_row(&found)?;
        let newest: i64 = get(&found, 14)?;
        let version = upto.unwrap_or(newest);
        let changes = self
            .query(
                "SELECT version, step, state, message, at_ms, NULL AS body FROM task_statuses \
                 WHERE task_seq = $1 AND version > $2 AND version <= $3 AND writer <> $4 \
                 UNION ALL \
                 SELECT version, step, NULL, NULL, NULL, body FROM artifacts \
                 WHERE task_seq = $1 AND version > $2 AND version <= $3 AND writer <> $4 \
                 ORDER BY 1, 2",
                &[&row.seq, &after, &version, &not_by],
            )?
            .iter()
            .map(|change| match get::<Option<&str>>(change, 5)? {
                Some(body) => Ok(TaskChange::Artifact(serde_json::from_str(body)?)),
                None => Ok(TaskChange::Status {
                    state: parse_task_state(task_id, get(change, 2)?)?,
                    message: get::<Option<&str>>(change, 3)?
                        .map(serde_json::from_str)
                        .transpose()?,
                    at_ms: get(change, 4)?,
                }),
            })
            .collect::<Result<_, StoreError>>()?;
        Ok(Some(TaskChanges {
            row,
            version,
            newest,
            changes,
        }))
    }

    fn task_by_id(&self, task_id: &str) -> Result<Option<TaskRow>, StoreError> {
        let lock = self.lock();
        Ok(self
            .tasks_where(&format!("task_id = $1{lock}"), &[&task_id])?
            .pop())
    }

    fn task_owned_by(&self, principal: &str, task_id: &str) -> Result<Option<TaskRow>, StoreError> {
        // The principal is part of the lookup: a foreign Task is never read or decoded.
        let lock = self.lock();
        Ok(self
            .tasks_where(
                &format!("task_id = $1 AND principal = $2{lock}"),
                &[&task_id, &principal],
            )?
            .pop())
    }

    fn task_history(
        &self,
        task_seq: i64,
        limit: Option<u32>,
    ) -> Result<Vec<MessageRecord>, StoreError> {
        let limit = limit.map(i64::from);
        let mut newest_first: Vec<MessageRecord> = self.bodies(
            "SELECT body FROM history WHERE task_seq = $1 ORDER BY n DESC LIMIT $2",
            &[&task_seq, &limit],
        )?;
        newest_first.reverse();
        Ok(newest_first)
    }

    fn task_artifacts(&self, task_seq: i64) -> Result<Vec<ArtifactRecord>, StoreError> {
        self.bodies(
            "SELECT body FROM artifacts WHERE task_seq = $1 ORDER BY n",
            &[&task_seq],
        )
    }

    fn task_first_message(&self, task_seq: i64) -> Result<Option<MessageRecord>, StoreError> {
        Ok(self
            .bodies(
                "SELECT body FROM history WHERE task_seq = $1 ORDER BY n LIMIT 1",
                &[&task_seq],
            )?
            .pop())
    }

    fn tasks_earlier_in_context(
        &self,
        principal: &str,
        context_id: &str,
        before_seq: i64,
        limit: u32,
    ) -> Result<Vec<TaskRow>, StoreError> {
        self.tasks_where(
            "principal = $1 AND context_id = $2 AND seq < $3 ORDER BY seq DESC LIMIT $4",
            &[&principal, &context_id, &before_seq, &i64::from(limit)],
        )
    }

    fn task_ids_matching(&self, fragment: &str, limit: u32) -> Result<Vec<String>, StoreError> {
        // `fragment` is lowercase hex digits and `-` (`ids::id_fragment`): no LIKE wildcard.
        Ok(self
            .query(
                "SELECT task_id FROM tasks WHERE task_id LIKE $1 || '%' OR task_id LIKE '%' || $1 \
                 ORDER BY task_id LIMIT $2",
                &[&fragment, &i64::from(limit)],
            )?
            .iter()
            .map(|row| row.get(0))
            .collect())
    }

    fn task_page(&self, principal: &str, query: &PageQuery<'_>) -> Result<Page, StoreError> {
        let state = query.state.map(TaskState::as_str);
        let mut clauses = vec!["principal = $1".to_string()];
        let mut params: Vec<&(dyn ToSql + Sync)> = vec![&principal];
        if let Some(context_id) = &query.context_id {
            params.push(context_id);
            clauses.push(format!("context_id = ${}", params.len()));
        }
        if let Some(state) = &state {
            params.push(state);
            clauses.push(format!("state = ${}", params.len()));
        }
        if let Some(since) = &query.status_since_ms {
            params.push(since);
            clauses.push(format!("status_ms >= ${}", params.len()));
        }
        let matching = clauses.join(" AND ");
        // Without a context or time filter the count is the kept one (one row read).
        let maintained = query.context_id.is_none() && query.status_since_ms.is_none();
        let count_sql = if maintained {
            format!("SELECT COALESCE(SUM(n), 0)::BIGINT FROM task_counts WHERE {matching}")
        } else {
            format!("SELECT COUNT(*) FROM tasks WHERE {matching}")
        };
        let total: i64 = self.query_one(&count_sql, &params)?.get(0);
        let after = query.after.map(|a| (a.status_ms, a.seq));
        let mut page_clause = String::new();
        if let Some((status_ms, seq)) = &after {
            params.push(status_ms);
            params.push(seq);
            page_clause = format!(
                " AND (status_ms, seq) < (${}, ${})",
                params.len() - 1,
                params.len()
            );
        }
        let limit = i64::from(query.limit.max(1));
        let fetch = limit + 1;
        params.push(&fetch);
        let mut rows = self.tasks_where(
            &format!(
                "{matching}{page_clause} ORDER BY status_ms DESC, seq DESC LIMIT ${}",
                params.len()
            ),
            &params,
        )?;
        let more = rows.len() as i64 > limit;
        rows.truncate(limit as usize);
        let next = if more {
            rows.last().map(|t| PageCursor {
                status_ms: t.record.status_ms,
                seq: t.seq,
            })
        } else {
            None
        };
        Ok(Page {
            rows,
            next,
            total: total as u64,
        })
    }

    fn task_summaries(&self, filter: &SummaryFilter) -> Result<Vec<TaskSummary>, StoreError> {
        let state = filter.state.map(TaskState::as_str);
        let mut clauses = Vec::new();
        let mut params: Vec<&(dyn ToSql + Sync)> = Vec::new();
        if let Some(state) = &state {
            params.push(state);
            clauses.push(format!("state = ${}", params.len()));
        }
        if let Some(principal) = &filter.principal {
            params.push(principal);
            clauses.push(format!("principal = ${}", params.len()));
        }
        if let Some(context_id) = &filter.context_id {
            params.push(context_id);
            clauses.push(format!("context_id = ${}", params.len()));
        }
        let matching = if clauses.is_empty() {
            String::new()
        } else {
            format!(" WHERE {}", clauses.join(" AND "))
        };
        let limit = i64::from(filter.limit.clamp(1, 1000));
        params.push(&limit);
        self.query(
            &format!(
                "SELECT task_id, principal, context_id, source, state, status_ms, created_ms FROM tasks{matching} \
                 ORDER BY status_ms DESC, seq DESC LIMIT ${}",
                params.len()
            ),
            &params,
        )?
        .iter()
        .map(|row| {
            let task_id: String = get(row, 0)?;
            let state = parse_task_state(&task_id, get(row, 4)?)?;
            Ok(TaskSummary {
                task_id,
                principal: get(row, 1)?,
                context_id: get(row, 2)?,
                source: get(row, 3)?,
                state,
                status_ms: get(row, 5)?,
                created_ms: get(row, 6)?,
            })
        })
        .collect()
    }

    fn claim_by_dedupe_key(
        &self,
        principal: &str,
        dedupe_key: &str,
    ) -> Result<Option<PriorClaim>, StoreError> {
        let Some(row) = self.query_opt(
            "SELECT activation_id, task_id, context_id, digest, requested_context_id, requested_task_id, \
             direct_reply FROM claims WHERE principal = $1 AND dedupe_key = $2",
            &[&principal, &dedupe_key],
        )?
        else {
            return Ok(None);
        };
        Ok(Some(PriorClaim {
            activation_id: get(&row, 0)?,
            task_id: get(&row, 1)?,
            context_id: get(&row, 2)?,
            digest: get(&row, 3)?,
            requested_context_id: get(&row, 4)?,
            requested_task_id: get(&row, 5)?,
            direct_reply: get::<Option<&str>>(&row, 6)?
                .map(serde_json::from_str::<MessageRecord>)
                .transpose()?,
        }))
    }

    fn claim_state_of_event(
        &self,
        principal: &str,
        source: &str,
        event_id: &str,
    ) -> Result<Option<ClaimState>, StoreError> {
        self.query_opt(
            "SELECT activation_id, state FROM claims WHERE principal = $1 AND dedupe_key = $2 AND source = $3",
            &[&principal, &event_id, &source],
        )?
        .map(|row| parse_claim_state(get(&row, 0)?, get(&row, 1)?))
        .transpose()
    }

    fn wake_claim(
        &self,
        activation_id: &str,
        task_id: &str,
    ) -> Result<Option<WakeClaim>, StoreError> {
        let lock = self.lock();
        self.query_opt(
            &format!(
                "SELECT state, deliveries FROM claims WHERE activation_id = $1 AND task_id = $2{lock}"
            ),
            &[&activation_id, &task_id],
        )?
        .map(|row| {
            Ok(WakeClaim {
                state: parse_claim_state(activation_id, get(&row, 0)?)?,
                deliveries: get(&row, 1)?,
            })
        })
        .transpose()
    }

    fn newest_claim_of_task(&self, task_id: &str) -> Result<Option<String>, StoreError> {
        Ok(self
            .query_one(
                "SELECT MAX(activation_id) FROM claims WHERE task_id = $1",
                &[&task_id],
            )?
            .get(0))
    }

    fn newest_deliverable_claims(&self) -> Result<Vec<Deliverable>, StoreError> {
        self.deliverable_where("TRUE", &[])
    }

    fn deliverable_claims_for(&self, node: &str) -> Result<Vec<Deliverable>, StoreError> {
        self.deliverable_where(
            "NOT EXISTS (SELECT 1 FROM claims o WHERE o.task_id = c.task_id \
             AND o.lease_owner <> $1 AND o.lease_until > clock_timestamp())",
            &[&node],
        )
    }

    fn earliest_foreign_lease_ms(&self, node: &str) -> Result<Option<i64>, StoreError> {
        Ok(self
            .query_one(
                &format!(
                    "SELECT {} FROM claims WHERE lease_owner IS NOT NULL AND lease_owner <> $1 \
                     AND lease_until > clock_timestamp()",
                    remaining_ms_sql("MIN(lease_until)")
                ),
                &[&node],
            )?
            .get(0))
    }

    fn context_owner(&self, context_id: &str) -> Result<Option<String>, StoreError> {
        Ok(self
            .query_opt(
                "SELECT principal FROM contexts WHERE context_id = $1",
                &[&context_id],
            )?
            .map(|row| row.get(0)))
    }

    fn reply_anchor(
        &self,
        principal: &str,
        source: &str,
        provider_response_id: &str,
    ) -> Result<Option<Anchor>, StoreError> {
        self.query_opt(
            "SELECT task_id, input_request_seq FROM reply_anchors \
             WHERE principal = $1 AND source = $2 AND provider_response_id = $3",
            &[&principal, &source, &provider_response_id],
        )?
        .map(|row| {
            Ok(Anchor {
                task_id: get(&row, 0)?,
                input_request_seq: get(&row, 1)?,
            })
        })
        .transpose()
    }

    fn checkpoint(&self, principal: &str, source: &str) -> Result<Option<String>, StoreError> {
        Ok(self
            .query_opt(
                "SELECT cursor FROM checkpoints WHERE principal = $1 AND source = $2",
                &[&principal, &source],
            )?
            .map(|row| row.get(0)))
    }

    fn evidence_of_task(&self, task_id: &str) -> Result<Vec<Evidence>, StoreError> {
        self.query(
            "SELECT evidence_id, kind, healthy, content FROM evidence WHERE task_id = $1 \
             ORDER BY recorded_ms, evidence_id",
            &[&task_id],
        )?
        .iter()
        .map(|row| {
            Ok(Evidence {
                evidence_id: get(row, 0)?,
                kind: EvidenceKind::parse(get(row, 1)?),
                healthy: get(row, 2)?,
                content: serde_json::from_str(get(row, 3)?)?,
            })
        })
        .collect()
    }

    fn delivery_by_id(&self, delivery_id: &str) -> Result<Option<StoredDelivery>, StoreError> {
        self.query_opt(
            "SELECT payload_digest, state, provider_response_id, detail, attempts FROM deliveries \
             WHERE delivery_id = $1",
            &[&delivery_id],
        )?
        .map(|row| {
            let state: &str = get(&row, 1)?;
            let state = DeliveryState::parse(state).ok_or_else(|| {
                StoreError::Corrupt(format!("delivery {delivery_id}: unknown state `{state}`"))
            })?;
            Ok(StoredDelivery {
                payload_digest: get(&row, 0)?,
                state,
                provider_response_id: get(&row, 2)?,
                detail: get(&row, 3)?,
                attempts: get(&row, 4)?,
            })
        })
        .transpose()
    }

    fn delivery_by_operation(
        &self,
        source: &str,
        operation_id: &str,
    ) -> Result<Option<(String, String)>, StoreError> {
        self.query_opt(
            "SELECT delivery_id, payload_digest FROM deliveries WHERE source = $1 AND operation_id = $2",
            &[&source, &operation_id],
        )?
        .map(|row| Ok((get(&row, 0)?, get(&row, 1)?)))
        .transpose()
    }

    fn delivered_response(
        &self,
        task_id: &str,
        source: &str,
        provider_response_id: &str,
    ) -> Result<bool, StoreError> {
        Ok(self
            .query_opt(
                "SELECT delivery_id FROM deliveries WHERE task_id = $1 AND source = $2 \
                 AND provider_response_id = $3 AND state = $4",
                &[
                    &task_id,
                    &source,
                    &provider_response_id,
                    &DeliveryState::Delivered.as_str(),
                ],
            )?
            .is_some())
    }

    fn secret(&self, name: &str) -> Result<Vec<u8>, StoreError> {
        get(
            &self.query_one("SELECT value FROM secrets WHERE name = $1", &[&name])?,
            0,
        )
    }

    fn tasks_by_state(&self) -> Result<Vec<(Option<TaskState>, u64)>, StoreError> {
        self.query("SELECT state, COUNT(*) FROM tasks GROUP BY state", &[])?
            .iter()
            .map(|row| Ok((TaskState::parse(get(row, 0)?), get::<i64>(row, 1)? as u64)))
            .collect()
    }

    fn record_counts(&self) -> Result<(u64, u64, u64), StoreError> {
        let row = self.query_one(
            "SELECT (SELECT COUNT(*) FROM tasks), (SELECT COUNT(*) FROM claims), (SELECT COUNT(*) FROM contexts)",
            &[],
        )?;
        Ok((
            get::<i64>(&row, 0)? as u64,
            get::<i64>(&row, 1)? as u64,
            get::<i64>(&row, 2)? as u64,
        ))
    }

    fn oldest_live_task(&self) -> Result<Option<(String, i64)>, StoreError> {
        self.query_opt(
            &format!(
                "SELECT task_id, created_ms FROM tasks WHERE state IN {} ORDER BY created_ms, seq LIMIT 1",
                live_states_sql()
            ),
            &[],
        )?
        .map(|row| Ok((get(&row, 0)?, get(&row, 1)?)))
        .transpose()
    }

    fn problems(&self) -> Result<Vec<String>, StoreError> {
        // The same invariants as the SQLite store's (`store::inspect::problems`), less
        // SQLite's own integrity check (PostgreSQL checks its pages itself).
        let invariants: [(String, &str); 7] = [
            (
                "SELECT 'principal ' || principal || ', state ' || state FROM \
                 (SELECT principal, state, COUNT(*) AS n FROM tasks GROUP BY principal, state) t \
                 WHERE n IS DISTINCT FROM (SELECT c.n FROM task_counts c WHERE c.principal = t.principal AND c.state = t.state) \
                 UNION SELECT 'principal ' || principal || ', state ' || state FROM task_counts c WHERE n <> 0 AND NOT EXISTS \
                 (SELECT 1 FROM tasks t WHERE t.principal = c.principal AND t.state = c.state)"
                    .into(),
                "has a kept Task count (GET /tasks totalSize) that differs from its Tasks",
            ),
            (
                format!("SELECT task_id FROM tasks WHERE state NOT IN {}", known_states_sql()),
                "has an unknown state",
            ),
            (
                "SELECT t.task_id FROM tasks t WHERE NOT EXISTS (SELECT 1 FROM claims c WHERE c.task_id = t.task_id)"
                    .into(),
                "has no claim (every Task is accepted with one, in one transaction)",
            ),
            (
                format!(
                    "SELECT c.activation_id FROM claims c WHERE c.task_id IS NOT NULL AND c.state NOT IN {} \
                     AND NOT EXISTS (SELECT 1 FROM tasks t WHERE t.task_id = c.task_id)",
                    claims::states_sql(ClaimState::is_given_up)
                ),
                "is a claim whose Task is missing (the next start quarantines it)",
            ),
            (
                "SELECT DISTINCT h.task_seq::TEXT FROM history h WHERE NOT EXISTS (SELECT 1 FROM tasks t WHERE t.seq = h.task_seq) \
                 UNION SELECT DISTINCT a.task_seq::TEXT FROM artifacts a WHERE NOT EXISTS (SELECT 1 FROM tasks t WHERE t.seq = a.task_seq)"
                    .into(),
                "is the sequence number of history or artifacts whose Task is missing",
            ),
            (
                format!(
                    "SELECT task_id FROM tasks WHERE input_request_open = 1 AND state NOT IN {}",
                    interrupted_states_sql()
                ),
                "has an open input request but does not wait for input",
            ),
            (
                format!(
                    "SELECT t.task_id FROM tasks t WHERE t.state NOT IN {} \
                     AND NOT EXISTS (SELECT 1 FROM contexts x WHERE x.context_id = t.context_id)",
                    terminal_states_sql()
                ),
                "is a live Task whose context is missing",
            ),
        ];
        let mut problems = Vec::new();
        for (sql, what) in invariants {
            for row in self.query(&sql, &[])? {
                let id: String = get(&row, 0)?;
                problems.push(format!("{id} {what}"));
            }
        }
        Ok(problems)
    }
}

impl WriteTx for PgTx<'_> {
    fn keep_task_session(&self, task_id: &str, files: &[SessionFile]) -> Result<(), StoreError> {
        let names: Vec<&str> = files.iter().map(|f| f.name.as_str()).collect();
        self.execute(
            "DELETE FROM task_sessions WHERE task_id = $1 AND NOT (name = ANY($2))",
            &[&task_id, &names],
        )?;
        for file in files {
            let digest = crate::digest::content_address(&file.body);
            self.execute(
                "INSERT INTO task_sessions (task_id, name, digest, body) VALUES ($1, $2, $3, $4) \
                 ON CONFLICT (task_id, name) DO UPDATE \
                 SET digest = EXCLUDED.digest, body = EXCLUDED.body, updated_at = now() \
                 WHERE task_sessions.digest <> EXCLUDED.digest",
                &[&task_id, &file.name, &digest, &file.body],
            )?;
        }
        Ok(())
    }

    fn step(&self, name: &str) -> Result<(), StoreError> {
        match self.faults {
            Some(faults) => faults.at(name),
            None => Ok(()),
        }
    }

    fn insert_task(&self, task: &NewTask<'_>) -> Result<i64, StoreError> {
        let extensions = serde_json::to_string(task.extensions)?;
        let row = self.query_one(
            "INSERT INTO tasks (task_id, principal, context_id, source, continuation, state, status_ms, created_ms, extensions) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $7, $8) RETURNING seq",
            &[
                &task.task_id,
                &task.principal,
                &task.context_id,
                &task.source,
                &task.continuation.as_str(),
                &task.state.as_str(),
                &task.now_ms,
                &extensions,
            ],
        )?;
        self.count(task.principal, task.state, 1);
        get(&row, 0)
    }

    fn insert_first_message(
        &self,
        task_seq: i64,
        message: &MessageRecord,
    ) -> Result<(), StoreError> {
        let body = serde_json::to_string(message)?;
        self.execute(
            "INSERT INTO history (task_seq, n, body) VALUES ($1, 0, $2)",
            &[&task_seq, &body],
        )?;
        Ok(())
    }

    fn append_history(&self, task: &TaskRow, message: &MessageRecord) -> Result<(), StoreError> {
        let body = serde_json::to_string(message)?;
        self.execute(
            "INSERT INTO history (task_seq, n, body) \
             VALUES ($1, (SELECT COALESCE(MAX(n) + 1, 0) FROM history WHERE task_seq = $1), $2)",
            &[&task.seq, &body],
        )?;
        Ok(())
    }

    fn next_artifact_n(&self, task: &TaskRow) -> Result<i64, StoreError> {
        get(
            &self.query_one(
                "SELECT COALESCE(MAX(n) + 1, 0) FROM artifacts WHERE task_seq = $1",
                &[&task.seq],
            )?,
            0,
        )
    }

    fn append_artifact(&self, task: &TaskRow, artifact: &ArtifactRecord) -> Result<(), StoreError> {
        let body = serde_json::to_string(artifact)?;
        let (version, step) = self.next_change(task)?;
        self.execute(
            "INSERT INTO artifacts (task_seq, n, artifact_id, body, version, step, writer) \
             VALUES ($1, (SELECT COALESCE(MAX(n) + 1, 0) FROM artifacts WHERE task_seq = $1), $2, $3, $4, $5, $6)",
            &[&task.seq, &artifact.artifact_id, &body, &version, &step, &self.node],
        )?;
        Ok(())
    }

    fn set_task_status(
        &self,
        task: &TaskRow,
        state: TaskState,
        message: Option<&MessageRecord>,
        now_ms: i64,
        input_request: InputRequest<'_>,
    ) -> Result<(), StoreError> {
        let message_json = message.map(serde_json::to_string).transpose()?;
        let (open, bump, schema): (Option<i16>, i64, Option<String>) = match input_request {
            InputRequest::Unchanged => (None, 0, None),
            InputRequest::Open(schema) => (Some(1), 1, schema.map(Value::to_string)),
            InputRequest::Closed => (Some(0), 0, None),
        };
        self.execute(
            "UPDATE tasks SET state = $2, status_message = $3, status_ms = $4, \
             input_request_open = COALESCE($5, input_request_open), input_request_seq = input_request_seq + $6, \
             input_schema = CASE $5 WHEN 0 THEN NULL WHEN 1 THEN $7 ELSE input_schema END \
             WHERE seq = $1",
            &[
                &task.seq,
                &state.as_str(),
                &message_json,
                &now_ms,
                &open,
                &bump,
                &schema,
            ],
        )?;
        let (version, step) = self.next_change(task)?;
        self.execute(
            "INSERT INTO task_statuses (task_seq, version, step, writer, state, message, at_ms) \
             VALUES ($1, $2, $3, $4, $5, $6, $7)",
            &[
                &task.seq,
                &version,
                &step,
                &self.node,
                &state.as_str(),
                &message_json,
                &now_ms,
            ],
        )?;
        if task.record.state != state {
            self.count(&task.record.principal, task.record.state, -1);
            self.count(&task.record.principal, state, 1);
        }
        Ok(())
    }

    fn insert_claim(&self, claim: &NewClaim<'_>) -> Result<(), StoreError> {
        let direct_reply = claim.direct_reply.map(serde_json::to_string).transpose()?;
        self.execute(
            "INSERT INTO claims (activation_id, principal, dedupe_key, source, route, task_id, context_id, digest, \
             requested_context_id, requested_task_id, direct_reply, state, claimed_ms) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)",
            &[
                &claim.activation_id,
                &claim.principal,
                &claim.dedupe_key,
                &claim.source,
                &claim.route.as_str(),
                &claim.task_id,
                &claim.context_id,
                &claim.digest,
                &claim.requested_context_id,
                &claim.requested_task_id,
                &direct_reply,
                &ClaimState::Accepted.as_str(),
                &claim.now_ms,
            ],
        )?;
        Ok(())
    }

    fn record_claim_accepted(&self, activation_id: &str, now_ms: i64) -> Result<(), StoreError> {
        self.execute(
            "INSERT INTO claim_states (activation_id, n, kind, count, at_ms, detail) VALUES ($1, 0, $2, NULL, $3, NULL)",
            &[&activation_id, &ClaimState::Accepted.as_str(), &now_ms],
        )?;
        self.notify_wake()
    }

    fn push_claim_state(
        &self,
        activation_id: &str,
        state: ClaimState,
        detail: Option<&str>,
        now_ms: i64,
    ) -> Result<(), StoreError> {
        self.append_claim_record(activation_id, state, None, detail, now_ms)?;
        self.execute(
            "UPDATE claims SET state = $2 WHERE activation_id = $1",
            &[&activation_id, &state.as_str()],
        )?;
        Ok(())
    }

    fn record_wake_delivery(
        &self,
        activation_id: &str,
        n: i64,
        now_ms: i64,
    ) -> Result<(), StoreError> {
        self.execute(
            "UPDATE claims SET deliveries = $2 WHERE activation_id = $1",
            &[&activation_id, &n],
        )?;
        self.append_claim_record(
            activation_id,
            ClaimState::WakeDelivered,
            Some(n),
            None,
            now_ms,
        )
    }

    fn take_wake_lease(
        &self,
        activation_id: &str,
        node: &str,
        lease_ms: i64,
    ) -> Result<WakeLease, StoreError> {
        // A lease is on one claim, but a Task is worked by one node at a time: deliveries
        // of one Task's claims take turns (a lock held until this transaction ends), and
        // a live lease of another node on any claim of the Task keeps this one off.
        let Some(task) = self.query_opt(
            "SELECT task_id FROM claims WHERE activation_id = $1",
            &[&activation_id],
        )?
        else {
            return Ok(WakeLease::Missing);
        };
        let task_id: Option<String> = get(&task, 0)?;
        let Some(task_id) = task_id else {
            return Ok(WakeLease::Missing);
        };
        self.query_one(
            "SELECT pg_advisory_xact_lock($1, hashtext($2))",
            &[&TASK_DELIVERY_LOCK, &task_id],
        )?;
        if let Some(row) = self.query_opt(
            &format!(
                "SELECT lease_owner, {} FROM claims WHERE task_id = $1 AND activation_id <> $2 \
                 AND lease_owner <> $3 AND lease_until > clock_timestamp() LIMIT 1",
                remaining_ms_sql("lease_until")
            ),
            &[&task_id, &activation_id, &node],
        )? {
            return Ok(WakeLease::HeldBy {
                owner: get(&row, 0)?,
                remaining_ms: get(&row, 1)?,
            });
        }
        let Some(row) = self.query_opt(
            &format!(
                "SELECT lease_owner, {} FROM claims WHERE activation_id = $1 FOR UPDATE SKIP LOCKED",
                remaining_ms_sql("lease_until")
            ),
            &[&activation_id],
        )?
        else {
            // Locked by another transaction (it was there a moment ago).
            return Ok(WakeLease::Busy);
        };
        let owner: Option<String> = get(&row, 0)?;
        let remaining_ms: Option<i64> = get(&row, 1)?;
        if let (Some(owner), Some(remaining_ms)) = (owner, remaining_ms) {
            if owner != node && remaining_ms > 0 {
                return Ok(WakeLease::HeldBy {
                    owner,
                    remaining_ms,
                });
            }
        }
        self.execute(
            "UPDATE claims SET lease_owner = $2, \
             lease_until = clock_timestamp() + $3::BIGINT * INTERVAL '1 millisecond' \
             WHERE activation_id = $1",
            &[&activation_id, &node, &lease_ms],
        )?;
        Ok(WakeLease::Taken)
    }

    fn renew_wake_leases(&self, node: &str, lease_ms: i64) -> Result<u64, StoreError> {
        self.execute(
            "UPDATE claims SET lease_until = clock_timestamp() + $2::BIGINT * INTERVAL '1 millisecond' \
             WHERE lease_owner = $1",
            &[&node, &lease_ms],
        )
    }

    fn release_wake_lease(&self, activation_id: &str, node: &str) -> Result<bool, StoreError> {
        let released = self.execute(
            "UPDATE claims SET lease_owner = NULL, lease_until = NULL \
             WHERE activation_id = $1 AND lease_owner = $2",
            &[&activation_id, &node],
        )? > 0;
        if released {
            self.notify_wake()?;
        }
        Ok(released)
    }

    fn release_node_wake_leases(&self, node: &str) -> Result<u64, StoreError> {
        let released = self.execute(
            "UPDATE claims SET lease_owner = NULL, lease_until = NULL WHERE lease_owner = $1",
            &[&node],
        )?;
        if released > 0 {
            self.notify_wake()?;
        }
        Ok(released)
    }

    fn context_of_conversation(
        &self,
        new_context_id: &str,
        principal: &str,
        source: &str,
        conversation_key: &str,
        now_ms: i64,
    ) -> Result<String, StoreError> {
        // One atomic upsert: concurrent first messages of a conversation, on any node,
        // get the same context (the loser waits for the winner's commit, then updates).
        get(
            &self.query_one(
                "INSERT INTO contexts (context_id, principal, source, conversation_key, created_ms, last_event_ms) \
                 VALUES ($1, $2, $3, $4, $5, $5) \
                 ON CONFLICT (principal, source, conversation_key) WHERE conversation_key IS NOT NULL \
                 DO UPDATE SET last_event_ms = GREATEST(contexts.last_event_ms, EXCLUDED.last_event_ms) \
                 RETURNING context_id",
                &[&new_context_id, &principal, &source, &conversation_key, &now_ms],
            )?,
            0,
        )
    }

    fn insert_fresh_context(
        &self,
        context_id: &str,
        principal: &str,
        source: &str,
        now_ms: i64,
    ) -> Result<(), StoreError> {
        self.execute(
            "INSERT INTO contexts (context_id, principal, source, conversation_key, created_ms, last_event_ms) \
             VALUES ($1, $2, $3, NULL, $4, $4)",
            &[&context_id, &principal, &source, &now_ms],
        )?;
        Ok(())
    }

    fn touch_context(&self, context_id: &str, now_ms: i64) -> Result<(), StoreError> {
        self.execute(
            "UPDATE contexts SET last_event_ms = GREATEST(last_event_ms, $2) WHERE context_id = $1",
            &[&context_id, &now_ms],
        )?;
        Ok(())
    }

    fn upsert_reply_anchor(
        &self,
        principal: &str,
        source: &str,
        provider_response_id: &str,
        anchor: &Anchor,
        now_ms: i64,
    ) -> Result<(), StoreError> {
        self.execute(
            "INSERT INTO reply_anchors (principal, source, provider_response_id, task_id, input_request_seq, recorded_ms) \
             VALUES ($1, $2, $3, $4, $5, $6) \
             ON CONFLICT (principal, source, provider_response_id) DO UPDATE SET \
             task_id = EXCLUDED.task_id, input_request_seq = EXCLUDED.input_request_seq, recorded_ms = EXCLUDED.recorded_ms",
            &[
                &principal,
                &source,
                &provider_response_id,
                &anchor.task_id,
                &anchor.input_request_seq,
                &now_ms,
            ],
        )?;
        Ok(())
    }

    fn set_checkpoint(
        &self,
        principal: &str,
        source: &str,
        cursor: &str,
        now_ms: i64,
    ) -> Result<(), StoreError> {
        self.execute(
            "INSERT INTO checkpoints (principal, source, cursor, updated_ms) VALUES ($1, $2, $3, $4) \
             ON CONFLICT (principal, source) DO UPDATE SET cursor = EXCLUDED.cursor, updated_ms = EXCLUDED.updated_ms",
            &[&principal, &source, &cursor, &now_ms],
        )?;
        Ok(())
    }

    fn insert_evidence(&self, evidence: &EvidenceRow<'_>) -> Result<(), StoreError> {
        // The same content twice is one record (per Task; and once among evidence about
        // no Task): either unique index makes the second insert a no-op.
        self.execute(
            "INSERT INTO evidence (evidence_id, kind, healthy, task_id, activation_id, locator, content, recorded_ms) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8) ON CONFLICT DO NOTHING",
            &[
                &evidence.evidence_id,
                &evidence.kind.as_str(),
                &evidence.healthy,
                &evidence.task_id,
                &evidence.activation_id,
                &evidence.locator,
                &evidence.content,
                &evidence.now_ms,
            ],
        )?;
        Ok(())
    }

    fn insert_delivery(&self, delivery: &NewDelivery<'_>) -> Result<(), StoreError> {
        self.execute(
            "INSERT INTO deliveries (delivery_id, principal, source, task_id, operation_id, payload_digest, recovery, \
             state, created_ms, updated_ms) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $9)",
            &[
                &delivery.delivery_id,
                &delivery.principal,
                &delivery.source,
                &delivery.task_id,
                &delivery.operation_id,
                &delivery.payload_digest,
                &delivery.recovery.as_str(),
                &DeliveryState::Prepared.as_str(),
                &delivery.now_ms,
            ],
        )?;
        Ok(())
    }

    fn set_delivery_state(
        &self,
        delivery_id: &str,
        state: DeliveryState,
        provider_response_id: Option<&str>,
        detail: Option<&str>,
        now_ms: i64,
    ) -> Result<(), StoreError> {
        let attempt = i64::from(state == DeliveryState::Sending);
        self.execute(
            "UPDATE deliveries SET state = $2, provider_response_id = COALESCE($3, provider_response_id), \
             detail = $4, attempts = attempts + $6, updated_ms = $5 WHERE delivery_id = $1",
            &[
                &delivery_id,
                &state.as_str(),
                &provider_response_id,
                &detail,
                &now_ms,
                &attempt,
            ],
        )?;
        Ok(())
    }

    fn take_orphaned_claims(&self) -> Result<Vec<(String, String)>, StoreError> {
        let orphans = self
            .query(
                &format!(
                    "SELECT c.activation_id, c.task_id FROM removed_tasks r \
                     JOIN claims c ON c.task_id = r.task_id \
                     WHERE c.state NOT IN {} \
                     AND NOT EXISTS (SELECT 1 FROM tasks t WHERE t.task_id = c.task_id)",
                    claims::states_sql(ClaimState::is_given_up)
                ),
                &[],
            )?
            .iter()
            .map(|row| Ok((get(row, 0)?, get(row, 1)?)))
            .collect::<Result<Vec<_>, StoreError>>()?;
        self.execute("DELETE FROM removed_tasks", &[])?;
        Ok(orphans)
    }

    fn delete_settled_tasks(&self, cutoff_ms: i64) -> Result<Vec<String>, StoreError> {
        // One statement: the Tasks go (the trigger notes each and moves its count), and
        // their history and artifacts with them.
        let removed: Vec<(String, i64)> = self
            .query(
                &format!(
                    "DELETE FROM tasks WHERE state IN {} AND status_ms < $1 RETURNING task_id, seq",
                    terminal_states_sql()
                ),
                &[&cutoff_ms],
            )?
            .iter()
            .map(|row| Ok((get(row, 0)?, get(row, 1)?)))
            .collect::<Result<_, StoreError>>()?;
        let seqs: Vec<i64> = removed.iter().map(|(_, seq)| *seq).collect();
        self.execute("DELETE FROM history WHERE task_seq = ANY($1)", &[&seqs])?;
        self.execute("DELETE FROM artifacts WHERE task_seq = ANY($1)", &[&seqs])?;
        Ok(removed.into_iter().map(|(task_id, _)| task_id).collect())
    }

    fn delete_unused_claims(&self, cutoff_ms: i64) -> Result<usize, StoreError> {
        let removed = self.query(
            "DELETE FROM claims WHERE claimed_ms < $1 \
             AND (task_id IS NULL OR NOT EXISTS (SELECT 1 FROM tasks t WHERE t.task_id = claims.task_id)) \
             RETURNING activation_id",
            &[&cutoff_ms],
        )?;
        let ids: Vec<String> = removed.iter().map(|row| row.get(0)).collect();
        self.execute(
            "DELETE FROM claim_states WHERE activation_id = ANY($1)",
            &[&ids],
        )?;
        Ok(ids.len())
    }

    fn delete_unused_evidence(&self, cutoff_ms: i64) -> Result<usize, StoreError> {
        Ok(self.execute(
            "DELETE FROM evidence WHERE recorded_ms < $1 \
             AND (task_id IS NULL OR NOT EXISTS (SELECT 1 FROM tasks t WHERE t.task_id = evidence.task_id))",
            &[&cutoff_ms],
        )? as usize)
    }

    fn delete_unused_anchors(&self, cutoff_ms: i64) -> Result<usize, StoreError> {
        Ok(self.execute(
            &format!(
                "DELETE FROM reply_anchors WHERE recorded_ms < $1 \
                 AND task_id NOT IN (SELECT task_id FROM tasks WHERE state IN {})",
                live_states_sql()
            ),
            &[&cutoff_ms],
        )? as usize)
    }

    fn delete_unused_deliveries(&self, cutoff_ms: i64) -> Result<usize, StoreError> {
        Ok(self.execute(
            &format!(
                "DELETE FROM deliveries WHERE updated_ms < $1 AND state <> $2 \
                 AND (task_id IS NULL OR task_id NOT IN (SELECT task_id FROM tasks WHERE state IN {}))",
                live_states_sql()
            ),
            &[&cutoff_ms, &DeliveryState::Sending.as_str()],
        )? as usize)
    }

    fn delete_unused_contexts(&self, cutoff_ms: i64) -> Result<usize, StoreError> {
        Ok(self.execute(
            &format!(
                "DELETE FROM contexts WHERE last_event_ms < $1 \
                 AND context_id NOT IN (SELECT context_id FROM tasks WHERE state IN {})",
                live_states_sql()
            ),
            &[&cutoff_ms],
        )? as usize)
    }
}
