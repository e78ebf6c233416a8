//! The statements of startup recovery and compaction; the rules they carry out (what is
//! kept, and for how long) are written down in `plane::retention`, which calls these in
//! one writer transaction. Each `delete_*` removes records last used before `cutoff_ms`
//! that no retained Task still needs, and returns how many it removed.

use rusqlite::{params, Connection};

use super::claims;
use super::tasks::{live_states_sql, terminal_states_sql};
use super::StoreError;
use crate::record::{ClaimState, DeliveryState};

/// The claims of Tasks removed since the last call whose Task is still missing and that
/// are not given up yet, as (activation id, task id); the removals are then forgotten.
/// The store notes each removed Task (schema 5), so this costs what was removed, not
/// what is stored.
pub fn take_orphaned_claims(conn: &Connection) -> Result<Vec<(String, String)>, StoreError> {
    let orphans: Vec<(String, String)> = conn
        .prepare(&format!(
            // CROSS JOIN keeps removed_tasks the outer loop: with a plain JOIN the planner
            // scanned every claim and probed removed_tasks for each (100 ms at 100k
            // claims, with nothing removed), which made opening grow with the store.
            "SELECT c.activation_id, c.task_id FROM removed_tasks r \
             CROSS JOIN claims c ON c.task_id = r.task_id \
             WHERE c.state NOT IN {} \
             AND NOT EXISTS (SELECT 1 FROM tasks t WHERE t.task_id = c.task_id)",
            claims::states_sql(ClaimState::is_given_up)
        ))?
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?
        .collect::<Result<_, _>>()?;
    conn.execute("DELETE FROM removed_tasks", [])?;
    Ok(orphans)
}

/// Deletes the terminal Tasks whose status last changed before `cutoff_ms`, with their
/// history and artifacts; returns their ids.
pub fn delete_settled_tasks(conn: &Connection, cutoff_ms: i64) -> Result<Vec<String>, StoreError> {
    let terminal = terminal_states_sql();
    let removed: Vec<String> = conn
        .prepare(&format!(
            "SELECT task_id FROM tasks WHERE state IN {terminal} AND status_ms < ?1"
        ))?
        .query_map([cutoff_ms], |r| r.get(0))?
        .collect::<Result<_, _>>()?;
    let old_tasks = format!("SELECT seq FROM tasks WHERE state IN {terminal} AND status_ms < ?1");
    conn.execute(
        &format!("DELETE FROM history WHERE task_seq IN ({old_tasks})"),
        [cutoff_ms],
    )?;
    conn.execute(
        &format!("DELETE FROM artifacts WHERE task_seq IN ({old_tasks})"),
        [cutoff_ms],
    )?;
    conn.execute(
        &format!("DELETE FROM tasks WHERE state IN {terminal} AND status_ms < ?1"),
        [cutoff_ms],
    )?;
    Ok(removed)
}

/// Deletes the claims (and their state records) made before `cutoff_ms` whose Task is
/// gone, or that never had one (direct Message outcomes).
pub fn delete_unused_claims(conn: &Connection, cutoff_ms: i64) -> Result<usize, StoreError> {
    let old_claims = "SELECT activation_id FROM claims c WHERE claimed_ms < ?1 \
         AND (task_id IS NULL OR NOT EXISTS (SELECT 1 FROM tasks t WHERE t.task_id = c.task_id))";
    conn.execute(
        &format!("DELETE FROM claim_states WHERE activation_id IN ({old_claims})"),
        [cutoff_ms],
    )?;
    Ok(conn.execute(
        "DELETE FROM claims WHERE claimed_ms < ?1 \
         AND (task_id IS NULL OR NOT EXISTS (SELECT 1 FROM tasks t WHERE t.task_id = claims.task_id))",
        [cutoff_ms],
    )?)
}

/// Deletes evidence recorded before `cutoff_ms` about no Task, or about one that is gone.
pub fn delete_unused_evidence(conn: &Connection, cutoff_ms: i64) -> Result<usize, StoreError> {
    Ok(conn.execute(
        "DELETE FROM evidence WHERE recorded_ms < ?1 \
         AND (task_id IS NULL OR NOT EXISTS (SELECT 1 FROM tasks t WHERE t.task_id = evidence.task_id))",
        [cutoff_ms],
    )?)
}

/// Deletes reply anchors recorded before `cutoff_ms` whose Task is not live.
pub fn delete_unused_anchors(conn: &Connection, cutoff_ms: i64) -> Result<usize, StoreError> {
    Ok(conn.execute(
        &format!(
            "DELETE FROM reply_anchors WHERE recorded_ms < ?1 \
             AND task_id NOT IN (SELECT task_id FROM tasks WHERE state IN {})",
            live_states_sql()
        ),
        [cutoff_ms],
    )?)
}

/// Deletes deliveries last updated before `cutoff_ms` whose Task (if any) is not live; a
/// delivery in `sending` is never deleted (its recovery is still owed).
pub fn delete_unused_deliveries(conn: &Connection, cutoff_ms: i64) -> Result<usize, StoreError> {
    Ok(conn.execute(
        &format!(
            "DELETE FROM deliveries WHERE updated_ms < ?1 AND state <> ?2 \
             AND (task_id IS NULL OR task_id NOT IN (SELECT task_id FROM tasks WHERE state IN {}))",
            live_states_sql()
        ),
        params![cutoff_ms, DeliveryState::Sending.as_str()],
    )?)
}

/// Deletes contexts whose last event was before `cutoff_ms` and that no live Task uses.
pub fn delete_unused_contexts(conn: &Connection, cutoff_ms: i64) -> Result<usize, StoreError> {
    Ok(conn.execute(
        &format!(
            "DELETE FROM contexts WHERE last_event_ms < ?1 \
             AND context_id NOT IN (SELECT context_id FROM tasks WHERE state IN {})",
            live_states_sql()
        ),
        [cutoff_ms],
    )?)
}
