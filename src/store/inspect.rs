//! Statements for looking inside a store without changing it (the operator's inspection
//! CLI, on a read-only connection): counts, the oldest live Task, and the store's own
//! invariants. Everything here crosses principals: never expose it to callers.

use rusqlite::types::Value as SqlValue;
use rusqlite::{Connection, OptionalExtension};

use super::tasks::{
    interrupted_states_sql, known_states_sql, live_states_sql, terminal_states_sql,
};
use super::{claims, StoreError};
use crate::record::{ClaimState, TaskState};

/// Runs `read` inside one read transaction of `conn`, so every statement sees the same
/// snapshot.
pub fn snapshot<R, E: From<StoreError>>(
    conn: &Connection,
    read: impl FnOnce(&Connection) -> Result<R, E>,
) -> Result<R, E> {
    let tx = conn
        .unchecked_transaction()
        .map_err(|e| E::from(e.into()))?;
    let result = read(&tx)?;
    tx.finish().map_err(|e| E::from(e.into()))?;
    Ok(result)
}

/// How many Tasks are in each stored state (`None`: a state this build does not know).
pub fn tasks_by_state(conn: &Connection) -> Result<Vec<(Option<TaskState>, u64)>, StoreError> {
    let mut stmt = conn.prepare("SELECT state, COUNT(*) FROM tasks GROUP BY state")?;
    let mut rows = stmt.query([])?;
    let mut counts = Vec::new();
    while let Some(row) = rows.next()? {
        let state: String = row.get(0)?;
        let count: i64 = row.get(1)?;
        counts.push((TaskState::parse(&state), count as u64));
    }
    Ok(counts)
}

/// How many Tasks, claims and contexts the store holds.
pub fn record_counts(conn: &Connection) -> Result<(u64, u64, u64), StoreError> {
    let count = |table: &str| -> Result<u64, StoreError> {
        Ok(
            conn.query_row(&format!("SELECT COUNT(*) FROM {table}"), [], |r| {
                r.get::<_, i64>(0)
            })? as u64,
        )
    };
    Ok((count("tasks")?, count("claims")?, count("contexts")?))
}

/// The oldest Task that is not terminal: (task id, created at, Unix ms).
pub fn oldest_live(conn: &Connection) -> Result<Option<(String, i64)>, StoreError> {
    Ok(conn
        .query_row(
            &format!(
                "SELECT task_id, created_ms FROM tasks WHERE state IN {} ORDER BY created_ms, seq LIMIT 1",
                live_states_sql()
            ),
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .optional()?)
}

/// SQLite's `integrity_check` and the store's own invariants; each problem found is one
/// sentence (none: the store is sound).
pub fn problems(conn: &Connection) -> Result<Vec<String>, StoreError> {
    let mut problems = Vec::new();
    {
        let mut stmt = conn.prepare("PRAGMA integrity_check")?;
        let mut rows = stmt.query([])?;
        while let Some(row) = rows.next()? {
            let line: String = row.get(0)?;
            if line != "ok" {
                problems.push(format!("SQLite integrity_check: {line}"));
            }
        }
    }
    let invariants: [(String, &str); 7] = [
        (
            "SELECT 'principal ' || principal || ', state ' || state FROM (SELECT principal, state, COUNT(*) AS n FROM tasks GROUP BY principal, state) t \
             WHERE n IS NOT (SELECT c.n FROM task_counts c WHERE c.principal = t.principal AND c.state = t.state) \
             UNION SELECT 'principal ' || principal || ', state ' || state FROM task_counts c WHERE n != 0 AND NOT EXISTS \
             (SELECT 1 FROM tasks t WHERE t.principal = c.principal AND t.state = c.state)".into(),
            "has a kept Task count (GET /tasks totalSize) that differs from its Tasks",
        ),
        (
            format!("SELECT task_id FROM tasks WHERE state NOT IN {}", known_states_sql()),
            "has an unknown state",
        ),
        (
            "SELECT t.task_id FROM tasks t WHERE NOT EXISTS (SELECT 1 FROM claims c WHERE c.task_id = t.task_id)".into(),
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
            "SELECT DISTINCT h.task_seq FROM history h WHERE NOT EXISTS (SELECT 1 FROM tasks t WHERE t.seq = h.task_seq) \
             UNION SELECT DISTINCT a.task_seq FROM artifacts a WHERE NOT EXISTS (SELECT 1 FROM tasks t WHERE t.seq = a.task_seq)".into(),
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
    // A store not yet migrated to schema 4 (opened read-only here) keeps no counts.
    let keeps_counts: bool = conn.query_row(
        "SELECT EXISTS (SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'task_counts')",
        [],
        |r| r.get(0),
    )?;
    for (sql, what) in invariants {
        if !keeps_counts && sql.contains("task_counts") {
            continue;
        }
        let mut stmt = conn.prepare(&sql)?;
        let mut rows = stmt.query([])?;
        while let Some(row) = rows.next()? {
            let id = match row.get::<_, SqlValue>(0)? {
                SqlValue::Text(t) => t,
                SqlValue::Integer(n) => n.to_string(),
                other => format!("{other:?}"),
            };
            problems.push(format!("{id} {what}"));
        }
    }
    Ok(problems)
}
