//! Row-level reads and writes shared by the plane's operations. Each function is one
//! statement (or a tight group); the rules that combine them live in the callers.

use rusqlite::{params, Connection};
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::record::{ClaimState, EvidenceKind};
use crate::store::StoreError;

/// `sha256:<hex>` of `bytes`: the content address of payloads and evidence.
pub fn content_address(bytes: &[u8]) -> String {
    let digest = Sha256::digest(bytes);
    let mut out = String::with_capacity(7 + 64);
    out.push_str("sha256:");
    for byte in digest {
        out.push_str(&format!("{byte:02x}"));
    }
    out
}

/// Records content-addressed evidence; the same content twice is one record.
#[allow(clippy::too_many_arguments)]
pub fn insert_evidence(
    conn: &Connection,
    kind: &EvidenceKind,
    healthy: bool,
    task_id: Option<&str>,
    activation_id: Option<&str>,
    locator: &Value,
    content: &Value,
    now_ms: i64,
) -> Result<String, StoreError> {
    let content_text = serde_json::to_string(content)?;
    let id = content_address(content_text.as_bytes());
    conn.prepare_cached(
        "INSERT OR IGNORE INTO evidence (evidence_id, kind, healthy, task_id, activation_id, locator, content, recorded_ms) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
    )?
    .execute(params![
        id,
        kind.as_str(),
        healthy as i64,
        task_id,
        activation_id,
        serde_json::to_string(locator)?,
        content_text,
        now_ms
    ])?;
    Ok(id)
}

/// Appends a state record to a claim (the claim's current state is unchanged).
pub fn append_claim_record(
    conn: &Connection,
    activation_id: &str,
    kind: ClaimState,
    count: Option<i64>,
    detail: Option<&str>,
    now_ms: i64,
) -> Result<(), StoreError> {
    conn.prepare_cached(
        "INSERT INTO claim_states (activation_id, n, kind, count, at_ms, detail) \
         VALUES (?1, (SELECT COUNT(*) FROM claim_states WHERE activation_id = ?1), ?2, ?3, ?4, ?5)",
    )?
    .execute(params![activation_id, kind.as_str(), count, now_ms, detail])?;
    Ok(())
}

/// Appends a state record to a claim and makes it the claim's current state.
pub fn push_claim_state(
    conn: &Connection,
    activation_id: &str,
    kind: ClaimState,
    count: Option<i64>,
    detail: Option<&str>,
    now_ms: i64,
) -> Result<(), StoreError> {
    append_claim_record(conn, activation_id, kind, count, detail, now_ms)?;
    conn.prepare_cached("UPDATE claims SET state = ?2 WHERE activation_id = ?1")?
        .execute(params![activation_id, kind.as_str()])?;
    Ok(())
}

/// Updates a context's last-event time (keeps its mapping alive for another window).
pub fn touch_context(conn: &Connection, context_id: &str, now_ms: i64) -> Result<(), StoreError> {
    conn.prepare_cached(
        "UPDATE contexts SET last_event_ms = MAX(last_event_ms, ?2) WHERE context_id = ?1",
    )?
    .execute(params![context_id, now_ms])?;
    Ok(())
}

/// The claim states `keep` selects, as an SQL list.
pub fn claim_states_sql(keep: impl Fn(ClaimState) -> bool) -> String {
    let names: Vec<String> = ClaimState::ALL
        .into_iter()
        .filter(|s| keep(*s))
        .map(|s| format!("'{}'", s.as_str()))
        .collect();
    format!("({})", names.join(", "))
}
