//! Inbound messages on their way to acceptance: what is checked before anything is
//! written (identifiers, the caller's role, content), and the [`Intake`] built from a
//! native activation or an A2A message, with its dedupe key and payload digest.

use serde_json::{json, Value};

use super::intake::Activation;
use super::{PlaneError, TaskPlane, A2A_SOURCE};
use crate::digest::canonical_json;
use crate::field_error::FieldError;
use crate::ids::{check_identifier, check_locator};
use crate::record::{Continuation, MessageRecord, Role};

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

impl TaskPlane {
    pub(super) fn native_intake(
        &self,
        activation: Activation,
    ) -> Result<(Intake, Activation), PlaneError> {
        check_identifier("principal", &activation.principal)?;
        check_identifier("source", &activation.source)?;
        check_identifier("eventId", &activation.event_id)?;
        if let Some(key) = &activation.conversation_key {
            check_identifier("conversationKey", key)?;
        }
        if let Some(reply_to) = &activation.reply_to {
            check_identifier("replyTo", reply_to)?;
        }
        check_locator("locator", &activation.locator)?;
        check_inbound_message(&activation.message, "message", false)?;
        if activation.source == A2A_SOURCE {
            return Err(PlaneError::Invalid(FieldError::new("source", "`a2a` is the A2A binding; its messages enter through acceptInContext or continueTask")));
        }
        let continuation = self.continuation_of(&activation.source)?;
        let locator = Value::Object(
            activation
                .locator
                .iter()
                .map(|(k, v)| (k.clone(), Value::String(v.clone())))
                .collect(),
        );
        let digest = canonical_json(&json!({
            "source": activation.source,
            "conversationKey": activation.conversation_key,
            "replyTo": activation.reply_to,
            "locator": locator,
            "message": activation.message,
        }));
        let intake = Intake {
            principal: activation.principal.clone(),
            source: activation.source.clone(),
            continuation,
            dedupe_key: activation.event_id.clone(),
            digest,
            requested_context_id: None,
            requested_task_id: None,
            message: activation.message.clone(),
            locator,
            extensions: Vec::new(),
        };
        Ok((intake, activation))
    }

    pub(super) fn message_intake(
        &self,
        principal: &str,
        context_id: Option<&str>,
        task_id: Option<&str>,
        message: MessageRecord,
        extensions: Vec<String>,
    ) -> Result<Intake, PlaneError> {
        check_identifier("principal", principal)?;
        check_inbound_message(&message, "message", true)?;
        // A requested context or task id is stored with the claim: bounded like every other
        // identifier (the ones the plane mints are UUIDs).
        for (field, id) in [
            ("message.contextId", context_id),
            ("message.taskId", task_id),
        ] {
            if let Some(id) = id.filter(|id| !id.is_empty()) {
                check_identifier(field, id)?;
            }
        }
        let digest = canonical_json(&json!({ "message": message }));
        let locator = json!({ "messageId": message.message_id });
        Ok(Intake {
            principal: principal.to_string(),
            source: A2A_SOURCE.to_string(),
            continuation: Continuation::ExplicitTaskId,
            dedupe_key: message.message_id.clone(),
            digest,
            requested_context_id: context_id.filter(|c| !c.is_empty()).map(str::to_string),
            requested_task_id: task_id.filter(|t| !t.is_empty()).map(str::to_string),
            message,
            locator,
            extensions,
        })
    }
}

/// An inbound message: its id is the dedupe key (an identifier), it comes from the caller,
/// and it carries content.
fn check_inbound_message(
    message: &MessageRecord,
    field: &str,
    message_id_is_key: bool,
) -> Result<(), PlaneError> {
    if message_id_is_key {
        check_identifier(&format!("{field}.messageId"), &message.message_id)?;
    } else if message.message_id.is_empty() {
        return Err(PlaneError::Invalid(FieldError::new(
            format!("{field}.messageId"),
            "is required",
        )));
    }
    check_content(message, Role::User, field)
}

/// A message from `role` (the caller's or the agent's) that carries content.
pub(super) fn check_content(
    message: &MessageRecord,
    role: Role,
    field: &str,
) -> Result<(), PlaneError> {
    message.check_role(role, field)?;
    if message.parts.is_empty() {
        return Err(PlaneError::Invalid(FieldError::new(
            format!("{field}.parts"),
            "must hold at least one part",
        )));
    }
    Ok(())
}
