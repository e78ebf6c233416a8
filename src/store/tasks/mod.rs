//! The `tasks` table with its `history` and `artifacts`: one row per Task, found by id
//! (scoped to its principal for callers), listed newest status first, and the SQL forms
//! of the state sets the rules define on [`TaskState`] and [`TaskRecord`]. Beside it:
//! the writer's kept rows of live Tasks ([`LiveRows`], in `live_rows.rs`), the kept counts
//! by principal and state (`counts.rs`) and the listings (`list.rs`).

mod counts;
mod list;
mod live_rows;
mod lookup;

use std::borrow::Cow;
use std::sync::LazyLock;

use rusqlite::{params, OptionalExtension, Row};
use serde_json::Value;

pub use counts::{write_counts, CountChanges};
pub use list::{page, summaries, Page, PageCursor, PageQuery, SummaryFilter, TaskSummary};
pub use live_rows::LiveRows;
pub use lookup::{earlier_in_context, first_message, ids_matching};

use super::writer::{SqliteWriteTx, Statements};
use super::{sql_list, StoreError};
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
        rows.borrow_mut().keep(Cow::Borrowed(row), 0);
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
pub fn insert(tx: &SqliteWriteTx<'_, '_>, task: &NewTask<'_>) -> Result<i64, StoreError> {
    let extensions = serde_json::to_string(task.extensions)?;
    // No `RETURNING seq`: SQLite runs a RETURNING clause as a trigger, and a statement with
    // a trigger copies every page it touches into a statement journal first. The row kept
    // below (`LiveRows`) must stay what this statement stores.
    let written = tx.with_statement(
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
    let row = TaskRow {
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
    };
    tx.live_rows().borrow_mut().keep(Cow::Owned(row), written);
    Ok(seq)
}

/// The first message of a Task just inserted (position 0 of its history).
pub fn insert_first_message(
    tx: &SqliteWriteTx<'_, '_>,
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
    tx: &SqliteWriteTx<'_, '_>,
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
pub fn next_artifact_n(tx: &SqliteWriteTx<'_, '_>, task: &TaskRow) -> Result<i64, StoreError> {
    tx.with_statement(
        "SELECT COALESCE(MAX(n) + 1, 0) FROM artifacts WHERE task_seq = ?1",
        |s| s.query_row([task.seq], |r| r.get(0)),
    )
}

pub fn append_artifact(
    tx: &SqliteWriteTx<'_, '_>,
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
    tx: &SqliteWriteTx<'_, '_>,
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
    let written = tx.with_statement(sql, |s| {
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
        .set_status(task, state, message, now_ms, input_request, written);
    if task.record.state != state {
        tx.count(&task.record.principal, task.record.state, -1);
        tx.count(&task.record.principal, state, 1);
    }
    Ok(())
}
