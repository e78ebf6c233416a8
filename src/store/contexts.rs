//! The `contexts` table: (principal, source, conversation key) → contextId, plus contexts
//! minted without a key; each with its owner and the time of its last event.

use rusqlite::{params, Connection, OptionalExtension};

use super::writer::SqliteWriteTx;
use super::StoreError;

/// The context of a conversation: one atomic upsert on (principal, source, key), so
/// concurrent first messages get the same contextId. `new_context_id` is used only when
/// the conversation has no context yet; an existing one's last event moves to `now_ms`.
pub fn of_conversation(
    conn: &Connection,
    new_context_id: &str,
    principal: &str,
    source: &str,
    conversation_key: &str,
    now_ms: i64,
) -> Result<String, StoreError> {
    Ok(conn
        .prepare_cached(
            "INSERT INTO contexts (context_id, principal, source, conversation_key, created_ms, last_event_ms) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?5) \
             ON CONFLICT (principal, source, conversation_key) WHERE conversation_key IS NOT NULL \
             DO UPDATE SET last_event_ms = MAX(last_event_ms, excluded.last_event_ms) \
             RETURNING context_id",
        )?
        .query_row(
            params![new_context_id, principal, source, conversation_key, now_ms],
            |r| r.get(0),
        )?)
}

/// Inserts a context with no conversation key.
pub fn insert_fresh(
    tx: &SqliteWriteTx<'_, '_>,
    context_id: &str,
    principal: &str,
    source: &str,
    now_ms: i64,
) -> Result<(), StoreError> {
    tx.with_statement(
        "INSERT INTO contexts (context_id, principal, source, conversation_key, created_ms, last_event_ms) \
         VALUES (?1, ?2, ?3, NULL, ?4, ?4)",
        |s| s.execute(params![context_id, principal, source, now_ms]),
    )?;
    Ok(())
}

/// The principal that owns `context_id`, if the context exists.
pub fn owner(conn: &Connection, context_id: &str) -> Result<Option<String>, StoreError> {
    Ok(conn
        .prepare_cached("SELECT principal FROM contexts WHERE context_id = ?1")?
        .query_row([context_id], |r| r.get(0))
        .optional()?)
}

/// Moves a context's last-event time on (keeps its mapping alive for another window).
pub fn touch(conn: &Connection, context_id: &str, now_ms: i64) -> Result<(), StoreError> {
    conn.prepare_cached(
        "UPDATE contexts SET last_event_ms = MAX(last_event_ms, ?2) WHERE context_id = ?1",
    )?
    .execute(params![context_id, now_ms])?;
    Ok(())
}
