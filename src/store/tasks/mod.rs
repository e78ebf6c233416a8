//! The `tasks` table with its `history` and `artifacts`: one row per Task, found by id
//! (scoped to its principal for callers), listed newest status first, and the SQL forms
//! of the state sets the rules define on [`TaskState`] and [`TaskRecord`].

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::LazyLock;

use rusqlite::types::Value as SqlValue;
use rusqlite::{params, Connection, OptionalExtension, Row};
use serde_json::Value;

use super::{sql_list, Statements, StoreError, WriteTx};
use crate::record::{ArtifactRecord, Continuation, MessageRecord, TaskRecord, TaskState};

/// A Task's row, without history or artifacts.
#[derive(Debug, Clone, PartialEq)]
pub struct TaskRow {
    /// Insertion order: the key of its history and artifacts, and the listing tiebreak.
    pub seq: i64,
    pub record: TaskRecord,
    /// Moves on each time the Task opens an input request (a reply anchor names one).
    pub input_request_seq: i64,
    /// The MCP elicitation schema of the open input request, if the agent gave one.
    pub input_schema: Option<Value>,
}

const TASK_COLUMNS: &str =
    "seq, task_id, principal, context_id, source, continuation, state, status_message, \
     status_ms, created_ms, input_request_seq, input_request_open, extensions, input_schema";

fn task_from_row(row: &Row<'_>) -> rusqlite::Result<Result<TaskRow, StoreError>> {
    // Columns that are only parsed are borrowed from the row, not copied out first.
    let text = |i: usize| -> rusqlite::Result<&str> { Ok(row.get_ref(i)?.as_str()?) };
    let optional_text =
        |i: usize| -> rusqlite::Result<Option<&str>> { Ok(row.get_ref(i)?.as_str_or_null()?) };
    let continuation = text(5)?;
    let state = text(6)?;
    let status_message = optional_text(7)?;
    let extensions = text(12)?;
    let input_schema = optional_text(13)?;
    let task_id: String = row.get(1)?;
    let decoded = (|| {
        let continuation = Continuation::parse(continuation).ok_or_else(|| {
            StoreError::Corrupt(format!(
                "task {task_id}: unknown continuation `{continuation}`"
            ))
        })?;
        let state = parse_state(&task_id, state)?;
        let status_message = status_message
            .map(serde_json::from_str::<MessageRecord>)
            .transpose()?;
        // Most Tasks activate no extension: their empty list needs no parser.
        let extensions: Vec<String> = match extensions {
            "[]" => Vec::new(),
            listed => serde_json::from_str(listed)?,
        };
        let input_schema = input_schema.map(serde_json::from_str).transpose()?;
        Ok::<_, StoreError>((
            continuation,
            state,
            status_message,
            extensions,
            input_schema,
        ))
    })();
    Ok(match decoded {
        Err(e) => Err(e),
        Ok((continuation, state, status_message, extensions, input_schema)) => Ok(TaskRow {
            seq: row.get(0)?,
            record: TaskRecord {
                task_id,
                principal: row.get(2)?,
                context_id: row.get(3)?,
                source: row.get(4)?,
                continuation,
                state,
                status_message,
                status_ms: row.get(8)?,
                created_ms: row.get(9)?,
                input_request_open: row.get::<_, i64>(11)? != 0,
                extensions,
                history: Vec::new(),
                artifacts: Vec::new(),
            },
            input_request_seq: row.get(10)?,
            input_schema,
        }),
    })
}

fn parse_state(task_id: &str, state: &str) -> Result<TaskState, StoreError> {
    TaskState::parse(state)
        .ok_or_else(|| StoreError::Corrupt(format!("task {task_id}: unknown state `{state}`")))
}

// ---- State sets as SQL -----------------------------------------------------------------

/// The terminal states as an SQL list (`('completed', …)`), built from the one definition
/// of "terminal" ([`TaskState::is_terminal`]).
pub fn terminal_states_sql() -> String {
    states_sql(|s| s.is_terminal())
}

/// The states that are not terminal, as an SQL list: `state IN` it is an index range
/// where `state NOT IN` the terminal list would scan every Task.
pub fn live_states_sql() -> String {
    states_sql(|s| !s.is_terminal())
}

/// The interrupted states as an SQL list ([`TaskState::is_interrupted`]).
pub fn interrupted_states_sql() -> String {
    states_sql(|s| s.is_interrupted())
}

/// Every state this build knows, as an SQL list.
pub fn known_states_sql() -> String {
    states_sql(|_| true)
}

/// "The Task waits for its caller" ([`TaskRecord::awaits_caller`]) as an SQL condition on
/// the tasks row named `t`.
pub fn awaits_caller_sql(t: &str) -> String {
    format!(
        "({t}.state IN {} AND {t}.input_request_open = 1)",
        interrupted_states_sql()
    )
}

fn states_sql(keep: impl Fn(TaskState) -> bool) -> String {
    sql_list(
        TaskState::ALL
            .into_iter()
            .filter(|s| keep(*s))
            .map(TaskState::as_str),
    )
}

// ---- One Task ---------------------------------------------------------------------------

/// The row of Task `task_id`, whoever owns it. In the writer, a live Task's row it kept
/// ([`LiveRows`]) instead of a read.
pub fn by_id(on: &impl Statements, task_id: &str) -> Result<Option<TaskRow>, StoreError> {
    static SQL: LazyLock<String> =
        LazyLock::new(|| format!("SELECT {TASK_COLUMNS} FROM tasks WHERE task_id = ?1"));
    let live = on.writer_rows();
    if let Some(row) = live.and_then(|rows| rows.borrow().get(task_id)) {
        return Ok(Some(row));
    }
    let row = on
        .statement(SQL.as_str(), |s| {
            s.query_row([task_id], task_from_row).optional()
        })?
        .transpose()?;
    if let (Some(rows), Some(row)) = (live, &row) {
        rows.borrow_mut().keep(Cow::Borrowed(row));
    }
    Ok(row)
}

/// The row of Task `task_id` if `principal` owns it. A foreign Task is `None`, exactly
/// like a missing one.
pub fn owned(
    on: &impl Statements,
    principal: &str,
    task_id: &str,
) -> Result<Option<TaskRow>, StoreError> {
    // The principal is part of the lookup: a foreign Task's row is never read or decoded,
    // so it costs what a missing one does (no timing difference to probe).
    static SQL: LazyLock<String> = LazyLock::new(|| {
        format!("SELECT {TASK_COLUMNS} FROM tasks WHERE task_id = ?1 AND principal = ?2")
    });
    on.statement(SQL.as_str(), |s| {
        s.query_row([task_id, principal], task_from_row).optional()
    })?
    .transpose()
}

/// A Task to create.
pub struct NewTask<'a> {
    pub task_id: &'a str,
    pub principal: &'a str,
    pub context_id: &'a str,
    pub source: &'a str,
    pub continuation: Continuation,
    pub state: TaskState,
    pub extensions: &'a [String],
    pub now_ms: i64,
}

/// Inserts a Task whose history will hold one message ([`insert_first_message`] writes
/// it); returns its `seq`. Its principal's count in its state goes up by one.
pub fn insert(tx: &WriteTx<'_, '_>, task: &NewTask<'_>) -> Result<i64, StoreError> {
    let extensions = serde_json::to_string(task.extensions)?;
    // No `RETURNING seq`: SQLite runs a RETURNING clause as a trigger, and a statement with
    // a trigger copies every page it touches into a statement journal first. The row kept
    // below (`LiveRows`) must stay what this statement stores.
    tx.with_statement(
        "INSERT INTO tasks (task_id, principal, context_id, source, continuation, state, status_ms, created_ms, extensions) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?7, ?8)",
        |s| {
            s.execute(params![
                task.task_id,
                task.principal,
                task.context_id,
                task.source,
                task.continuation.as_str(),
                task.state.as_str(),
                task.now_ms,
                extensions
            ])
        },
    )?;
    tx.count(task.principal, task.state, 1);
    let seq = tx.conn().last_insert_rowid();
    // The row as a read would give it (the columns not set above take their defaults).
    tx.live_rows().borrow_mut().keep(Cow::Owned(TaskRow {
        seq,
        record: TaskRecord {
            task_id: task.task_id.to_string(),
            principal: task.principal.to_string(),
            context_id: task.context_id.to_string(),
            source: task.source.to_string(),
            continuation: task.continuation,
            state: task.state,
            status_message: None,
            status_ms: task.now_ms,
            created_ms: task.now_ms,
            input_request_open: false,
            extensions: task.extensions.to_vec(),
            history: Vec::new(),
            artifacts: Vec::new(),
        },
        input_request_seq: 0,
        input_schema: None,
    }));
    Ok(seq)
}

/// The first message of a Task just inserted (position 0 of its history).
pub fn insert_first_message(
    tx: &WriteTx<'_, '_>,
    task_seq: i64,
    message: &MessageRecord,
) -> Result<(), StoreError> {
    let body = serde_json::to_string(message)?;
    tx.with_statement(
        "INSERT INTO history (task_seq, n, body) VALUES (?1, 0, ?2)",
        |s| s.execute(params![task_seq, body]),
    )?;
    Ok(())
}

/// The newest `limit` messages of a Task (all when `None`), oldest first.
pub fn history(
    on: &impl Statements,
    task_seq: i64,
    limit: Option<u32>,
) -> Result<Vec<MessageRecord>, StoreError> {
    let limit = limit.map(i64::from).unwrap_or(-1);
    let bodies = on.statement(
        "SELECT body FROM history WHERE task_seq = ?1 ORDER BY n DESC LIMIT ?2",
        |s| {
            s.query_map(params![task_seq, limit], |r| r.get::<_, String>(0))?
                .collect::<rusqlite::Result<Vec<_>>>()
        },
    )?;
    bodies
        .iter()
        .rev()
        .map(|body| Ok(serde_json::from_str::<MessageRecord>(body)?))
        .collect()
}

/// A Task's artifacts, in the order they were recorded.
pub fn artifacts(on: &impl Statements, task_seq: i64) -> Result<Vec<ArtifactRecord>, StoreError> {
    let bodies = on.statement(
        "SELECT body FROM artifacts WHERE task_seq = ?1 ORDER BY n",
        |s| {
            s.query_map([task_seq], |r| r.get::<_, String>(0))?
                .collect::<rusqlite::Result<Vec<_>>>()
        },
    )?;
    bodies
        .iter()
        .map(|body| Ok(serde_json::from_str::<ArtifactRecord>(body)?))
        .collect()
}

pub fn append_history(
    tx: &WriteTx<'_, '_>,
    task: &TaskRow,
    message: &MessageRecord,
) -> Result<(), StoreError> {
    let body = serde_json::to_string(message)?;
    tx.with_statement(
        "INSERT INTO history (task_seq, n, body) \
         VALUES (?1, (SELECT COALESCE(MAX(n) + 1, 0) FROM history WHERE task_seq = ?1), ?2)",
        |s| s.execute(params![task.seq, body]),
    )?;
    Ok(())
}

/// The position the Task's next artifact takes (0 when it has none yet).
pub fn next_artifact_n(tx: &WriteTx<'_, '_>, task: &TaskRow) -> Result<i64, StoreError> {
    tx.with_statement(
        "SELECT COALESCE(MAX(n) + 1, 0) FROM artifacts WHERE task_seq = ?1",
        |s| s.query_row([task.seq], |r| r.get(0)),
    )
}

pub fn append_artifact(
    tx: &WriteTx<'_, '_>,
    task: &TaskRow,
    artifact: &ArtifactRecord,
) -> Result<(), StoreError> {
    let body = serde_json::to_string(artifact)?;
    tx.with_statement(
        "INSERT INTO artifacts (task_seq, n, artifact_id, body) \
         VALUES (?1, (SELECT COALESCE(MAX(n) + 1, 0) FROM artifacts WHERE task_seq = ?1), ?2, ?3)",
        |s| s.execute(params![task.seq, artifact.artifact_id, body]),
    )?;
    Ok(())
}

/// What a status change does to the Task's input request.
#[derive(Debug, Clone, Copy)]
pub enum InputRequest<'a> {
    /// Left as it is.
    Unchanged,
    /// A new request opens (its sequence number moves on), with the agent's elicitation
    /// schema if it gave one.
    Open(Option<&'a Value>),
    /// The open request is answered (or the Task settled): it closes, schema and all.
    Closed,
}

impl TaskRow {
    /// This row as [`set_status`] leaves it: the same changes, made in memory, so a writer
    /// that answers with the Task it just settled need not read the row back.
    pub fn with_status(
        mut self,
        state: TaskState,
        message: Option<&MessageRecord>,
        now_ms: i64,
        input_request: InputRequest<'_>,
    ) -> TaskRow {
        self.record.state = state;
        self.record.status_message = message.cloned();
        self.record.status_ms = now_ms;
        match input_request {
            InputRequest::Unchanged => {}
            InputRequest::Open(schema) => {
                self.record.input_request_open = true;
                self.input_request_seq += 1;
                self.input_schema = schema.cloned();
            }
            InputRequest::Closed => {
                self.record.input_request_open = false;
                self.input_schema = None;
            }
        }
        self
    }
}

/// Sets a Task's status: its state, status message and time, and its input request
/// ([`TaskRow::with_status`] makes the same changes to a row in memory).
pub fn set_status(
    tx: &WriteTx<'_, '_>,
    task: &TaskRow,
    state: TaskState,
    message: Option<&MessageRecord>,
    now_ms: i64,
    input_request: InputRequest<'_>,
) -> Result<(), StoreError> {
    let message_json = message.map(serde_json::to_string).transpose()?;
    let (open, bump, schema) = match input_request {
        InputRequest::Unchanged => (None, 0, None),
        InputRequest::Open(schema) => (Some(1), 1, schema.map(Value::to_string)),
        InputRequest::Closed => (Some(0), 0, None),
    };
    // A change in the same millisecond as the Task's last one (an agent's `startWork` and
    // `complete` issued together) leaves `status_ms` out of the SET: SQLite then leaves
    // the two indexes keyed by it (by principal, by context) alone instead of moving the
    // Task's entry in each to where it already is.
    // One statement text, with or without the status time (a literal, so each variant is
    // a `&'static str` the writer keeps compiled). `LiveRows::set_status` must make the
    // same change to a kept row.
    macro_rules! update_status {
        ($status_ms:literal) => {
            concat!(
                "UPDATE tasks SET state = ?2, status_message = ?3, ",
                $status_ms,
                "input_request_open = COALESCE(?5, input_request_open), input_request_seq = input_request_seq + ?6, \
                 input_schema = CASE ?5 WHEN 0 THEN NULL WHEN 1 THEN ?7 ELSE input_schema END \
                 WHERE seq = ?1"
            )
        };
    }
    let sql = if now_ms == task.record.status_ms {
        update_status!("")
    } else {
        update_status!("status_ms = ?4, ")
    };
    tx.with_statement(sql, |s| {
        s.execute(params![
            task.seq,
            state.as_str(),
            message_json,
            now_ms,
            open,
            bump,
            schema
        ])
    })?;
    tx.live_rows()
        .borrow_mut()
        .set_status(task, state, message, now_ms, input_request);
    if task.record.state != state {
        tx.count(&task.record.principal, task.record.state, -1);
        tx.count(&task.record.principal, state, 1);
    }
    Ok(())
}

// ---- The writer's live rows -------------------------------------------------------------
//
// The writer reads a Task's row for nearly every write about it (is it live, in which
// state, whose), and an agent that settles a Task at once writes it three times in a row:
// created, WORKING, COMPLETED. Each read was an index seek and a row decode (~12k
// instructions; callgrind, one-core message:send). The writer keeps the rows of live
// Tasks as its own writes leave them, so the next write about the Task needs no read.
//
// Why a kept row is always the stored one: the tasks table has three writers, [`insert`]
// and [`set_status`] (which keep or update the row after their statement ran) and
// compaction's delete of terminal Tasks (never kept); the test
// `a_statement_that_writes_the_tasks_table_keeps_the_writers_live_rows_true` fails when a
// fourth appears. The writer forgets every kept row whenever it rolls anything back (a
// failed batch, a job's savepoint), so a row is never ahead of the store; the tests in
// `plane::agent::live_rows` compare kept and stored rows through an agent's writes and a
// rollback. Only what is small and hot is kept: live Tasks without a status message or
// input schema, at most [`LIVE_ROWS_AT_MOST`]. Readers never see them: only the writer's
// own reads ([`by_id`] on a [`WriteTx`]) do.

/// At most this many rows are kept (~0.5 KB each); past it the writer starts again.
const LIVE_ROWS_AT_MOST: usize = 4096;

/// The rows of live Tasks, by id, as the writer's own transactions leave them.
#[derive(Debug, Default)]
pub struct LiveRows {
    rows: HashMap<String, TaskRow>,
}

/// Whether the writer keeps `row`: a live Task's, small (no status message, input schema,
/// history or artifacts).
fn worth_keeping(row: &TaskRow) -> bool {
    let record = &row.record;
    !record.state.is_terminal()
        && record.status_message.is_none()
        && row.input_schema.is_none()
        && record.history.is_empty()
        && record.artifacts.is_empty()
}

impl LiveRows {
    pub(crate) fn get(&self, task_id: &str) -> Option<TaskRow> {
        self.rows.get(task_id).cloned()
    }

    /// Keeps `row` (the row as stored) if it is worth keeping, else forgets the Task's.
    fn keep(&mut self, row: Cow<'_, TaskRow>) {
        if !worth_keeping(&row) {
            self.rows.remove(&row.record.task_id);
            return;
        }
        if self.rows.len() >= LIVE_ROWS_AT_MOST && !self.rows.contains_key(&row.record.task_id) {
            self.rows.clear();
        }
        let row = row.into_owned();
        self.rows.insert(row.record.task_id.clone(), row);
    }

    /// What [`set_status`]'s statement did to the row, done to the kept one (with
    /// [`TaskRow::with_status`]), which stays only if still worth keeping: `task` is the
    /// row the caller changed.
    fn set_status(
        &mut self,
        task: &TaskRow,
        state: TaskState,
        message: Option<&MessageRecord>,
        now_ms: i64,
        input_request: InputRequest<'_>,
    ) {
        let Some((task_id, row)) = self.rows.remove_entry(&task.record.task_id) else {
            return;
        };
        // The statement leaves `status_ms` out when it equals the caller's row's.
        let status_ms = if now_ms == task.record.status_ms {
            row.record.status_ms
        } else {
            now_ms
        };
        let row = row.with_status(state, message, status_ms, input_request);
        if worth_keeping(&row) {
            self.rows.insert(task_id, row);
        }
    }

    /// Forgets every kept row (after a rollback).
    pub fn clear(&mut self) {
        self.rows.clear();
    }
}

// ---- Kept counts ------------------------------------------------------------------------
//
// `task_counts` holds each principal's number of Tasks by state, so a listing's
// `totalSize` is one lookup. An insert and a state change count themselves in their
// transaction (`WriteTx::count`), and the transaction writes the sums once, just before
// it commits: a batch of writes for a dozen Tasks moves the same few counts again and
// again, and one upsert per count and state per commit replaced five statements per Task
// (~6% of a one-core `message:send`'s instructions). A delete (compaction only) keeps
// the count by the `task_counts_delete` trigger. Triggers did all of it before schema 7,
// but a statement that fires a trigger runs with a statement journal: every page it
// touches is copied first.

/// A transaction's changes to the kept counts: (principal, state) → Tasks more or fewer.
#[derive(Debug, Clone, Default)]
pub struct CountChanges(Vec<(String, TaskState, i64)>);

impl CountChanges {
    pub fn add(&mut self, principal: &str, state: TaskState, by: i64) {
        match self
            .0
            .iter_mut()
            .find(|(p, s, _)| *s == state && p == principal)
        {
            Some((_, _, n)) => *n += by,
            None => self.0.push((principal.to_string(), state, by)),
        }
    }

    pub fn clear(&mut self) {
        self.0.clear();
    }
}

/// Writes the transaction's count changes (each non-zero sum once) and forgets them.
pub fn write_counts(tx: &WriteTx<'_, '_>) -> Result<(), StoreError> {
    let changes = std::mem::take(&mut *tx.counts.borrow_mut());
    for (principal, state, by) in changes.0 {
        if by == 0 {
            continue;
        }
        tx.with_statement(
            "INSERT INTO task_counts (principal, state, n) VALUES (?1, ?2, ?3) \
             ON CONFLICT (principal, state) DO UPDATE SET n = n + excluded.n",
            |s| s.execute(params![principal, state.as_str(), by]),
        )?;
    }
    Ok(())
}

// ---- Listings ---------------------------------------------------------------------------

/// A position in the listing order: (status time, insertion sequence), descending.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PageCursor {
    pub status_ms: i64,
    pub seq: i64,
}

/// Which of a principal's Tasks one page lists.
#[derive(Debug, Clone, Default)]
pub struct PageQuery<'a> {
    pub context_id: Option<&'a str>,
    pub state: Option<TaskState>,
    /// Only Tasks whose status changed at or after this time (Unix ms).
    pub status_since_ms: Option<i64>,
    /// Where the previous page ended.
    pub after: Option<PageCursor>,
    /// At most this many rows (at least one).
    pub limit: u32,
}

/// One page of rows: the rows, where the next page starts (`None` on the last), and how
/// many match before pagination.
pub struct Page {
    pub rows: Vec<TaskRow>,
    pub next: Option<PageCursor>,
    pub total: u64,
}

/// The principal's Tasks that match `query`, newest status first (keyset pagination: a
/// page boundary is a position, not an offset, so inserts do not shift later pages).
pub fn page(conn: &Connection, principal: &str, query: &PageQuery<'_>) -> Result<Page, StoreError> {
    let mut clauses = vec!["principal = ?"];
    let mut params: Vec<SqlValue> = vec![principal.to_string().into()];
    if let Some(context_id) = query.context_id {
        clauses.push("context_id = ?");
        params.push(context_id.to_string().into());
    }
    if let Some(state) = query.state {
        clauses.push("state = ?");
        params.push(state.as_str().to_string().into());
    }
    if let Some(since) = query.status_since_ms {
        clauses.push("status_ms >= ?");
        params.push(since.into());
    }
    let matching = clauses.join(" AND ");
    // Without a context or time filter, the count is kept by the store (schema 4):
    // one row read instead of counting the principal's Tasks on every page.
    let maintained = query.context_id.is_none() && query.status_since_ms.is_none();
    let count_sql = if maintained {
        format!("SELECT COALESCE(SUM(n), 0) FROM task_counts WHERE {matching}")
    } else {
        format!("SELECT COUNT(*) FROM tasks WHERE {matching}")
    };
    let total: i64 = conn
        .prepare_cached(&count_sql)?
        .query_row(rusqlite::params_from_iter(params.iter()), |r| r.get(0))?;
    let mut page_clause = "";
    if let Some(after) = query.after {
        // A row value, so SQLite seeks the index to the position (an `OR` of the two
        // comparisons made it scan from the newest Task: page cost grew with depth).
        page_clause = " AND (status_ms, seq) < (?, ?)";
        params.extend([after.status_ms.into(), after.seq.into()]);
    }
    let limit = i64::from(query.limit.max(1));
    params.push((limit + 1).into());
    let sql = format!(
        "SELECT {TASK_COLUMNS} FROM tasks WHERE {matching}{page_clause} ORDER BY status_ms DESC, seq DESC LIMIT ?"
    );
    let mut stmt = conn.prepare_cached(&sql)?;
    let mut rows = stmt
        .query_map(rusqlite::params_from_iter(params.iter()), task_from_row)?
        .map(|row| row?)
        .collect::<Result<Vec<_>, StoreError>>()?;
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

/// One line of the operator's view of the store (every principal's Tasks).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskSummary {
    pub task_id: String,
    pub principal: String,
    pub context_id: String,
    pub source: String,
    pub state: TaskState,
    pub status_ms: i64,
    pub created_ms: i64,
}

/// Which Tasks the operator's view lists (every principal's unless one is named).
#[derive(Debug, Clone, Default)]
pub struct SummaryFilter {
    pub state: Option<TaskState>,
    pub principal: Option<String>,
    pub context_id: Option<String>,
    /// At most this many (1–1000).
    pub limit: u32,
}

/// The newest-status Tasks that match `filter`, whoever owns them: the operator's view
/// (the Pi UI's `/a2a tasks`, the inspection CLI), never a caller's.
pub fn summaries(
    conn: &Connection,
    filter: &SummaryFilter,
) -> Result<Vec<TaskSummary>, StoreError> {
    let mut clauses: Vec<&str> = Vec::new();
    let mut params: Vec<SqlValue> = Vec::new();
    if let Some(state) = filter.state {
        clauses.push("state = ?");
        params.push(state.as_str().to_string().into());
    }
    if let Some(principal) = &filter.principal {
        clauses.push("principal = ?");
        params.push(principal.clone().into());
    }
    if let Some(context_id) = &filter.context_id {
        clauses.push("context_id = ?");
        params.push(context_id.clone().into());
    }
    let matching = if clauses.is_empty() {
        String::new()
    } else {
        format!(" WHERE {}", clauses.join(" AND "))
    };
    params.push(i64::from(filter.limit.clamp(1, 1000)).into());
    let mut stmt = conn.prepare_cached(&format!(
        "SELECT task_id, principal, context_id, source, state, status_ms, created_ms FROM tasks{matching} \
         ORDER BY status_ms DESC, seq DESC LIMIT ?"
    ))?;
    let mut rows = stmt.query(rusqlite::params_from_iter(params.iter()))?;
    let mut found = Vec::new();
    while let Some(row) = rows.next()? {
        let task_id: String = row.get(0)?;
        let state = parse_state(&task_id, &row.get::<_, String>(4)?)?;
        found.push(TaskSummary {
            task_id,
            principal: row.get(1)?,
            context_id: row.get(2)?,
            source: row.get(3)?,
            state,
            status_ms: row.get(5)?,
            created_ms: row.get(6)?,
        });
    }
    Ok(found)
}

#[cfg(test)]
mod tests {

    /// The string literals of a Rust source (plain, byte and raw), outside `//` comments.
    fn string_literals(source: &str) -> Vec<String> {
        let mut literals = Vec::new();
        // Whole-line comments out (a literal may span lines).
        let code: String = source
            .lines()
            .filter(|l| !l.trim_start().starts_with("//"))
            .collect::<Vec<_>>()
            .join("\n");
        let chars: Vec<char> = code.chars().collect();
        let mut i = 0;
        while i < chars.len() {
            match chars[i] {
                // A char literal holding a quote: `'"'`.
                '\'' if chars.get(i + 1) == Some(&'"') && chars.get(i + 2) == Some(&'\'') => i += 3,
                'r' if matches!(chars.get(i + 1), Some('"') | Some('#'))
                    && (i == 0 || !(chars[i - 1].is_alphanumeric() || chars[i - 1] == '_')) =>
                {
                    let hashes = chars[i + 1..].iter().take_while(|c| **c == '#').count();
                    if chars.get(i + 1 + hashes) != Some(&'"') {
                        i += 1;
                        continue;
                    }
                    let close: String = std::iter::once('"')
                        .chain((0..hashes).map(|_| '#'))
                        .collect();
                    let body_start = i + 2 + hashes;
                    let body: String = chars[body_start..].iter().collect();
                    let end = body.find(&close).map_or(body.len(), |e| e);
                    literals.push(body[..end].to_string());
                    i = body_start + body[..end].chars().count() + close.chars().count();
                }
                '"' => {
                    let mut literal = String::new();
                    i += 1;
                    while i < chars.len() && chars[i] != '"' {
                        if chars[i] == '\\' {
                            i += 1;
                        }
                        if let Some(c) = chars.get(i) {
                            literal.push(*c);
                        }
                        i += 1;
                    }
                    literals.push(literal);
                    i += 1;
                }
                _ => i += 1,
            }
        }
        literals
    }

    /// What `sql` does to the tasks table, if it writes it: `insert`, `update` or `delete`
    /// (with `or …` conflict clauses and a `main.`/`temp.` schema name allowed).
    fn writes_tasks(sql: &str) -> Vec<&'static str> {
        let sql = sql.to_ascii_lowercase();
        let words: Vec<&str> = sql
            .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .filter(|w| !w.is_empty())
            .collect();
        let mut found = Vec::new();
        for (k, word) in words.iter().enumerate() {
            if *word != "tasks" {
                continue;
            }
            // The words before the table name, nearest first, past a schema name.
            let mut before = words[..k].iter().rev().copied().peekable();
            if matches!(before.peek(), Some(&"main") | Some(&"temp")) {
                before.next();
            }
            let before: Vec<&str> = before.take(3).collect();
            match before.as_slice() {
                ["into", ..] => found.push("insert"),
                ["update", ..] | [_, "or", "update", ..] => found.push("update"),
                ["from", "delete", ..] => found.push("delete"),
                _ => {}
            }
        }
        found
    }

    /// Every statement in the crate's sources and tests that writes the tasks table, as
    /// (file, what it does).
    fn statements_writing_tasks() -> Vec<(String, &'static str)> {
        let root = env!("CARGO_MANIFEST_DIR");
        let mut found = Vec::new();
        let mut dirs = vec![
            std::path::Path::new(root).join("src"),
            std::path::Path::new(root).join("tests"),
        ];
        while let Some(dir) = dirs.pop() {
            for entry in std::fs::read_dir(&dir).unwrap() {
                let path = entry.unwrap().path();
                if path.is_dir() {
                    dirs.push(path);
                    continue;
                }
                if path.extension().is_none_or(|e| e != "rs") {
                    continue;
                }
                let mut source = std::fs::read_to_string(&path).unwrap();
                let file = path.strip_prefix(root).unwrap().display().to_string();
                if file == "src/store/tasks.rs" {
                    // This file's own tests hold writes as examples for the scan.
                    let tests = source.rfind("#[cfg(test)]").unwrap();
                    source.truncate(tests);
                }
                for literal in string_literals(&source) {
                    for what in writes_tasks(&literal) {
                        found.push((file.clone(), what));
                    }
                }
            }
        }
        found.sort();
        found
    }

    #[test]
    fn the_tasks_table_writer_scan_sees_every_form_of_a_write() {
        for sql in [
            "UPDATE tasks SET state = ?1",
            "update or ignore tasks set x = 1",
            "UPDATE main.tasks SET x = 1",
            "DELETE FROM tasks WHERE seq = 1",
            "delete from temp.tasks",
            "INSERT INTO tasks (a) VALUES (1)",
            "INSERT OR REPLACE INTO tasks VALUES (1)",
            "REPLACE INTO tasks VALUES (1)",
            "INSERT INTO main.tasks VALUES (1) ON CONFLICT DO NOTHING",
        ] {
            assert_eq!(writes_tasks(sql).len(), 1, "{sql}");
        }
        for sql in [
            "SELECT * FROM tasks",
            "INSERT INTO task_counts SELECT principal FROM tasks",
            "CREATE TRIGGER t AFTER DELETE ON tasks BEGIN SELECT 1; END",
            "DELETE FROM history WHERE task_seq IN (SELECT seq FROM tasks)",
        ] {
            assert_eq!(writes_tasks(sql), Vec::<&str>::new(), "{sql}");
        }
        let source = "let a = r#\"UPDATE tasks SET x\"#; let b = '\"'; let c = \"it's \\\"DELETE FROM tasks\\\"\";";
        assert_eq!(
            string_literals(source),
            vec![
                "UPDATE tasks SET x".to_string(),
                "it's \"DELETE FROM tasks\"".to_string()
            ]
        );
    }

    #[test]
    fn a_statement_that_writes_the_tasks_table_keeps_the_writers_live_rows_true() {
        // The writer's kept rows (`LiveRows`) are true because every statement that writes
        // the tasks table keeps them so: `insert` and `set_status` update them, and
        // compaction deletes only terminal Tasks (never kept) and forgets them anyway. A
        // new statement here must do the same (and be listed), or a kept row goes stale.
        assert_eq!(
            statements_writing_tasks(),
            vec![
                ("src/store/retention.rs".to_string(), "delete"),
                ("src/store/tasks.rs".to_string(), "insert"),
                ("src/store/tasks.rs".to_string(), "update"),
                // Tests: a raw delete inside a writer job, which forgets the kept rows
                // itself; a delete and an update on a closed store (no writer).
                ("tests/retention.rs".to_string(), "delete"),
                ("tests/retention.rs".to_string(), "delete"),
                ("tests/retention.rs".to_string(), "update"),
            ],
            "a statement writes the tasks table: keep the writer's LiveRows true for it \
             (see \"The writer's live rows\" in src/store/tasks.rs), then list it here"
        );
    }
}
