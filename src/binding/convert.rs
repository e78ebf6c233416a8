//! JS values ↔ the plane's records: inbound and agent-side messages and artifacts, task
//! views, and the wire helpers exported as functions. Conversions only.

use std::collections::{BTreeMap, HashMap};

use napi_derive::napi;
use serde_json::Value;

use super::{internal, invalid_arg, Failure, Result};
use crate::plane;
use crate::record::{self, ArtifactRecord, MessageRecord};
use crate::wire;

js_enum! {
    [" A Task's state as A2A names it. As an argument, the stored short name (`working`)"
     " is taken too."]
    pub enum TaskState for "state", also short_state_name, short_state_names {
        Submitted = "TASK_STATE_SUBMITTED",
        Working = "TASK_STATE_WORKING",
        InputRequired = "TASK_STATE_INPUT_REQUIRED",
        AuthRequired = "TASK_STATE_AUTH_REQUIRED",
        Completed = "TASK_STATE_COMPLETED",
        Failed = "TASK_STATE_FAILED",
        Canceled = "TASK_STATE_CANCELED",
        Rejected = "TASK_STATE_REJECTED",
    }
}

impl From<record::TaskState> for TaskState {
    fn from(state: record::TaskState) -> Self {
        match state {
            record::TaskState::Submitted => TaskState::Submitted,
            record::TaskState::Working => TaskState::Working,
            record::TaskState::InputRequired => TaskState::InputRequired,
            record::TaskState::AuthRequired => TaskState::AuthRequired,
            record::TaskState::Completed => TaskState::Completed,
            record::TaskState::Failed => TaskState::Failed,
            record::TaskState::Canceled => TaskState::Canceled,
            record::TaskState::Rejected => TaskState::Rejected,
        }
    }
}

impl From<TaskState> for record::TaskState {
    fn from(name: TaskState) -> Self {
        match name {
            TaskState::Submitted => record::TaskState::Submitted,
            TaskState::Working => record::TaskState::Working,
            TaskState::InputRequired => record::TaskState::InputRequired,
            TaskState::AuthRequired => record::TaskState::AuthRequired,
            TaskState::Completed => record::TaskState::Completed,
            TaskState::Failed => record::TaskState::Failed,
            TaskState::Canceled => record::TaskState::Canceled,
            TaskState::Rejected => record::TaskState::Rejected,
        }
    }
}

/// A state named as stored (`working`, any case), for the operator's commands.
fn short_state_name(text: &str) -> Option<TaskState> {
    record::TaskState::parse(&text.trim().to_ascii_lowercase()).map(TaskState::from)
}

fn short_state_names() -> String {
    let names: Vec<&str> = record::TaskState::ALL.iter().map(|s| s.as_str()).collect();
    format!("the short names {}", names.join(", "))
}

/// The sets of Task states, as the addon defines them (JS restates none).
#[napi(object, object_from_js = false)]
pub struct TaskStates {
    /// The agent has work to do on the Task (SUBMITTED, WORKING).
    pub active: Vec<TaskState>,
    /// The Task waits for its caller: an answer or an authorization (INPUT_REQUIRED,
    /// AUTH_REQUIRED).
    pub interrupted: Vec<TaskState>,
    /// The Task never changes again (COMPLETED, FAILED, CANCELED, REJECTED).
    pub terminal: Vec<TaskState>,
}

/// Which Task states are active, interrupted (waiting for the caller) and terminal; every
/// state is in exactly one set, in the order `TaskState` lists them.
#[napi(catch_unwind)]
pub fn task_states() -> TaskStates {
    let with = |is: fn(record::TaskState) -> bool| -> Vec<TaskState> {
        record::TaskState::ALL
            .into_iter()
            .filter(|state| is(*state))
            .map(TaskState::from)
            .collect()
    };
    TaskStates {
        active: with(record::TaskState::is_active),
        interrupted: with(record::TaskState::is_interrupted),
        terminal: with(record::TaskState::is_terminal),
    }
}

js_enum! {
    [" What an intake did: `created` a Task (or a direct Message outcome), `continued` a"
     " waiting Task, or found a `duplicate` (the prior outcome, returned again)."]
    pub enum Disposition for "disposition" {
        Created = "created": " A new Task (or a direct Message outcome).",
        Continued = "continued": " An existing waiting Task was continued.",
        Duplicate = "duplicate": " The same (principal, id) with the same payload was accepted before: this is the prior outcome.",
    }
}

impl From<plane::Disposition> for Disposition {
    fn from(disposition: plane::Disposition) -> Self {
        match disposition {
            plane::Disposition::Created => Disposition::Created,
            plane::Disposition::Continued => Disposition::Continued,
            plane::Disposition::Duplicate => Disposition::Duplicate,
        }
    }
}

/// The A2A protocol version the task plane serves (`"1.0"`).
#[napi(catch_unwind)]
pub fn protocol_version() -> String {
    wire::PROTOCOL_VERSION.to_string()
}

/// Parses an A2A `Message` in ProtoJSON, checks its REQUIRED members, and returns it
/// re-encoded in canonical ProtoJSON (camelCase, defaults omitted). Throws an error that
/// names the offending field when the text is not a valid Message.
#[napi(catch_unwind)]
pub fn normalize_message(json: String) -> Result<String> {
    let message: wire::Message =
        wire::json::decode("Message", json.as_bytes()).map_err(invalid_arg)?;
    Ok(wire::json::encode(&message))
}

/// Same as `normalizeMessage` for a `SendMessageRequest` (the body of `message:send`).
#[napi(catch_unwind)]
pub fn normalize_send_message_request(json: String) -> Result<String> {
    let request: wire::SendMessageRequest =
        wire::json::decode("SendMessageRequest", json.as_bytes()).map_err(invalid_arg)?;
    Ok(wire::json::encode(&request))
}

/// The durable outcome of an intake, returned only after it is committed.
#[napi(object)]
pub struct Acceptance {
    pub activation_id: String,
    /// Absent for a direct Message outcome.
    pub task_id: Option<String>,
    pub context_id: String,
    pub disposition: Disposition,
    /// The Task's current state.
    pub state: Option<TaskState>,
    /// The direct Message outcome (an A2A Message), verbatim.
    pub direct_reply: Option<Value>,
}

impl TryFrom<plane::Acceptance> for Acceptance {
    type Error = Failure;

    fn try_from(a: plane::Acceptance) -> Result<Self> {
        let direct_reply = a
            .direct_reply
            .as_ref()
            .map(|m| serde_json::to_value(wire::convert::message_to_wire(m, &a.context_id, None)))
            .transpose()
            .map_err(internal)?;
        Ok(Acceptance {
            activation_id: a.activation_id,
            task_id: a.task_id,
            context_id: a.context_id,
            disposition: a.disposition.into(),
            state: a.state.map(TaskState::from),
            direct_reply,
        })
    }
}

/// A native provider event for `accept` / `continue`.
#[napi(object)]
pub struct ActivationInput {
    /// The authenticated intake principal.
    pub principal: String,
    /// The registered source.
    pub source: String,
    /// The source's event identity (the idempotency key, scoped to the principal).
    pub event_id: String,
    /// The source's Conversation fields as one identifier; absent gives a fresh context.
    pub conversation_key: Option<String>,
    /// The provider id of the message this event directly replies to.
    pub reply_to: Option<String>,
    /// The exact provider object: identifier keys, opaque values of 1..4096 characters.
    pub locator: Option<HashMap<String, String>>,
    /// The content, as an A2A `Message` object (role `ROLE_USER`).
    pub message: Value,
}

pub(super) fn inbound_message(
    value: Value,
) -> Result<(MessageRecord, Option<String>, Option<String>)> {
    let message: wire::Message = wire::json::decode_value("Message", value).map_err(invalid_arg)?;
    let (record, context_id, task_id) = wire::convert::message_from_wire(message).map_err(|e| {
        invalid_arg(format!(
            "invalid Message: field `{}`: {}",
            e.field, e.message
        ))
    })?;
    // Its role (ROLE_USER) is the plane's rule, checked at intake.
    Ok((record, context_id, task_id))
}

pub(super) fn activation(input: ActivationInput) -> Result<plane::Activation> {
    let (message, _, _) = inbound_message(input.message)?;
    Ok(plane::Activation {
        principal: input.principal,
        source: input.source,
        event_id: input.event_id,
        conversation_key: input.conversation_key,
        reply_to: input.reply_to,
        locator: input
            .locator
            .unwrap_or_default()
            .into_iter()
            .collect::<BTreeMap<_, _>>(),
        message,
    })
}

/// An agent-side message; a missing (or empty) `messageId` is minted and a missing `role`
/// is `ROLE_AGENT` (the plane refuses any other role).
pub(super) fn agent_message(mut message: wire::Message) -> Result<MessageRecord> {
    if message.message_id.is_empty() {
        message.message_id = crate::ids::mint();
    }
    if message.role == wire::Role::Unspecified as i32 {
        message.role = wire::Role::Agent as i32;
    }
    validated("Message", &message)?;
    let (record, _, _) = wire::convert::message_from_wire(message).map_err(|e| {
        invalid_arg(format!(
            "invalid Message: field `{}`: {}",
            e.field, e.message
        ))
    })?;
    Ok(record)
}

/// An agent-side artifact; a missing (or empty) `artifactId` is minted.
pub(super) fn agent_artifact(mut artifact: wire::Artifact) -> Result<ArtifactRecord> {
    if artifact.artifact_id.is_empty() {
        artifact.artifact_id = crate::ids::mint();
    }
    validated("Artifact", &artifact)?;
    wire::convert::artifact_from_wire(artifact).map_err(|e| {
        invalid_arg(format!(
            "invalid Artifact: field `{}`: {}",
            e.field, e.message
        ))
    })
}

/// The REQUIRED checks of a decoded document, refused as the decoder would refuse them.
fn validated(what: &'static str, document: &impl wire::validate::Validate) -> Result<()> {
    document
        .validate(&wire::validate::At::Root)
        .map_err(|error| invalid_arg(wire::json::WireError { what, error }))
}

/// A Task that was accepted and waits for the agent, with the message that was accepted:
/// enough to start work without reading the Task.
#[napi(object, object_from_js = false)]
pub struct AcceptedTask {
    pub activation_id: String,
    pub task_id: String,
    pub context_id: String,
    /// The message accepted, an A2A `Message` (as `readTask` gives it in `history`, where
    /// it is the newest entry).
    #[napi(ts_type = "Record<string, unknown>")]
    pub message: Value,
    /// `true` when the message continued a Task that waited for its caller
    /// (INPUT_REQUIRED or AUTH_REQUIRED: the message is the answer); `false` when it
    /// created the Task.
    pub continued: bool,
}

impl AcceptedTask {
    /// An acceptance as the agent gets it. On the JS thread, when the call settles: the
    /// writer that published it only queued it.
    pub(super) fn from_arrival(arrival: &crate::events::Arrival) -> Result<Self> {
        let accepted = &arrival.accepted;
        let message = wire::convert::message_to_wire(
            &arrival.message,
            &accepted.context_id,
            Some(&accepted.task_id),
        );
        Ok(AcceptedTask {
            activation_id: accepted.activation_id.clone(),
            task_id: accepted.task_id.clone(),
            context_id: accepted.context_id.clone(),
            message: serde_json::to_value(message).map_err(internal)?,
            continued: arrival.continued,
        })
    }
}

/// One Task in the operator's view (`recentTasks`).
#[napi(object)]
pub struct TaskSummary {
    pub task_id: String,
    pub principal: String,
    pub context_id: String,
    pub source: String,
    pub state: TaskState,
    /// When the status last changed (Unix ms).
    pub status_ms: f64,
    pub created_ms: f64,
}

impl From<plane::TaskSummary> for TaskSummary {
    fn from(t: plane::TaskSummary) -> Self {
        TaskSummary {
            task_id: t.task_id,
            principal: t.principal,
            context_id: t.context_id,
            source: t.source,
            state: t.state.into(),
            status_ms: t.status_ms as f64,
            created_ms: t.created_ms as f64,
        }
    }
}

/// One Task with its owner, for the operator (`inspectTask`).
#[napi(object)]
pub struct InspectedTask {
    pub principal: String,
    pub source: String,
    /// The A2A Task (all history and artifacts).
    pub task: Value,
}

impl TryFrom<crate::record::TaskRecord> for InspectedTask {
    type Error = Failure;

    fn try_from(task: crate::record::TaskRecord) -> Result<Self> {
        let wire_task =
            serde_json::to_value(wire::convert::task_to_wire(&task)).map_err(internal)?;
        Ok(InspectedTask {
            principal: task.principal,
            source: task.source,
            task: wire_task,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_task_state_is_named_as_on_the_wire_and_taken_by_its_stored_name() {
        for state in record::TaskState::ALL {
            let name = TaskState::from(state);
            assert_eq!(
                name.as_str(),
                wire::convert::state_to_wire(state).as_str_name()
            );
            assert_eq!(record::TaskState::from(name), state);
            assert_eq!(TaskState::from_js(state.as_str()), Some(name));
            assert_eq!(TaskState::from_js(name.as_str()), Some(name));
        }
        assert_eq!(TaskState::from_js("TASK_STATE_UNSPECIFIED"), None);
        assert_eq!(TaskState::from_js("sleeping"), None);
    }

    #[test]
    fn every_task_state_is_in_exactly_one_set_as_the_records_define_them() {
        let sets = task_states();
        assert_eq!(sets.active, [TaskState::Submitted, TaskState::Working]);
        assert_eq!(
            sets.interrupted,
            [TaskState::InputRequired, TaskState::AuthRequired]
        );
        let all: Vec<TaskState> = [sets.active, sets.interrupted, sets.terminal.clone()].concat();
        let listed: Vec<TaskState> = record::TaskState::ALL
            .into_iter()
            .map(TaskState::from)
            .collect();
        assert_eq!(all, listed, "each state once, in TaskState's order");
        for state in sets.terminal {
            assert!(record::TaskState::from(state).is_terminal());
        }
    }

    #[test]
    fn a_disposition_is_named_as_the_plane_names_it() {
        for (disposition, name) in [
            (plane::Disposition::Created, Disposition::Created),
            (plane::Disposition::Continued, Disposition::Continued),
            (plane::Disposition::Duplicate, Disposition::Duplicate),
        ] {
            assert_eq!(Disposition::from(disposition), name);
            assert_eq!(name.as_str(), disposition.as_str());
        }
    }
}
