//! The `checkpoints` table: each source's durable cursor, per principal.

use rusqlite::{params, Connection, OptionalExtension};

use super::StoreError;

/// The cursor of `source` for `principal`, if one was recorded.
pub fn get(conn: &Connection, principal: &str, source: &str) -> Result<Option<String>, StoreError> {
    Ok(conn
        .prepare_cached("SELECT cursor FROM checkpoints WHERE principal = ?1 AND source = ?2")?
        .query_row(params![principal, source], |r| r.get(0))
        .optional()?)
}

/// Sets the cursor of `source` for `principal`.
pub fn set(
    conn: &Connection,
    principal: &str,
    source: &str,
    cursor: &str,
    now_ms: i64,
) -> Result<(), StoreError> {
    conn.prepare_cached(
        "INSERT INTO checkpoints (principal, source, cursor, updated_ms) VALUES (?1, ?2, ?3, ?4) \
         ON CONFLICT (principal, source) DO UPDATE SET cursor = excluded.cursor, updated_ms = excluded.updated_ms",
    )?
    .execute(params![principal, source, cursor, now_ms])?;
    Ok(())
}
