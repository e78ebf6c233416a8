//! Row-level reads and writes shared by the plane's operations. Each function is one
//! statement (or a tight group); the rules that combine them live in the callers.

use rusqlite::{params, Connection};
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::record::EvidenceKind;
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
