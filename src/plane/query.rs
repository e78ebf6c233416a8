//! Reading Tasks: one Task (the caller's own, or any for the agent side), a principal's
//! Tasks by filter, newest status first, with keyset pagination (a page boundary is a
//! position, not an offset, so inserts do not shift later pages), and the operator's view.
//! With the two rules of what a caller may ask to read: a listing's page size
//! ([`ListFilter::page_size`]) and a subscription ([`TaskPlane::subscribable`]), so every
//! binding answers them alike.

use super::{PlaneError, TaskPlane};
use crate::field_error::FieldError;
use crate::record::{TaskRecord, TaskState};
use crate::store::tasks::{self, PageQuery};
pub use crate::store::tasks::{PageCursor, SummaryFilter, TaskSummary};
use crate::store::ReadTx;

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

/// A listing's page size when the caller names none.
const DEFAULT_PAGE_SIZE: u32 = 50;
/// The largest page a caller may ask for.
const MAX_PAGE_SIZE: u32 = 100;

impl ListFilter {
    /// The page size of a listing whose caller asked for `requested`, as it was sent (a
    /// query parameter's text, or a number's decimal digits; `None`: not sent): the
    /// default when not sent, else a whole number from 1 to 100, else refused naming
    /// `pageSize` (the refusal repeats what was sent).
    pub fn page_size(requested: Option<&str>) -> Result<u32, PlaneError> {
        let Some(value) = requested else {
            return Ok(DEFAULT_PAGE_SIZE);
        };
        value
            .parse::<u32>()
            .ok()
            .filter(|n| (1..=MAX_PAGE_SIZE).contains(n))
            .ok_or_else(|| {
                PlaneError::Invalid(FieldError::new(
                    "pageSize",
                    format!("must be between 1 and {MAX_PAGE_SIZE} inclusive, got `{value}`"),
                ))
            })
    }
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
    /// The durable state of a Task the principal owns (`None` for a foreign or missing
    /// one). `history_length`: `None` all, `Some(n)` the newest n.
    pub fn get_task(
        &self,
        principal: &str,
        task_id: &str,
        history_length: Option<u32>,
        include_artifacts: bool,
    ) -> Result<Option<TaskRecord>, PlaneError> {
        self.read(|tx| {
            tx.task_owned_by(principal, task_id)?
                .map(|row| read_full(tx, row, history_length, include_artifacts))
                .transpose()
        })
    }

    /// The durable state of any Task, whoever owns it: for the agent side (the wake queue
    /// and the agent's tools, which check turn authority first), never for callers.
    pub fn task(
        &self,
        task_id: &str,
        history_length: Option<u32>,
        include_artifacts: bool,
    ) -> Result<Option<TaskRecord>, PlaneError> {
        self.read(|tx| {
            tx.task_by_id(task_id)?
                .map(|row| read_full(tx, row, history_length, include_artifacts))
                .transpose()
        })
    }

    /// Whether the principal may subscribe to the Task's updates: it must be theirs
    /// (`TaskNotFound` otherwise) and not terminal, since a terminal Task never changes
    /// again (`NotSubscribable`). An interrupted Task stays subscribable: its stream waits
    /// for the continuation.
    pub fn subscribable(&self, principal: &str, task_id: &str) -> Result<(), PlaneError> {
        let state = self
            .get_task(principal, task_id, Some(0), false)?
            .ok_or_else(|| PlaneError::TaskNotFound(task_id.to_string()))?
            .state;
        if state.is_terminal() {
            return Err(PlaneError::NotSubscribable {
                task_id: task_id.to_string(),
                state,
            });
        }
        Ok(())
    }

    /// The principal's Tasks that match `filter`, newest status first.
    pub fn list_tasks(&self, principal: &str, filter: &ListFilter) -> Result<TaskPage, PlaneError> {
        let query = PageQuery {
            context_id: filter.context_id.as_deref(),
            state: filter.state,
            status_since_ms: filter.status_since_ms,
            after: filter.after,
            limit: filter.page_size,
        };
        self.read(|tx| {
            let page = tx.task_page(principal, &query)?;
            let tasks = page
                .rows
                .into_iter()
                .map(|row| read_full(tx, row, filter.history_length, filter.include_artifacts))
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
        self.read(|tx| Ok(tx.task_summaries(filter)?))
    }
}

pub(super) fn read_full(
    on: &dyn ReadTx,
    row: tasks::TaskRow,
    history_length: Option<u32>,
    include_artifacts: bool,
) -> Result<TaskRecord, PlaneError> {
    let mut record = row.record;
    record.history = match history_length {
        Some(0) => Vec::new(),
        limit => on.task_history(row.seq, limit)?,
    };
    if include_artifacts {
        record.artifacts = on.task_artifacts(row.seq)?;
    }
    Ok(record)
}
