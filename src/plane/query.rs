//! Listing a principal's Tasks: filters, newest status first, keyset pagination (a page
//! boundary is a position, not an offset, so inserts do not shift later pages).

use super::{read_full, PlaneError, TaskPlane};
use crate::record::{TaskRecord, TaskState};
use crate::store::tasks::{self, PageQuery};
pub use crate::store::tasks::{PageCursor, SummaryFilter, TaskSummary};

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
        let query = PageQuery {
            context_id: filter.context_id.as_deref(),
            state: filter.state,
            status_since_ms: filter.status_since_ms,
            after: filter.after,
            limit: filter.page_size,
        };
        self.read(|conn| {
            let page = tasks::page(conn, principal, &query)?;
            let tasks = page
                .rows
                .into_iter()
                .map(|row| read_full(conn, row, filter.history_length, filter.include_artifacts))
                .collect::<Result<Vec<_>, PlaneError>>()?;
            Ok(TaskPage {
                tasks,
                next: page.next,
                total: page.total,
            })
        })
    }

    /// The operator's view of the newest-status Tasks, whoever owns them (see
    /// [`tasks::summaries`]).
    pub fn recent_tasks(&self, filter: &SummaryFilter) -> Result<Vec<TaskSummary>, PlaneError> {
        self.read(|conn| Ok(tasks::summaries(conn, filter)?))
    }
}
