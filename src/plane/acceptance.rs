//! Acceptance: the bodies of the intake transactions. Everything an acceptance writes —
//! claim, context, Task, history, evidence and the wake record — is written here inside
//! one writer transaction, so it is committed whole or not at all.

use std::sync::Arc;

use super::inbound::Intake;
use super::intake::{Acceptance, Disposition};
use super::PlaneError;
use crate::ids;
use crate::record::{ClaimRoute, EvidenceKind, MessageRecord, TaskRecord, TaskState};
use crate::store::claims::NewClaim;
use crate::store::evidence::{self, NewEvidence};
use crate::store::tasks::{InputRequest, NewTask, TaskRow};
use crate::store::{ReadTx, WriteTx};

/// The prior outcome of this (principal, dedupe key), if any.
///
/// Same payload → the prior outcome (the same Task in its current state, or the direct
/// Message verbatim). A different payload → `DuplicateMessageId`. Requested ids are
/// compared apart from the digest: a retry may name the ids the server minted for it.
pub(crate) fn prior_outcome(
    on: &dyn ReadTx,
    intake: &Intake,
) -> Result<Option<Acceptance>, PlaneError> {
    let Some(prior) = on.claim_by_dedupe_key(&intake.principal, &intake.dedupe_key)? else {
        return Ok(None);
    };
    let same_id = |asked: &Option<String>, first: &Option<String>, minted: Option<&str>| {
        asked == first || (asked.is_some() && asked.as_deref() == minted)
    };
    if prior.digest != intake.digest
        || !same_id(
            &intake.requested_context_id,
            &prior.requested_context_id,
            Some(prior.context_id.as_str()),
        )
        || !same_id(
            &intake.requested_task_id,
            &prior.requested_task_id,
            prior.task_id.as_deref(),
        )
    {
        return Err(PlaneError::DuplicateMessageId {
            message_id: intake.dedupe_key.clone(),
        });
    }
    let state = match &prior.task_id {
        Some(id) => on.task_by_id(id)?.map(|t| t.record.state),
        None => None,
    };
    Ok(Some(Acceptance {
        activation_id: prior.activation_id,
        task_id: prior.task_id,
        context_id: prior.context_id,
        disposition: Disposition::Duplicate,
        state,
        direct_reply: prior.direct_reply,
        created: None,
        message: None,
    }))
}

/// The context of a conversation: the one its first message got, whoever accepted it
/// (concurrent first messages get the same contextId).
pub(crate) fn conversation_context(
    tx: &dyn WriteTx,
    principal: &str,
    source: &str,
    conversation_key: &str,
    now_ms: i64,
) -> Result<String, PlaneError> {
    tx.step("context")?;
    Ok(tx.context_of_conversation(&ids::mint(), principal, source, conversation_key, now_ms)?)
}

/// A new context with no conversation key.
pub(crate) fn fresh_context(
    tx: &dyn WriteTx,
    principal: &str,
    source: &str,
    now_ms: i64,
) -> Result<String, PlaneError> {
    tx.step("context")?;
    let context_id = ids::mint();
    tx.insert_fresh_context(&context_id, principal, source, now_ms)?;
    Ok(context_id)
}

/// Whether `principal` owns `context_id` (a foreign or unknown context is `false`).
pub(crate) fn owns_context(
    tx: &dyn ReadTx,
    principal: &str,
    context_id: &str,
) -> Result<bool, PlaneError> {
    Ok(tx.context_owner(context_id)?.as_deref() == Some(principal))
}

/// Creates a SUBMITTED Task in `context_id` with the message as its first history entry,
/// and records the claim, its evidence and its wake.
pub(crate) fn create_task(
    tx: &dyn WriteTx,
    intake: &Intake,
    context_id: String,
    now_ms: i64,
) -> Result<Acceptance, PlaneError> {
    tx.step("task")?;
    let task_id = ids::mint();
    let seq = tx.insert_task(&NewTask {
        task_id: &task_id,
        principal: &intake.principal,
        context_id: &context_id,
        source: &intake.source,
        continuation: intake.continuation,
        state: TaskState::Submitted,
        extensions: &intake.extensions,
        now_ms,
    })?;
    tx.step("history")?;
    tx.insert_first_message(seq, &intake.message)?;
    let mut acceptance = record_claim(
        tx,
        intake,
        ClaimRoute::Created,
        Some(&task_id),
        &context_id,
        None,
        now_ms,
    )?;
    // The Task as these rows record it (what a read right after the commit returns).
    acceptance.created = Some(Arc::new(TaskRecord {
        task_id,
        principal: intake.principal.clone(),
        context_id,
        source: intake.source.clone(),
        continuation: intake.continuation,
        state: TaskState::Submitted,
        status_message: None,
        status_ms: now_ms,
        created_ms: now_ms,
        input_request_open: false,
        extensions: intake.extensions.clone(),
        history: vec![intake.message.clone()],
        artifacts: vec![],
    }));
    Ok(acceptance)
}

/// Attaches the message to a waiting Task: the request is answered and the Task goes
/// back to SUBMITTED until its wake is delivered.
pub(crate) fn continue_task(
    tx: &dyn WriteTx,
    intake: &Intake,
    task: &TaskRow,
    now_ms: i64,
) -> Result<Acceptance, PlaneError> {
    tx.step("task")?;
    tx.set_task_status(
        task,
        TaskState::Submitted,
        None,
        now_ms,
        InputRequest::Closed,
    )?;
    tx.touch_context(&task.record.context_id, now_ms)?;
    tx.step("history")?;
    tx.append_history(task, &intake.message)?;
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
    tx: &dyn WriteTx,
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

/// What an activation's evidence says, written straight from the intake's fields (no JSON
/// tree built first). Members in sorted order: the bytes, and so the evidence id, are
/// those of the same content as a `serde_json::Value` (whose objects keep keys sorted).
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct ActivationEvidence<'a> {
    activation_id: &'a str,
    context_id: &'a str,
    dedupe_key: &'a str,
    digest: &'a str,
    kind: &'a str,
    locator: &'a serde_json::Value,
    principal: &'a str,
    route: &'a str,
    source: &'a str,
    task_id: Option<&'a str>,
}

fn record_claim(
    tx: &dyn WriteTx,
    intake: &Intake,
    route: ClaimRoute,
    task_id: Option<&str>,
    context_id: &str,
    direct_reply: Option<&MessageRecord>,
    now_ms: i64,
) -> Result<Acceptance, PlaneError> {
    tx.step("claim")?;
    let activation_id = ids::mint();
    tx.insert_claim(&NewClaim {
        activation_id: &activation_id,
        principal: &intake.principal,
        dedupe_key: &intake.dedupe_key,
        source: &intake.source,
        route,
        task_id,
        context_id,
        digest: &intake.digest,
        requested_context_id: intake.requested_context_id.as_deref(),
        requested_task_id: intake.requested_task_id.as_deref(),
        direct_reply,
        now_ms,
    })?;
    tx.step("evidence")?;
    evidence::insert(
        tx,
        &NewEvidence {
            kind: &EvidenceKind::Activation,
            healthy: true,
            task_id,
            activation_id: Some(&activation_id),
            locator: &intake.locator,
            content: &ActivationEvidence {
                activation_id: &activation_id,
                context_id,
                dedupe_key: &intake.dedupe_key,
                digest: &intake.digest,
                kind: EvidenceKind::Activation.as_str(),
                locator: &intake.locator,
                principal: &intake.principal,
                route: route.as_str(),
                source: &intake.source,
                task_id,
            },
            now_ms,
        },
    )?;
    // The wake record: the claim's first state record, ACCEPTED (the claim row already
    // says so). A direct outcome has no Task, so the wake queue never offers it.
    tx.step("wake")?;
    tx.record_claim_accepted(&activation_id, now_ms)?;
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
        created: None,
        message: task_id.map(|_| Arc::new(intake.message.clone())),
    })
}

#[cfg(test)]
mod tests {
    use super::ActivationEvidence;
    use serde_json::json;

    #[test]
    fn activation_evidence_is_the_json_of_its_members_in_sorted_order() {
        let locator = json!({"kind": "a2a", "messageId": "m-1"});
        for task_id in [Some("t-1"), None] {
            let written = serde_json::to_string(&ActivationEvidence {
                activation_id: "a-1",
                context_id: "c-1",
                dedupe_key: "m-1",
                digest: "sha256:00",
                kind: "activation",
                locator: &locator,
                principal: "alice",
                route: "created",
                source: "a2a",
                task_id,
            })
            .unwrap();
            let as_value = json!({
                "kind": "activation", "activationId": "a-1", "principal": "alice",
                "source": "a2a", "dedupeKey": "m-1", "digest": "sha256:00",
                "route": "created", "taskId": task_id, "contextId": "c-1", "locator": locator,
            });
            assert_eq!(written, as_value.to_string());
        }
    }
}
