//! Recovery and compaction of operational records: at startup, and while the plane is
//! open whenever [`RETENTION_EVERY_MS`] has passed since the last run
//! ([`TaskPlane::compact_if_due`]; the resident asks every minute) or when the operator
//! asks ([`TaskPlane::compact`], on SIGHUP).
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

use std::sync::atomic::Ordering;

use serde_json::json;

use super::{PlaneError, TaskPlane, SESSIONS_DIR};
use crate::clock::DAY_MS;
use crate::record::{ClaimState, EvidenceKind};
use crate::store::evidence::{self, NewEvidence};
use crate::store::WriteTx;

/// The retention floor for operational records: 30 days.
pub const RETENTION_MS: i64 = 30 * DAY_MS;

/// How often retention runs while the plane is open: hourly.
pub const RETENTION_EVERY_MS: i64 = 60 * 60 * 1000;

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

impl CompactionReport {
    /// The counts as a log line's fields.
    pub fn counts(&self) -> serde_json::Value {
        json!({
            "quarantinedClaims": self.quarantined_claims,
            "tasks": self.tasks,
            "claims": self.claims,
            "evidence": self.evidence,
            "replyAnchors": self.reply_anchors,
            "deliveries": self.deliveries,
            "contexts": self.contexts,
            "sessions": self.sessions,
        })
    }
}

impl TaskPlane {
    pub(super) fn recover_and_compact(&self) -> Result<CompactionReport, PlaneError> {
        let now = self.now();
        self.compacted_ms.store(now, Ordering::SeqCst);
        let retention_ms = self.retention_ms;
        let (mut report, removed) = self.write(move |tx| {
            let quarantined = quarantine_orphaned_claims(tx, now)?;
            let (mut report, removed) = compact(tx, now, retention_ms)?;
            report.quarantined_claims = quarantined;
            Ok((report, removed))
        })?;
        // After the commit: a session folder never outlives its Task's record, but a crash
        // before this only leaves an orphan for the next compaction.
        report.sessions = remove_session_folders(
            &self.root().join(SESSIONS_DIR),
            &removed,
            now - retention_ms,
            &|task_id| Ok(self.task(task_id, Some(0), false)?.is_some()),
        )?;
        Ok(report)
    }

    /// Runs recovery and compaction now (startup does this already).
    pub fn compact(&self) -> Result<CompactionReport, PlaneError> {
        let report = self.recover_and_compact()?;
        if report != CompactionReport::default() {
            crate::log::event("a2a_retention_compacted", json!(report.counts()));
        }
        Ok(report)
    }

    /// The periodic retention rule: compacts when [`RETENTION_EVERY_MS`] has passed on the
    /// plane's clock since the last run (at open, or by [`TaskPlane::compact`]); `None`
    /// when it is not due yet.
    pub fn compact_if_due(&self) -> Result<Option<CompactionReport>, PlaneError> {
        let last = self.compacted_ms.load(Ordering::SeqCst);
        if self.now() - last < RETENTION_EVERY_MS {
            return Ok(None);
        }
        self.compact().map(Some)
    }
}

/// Quarantines claims whose Task is missing; returns how many. Only the claims of Tasks
/// removed since the last recovery are looked at (the store notes each removed Task), so
/// this costs what was removed, not what is stored.
pub(super) fn quarantine_orphaned_claims(
    tx: &dyn WriteTx,
    now_ms: i64,
) -> Result<usize, PlaneError> {
    let orphans = tx.take_orphaned_claims()?;
    for (activation_id, task_id) in &orphans {
        let detail = format!("task {task_id} of this claim is missing from the store");
        tx.push_claim_state(
            activation_id,
            ClaimState::Quarantined,
            Some(&detail),
            now_ms,
        )?;
        evidence::insert(
            tx,
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

/// Removes what the retention rules allow, as of `now_ms` (see the module docs, in the
/// same order). Returns the ids of the Tasks it removed, whose session folders go once
/// this transaction has committed.
pub(super) fn compact(
    tx: &dyn WriteTx,
    now_ms: i64,
    retention_ms: i64,
) -> Result<(CompactionReport, Vec<String>), PlaneError> {
    let cutoff = now_ms - retention_ms;
    let removed = tx.delete_settled_tasks(cutoff)?;
    let report = CompactionReport {
        quarantined_claims: 0,
        tasks: removed.len(),
        claims: tx.delete_unused_claims(cutoff)?,
        evidence: tx.delete_unused_evidence(cutoff)?,
        reply_anchors: tx.delete_unused_anchors(cutoff)?,
        deliveries: tx.delete_unused_deliveries(cutoff)?,
        contexts: tx.delete_unused_contexts(cutoff)?,
        sessions: 0,
    };
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
