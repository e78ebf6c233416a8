//! Acceptance: the bodies of the intake transactions. Everything an acceptance writes —
//! claim, context, Task, history, evidence and the wake record — is written here inside
//! one writer transaction, so it is committed whole or not at all.

use rusqlite::{params, Connection, OptionalExtension};
use serde_json::{json, Value};

use super::rows;
use super::{Acceptance, Disposition, PlaneError};
use crate::ids;
use crate::record::{ClaimRoute, ClaimState, Continuation, EvidenceKind, MessageRecord, TaskState};
use crate::store::tasks::{self, InputRequest, NewTask, TaskRow};
use crate::store::WriteTx;

/// An inbound message on its way to acceptance, already validated.
#[derive(Debug, Clone)]
pub(crate) struct Intake {
    pub principal: String,
    pub source: String,
    /// The source's declared continuation method, copied onto a new Task.
    pub continuation: Continuation,
    /// `messageId` (A2A) or the source's event identity (native): the dedupe key.
    pub dedupe_key: String,
    /// Content address of the payload, without server-minted ids.
    pub digest: String,
    pub requested_context_id: Option<String>,
    pub requested_task_id: Option<String>,
    pub message: MessageRecord,
    pub locator: Value,
    pub extensions: Vec<String>,
}

/// The prior outcome of this (principal, dedupe key), if any.
///
/// Same payload → the prior outcome (the same Task in its current state, or the direct
/// Message verbatim). A different payload → `DuplicateMessageId`. Requested ids are
/// compared apart from the digest: a retry may name the ids the server minted for it.
pub(crate) fn prior_outcome(
    conn: &Connection,
    intake: &Intake,
) -> Result<Option<Acceptance>, PlaneError> {
    let row = conn
        .prepare_cached(
            "SELECT activation_id, task_id, context_id, digest, requested_context_id, requested_task_id, direct_reply \
             FROM claims WHERE principal = ?1 AND dedupe_key = ?2",
        )?
        .query_row(params![intake.principal, intake.dedupe_key], |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, Option<String>>(1)?,
                r.get::<_, String>(2)?,
                r.get::<_, String>(3)?,
                r.get::<_, Option<String>>(4)?,
                r.get::<_, Option<String>>(5)?,
                r.get::<_, Option<String>>(6)?,
            ))
        })
        .optional()?;
    let Some((activation_id, task_id, context_id, digest, req_ctx, req_task, direct_reply)) = row
    else {
        return Ok(None);
    };
    let same_id = |asked: &Option<String>, first: &Option<String>, minted: Option<&str>| {
        asked == first || (asked.is_some() && asked.as_deref() == minted)
    };
    if digest != intake.digest
        || !same_id(
            &intake.requested_context_id,
            &req_ctx,
            Some(context_id.as_str()),
        )
        || !same_id(&intake.requested_task_id, &req_task, task_id.as_deref())
    {
        return Err(PlaneError::DuplicateMessageId {
            message_id: intake.dedupe_key.clone(),
        });
    }
    let state = match &task_id {
        Some(id) => tasks::by_id(conn, id)?.map(|t| t.record.state),
        None => None,
    };
    let direct_reply = direct_reply
        .map(|m| serde_json::from_str::<MessageRecord>(&m))
        .transpose()?;
    Ok(Some(Acceptance {
        activation_id,
        task_id,
        context_id,
        disposition: Disposition::Duplicate,
        state,
        direct_reply,
    }))
}

/// The context of a conversation: one atomic upsert on (principal, source, key), so
/// concurrent first messages get the same contextId.
pub(crate) fn conversation_context(
    tx: &WriteTx<'_>,
    principal: &str,
    source: &str,
    conversation_key: &str,
    now_ms: i64,
) -> Result<String, PlaneError> {
    tx.step("context")?;
    let context_id = tx
        .conn()
        .prepare_cached(
            "INSERT INTO contexts (context_id, principal, source, conversation_key, created_ms, last_event_ms) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?5) \
             ON CONFLICT (principal, source, conversation_key) WHERE conversation_key IS NOT NULL \
             DO UPDATE SET last_event_ms = MAX(last_event_ms, excluded.last_event_ms) \
             RETURNING context_id",
        )?
        .query_row(params![ids::mint(), principal, source, conversation_key, now_ms], |r| r.get(0))?;
    Ok(context_id)
}

/// A new context with no conversation key.
pub(crate) fn fresh_context(
    tx: &WriteTx<'_>,
    principal: &str,
    source: &str,
    now_ms: i64,
) -> Result<String, PlaneError> {
    tx.step("context")?;
    let context_id = ids::mint();
    tx.conn()
        .prepare_cached(
            "INSERT INTO contexts (context_id, principal, source, conversation_key, created_ms, last_event_ms) \
             VALUES (?1, ?2, ?3, NULL, ?4, ?4)",
        )?
        .execute(params![context_id, principal, source, now_ms])?;
    Ok(context_id)
}

/// Whether `principal` owns `context_id` (a foreign or unknown context is `false`).
pub(crate) fn owns_context(
    conn: &Connection,
    principal: &str,
    context_id: &str,
) -> Result<bool, PlaneError> {
    let owner: Option<String> = conn
        .prepare_cached("SELECT principal FROM contexts WHERE context_id = ?1")?
        .query_row([context_id], |r| r.get(0))
        .optional()?;
    Ok(owner.as_deref() == Some(principal))
}

/// Creates a SUBMITTED Task in `context_id` with the message as its first history entry,
/// and records the claim, its evidence and its wake.
pub(crate) fn create_task(
    tx: &WriteTx<'_>,
    intake: &Intake,
    context_id: String,
    now_ms: i64,
) -> Result<Acceptance, PlaneError> {
    let conn = tx.conn();
    tx.step("task")?;
    let task_id = ids::mint();
    let seq = tasks::insert(
        conn,
        &NewTask {
            task_id: &task_id,
            principal: &intake.principal,
            context_id: &context_id,
            source: &intake.source,
            continuation: intake.continuation,
            state: TaskState::Submitted,
            extensions: &intake.extensions,
            now_ms,
        },
    )?;
    tx.step("history")?;
    tasks::insert_first_message(conn, seq, &intake.message)?;
    record_claim(
        tx,
        intake,
        ClaimRoute::Created,
        Some(&task_id),
        &context_id,
        None,
        now_ms,
    )
}

/// Attaches the message to a waiting Task: the request is answered and the Task goes
/// back to SUBMITTED until its wake is delivered.
pub(crate) fn continue_task(
    tx: &WriteTx<'_>,
    intake: &Intake,
    task: &TaskRow,
    now_ms: i64,
) -> Result<Acceptance, PlaneError> {
    let conn = tx.conn();
    tx.step("task")?;
    tasks::set_status(
        conn,
        task.seq,
        TaskState::Submitted,
        None,
        now_ms,
        InputRequest::Closed,
    )?;
    rows::touch_context(conn, &task.record.context_id, now_ms)?;
    tx.step("history")?;
    tasks::append_history(conn, task, &intake.message)?;
    record_claim(
        tx,
        intake,
        ClaimRoute::Continued,
        Some(&task.record.task_id),
        &task.record.context_id,
        None,
        now_ms,
    )
}

/// Records a direct Message outcome: no Task exists, and a duplicate returns `reply`
/// verbatim.
pub(crate) fn record_direct(
    tx: &WriteTx<'_>,
    intake: &Intake,
    context_id: &str,
    reply: &MessageRecord,
    now_ms: i64,
) -> Result<Acceptance, PlaneError> {
    record_claim(
        tx,
        intake,
        ClaimRoute::Direct,
        None,
        context_id,
        Some(reply),
        now_ms,
    )
}

fn record_claim(
    tx: &WriteTx<'_>,
    intake: &Intake,
    route: ClaimRoute,
    task_id: Option<&str>,
    context_id: &str,
    direct_reply: Option<&MessageRecord>,
    now_ms: i64,
) -> Result<Acceptance, PlaneError> {
    let conn = tx.conn();
    tx.step("claim")?;
    let activation_id = ids::mint();
    conn.prepare_cached(
        "INSERT INTO claims (activation_id, principal, dedupe_key, source, route, task_id, context_id, digest, \
         requested_context_id, requested_task_id, direct_reply, state, claimed_ms) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)",
    )?
    .execute(params![
        activation_id,
        intake.principal,
        intake.dedupe_key,
        intake.source,
        route.as_str(),
        task_id,
        context_id,
        intake.digest,
        intake.requested_context_id,
        intake.requested_task_id,
        direct_reply.map(serde_json::to_string).transpose()?,
        ClaimState::Accepted.as_str(),
        now_ms
    ])?;
    tx.step("evidence")?;
    rows::insert_evidence(
        conn,
        &EvidenceKind::Activation,
        true,
        task_id,
        Some(&activation_id),
        &intake.locator,
        &json!({
            "kind": EvidenceKind::Activation.as_str(),
            "activationId": activation_id,
            "principal": intake.principal,
            "source": intake.source,
            "dedupeKey": intake.dedupe_key,
            "digest": intake.digest,
            "route": route.as_str(),
            "taskId": task_id,
            "contextId": context_id,
            "locator": intake.locator,
        }),
        now_ms,
    )?;
    // The wake record: the claim's first state record, ACCEPTED (the claim row already
    // says so). A direct outcome has no Task, so the wake queue never offers it.
    tx.step("wake")?;
    conn.prepare_cached(
        "INSERT INTO claim_states (activation_id, n, kind, count, at_ms, detail) VALUES (?1, 0, ?2, NULL, ?3, NULL)",
    )?
    .execute(params![activation_id, ClaimState::Accepted.as_str(), now_ms])?;
    Ok(Acceptance {
        activation_id,
        task_id: task_id.map(str::to_string),
        context_id: context_id.to_string(),
        disposition: match route {
            ClaimRoute::Created | ClaimRoute::Direct => Disposition::Created,
            ClaimRoute::Continued => Disposition::Continued,
        },
        state: task_id.map(|_| TaskState::Submitted),
        direct_reply: direct_reply.cloned(),
    })
}
