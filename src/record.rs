//! Native records: what the store keeps. They are not A2A wire types (those exist only at
//! the boundary; see `wire::convert`), so the store's format does not change when the wire
//! model does, and native sources can hand in content without speaking ProtoJSON.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::digest::{
    write_array, write_canonical, write_canonical_map, write_string, CanonicalObject,
};
use crate::field_error::FieldError;

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

    /// SUBMITTED or WORKING: neither settled nor interrupted, the agent has work to do.
    pub fn is_active(self) -> bool {
        !self.is_settled()
    }

    /// INPUT_REQUIRED or AUTH_REQUIRED.
    pub fn is_interrupted(self) -> bool {
        matches!(self, TaskState::InputRequired | TaskState::AuthRequired)
    }

    /// Terminal or interrupted: the agent has nothing more to do on the Task until its
    /// caller acts, so a blocking send returns and a finished turn is not re-offered.
    pub fn is_settled(self) -> bool {
        self.is_terminal() || self.is_interrupted()
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
    /// Writes this part in canonical JSON (see [`MessageRecord::write_canonical`]).
    fn write_canonical(&self, out: &mut Vec<u8>) {
        let mut part = CanonicalObject::start(out);
        let mut content = CanonicalObject::start(part.member("content"));
        match &self.content {
            PartContent::Text(text) => write_string(text, content.member("text")),
            PartContent::Raw(bytes) => {
                write_string(&base64_bytes::encode(bytes), content.member("raw"))
            }
            PartContent::Url(url) => write_string(url, content.member("url")),
            PartContent::Data(value) => write_canonical(value, content.member("data")),
        }
        content.end();
        if let Some(filename) = &self.filename {
            write_string(filename, part.member("filename"));
        }
        if let Some(media_type) = &self.media_type {
            write_string(media_type, part.member("media_type"));
        }
        if let Some(metadata) = &self.metadata {
            write_canonical_map(metadata, part.member("metadata"));
        }
        part.end();
    }

    /// A part of `content` alone (no metadata, filename or media type).
    pub fn of(content: PartContent) -> Self {
        PartRecord {
            content,
            metadata: None,
            filename: None,
            media_type: None,
        }
    }

    pub fn text(text: impl Into<String>) -> Self {
        PartRecord::of(PartContent::Text(text.into()))
    }

    pub fn data(value: Value) -> Self {
        PartRecord::of(PartContent::Data(value))
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

    /// The one role check, for every way a message comes in: a caller's message is
    /// ROLE_USER, the agent's ROLE_AGENT. `field` names the message (`message`, `reply`).
    pub fn check_role(&self, role: Role, field: &str) -> Result<(), FieldError> {
        if self.role == role {
            return Ok(());
        }
        Err(FieldError::new(
            format!("{field}.role"),
            match role {
                Role::User => "an inbound message is the caller's: ROLE_USER",
                Role::Agent => "a message from the agent is ROLE_AGENT",
            },
        ))
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

    /// Writes this message as its `Serialize` form would be in canonical JSON (members
    /// sorted by key at every level; see `digest`), straight from the record: an intake's
    /// payload digest without a `serde_json::Value` built and dropped per message. Each
    /// member mirrors the field's serde attributes above (names, skipped empties, the part
    /// content's one key); a test holds the bytes to `digest::canonical_json` of the
    /// serialized message.
    pub fn write_canonical(&self, out: &mut Vec<u8>) {
        let mut message = CanonicalObject::start(out);
        if !self.extensions.is_empty() {
            write_array(&self.extensions, message.member("extensions"), |e, out| {
                write_string(e, out)
            });
        }
        write_string(&self.message_id, message.member("message_id"));
        if let Some(metadata) = &self.metadata {
            write_canonical_map(metadata, message.member("metadata"));
        }
        write_array(
            &self.parts,
            message.member("parts"),
            PartRecord::write_canonical,
        );
        if !self.reference_task_ids.is_empty() {
            write_array(
                &self.reference_task_ids,
                message.member("reference_task_ids"),
                |id, out| write_string(id, out),
            );
        }
        let role = match self.role {
            Role::User => "user",
            Role::Agent => "agent",
        };
        write_string(role, message.member("role"));
        message.end();
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

/// Where a claim (one accepted activation) stands, and the kinds of the state records
/// the store keeps for it, in order: ACCEPTED, WOKEN, WAKE_DELIVERED n, then WAKE_FAILED
/// or QUARANTINED. `WakeDelivered` is only ever a record (with its count), never the
/// claim's current state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ClaimState {
    /// Committed with its Task; not yet delivered to the agent.
    Accepted,
    /// Delivered to the agent at least once.
    Woken,
    /// One delivery of the wake (a record with the delivery's number).
    WakeDelivered,
    /// Given up by the wake queue: never offered again.
    WakeFailed,
    /// Its Task is missing from the store: a permanent failure, never offered.
    Quarantined,
}

impl ClaimState {
    pub const ALL: [ClaimState; 5] = [
        ClaimState::Accepted,
        ClaimState::Woken,
        ClaimState::WakeDelivered,
        ClaimState::WakeFailed,
        ClaimState::Quarantined,
    ];

    /// The name the store writes.
    pub fn as_str(self) -> &'static str {
        match self {
            ClaimState::Accepted => "ACCEPTED",
            ClaimState::Woken => "WOKEN",
            ClaimState::WakeDelivered => "WAKE_DELIVERED",
            ClaimState::WakeFailed => "WAKE_FAILED",
            ClaimState::Quarantined => "QUARANTINED",
        }
    }

    pub fn parse(name: &str) -> Option<ClaimState> {
        ClaimState::ALL.into_iter().find(|s| s.as_str() == name)
    }

    /// ACCEPTED or WOKEN: the activation may still be delivered to the agent.
    pub fn is_deliverable(self) -> bool {
        matches!(self, ClaimState::Accepted | ClaimState::Woken)
    }

    /// WAKE_FAILED or QUARANTINED: given up for good (never offered, never recovered).
    pub fn is_given_up(self) -> bool {
        matches!(self, ClaimState::WakeFailed | ClaimState::Quarantined)
    }
}

/// How an acceptance settled its claim (stored with the claim and in its evidence).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClaimRoute {
    /// A new Task.
    Created,
    /// A waiting Task was continued.
    Continued,
    /// A direct Message outcome: no Task.
    Direct,
}

impl ClaimRoute {
    pub fn as_str(self) -> &'static str {
        match self {
            ClaimRoute::Created => "created",
            ClaimRoute::Continued => "continued",
            ClaimRoute::Direct => "direct",
        }
    }
}

/// Where an outbound delivery stands: `prepared` → `sending` → `delivered`, `failed` (the
/// provider certainly did not perform it; a later call may retry) or `ambiguous` (final).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DeliveryState {
    Prepared,
    Sending,
    Delivered,
    Failed,
    Ambiguous,
}

impl DeliveryState {
    pub const ALL: [DeliveryState; 5] = [
        DeliveryState::Prepared,
        DeliveryState::Sending,
        DeliveryState::Delivered,
        DeliveryState::Failed,
        DeliveryState::Ambiguous,
    ];

    /// The name the store writes.
    pub fn as_str(self) -> &'static str {
        match self {
            DeliveryState::Prepared => "prepared",
            DeliveryState::Sending => "sending",
            DeliveryState::Delivered => "delivered",
            DeliveryState::Failed => "failed",
            DeliveryState::Ambiguous => "ambiguous",
        }
    }

    pub fn parse(name: &str) -> Option<DeliveryState> {
        DeliveryState::ALL.into_iter().find(|s| s.as_str() == name)
    }
}

/// How a delivery found in `sending` after a crash is recovered (the source's Delivery
/// recovery column).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Recovery {
    /// The provider deduplicates on the operation id: resending is safe.
    IdempotencyKey,
    /// The provider can be asked whether the mutation happened (needs a reconciler).
    Lookup,
    /// Neither: mark ambiguous, record evidence, report unhealthy.
    Ambiguous,
}

impl Recovery {
    pub fn as_str(self) -> &'static str {
        match self {
            Recovery::IdempotencyKey => "idempotency_key",
            Recovery::Lookup => "lookup",
            Recovery::Ambiguous => "ambiguous",
        }
    }

    pub fn parse(name: &str) -> Option<Recovery> {
        [
            Recovery::IdempotencyKey,
            Recovery::Lookup,
            Recovery::Ambiguous,
        ]
        .into_iter()
        .find(|r| r.as_str() == name)
    }
}

/// What a piece of evidence is about. The plane records the named kinds itself; a source
/// adapter records evidence of its own kinds (any identifier) through `record_evidence`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum EvidenceKind {
    /// An acceptance (healthy): what was claimed, from whom, and where it went.
    Activation,
    /// A claim whose Task is missing was quarantined at startup.
    ClaimQuarantined,
    /// A delivery may or may not have reached the provider.
    DeliveryAmbiguous,
    /// An activation the wake queue could not admit (it was full).
    WakeOverflow,
    /// An activation given up after too many deliveries left its Task unsettled.
    WakeFailed,
    /// An activation whose turns failed too often in a row (it stays replayable).
    TurnFailed,
    /// A kind named by a source adapter.
    Source(String),
}

impl EvidenceKind {
    const NAMED: [EvidenceKind; 6] = [
        EvidenceKind::Activation,
        EvidenceKind::ClaimQuarantined,
        EvidenceKind::DeliveryAmbiguous,
        EvidenceKind::WakeOverflow,
        EvidenceKind::WakeFailed,
        EvidenceKind::TurnFailed,
    ];

    /// The name the store writes.
    pub fn as_str(&self) -> &str {
        match self {
            EvidenceKind::Activation => "activation",
            EvidenceKind::ClaimQuarantined => "claim_quarantined",
            EvidenceKind::DeliveryAmbiguous => "delivery_ambiguous",
            EvidenceKind::WakeOverflow => "wake_overflow",
            EvidenceKind::WakeFailed => "wake_failed",
            EvidenceKind::TurnFailed => "turn_failed",
            EvidenceKind::Source(kind) => kind,
        }
    }

    /// The kind a stored name stands for: one of the plane's, else a source's.
    pub fn parse(name: &str) -> EvidenceKind {
        EvidenceKind::NAMED
            .into_iter()
            .find(|k| k.as_str() == name)
            .unwrap_or_else(|| EvidenceKind::Source(name.to_string()))
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

impl TaskRecord {
    /// The Task waits for its caller: interrupted (INPUT_REQUIRED or AUTH_REQUIRED) with
    /// an input request nobody has answered. Only a continuation moves it on; the agent is
    /// not offered it meanwhile.
    pub fn awaits_caller(&self) -> bool {
        self.state.is_interrupted() && self.input_request_open
    }
}

/// A native object locator: identifier keys, opaque values.
pub type Locator = BTreeMap<String, String>;

mod base64_bytes {
    use base64::engine::general_purpose::STANDARD;
    use base64::Engine;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(bytes: &[u8], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&encode(bytes))
    }

    /// The text raw bytes are stored as (also in a message's canonical JSON).
    pub fn encode(bytes: &[u8]) -> String {
        STANDARD.encode(bytes)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        let text = String::deserialize(d)?;
        STANDARD.decode(text).map_err(serde::de::Error::custom)
    }
}
