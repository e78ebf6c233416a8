//! Listing a principal's Tasks: filters, newest status first, keyset pagination (a page
//! boundary is a position, not an offset, so inserts do not shift later pages).

use rusqlite::types::Value as SqlValue;

use super::rows::{self, TASK_COLUMNS};
use super::{read_full, PlaneError, TaskPlane};
use crate::record::{TaskRecord, TaskState};

/// What to list.
#[derive(Debug, Clone, Default)]
pub struct ListFilter {
    pub context_id: Option<String>,
    pub state: Option<TaskState>,
    /// Only Tasks whose status changed at or after this time (Unix ms).
    pub status_since_ms: Option<i64>,
    pub page_size: u32,
    /// Where the previous page ended.
    pub after: Option<PageCursor>,
    pub history_length: Option<u32>,
    pub include_artifacts: bool,
}

/// A position in the listing order: (status time, insertion sequence), descending.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PageCursor {
    pub status_ms: i64,
    pub seq: i64,
}

/// One page of a listing.
#[derive(Debug, Clone)]
pub struct TaskPage {
    pub tasks: Vec<TaskRecord>,
    /// Where the next page starts; `None` on the last page.
    pub next: Option<PageCursor>,
    /// Matches before pagination.
    pub total: u64,
}

impl TaskPlane {
    /// The principal's Tasks that match `filter`, newest status first.
    pub fn list_tasks(&self, principal: &str, filter: &ListFilter) -> Result<TaskPage, PlaneError> {
        let mut clauses = vec!["principal = ?"];
        let mut params: Vec<SqlValue> = vec![principal.to_string().into()];
        if let Some(context_id) = &filter.context_id {
            clauses.push("context_id = ?");
            params.push(context_id.clone().into());
        }
        if let Some(state) = filter.state {
            clauses.push("state = ?");
            params.push(state.as_str().to_string().into());
        }
        if let Some(since) = filter.status_since_ms {
            clauses.push("status_ms >= ?");
            params.push(since.into());
        }
        let matching = clauses.join(" AND ");
        let count_params = params.clone();
        let mut page_clause = String::new();
        if let Some(after) = filter.after {
            // A row value, so SQLite seeks the index to the position (an `OR` of the two
            // comparisons made it scan from the newest Task: page cost grew with depth).
            page_clause = " AND (status_ms, seq) < (?, ?)".to_string();
            params.extend([after.status_ms.into(), after.seq.into()]);
        }
        let limit = i64::from(filter.page_size.max(1));
        params.push((limit + 1).into());
        // Without a context or time filter, the count is kept by the store (schema 4):
        // one row read instead of counting the principal's Tasks on every page.
        let maintained = filter.context_id.is_none() && filter.status_since_ms.is_none();
        let count_sql = if maintained {
            format!(
                "SELECT COALESCE(SUM(n), 0) FROM task_counts WHERE {}",
                matching
            )
        } else {
            format!("SELECT COUNT(*) FROM tasks WHERE {matching}")
        };
        self.read(|conn| {
            let total: i64 = conn
                .prepare_cached(&count_sql)?
                .query_row(rusqlite::params_from_iter(count_params.iter()), |r| r.get(0))?;
            let sql = format!(
                "SELECT {TASK_COLUMNS} FROM tasks WHERE {matching}{page_clause} ORDER BY status_ms DESC, seq DESC LIMIT ?"
            );
            let mut stmt = conn.prepare_cached(&sql)?;
            let mut found = stmt
                .query_map(rusqlite::params_from_iter(params.iter()), rows::task_from_row)?
                .map(|row| Ok(row??))
                .collect::<Result<Vec<_>, PlaneError>>()?;
            let more = found.len() as i64 > limit;
            found.truncate(limit as usize);
            let next = if more {
                found.last().map(|t| PageCursor {
                    status_ms: t.record.status_ms,
                    seq: t.seq,
                })
            } else {
                None
            };
            let tasks = found
                .into_iter()
                .map(|row| read_full(conn, row, filter.history_length, filter.include_artifacts))
                .collect::<Result<Vec<_>, PlaneError>>()?;
            Ok(TaskPage {
                tasks,
                next,
                total: total as u64,
            })
        })
    }
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

/// The newest-status Tasks that match `filter`: the operator's view (the Pi UI's
/// `/a2a tasks`, the inspection CLI), never a caller's.
pub(super) fn summaries(
    conn: &rusqlite::Connection,
    filter: &SummaryFilter,
) -> Result<Vec<TaskSummary>, PlaneError> {
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
        let state: String = row.get(4)?;
        let state = TaskState::parse(&state).ok_or_else(|| {
            PlaneError::FailedPrecondition(format!(
                "task {task_id} has an unknown stored state `{state}`"
            ))
        })?;
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

impl TaskPlane {
    /// The operator's view of the newest-status Tasks (see [`summaries`]).
    pub fn recent_tasks(&self, filter: &SummaryFilter) -> Result<Vec<TaskSummary>, PlaneError> {
        self.read(|conn| summaries(conn, filter))
    }
}
