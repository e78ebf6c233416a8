//! Listings of Tasks: a principal's pages, newest status first ([`page`], keyset
//! pagination), and the operator's view of every principal's Tasks ([`summaries`]).

use rusqlite::types::Value as SqlValue;
use rusqlite::Connection;

use super::{parse_state, task_from_row, TaskRow, TASK_COLUMNS};
use crate::record::TaskState;
use crate::store::StoreError;

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
