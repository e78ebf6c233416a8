//! What a call leaves out means: how many Tasks the operator's views list, and how long a
//! wait for the next wake or acceptance lasts. (A delivery's lease:
//! [`super::lease_duration`].) The Node addon only converts; these decide.

use std::time::Duration;

use super::SummaryFilter;
use crate::record::TaskState;

/// How many Tasks the resident's operator view lists when not told (`TaskPlane.recentTasks`,
/// Pi's `/a2a tasks`).
pub const RECENT_TASKS: u32 = 20;

/// How many Tasks the store inspector lists when not told (`StoreInspector.tasks`, the
/// inspection CLI).
pub const INSPECTED_TASKS: u32 = 50;

/// How long a wait for the next wake or acceptance lasts when not told, in milliseconds.
pub const WAIT_MS: u32 = 1_000;

/// The resident's operator view: the newest Tasks of every principal, optionally in one
/// `state`, at most `limit` ([`RECENT_TASKS`] when not told).
pub fn recent_tasks(state: Option<TaskState>, limit: Option<u32>) -> SummaryFilter {
    SummaryFilter {
        state,
        limit: limit.unwrap_or(RECENT_TASKS),
        ..SummaryFilter::default()
    }
}

/// The store inspector's listing: at most `limit` ([`INSPECTED_TASKS`] when not told).
pub fn inspected_tasks(
    state: Option<TaskState>,
    principal: Option<String>,
    context_id: Option<String>,
    limit: Option<u32>,
) -> SummaryFilter {
    SummaryFilter {
        state,
        principal,
        context_id,
        limit: limit.unwrap_or(INSPECTED_TASKS),
    }
}

/// How long a wait for the next wake or acceptance lasts: `timeout_ms`, else [`WAIT_MS`];
/// zero answers at once.
pub fn wait(timeout_ms: Option<u32>) -> Duration {
    Duration::from_millis(u64::from(timeout_ms.unwrap_or(WAIT_MS)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_operator_views_list_20_recent_or_50_inspected_tasks_unless_told() {
        assert_eq!(recent_tasks(None, None).limit, 20);
        assert_eq!(recent_tasks(None, Some(3)).limit, 3);
        let working = recent_tasks(Some(TaskState::Working), None);
        assert_eq!(working.state, Some(TaskState::Working));
        assert_eq!((working.principal, working.context_id), (None, None));
        assert_eq!(inspected_tasks(None, None, None, None).limit, 50);
        let told = inspected_tasks(None, Some("alice".into()), Some("c".into()), Some(7));
        assert_eq!(told.limit, 7);
        assert_eq!(told.principal.as_deref(), Some("alice"));
        assert_eq!(told.context_id.as_deref(), Some("c"));
    }

    #[test]
    fn a_wait_for_the_next_wake_or_acceptance_lasts_a_second_unless_told() {
        assert_eq!(wait(None), Duration::from_secs(1));
        assert_eq!(wait(Some(250)), Duration::from_millis(250));
        assert_eq!(wait(Some(0)), Duration::ZERO);
    }
}
