//! The `reply_anchors` table: (principal, source, provider response id) → the Task whose
//! input request that response carried, and which request it was.

use rusqlite::{params, Connection, OptionalExtension};

use super::StoreError;

/// Where a reply anchor points.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Anchor {
    pub task_id: String,
    /// The Task's input request the anchored response asked (its sequence number).
    pub input_request_seq: i64,
}

/// The anchor of `provider_response_id` on `source` for `principal`, if one was recorded.
pub fn find(
    conn: &Connection,
    principal: &str,
    source: &str,
    provider_response_id: &str,
) -> Result<Option<Anchor>, StoreError> {
    Ok(conn
        .prepare_cached(
            "SELECT task_id, input_request_seq FROM reply_anchors \
             WHERE principal = ?1 AND source = ?2 AND provider_response_id = ?3",
        )?
        .query_row(params![principal, source, provider_response_id], |r| {
            Ok(Anchor {
                task_id: r.get(0)?,
                input_request_seq: r.get(1)?,
            })
        })
        .optional()?)
}

/// Records (or moves) the anchor of `provider_response_id` on `source` for `principal`.
pub fn upsert(
    conn: &Connection,
    principal: &str,
    source: &str,
    provider_response_id: &str,
    anchor: &Anchor,
    now_ms: i64,
) -> Result<(), StoreError> {
    conn.prepare_cached(
        "INSERT INTO reply_anchors (principal, source, provider_response_id, task_id, input_request_seq, recorded_ms) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6) \
         ON CONFLICT (principal, source, provider_response_id) DO UPDATE SET \
         task_id = excluded.task_id, input_request_seq = excluded.input_request_seq, recorded_ms = excluded.recorded_ms",
    )?
    .execute(params![
        principal,
        source,
        provider_response_id,
        anchor.task_id,
        anchor.input_request_seq,
        now_ms
    ])?;
    Ok(())
}
