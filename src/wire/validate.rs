//! The members upstream marks REQUIRED, and oneofs that must hold a member.
//!
//! ProtoJSON parsing accepts a document with REQUIRED members missing (they decode to
//! defaults), so every decoded document is checked here before use. Paths are the JSON
//! (camelCase) paths a client wrote, so errors point at the client's own text.

use crate::field_error::FieldError;

use super::{
    part, send_message_response, stream_response, AgentCard, AgentInterface, AgentSkill, Artifact,
    ListTasksResponse, Message, Part, Role, SendMessageRequest, SendMessageResponse,
    StreamResponse, Task, TaskArtifactUpdateEvent, TaskState, TaskStatus, TaskStatusUpdateEvent,
};

/// A wire document whose REQUIRED members can be checked. `at` is the JSON path of
/// `self` within the document ([`At::Root`] at the top).
pub trait Validate {
    fn validate(&self, at: &At<'_>) -> Result<(), FieldError>;
}

/// A JSON path, written out only for an error: a valid document (every request) checks
/// its members without building a path string for each (a profile of one-core
/// `message:send` counted ten such strings per request).
#[derive(Debug, Clone, Copy)]
pub enum At<'a> {
    /// The document itself.
    Root,
    /// `member` (a dotted path of members) of the value at the first path.
    Member(&'a At<'a>, &'static str),
    /// Entry `i` of the list `member` of the value at the first path.
    Entry(&'a At<'a>, &'static str, usize),
}

impl At<'_> {
    fn write(&self, out: &mut String) {
        match self {
            At::Root => {}
            At::Member(at, member) => {
                at.write(out);
                if !out.is_empty() {
                    out.push('.');
                }
                out.push_str(member);
            }
            At::Entry(at, member, i) => {
                At::Member(at, member).write(out);
                out.push('[');
                out.push_str(&i.to_string());
                out.push(']');
            }
        }
    }

    /// The path as the client wrote it (empty for the document itself).
    pub fn path(&self) -> String {
        let mut out = String::new();
        self.write(&mut out);
        out
    }
}

fn path(at: &At<'_>, member: &'static str) -> String {
    At::Member(at, member).path()
}

/// A REQUIRED member missing or out of range.
fn invalid(field: String, message: impl Into<String>) -> FieldError {
    FieldError::new(field, message)
}

fn required_string(value: &str, at: &At<'_>, member: &'static str) -> Result<(), FieldError> {
    if value.is_empty() {
        return Err(invalid(
            path(at, member),
            "is required and must not be empty",
        ));
    }
    Ok(())
}

fn required_list<T>(items: &[T], at: &At<'_>, member: &'static str) -> Result<(), FieldError> {
    if items.is_empty() {
        return Err(invalid(
            path(at, member),
            "is required and must hold at least one entry",
        ));
    }
    Ok(())
}

fn each<T: Validate>(items: &[T], at: &At<'_>, member: &'static str) -> Result<(), FieldError> {
    items
        .iter()
        .enumerate()
        .try_for_each(|(i, item)| item.validate(&At::Entry(at, member, i)))
}

fn required<T: Validate>(
    value: &Option<T>,
    at: &At<'_>,
    member: &'static str,
) -> Result<(), FieldError> {
    match value {
        Some(v) => v.validate(&At::Member(at, member)),
        None => Err(invalid(path(at, member), "is required")),
    }
}

impl Validate for Part {
    fn validate(&self, at: &At<'_>) -> Result<(), FieldError> {
        match self.content {
            Some(part::Content::Text(_) | part::Content::Raw(_) | part::Content::Url(_)) => Ok(()),
            Some(part::Content::Data(_)) => Ok(()),
            None => Err(invalid(
                at.path(),
                "a part needs exactly one of `text`, `raw`, `url` or `data`",
            )),
        }
    }
}

impl Validate for Message {
    fn validate(&self, at: &At<'_>) -> Result<(), FieldError> {
        required_string(&self.message_id, at, "messageId")?;
        match Role::try_from(self.role) {
            Ok(Role::User | Role::Agent) => {}
            _ => {
                return Err(invalid(
                    path(at, "role"),
                    "is required: ROLE_USER or ROLE_AGENT",
                ))
            }
        }
        required_list(&self.parts, at, "parts")?;
        each(&self.parts, at, "parts")
    }
}

impl Validate for Artifact {
    fn validate(&self, at: &At<'_>) -> Result<(), FieldError> {
        required_string(&self.artifact_id, at, "artifactId")?;
        required_list(&self.parts, at, "parts")?;
        each(&self.parts, at, "parts")
    }
}

impl Validate for TaskStatus {
    fn validate(&self, at: &At<'_>) -> Result<(), FieldError> {
        match TaskState::try_from(self.state) {
            Ok(TaskState::Unspecified) | Err(_) => {
                return Err(invalid(
                    path(at, "state"),
                    "is required: a TASK_STATE_* other than UNSPECIFIED",
                ))
            }
            Ok(_) => {}
        }
        if let Some(message) = &self.message {
            message.validate(&At::Member(at, "message"))?;
        }
        Ok(())
    }
}

impl Validate for Task {
    fn validate(&self, at: &At<'_>) -> Result<(), FieldError> {
        required_string(&self.id, at, "id")?;
        required(&self.status, at, "status")?;
        each(&self.artifacts, at, "artifacts")?;
        each(&self.history, at, "history")
    }
}

impl Validate for TaskStatusUpdateEvent {
    fn validate(&self, at: &At<'_>) -> Result<(), FieldError> {
        required_string(&self.task_id, at, "taskId")?;
        required_string(&self.context_id, at, "contextId")?;
        required(&self.status, at, "status")
    }
}

impl Validate for TaskArtifactUpdateEvent {
    fn validate(&self, at: &At<'_>) -> Result<(), FieldError> {
        required_string(&self.task_id, at, "taskId")?;
        required_string(&self.context_id, at, "contextId")?;
        required(&self.artifact, at, "artifact")
    }
}

impl Validate for SendMessageRequest {
    fn validate(&self, at: &At<'_>) -> Result<(), FieldError> {
        required(&self.message, at, "message")?;
        if let Some(config) = &self.configuration {
            if config.history_length.is_some_and(|n| n < 0) {
                return Err(invalid(
                    path(at, "configuration.historyLength"),
                    "must not be negative",
                ));
            }
        }
        Ok(())
    }
}

impl Validate for SendMessageResponse {
    fn validate(&self, at: &At<'_>) -> Result<(), FieldError> {
        match &self.payload {
            Some(send_message_response::Payload::Task(task)) => {
                task.validate(&At::Member(at, "task"))
            }
            Some(send_message_response::Payload::Message(m)) => {
                m.validate(&At::Member(at, "message"))
            }
            None => Err(invalid(
                at.path(),
                "needs exactly one of `task` or `message`",
            )),
        }
    }
}

impl Validate for StreamResponse {
    fn validate(&self, at: &At<'_>) -> Result<(), FieldError> {
        match &self.payload {
            Some(stream_response::Payload::Task(task)) => task.validate(&At::Member(at, "task")),
            Some(stream_response::Payload::Message(m)) => m.validate(&At::Member(at, "message")),
            Some(stream_response::Payload::StatusUpdate(e)) => {
                e.validate(&At::Member(at, "statusUpdate"))
            }
            Some(stream_response::Payload::ArtifactUpdate(e)) => {
                e.validate(&At::Member(at, "artifactUpdate"))
            }
            None => Err(invalid(
                at.path(),
                "needs exactly one of `task`, `message`, `statusUpdate` or `artifactUpdate`",
            )),
        }
    }
}

impl Validate for ListTasksResponse {
    fn validate(&self, at: &At<'_>) -> Result<(), FieldError> {
        each(&self.tasks, at, "tasks")
    }
}

impl Validate for AgentInterface {
    fn validate(&self, at: &At<'_>) -> Result<(), FieldError> {
        required_string(&self.url, at, "url")?;
        required_string(&self.protocol_binding, at, "protocolBinding")?;
        required_string(&self.protocol_version, at, "protocolVersion")
    }
}

impl Validate for AgentSkill {
    fn validate(&self, at: &At<'_>) -> Result<(), FieldError> {
        required_string(&self.id, at, "id")?;
        required_string(&self.name, at, "name")?;
        required_string(&self.description, at, "description")?;
        required_list(&self.tags, at, "tags")
    }
}

impl Validate for AgentCard {
    fn validate(&self, at: &At<'_>) -> Result<(), FieldError> {
        required_string(&self.name, at, "name")?;
        required_string(&self.description, at, "description")?;
        required_list(&self.supported_interfaces, at, "supportedInterfaces")?;
        each(&self.supported_interfaces, at, "supportedInterfaces")?;
        required_string(&self.version, at, "version")?;
        if self.capabilities.is_none() {
            return Err(invalid(
                path(at, "capabilities"),
                "is required (it may be `{}`)",
            ));
        }
        required_list(&self.default_input_modes, at, "defaultInputModes")?;
        required_list(&self.default_output_modes, at, "defaultOutputModes")?;
        // `skills` may be empty (the spec's own examples use `"skills": []`).
        each(&self.skills, at, "skills")
    }
}
