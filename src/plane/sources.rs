//! What source adapters record with the plane besides their events: their registration
//! (and declared continuation method), reply anchors for the responses the plane
//! delivered, content-addressed evidence, and their durable checkpoints.

use serde_json::Value;

use super::{PlaneError, TaskPlane};
use crate::field_error::FieldError;
use crate::ids::{self, check_identifier, check_locator};
use crate::record::{ClaimState, Continuation, EvidenceKind, Locator};
use crate::store::anchors::Anchor;
use crate::store::evidence::{self, NewEvidence};

/// The source name of the A2A HTTP+JSON binding; it continues Tasks by explicit taskId.
pub const A2A_SOURCE: &str = "a2a";

impl TaskPlane {
    /// Registers a source with its declared continuation method. Re-registering replaces
    /// the declaration for new Tasks; the A2A binding's source cannot be redeclared.
    pub fn register_source(
        &self,
        source: &str,
        continuation: Continuation,
    ) -> Result<(), PlaneError> {
        check_identifier("source", source)?;
        if source == A2A_SOURCE && continuation != Continuation::ExplicitTaskId {
            return Err(PlaneError::Invalid(FieldError::new(
                "source",
                "`a2a` is the A2A binding's source; it continues Tasks by explicit taskId only",
            )));
        }
        self.sources
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .insert(source.to_string(), continuation);
        Ok(())
    }

    pub(super) fn continuation_of(&self, source: &str) -> Result<Continuation, PlaneError> {
        self.sources
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(source)
            .copied()
            .ok_or_else(|| PlaneError::UnknownSource(source.to_string()))
    }

    /// Records that the plane sent `provider_response_id` on `source` for `task_id`'s
    /// open input request, so a direct reply to it can continue the Task. The Task must be
    /// the principal's and waiting for input, and that response must be one the plane
    /// delivered for it (see `deliver`).
    pub fn record_reply_anchor(
        &self,
        principal: &str,
        source: &str,
        provider_response_id: &str,
        task_id: &str,
    ) -> Result<(), PlaneError> {
        check_identifier("principal", principal)?;
        check_identifier("source", source)?;
        check_identifier("providerResponseId", provider_response_id)?;
        let (principal, source, response, task_id) = (
            principal.to_string(),
            source.to_string(),
            provider_response_id.to_string(),
            task_id.to_string(),
        );
        let now = self.now();
        self.write(move |tx| {
            let task = tx.task_owned_by(&principal, &task_id)?
                .ok_or_else(|| PlaneError::TaskNotFound(task_id.clone()))?;
            if !task.record.awaits_caller() {
                return Err(PlaneError::NotAwaitingInput {
                    task_id: task_id.clone(),
                    state: task.record.state,
                });
            }
            if task.record.source != source {
                return Err(PlaneError::Invalid(FieldError::new("source", format!("task {task_id} came from source `{}`, not `{source}`", task.record.source))));
            }
            // Condition 2: the plane itself delivered that provider response for this Task.
            let delivered = tx.delivered_response(&task_id, &source, &response)?;
            if !delivered {
                return Err(PlaneError::FailedPrecondition(format!(
                    "no delivered response {response} on source `{source}` for task {task_id}: a reply anchor \
                     records a response the plane delivered (deliver it first, then record the anchor)"
                )));
            }
            let anchor = Anchor {
                task_id: task_id.clone(),
                input_request_seq: task.input_request_seq,
            };
            tx.upsert_reply_anchor(&principal, &source, &response, &anchor, now)?;
            Ok(())
        })
    }

    /// Records content-addressed evidence and returns its id (`sha256:<hex>`).
    pub fn record_evidence(
        &self,
        kind: &str,
        healthy: bool,
        task_id: Option<&str>,
        locator: &Locator,
        content: Value,
    ) -> Result<String, PlaneError> {
        check_identifier("kind", kind)?;
        let kind = EvidenceKind::parse(kind);
        check_locator("locator", locator)?;
        let locator = Value::Object(
            locator
                .iter()
                .map(|(k, v)| (k.clone(), Value::String(v.clone())))
                .collect(),
        );
        let task_id = task_id.map(str::to_string);
        let now = self.now();
        self.write(move |tx| {
            Ok(evidence::insert(
                tx,
                &NewEvidence {
                    kind: &kind,
                    healthy,
                    task_id: task_id.as_deref(),
                    activation_id: None,
                    locator: &locator,
                    content: &content,
                    now_ms: now,
                },
            )?)
        })
    }

    /// Evidence recorded for a Task, oldest first: `(evidence id, kind, healthy, content)`.
    pub fn evidence_for_task(
        &self,
        task_id: &str,
    ) -> Result<Vec<(String, String, bool, Value)>, PlaneError> {
        self.read(|tx| {
            Ok(tx
                .evidence_of_task(task_id)?
                .into_iter()
                .map(|e| {
                    (
                        e.evidence_id,
                        e.kind.as_str().to_string(),
                        e.healthy,
                        e.content,
                    )
                })
                .collect())
        })
    }

    /// A source's durable cursor for this principal.
    pub fn checkpoint(&self, principal: &str, source: &str) -> Result<Option<String>, PlaneError> {
        self.read(|tx| Ok(tx.checkpoint(principal, source)?))
    }

    /// Advances a source's cursor, but only when every event it selected (`event_ids`) has
    /// been accepted from that source for that principal: a checkpoint never runs ahead
    /// of acceptance.
    pub fn advance_checkpoint(
        &self,
        principal: &str,
        source: &str,
        cursor: &str,
        event_ids: Vec<String>,
    ) -> Result<(), PlaneError> {
        check_identifier("principal", principal)?;
        check_identifier("source", source)?;
        if cursor.is_empty() || cursor.chars().count() > ids::MAX_LOCATOR_VALUE_LEN {
            return Err(PlaneError::Invalid(FieldError::new(
                "cursor",
                format!("must be 1..={} characters", ids::MAX_LOCATOR_VALUE_LEN),
            )));
        }
        let (principal, source, cursor) = (
            principal.to_string(),
            source.to_string(),
            cursor.to_string(),
        );
        let now = self.now();
        self.write(move |tx| {
            for event_id in &event_ids {
                let claim = tx.claim_state_of_event(&principal, &source, event_id)?;
                if matches!(claim, None | Some(ClaimState::Quarantined)) {
                    return Err(PlaneError::FailedPrecondition(format!(
                        "event {event_id} of source `{source}` has not been accepted; a checkpoint advances only after every selected event is accepted"
                    )));
                }
            }
            tx.set_checkpoint(&principal, &source, &cursor, now)?;
            Ok(())
        })
    }
}
