//! The `evidence` table: content-addressed records (`sha256:<hex>` of the content) of what
//! happened, healthy or not, with the locator of the object they are about.

use rusqlite::{params, Connection};
use serde::Serialize;
use serde_json::Value;

use super::writer::SqliteWriteTx;
use super::{EvidenceRow, StoreError, WriteTx};
use crate::digest::content_address;
use crate::record::EvidenceKind;

/// Evidence to record; its content is anything that serializes to a JSON object.
pub struct NewEvidence<'a, C: Serialize + ?Sized = Value> {
    pub kind: &'a EvidenceKind,
    pub healthy: bool,
    pub task_id: Option<&'a str>,
    pub activation_id: Option<&'a str>,
    pub locator: &'a Value,
    pub content: &'a C,
    pub now_ms: i64,
}

/// Records evidence and returns its id, the content address of its content: the same
/// content about the same Task (or about no Task) twice is one record. The same for every
/// backend: the id and the JSON texts are made here, the row is the backend's
/// ([`WriteTx::insert_evidence`]).
pub fn insert<C: Serialize + ?Sized>(
    tx: &dyn WriteTx,
    evidence: &NewEvidence<'_, C>,
) -> Result<String, StoreError> {
    let content_text = serde_json::to_string(evidence.content)?;
    let id = content_address(content_text.as_bytes());
    let locator = serde_json::to_string(evidence.locator)?;
    tx.insert_evidence(&EvidenceRow {
        evidence_id: &id,
        kind: evidence.kind,
        healthy: evidence.healthy,
        task_id: evidence.task_id,
        activation_id: evidence.activation_id,
        locator: &locator,
        content: &content_text,
        now_ms: evidence.now_ms,
    })?;
    Ok(id)
}

/// SQLite's [`WriteTx::insert_evidence`].
pub(super) fn insert_row(
    tx: &SqliteWriteTx<'_, '_>,
    row: &EvidenceRow<'_>,
) -> Result<(), StoreError> {
    tx.with_statement(
        "INSERT OR IGNORE INTO evidence (evidence_id, kind, healthy, task_id, activation_id, locator, content, recorded_ms) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
        |s| {
            s.execute(params![
                row.evidence_id,
                row.kind.as_str(),
                row.healthy as i64,
                row.task_id,
                row.activation_id,
                row.locator,
                row.content,
                row.now_ms
            ])
        },
    )?;
    Ok(())
}

/// One stored piece of evidence.
#[derive(Debug, Clone, PartialEq)]
pub struct Evidence {
    pub evidence_id: String,
    pub kind: EvidenceKind,
    pub healthy: bool,
    pub content: Value,
}

/// The evidence recorded about Task `task_id`, oldest first.
pub fn for_task(conn: &Connection, task_id: &str) -> Result<Vec<Evidence>, StoreError> {
    let mut stmt = conn.prepare_cached(
        "SELECT evidence_id, kind, healthy, content FROM evidence WHERE task_id = ?1 ORDER BY recorded_ms, evidence_id",
    )?;
    let rows = stmt
        .query_map([task_id], |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, String>(1)?,
                r.get::<_, i64>(2)? != 0,
                r.get::<_, String>(3)?,
            ))
        })?
        .map(|row| {
            let (evidence_id, kind, healthy, content) = row?;
            Ok(Evidence {
                evidence_id,
                kind: EvidenceKind::parse(&kind),
                healthy,
                content: serde_json::from_str(&content)?,
            })
        })
        .collect::<Result<Vec<_>, StoreError>>()?;
    Ok(rows)
}
