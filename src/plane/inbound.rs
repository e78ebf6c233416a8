//! Inbound messages on their way to acceptance: what is checked before anything is
//! written (identifiers, the caller's role, content), and the [`Intake`] built from a
//! native activation or an A2A message, with its dedupe key and payload digest.

use serde_json::{json, Value};

use super::intake::Activation;
use super::{PlaneError, TaskPlane, A2A_SOURCE};
use crate::digest::{canonical_json, content_address, CanonicalObject};
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
        let digest = message_digest(&message);
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

/// An A2A message's payload digest: the content address of `{"message": …}` in canonical
/// JSON, the bytes `canonical_json(&json!({"message": message}))` gives, written straight
/// from the record (a `serde_json::Value` of the message built, walked and dropped was 6% of
/// the listener's CPU in a profile of one-core `message:send`). The digest is stored with
/// each claim and compared on a duplicate `messageId`, so its bytes never change.
fn message_digest(message: &MessageRecord) -> String {
    let mut text = Vec::with_capacity(256);
    let mut payload = CanonicalObject::start(&mut text);
    message.write_canonical(payload.member("message"));
    payload.end();
    content_address(&text)
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::{PartContent, PartRecord};

    fn map(value: Value) -> serde_json::Map<String, Value> {
        match value {
            Value::Object(map) => map,
            _ => panic!("an object"),
        }
    }

    #[test]
    fn an_a2a_messages_digest_is_the_canonical_json_digest_of_the_message_as_serialized() {
        let mut every_field = MessageRecord::user_text("m-1", "plain");
        every_field.parts = vec![
            PartRecord::of(PartContent::Text(
                "quote \" back\\slash\nnew line \u{1} é 🎉".into(),
            )),
            PartRecord::of(PartContent::Raw(vec![0, 159, 146, 150, 255])),
            PartRecord::of(PartContent::Url("https://example.test/a?b=c&d=é".into())),
            PartRecord::of(PartContent::Data(json!({
                "z": [3, -1.5, 1e300, null, true, {"b": 1, "a": {"d": [], "c": {}}}],
                "é": "non-ascii key", "A": 0, "a": "",
            }))),
            PartRecord {
                content: PartContent::Text("with every optional member".into()),
                metadata: Some(map(json!({"y": {"k": [1, 2]}, "x": "v"}))),
                filename: Some("report \"final\".pdf".into()),
                media_type: Some("application/pdf".into()),
            },
        ];
        every_field.metadata = Some(map(json!({"trace": {"id": "t", "n": 2}, "a": null})));
        every_field.extensions = vec!["https://ext.test/one".into(), "two".into()];
        every_field.reference_task_ids = vec!["task-a".into(), "task-b".into()];

        let mut agent = MessageRecord::agent(vec![PartRecord::of(PartContent::Data(json!([])))]);
        agent.metadata = Some(serde_json::Map::new());
        let no_parts = MessageRecord {
            parts: Vec::new(),
            ..MessageRecord::user_text("m-2", "")
        };

        for message in [
            MessageRecord::user_text("m-0", "please summarise the report"),
            every_field,
            agent,
            no_parts,
        ] {
            assert_eq!(
                message_digest(&message),
                canonical_json(&json!({ "message": message })),
                "{message:?}"
            );
        }
    }
}
