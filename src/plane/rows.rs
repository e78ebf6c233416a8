//! Row-level reads and writes shared by the plane's operations. Each function is one
//! statement (or a tight group); the rules that combine them live in the callers.

use rusqlite::{params, Connection, OptionalExtension, Row};
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::record::{
    ArtifactRecord, ClaimState, Continuation, EvidenceKind, MessageRecord, TaskRecord, TaskState,
};
use crate::store::StoreError;

/// `sha256:<hex>` of `bytes`: the content address of payloads and evidence.
pub fn content_address(bytes: &[u8]) -> String {
    let digest = Sha256::digest(bytes);
    let mut out = String::with_capacity(7 + 64);
    out.push_str("sha256:");
    for byte in digest {
        out.push_str(&format!("{byte:02x}"));
    }
    out
}

/// The columns of a task row, without history or artifacts.
pub struct TaskRow {
    pub seq: i64,
    pub record: TaskRecord,
    pub input_request_seq: i64,
    pub history_len: i64,
    pub artifact_len: i64,
    /// The MCP elicitation schema of the open input request, if the agent gave one.
    pub input_schema: Option<serde_json::Value>,
}

pub const TASK_COLUMNS: &str = "seq, task_id, principal, context_id, source, continuation, state, status_message, \
     status_ms, created_ms, input_request_seq, input_request_open, extensions, history_len, artifact_len, input_schema";

pub fn task_from_row(row: &Row<'_>) -> rusqlite::Result<Result<TaskRow, StoreError>> {
    let continuation: String = row.get(5)?;
    let state: String = row.get(6)?;
    let status_message: Option<String> = row.get(7)?;
    let extensions: String = row.get(12)?;
    let input_schema: Option<String> = row.get(15)?;
    let task_id: String = row.get(1)?;
    let decoded = (|| {
        let continuation = Continuation::parse(&continuation).ok_or_else(|| {
            StoreError::Corrupt(format!(
                "task {task_id}: unknown continuation `{continuation}`"
            ))
        })?;
        let state = TaskState::parse(&state).ok_or_else(|| {
            StoreError::Corrupt(format!("task {task_id}: unknown state `{state}`"))
        })?;
        let status_message = status_message
            .map(|m| serde_json::from_str::<MessageRecord>(&m))
            .transpose()?;
        let extensions: Vec<String> = serde_json::from_str(&extensions)?;
        let input_schema = input_schema.map(|s| serde_json::from_str(&s)).transpose()?;
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
            history_len: row.get(13)?,
            artifact_len: row.get(14)?,
            input_schema,
        }),
    })
}

/// The task row with `task_id`, whoever owns it.
pub fn task_by_id(conn: &Connection, task_id: &str) -> Result<Option<TaskRow>, StoreError> {
    let sql = format!("SELECT {TASK_COLUMNS} FROM tasks WHERE task_id = ?1");
    conn.prepare_cached(&sql)?
        .query_row([task_id], task_from_row)
        .optional()?
        .transpose()
}

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

/// Every known state as an SQL list.
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

/// The claim states `keep` selects, as an SQL list.
pub fn claim_states_sql(keep: impl Fn(ClaimState) -> bool) -> String {
    sql_list(
        ClaimState::ALL
            .into_iter()
            .filter(|s| keep(*s))
            .map(ClaimState::as_str),
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

/// `('a', 'b')`: store names as an SQL list for `IN`. The names are the enums' own
/// (never caller text), so quoting them is safe.
fn sql_list<'a>(names: impl Iterator<Item = &'a str>) -> String {
    let names: Vec<String> = names.map(|n| format!("'{n}'")).collect();
    format!("({})", names.join(", "))
}

/// The task row with `task_id` if `principal` owns it. A foreign Task is `None`, exactly
/// like a missing one.
pub fn owned_task(
    conn: &Connection,
    principal: &str,
    task_id: &str,
) -> Result<Option<TaskRow>, StoreError> {
    // The principal is part of the lookup: a foreign Task's row is never read or decoded,
    // so it costs what a missing one does (no timing difference to probe).
    let sql = format!("SELECT {TASK_COLUMNS} FROM tasks WHERE task_id = ?1 AND principal = ?2");
    conn.prepare_cached(&sql)?
        .query_row([task_id, principal], task_from_row)
        .optional()?
        .transpose()
}

/// The newest `limit` messages of a task (all when `None`), oldest first.
pub fn history(
    conn: &Connection,
    task_seq: i64,
    limit: Option<u32>,
) -> Result<Vec<MessageRecord>, StoreError> {
    let limit = limit.map(i64::from).unwrap_or(-1);
    let mut stmt = conn
        .prepare_cached("SELECT body FROM history WHERE task_seq = ?1 ORDER BY n DESC LIMIT ?2")?;
    let mut out = stmt
        .query_map(params![task_seq, limit], |r| r.get::<_, String>(0))?
        .map(|body| Ok(serde_json::from_str::<MessageRecord>(&body?)?))
        .collect::<Result<Vec<_>, StoreError>>()?;
    out.reverse();
    Ok(out)
}

pub fn artifacts(conn: &Connection, task_seq: i64) -> Result<Vec<ArtifactRecord>, StoreError> {
    let mut stmt =
        conn.prepare_cached("SELECT body FROM artifacts WHERE task_seq = ?1 ORDER BY n")?;
    let out = stmt
        .query_map([task_seq], |r| r.get::<_, String>(0))?
        .map(|body| Ok(serde_json::from_str::<ArtifactRecord>(&body?)?))
        .collect::<Result<Vec<_>, StoreError>>()?;
    Ok(out)
}

pub fn append_history(
    conn: &Connection,
    task: &TaskRow,
    message: &MessageRecord,
) -> Result<(), StoreError> {
    conn.prepare_cached("INSERT INTO history (task_seq, n, body) VALUES (?1, ?2, ?3)")?
        .execute(params![
            task.seq,
            task.history_len,
            serde_json::to_string(message)?
        ])?;
    conn.prepare_cached("UPDATE tasks SET history_len = history_len + 1 WHERE seq = ?1")?
        .execute([task.seq])?;
    Ok(())
}

pub fn append_artifact(
    conn: &Connection,
    task: &TaskRow,
    artifact: &ArtifactRecord,
) -> Result<(), StoreError> {
    conn.prepare_cached(
        "INSERT INTO artifacts (task_seq, n, artifact_id, body) VALUES (?1, ?2, ?3, ?4)",
    )?
    .execute(params![
        task.seq,
        task.artifact_len,
        artifact.artifact_id,
        serde_json::to_string(artifact)?
    ])?;
    conn.prepare_cached("UPDATE tasks SET artifact_len = artifact_len + 1 WHERE seq = ?1")?
        .execute([task.seq])?;
    Ok(())
}

/// Sets a task's status. `input_request` is `Some(open)` to change the input-request
/// flag: `Some(true)` opens a new request (its sequence number moves on), `Some(false)`
/// marks the open one answered.
pub fn set_status(
    conn: &Connection,
    task_seq: i64,
    state: TaskState,
    message: Option<&MessageRecord>,
    now_ms: i64,
    input_request: Option<bool>,
) -> Result<(), StoreError> {
    let message = message.map(serde_json::to_string).transpose()?;
    let (open, bump) = match input_request {
        Some(true) => (Some(1), 1),
        Some(false) => (Some(0), 0),
        None => (None, 0),
    };
    conn.prepare_cached(
        "UPDATE tasks SET state = ?2, status_message = ?3, status_ms = ?4, \
         input_request_open = COALESCE(?5, input_request_open), input_request_seq = input_request_seq + ?6, \
         input_schema = CASE WHEN ?5 = 0 THEN NULL ELSE input_schema END \
         WHERE seq = ?1",
    )?
    .execute(params![task_seq, state.as_str(), message, now_ms, open, bump])?;
    Ok(())
}

/// Records content-addressed evidence; the same content twice is one record.
#[allow(clippy::too_many_arguments)]
pub fn insert_evidence(
    conn: &Connection,
    kind: &EvidenceKind,
    healthy: bool,
    task_id: Option<&str>,
    activation_id: Option<&str>,
    locator: &Value,
    content: &Value,
    now_ms: i64,
) -> Result<String, StoreError> {
    let content_text = serde_json::to_string(content)?;
    let id = content_address(content_text.as_bytes());
    conn.prepare_cached(
        "INSERT OR IGNORE INTO evidence (evidence_id, kind, healthy, task_id, activation_id, locator, content, recorded_ms) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
    )?
    .execute(params![
        id,
        kind.as_str(),
        healthy as i64,
        task_id,
        activation_id,
        serde_json::to_string(locator)?,
        content_text,
        now_ms
    ])?;
    Ok(id)
}

/// Appends a state record to a claim (the claim's current state is unchanged).
pub fn append_claim_record(
    conn: &Connection,
    activation_id: &str,
    kind: ClaimState,
    count: Option<i64>,
    detail: Option<&str>,
    now_ms: i64,
) -> Result<(), StoreError> {
    conn.prepare_cached(
        "INSERT INTO claim_states (activation_id, n, kind, count, at_ms, detail) \
         VALUES (?1, (SELECT COUNT(*) FROM claim_states WHERE activation_id = ?1), ?2, ?3, ?4, ?5)",
    )?
    .execute(params![activation_id, kind.as_str(), count, now_ms, detail])?;
    Ok(())
}

/// Appends a state record to a claim and makes it the claim's current state.
pub fn push_claim_state(
    conn: &Connection,
    activation_id: &str,
    kind: ClaimState,
    count: Option<i64>,
    detail: Option<&str>,
    now_ms: i64,
) -> Result<(), StoreError> {
    append_claim_record(conn, activation_id, kind, count, detail, now_ms)?;
    conn.prepare_cached("UPDATE claims SET state = ?2 WHERE activation_id = ?1")?
        .execute(params![activation_id, kind.as_str()])?;
    Ok(())
}

/// Updates a context's last-event time (keeps its mapping alive for another window).
pub fn touch_context(conn: &Connection, context_id: &str, now_ms: i64) -> Result<(), StoreError> {
    conn.prepare_cached(
        "UPDATE contexts SET last_event_ms = MAX(last_event_ms, ?2) WHERE context_id = ?1",
    )?
    .execute(params![context_id, now_ms])?;
    Ok(())
}
