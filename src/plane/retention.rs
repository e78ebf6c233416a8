//! Startup recovery and compaction of operational records.
//!
//! Acceptance is one transaction, so a claim is never committed without its Task: there is
//! no half-accepted claim to finish. What recovery does find is a claim whose Task record
//! is gone (a store edited or restored by hand): that is a permanent failure, so the claim
//! is QUARANTINED with unhealthy evidence instead of being offered to the agent.
//!
//! Compaction keeps, and only keeps:
//! - every non-terminal Task, and a terminal Task for [`RETENTION_MS`] after it settled,
//!   with its history and artifacts;
//! - claims of retained Tasks (dedupe lives at least as long as the Task), else 30 days;
//!   once a Task and its claim are gone, the same identity is new work;
//! - evidence of retained Tasks, else 30 days;
//! - reply anchors and outbound deliveries of non-terminal Tasks, else 30 days since last
//!   use; a delivery in `sending` is never pruned;
//! - a conversation's context for 30 days after its last event, and always while a
//!   non-terminal Task references it;
//! - a Task's Pi session folder (`sessions/<taskId>/`) exactly as long as the Task: it is
//!   removed right after the Task is compacted, and a folder of no Task at all (an orphan)
//!   once it has not changed for the same window.

use rusqlite::{params, Connection};
use serde_json::json;

use super::PlaneError;
use crate::clock::DAY_MS;
use crate::record::{ClaimState, DeliveryState, EvidenceKind};
use crate::store::evidence::{self, NewEvidence};
use crate::store::{claims, tasks};

/// The retention floor for operational records: 30 days.
pub const RETENTION_MS: i64 = 30 * DAY_MS;

/// Counts of what startup recovery and compaction removed or quarantined.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CompactionReport {
    pub quarantined_claims: usize,
    pub tasks: usize,
    pub claims: usize,
    pub evidence: usize,
    pub reply_anchors: usize,
    pub deliveries: usize,
    pub contexts: usize,
    /// Task session folders removed (with their Task, or orphaned past the window).
    pub sessions: usize,
}

/// Quarantines claims whose Task is missing; returns how many. Only the claims of Tasks
/// removed since the last recovery are looked at (the store notes each removed Task), so
/// this costs what was removed, not what is stored.
pub(super) fn quarantine_orphaned_claims(
    conn: &Connection,
    now_ms: i64,
) -> Result<usize, PlaneError> {
    let orphans: Vec<(String, String)> = conn
        .prepare(&format!(
            "SELECT c.activation_id, c.task_id FROM removed_tasks r \
             JOIN claims c ON c.task_id = r.task_id \
             WHERE c.state NOT IN {} \
             AND NOT EXISTS (SELECT 1 FROM tasks t WHERE t.task_id = c.task_id)",
            claims::states_sql(ClaimState::is_given_up)
        ))?
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?
        .collect::<Result<_, _>>()?;
    conn.execute("DELETE FROM removed_tasks", [])?;
    for (activation_id, task_id) in &orphans {
        let detail = format!("task {task_id} of this claim is missing from the store");
        claims::push_state(
            conn,
            activation_id,
            ClaimState::Quarantined,
            Some(&detail),
            now_ms,
        )?;
        evidence::insert(
            conn,
            &NewEvidence {
                kind: &EvidenceKind::ClaimQuarantined,
                healthy: false,
                task_id: Some(task_id),
                activation_id: Some(activation_id),
                locator: &json!({ "activationId": activation_id }),
                content: &json!({ "kind": EvidenceKind::ClaimQuarantined.as_str(), "activationId": activation_id, "taskId": task_id, "reason": detail, "at": now_ms }),
                now_ms,
            },
        )?;
    }
    Ok(orphans.len())
}

/// Removes what the retention rules allow, as of `now_ms`. Returns the ids of the Tasks
/// it removed, whose session folders go once this transaction has committed.
pub(super) fn compact(
    conn: &Connection,
    now_ms: i64,
    retention_ms: i64,
) -> Result<(CompactionReport, Vec<String>), PlaneError> {
    let cutoff = now_ms - retention_ms;
    let mut report = CompactionReport::default();
    let terminal = tasks::terminal_states_sql();
    let removed: Vec<String> = conn
        .prepare(&format!(
            "SELECT task_id FROM tasks WHERE state IN {terminal} AND status_ms < ?1"
        ))?
        .query_map([cutoff], |r| r.get(0))?
        .collect::<Result<_, _>>()?;

    // Terminal Tasks settled before the window, with their history and artifacts.
    let old_tasks = format!("SELECT seq FROM tasks WHERE state IN {terminal} AND status_ms < ?1");
    conn.execute(
        &format!("DELETE FROM history WHERE task_seq IN ({old_tasks})"),
        [cutoff],
    )?;
    conn.execute(
        &format!("DELETE FROM artifacts WHERE task_seq IN ({old_tasks})"),
        [cutoff],
    )?;
    report.tasks = conn.execute(
        &format!("DELETE FROM tasks WHERE state IN {terminal} AND status_ms < ?1"),
        [cutoff],
    )?;

    // Claims: kept while their Task is retained, else for the window.
    let old_claims = "SELECT activation_id FROM claims c WHERE claimed_ms < ?1 \
         AND (task_id IS NULL OR NOT EXISTS (SELECT 1 FROM tasks t WHERE t.task_id = c.task_id))";
    conn.execute(
        &format!("DELETE FROM claim_states WHERE activation_id IN ({old_claims})"),
        [cutoff],
    )?;
    report.claims = conn.execute(
        "DELETE FROM claims WHERE claimed_ms < ?1 \
         AND (task_id IS NULL OR NOT EXISTS (SELECT 1 FROM tasks t WHERE t.task_id = claims.task_id))",
        [cutoff],
    )?;

    report.evidence = conn.execute(
        "DELETE FROM evidence WHERE recorded_ms < ?1 \
         AND (task_id IS NULL OR NOT EXISTS (SELECT 1 FROM tasks t WHERE t.task_id = evidence.task_id))",
        [cutoff],
    )?;

    let live = tasks::live_states_sql();
    let live_task = format!("SELECT task_id FROM tasks WHERE state IN {live}");
    report.reply_anchors = conn.execute(
        &format!(
            "DELETE FROM reply_anchors WHERE recorded_ms < ?1 AND task_id NOT IN ({live_task})"
        ),
        [cutoff],
    )?;
    report.deliveries = conn.execute(
        &format!(
            "DELETE FROM deliveries WHERE updated_ms < ?1 AND state <> '{}' \
             AND (task_id IS NULL OR task_id NOT IN ({live_task}))",
            DeliveryState::Sending.as_str()
        ),
        [cutoff],
    )?;
    report.contexts = conn.execute(
        &format!(
            "DELETE FROM contexts WHERE last_event_ms < ?1 \
             AND context_id NOT IN (SELECT context_id FROM tasks WHERE state IN {live})"
        ),
        params![cutoff],
    )?;
    Ok((report, removed))
}

/// Removes the session folders of `removed` Tasks, and orphaned ones (no Task in the store,
/// unchanged since before `cutoff_ms`) under `sessions`; returns how many. Only direct
/// children of `sessions` whose names are identifiers are touched. A folder that cannot be
/// removed is logged and left for the next compaction: retention never fails an open.
pub(super) fn remove_session_folders(
    sessions: &std::path::Path,
    removed: &[String],
    cutoff_ms: i64,
    has_task: &dyn Fn(&str) -> Result<bool, PlaneError>,
) -> Result<usize, PlaneError> {
    let entries = match std::fs::read_dir(sessions) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(0),
        Err(e) => {
            crate::log::warn(
                "a2a_session_retention_failed",
                json!({ "path": sessions.display().to_string(), "error": e.to_string() }),
            );
            return Ok(0);
        }
    };
    let mut count = 0;
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().to_string();
        let Ok(meta) = entry.metadata() else { continue };
        if !meta.is_dir() || crate::ids::check_identifier("taskId", &name).is_err() {
            continue;
        }
        let doomed = if removed.contains(&name) {
            true
        } else {
            let changed_ms = meta
                .modified()
                .ok()
                .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                .map_or(i64::MAX, |d| d.as_millis() as i64);
            changed_ms < cutoff_ms && !has_task(&name)?
        };
        if !doomed {
            continue;
        }
        match std::fs::remove_dir_all(entry.path()) {
            Ok(()) => count += 1,
            Err(e) => crate::log::warn(
                "a2a_session_retention_failed",
                json!({ "path": entry.path().display().to_string(), "error": e.to_string() }),
            ),
        }
    }
    Ok(count)
}
