//! Native records: what the store keeps. They are not A2A wire types (those exist only at
//! the boundary; see `wire::convert`), so the store's format does not change when the wire
//! model does, and native sources can hand in content without speaking ProtoJSON.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// Who wrote a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// The caller (an A2A client or a native source's user).
    User,
    /// The resident agent.
    Agent,
}

/// The lifecycle state of a Task. `Submitted` and `Working` are active;
/// `InputRequired` and `AuthRequired` are interrupted (settled for a blocking send, still
/// continuable); the other four are terminal.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TaskState {
    Submitted,
    Working,
    InputRequired,
    AuthRequired,
    Completed,
    Failed,
    Canceled,
    Rejected,
}

impl TaskState {
    pub const ALL: [TaskState; 8] = [
        TaskState::Submitted,
        TaskState::Working,
        TaskState::InputRequired,
        TaskState::AuthRequired,
        TaskState::Completed,
        TaskState::Failed,
        TaskState::Canceled,
        TaskState::Rejected,
    ];

    /// The name the store writes.
    pub fn as_str(self) -> &'static str {
        match self {
            TaskState::Submitted => "submitted",
            TaskState::Working => "working",
            TaskState::InputRequired => "input_required",
            TaskState::AuthRequired => "auth_required",
            TaskState::Completed => "completed",
            TaskState::Failed => "failed",
            TaskState::Canceled => "canceled",
            TaskState::Rejected => "rejected",
        }
    }

    pub fn parse(name: &str) -> Option<TaskState> {
        TaskState::ALL.into_iter().find(|s| s.as_str() == name)
    }

    /// COMPLETED, FAILED, CANCELED or REJECTED: the Task never changes again.
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            TaskState::Completed | TaskState::Failed | TaskState::Canceled | TaskState::Rejected
        )
    }

    /// INPUT_REQUIRED or AUTH_REQUIRED.
    pub fn is_interrupted(self) -> bool {
        matches!(self, TaskState::InputRequired | TaskState::AuthRequired)
    }
}

/// The content of one part: exactly one kind.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PartContent {
    Text(String),
    Raw(#[serde(with = "base64_bytes")] Vec<u8>),
    Url(String),
    Data(Value),
}

/// One part of a message or artifact.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PartRecord {
    pub content: PartContent,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Map<String, Value>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub filename: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub media_type: Option<String>,
}

impl PartRecord {
    pub fn text(text: impl Into<String>) -> Self {
        PartRecord {
            content: PartContent::Text(text.into()),
            metadata: None,
            filename: None,
            media_type: None,
        }
    }

    pub fn data(value: Value) -> Self {
        PartRecord {
            content: PartContent::Data(value),
            metadata: None,
            filename: None,
            media_type: None,
        }
    }
}

/// A message in a Task's history or status. Its context and task ids are the Task's and
/// are filled in at the boundary; a caller's requested ids are routing, not content.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MessageRecord {
    pub message_id: String,
    pub role: Role,
    pub parts: Vec<PartRecord>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Map<String, Value>>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub extensions: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reference_task_ids: Vec<String>,
}

impl MessageRecord {
    /// A message from the caller with a single text part.
    pub fn user_text(message_id: impl Into<String>, text: impl Into<String>) -> Self {
        MessageRecord {
            message_id: message_id.into(),
            role: Role::User,
            parts: vec![PartRecord::text(text)],
            metadata: None,
            extensions: Vec::new(),
            reference_task_ids: Vec::new(),
        }
    }

    /// The message's text parts joined by newlines (other parts are left out).
    pub fn text(&self) -> String {
        self.parts
            .iter()
            .filter_map(|p| match &p.content {
                PartContent::Text(t) => Some(t.as_str()),
                _ => None,
            })
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// A message from the agent with a server-minted id.
    pub fn agent(parts: Vec<PartRecord>) -> Self {
        MessageRecord {
            message_id: crate::ids::mint(),
            role: Role::Agent,
            parts,
            metadata: None,
            extensions: Vec::new(),
            reference_task_ids: Vec::new(),
        }
    }
}

/// An output of a Task.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ArtifactRecord {
    pub artifact_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    pub parts: Vec<PartRecord>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Map<String, Value>>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub extensions: Vec<String>,
}

/// How a source lets a reply continue a Task (the Continuation column of the source
/// conformance matrix). Declared when the source registers; the plane decides.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Continuation {
    /// Replies never continue a Task: every event is new work.
    None,
    /// A verified reply anchor continues the waiting Task.
    ReplyAnchors,
    /// An authorized explicit taskId continues it (the A2A binding).
    ExplicitTaskId,
}

impl Continuation {
    pub fn as_str(self) -> &'static str {
        match self {
            Continuation::None => "none",
            Continuation::ReplyAnchors => "reply_anchors",
            Continuation::ExplicitTaskId => "explicit_task_id",
        }
    }

    pub fn parse(name: &str) -> Option<Continuation> {
        [
            Continuation::None,
            Continuation::ReplyAnchors,
            Continuation::ExplicitTaskId,
        ]
        .into_iter()
        .find(|c| c.as_str() == name)
    }
}

/// A Task as read from the store.
#[derive(Debug, Clone, PartialEq)]
pub struct TaskRecord {
    pub task_id: String,
    pub principal: String,
    pub context_id: String,
    pub source: String,
    pub continuation: Continuation,
    pub state: TaskState,
    /// The agent's message with the current status (a question, a rejection reason).
    pub status_message: Option<MessageRecord>,
    /// When the status last changed (Unix ms).
    pub status_ms: i64,
    pub created_ms: i64,
    /// Whether the Task records an input request nobody has answered yet.
    pub input_request_open: bool,
    /// Extension URIs the caller activated when the Task was created.
    pub extensions: Vec<String>,
    /// Oldest first; empty when the read asked for no history.
    pub history: Vec<MessageRecord>,
    /// Empty unless the read asked for artifacts.
    pub artifacts: Vec<ArtifactRecord>,
}

/// A native object locator: identifier keys, opaque values.
pub type Locator = BTreeMap<String, String>;

mod base64_bytes {
    use base64::engine::general_purpose::STANDARD;
    use base64::Engine;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(bytes: &[u8], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&STANDARD.encode(bytes))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        let text = String::deserialize(d)?;
        STANDARD.decode(text).map_err(serde::de::Error::custom)
    }
}
