//! Conversion between the wire model and the native records, at the boundary only.

use pbjson_types::value::Kind;
use serde_json::{Map, Number, Value};

use super::validate::{At, Validate};
use super::{
    part, Artifact, Message, Part, Role, Task, TaskState, TaskStatus, Timestamp, MAX_EXACT_INTEGER,
};
use crate::field_error::FieldError;
use crate::record::{self, ArtifactRecord, MessageRecord, PartContent, PartRecord, TaskRecord};

/// A `google.protobuf.Value` as plain JSON; integral numbers stay integers.
pub fn value_to_json(value: &pbjson_types::Value) -> Value {
    match &value.kind {
        None | Some(Kind::NullValue(_)) => Value::Null,
        Some(Kind::BoolValue(b)) => Value::Bool(*b),
        Some(Kind::StringValue(s)) => Value::String(s.clone()),
        Some(Kind::NumberValue(n)) => {
            if n.fract() == 0.0 && n.abs() <= MAX_EXACT_INTEGER {
                Value::Number(Number::from(*n as i64))
            } else {
                Number::from_f64(*n)
                    .map(Value::Number)
                    .unwrap_or(Value::Null)
            }
        }
        Some(Kind::ListValue(list)) => {
            Value::Array(list.values.iter().map(value_to_json).collect())
        }
        Some(Kind::StructValue(s)) => Value::Object(struct_to_json(s)),
    }
}

pub fn struct_to_json(s: &pbjson_types::Struct) -> Map<String, Value> {
    s.fields
        .iter()
        .map(|(k, v)| (k.clone(), value_to_json(v)))
        .collect()
}

/// Plain JSON as a `google.protobuf.Value`.
pub fn json_to_value(value: &Value) -> pbjson_types::Value {
    let kind = match value {
        Value::Null => Kind::NullValue(0),
        Value::Bool(b) => Kind::BoolValue(*b),
        Value::Number(n) => Kind::NumberValue(n.as_f64().unwrap_or(0.0)),
        Value::String(s) => Kind::StringValue(s.clone()),
        Value::Array(items) => Kind::ListValue(pbjson_types::ListValue {
            values: items.iter().map(json_to_value).collect(),
        }),
        Value::Object(map) => Kind::StructValue(json_to_struct(map)),
    };
    pbjson_types::Value { kind: Some(kind) }
}

pub fn json_to_struct(map: &Map<String, Value>) -> pbjson_types::Struct {
    pbjson_types::Struct {
        fields: map
            .iter()
            .map(|(k, v)| (k.clone(), json_to_value(v)))
            .collect(),
    }
}

fn non_empty(s: String) -> Option<String> {
    (!s.is_empty()).then_some(s)
}

pub fn part_from_wire(p: Part) -> Result<PartRecord, FieldError> {
    let content = match p.content {
        Some(part::Content::Text(t)) => PartContent::Text(t),
        Some(part::Content::Raw(b)) => PartContent::Raw(b.to_vec()),
        Some(part::Content::Url(u)) => PartContent::Url(u),
        Some(part::Content::Data(v)) => PartContent::Data(value_to_json(&v)),
        None => {
            return Err(FieldError::new(
                "",
                "a part needs exactly one of `text`, `raw`, `url` or `data`",
            ))
        }
    };
    Ok(PartRecord {
        content,
        metadata: p.metadata.as_ref().map(struct_to_json),
        filename: non_empty(p.filename),
        media_type: non_empty(p.media_type),
    })
}

fn parts_from_wire(parts: Vec<Part>) -> Result<Vec<PartRecord>, FieldError> {
    parts
        .into_iter()
        .enumerate()
        .map(|(i, p)| part_from_wire(p).map_err(|e| e.within(&format!("parts[{i}]"))))
        .collect()
}

pub fn part_to_wire(p: &PartRecord) -> Part {
    let content = match &p.content {
        PartContent::Text(t) => part::Content::Text(t.clone()),
        PartContent::Raw(b) => part::Content::Raw(b.clone()),
        PartContent::Url(u) => part::Content::Url(u.clone()),
        PartContent::Data(v) => part::Content::Data(json_to_value(v)),
    };
    Part {
        content: Some(content),
        metadata: p.metadata.as_ref().map(json_to_struct),
        filename: p.filename.clone().unwrap_or_default(),
        media_type: p.media_type.clone().unwrap_or_default(),
    }
}

/// An inbound wire message as a native record, plus the ids it asks for (routing, not
/// content): `(record, requested contextId, requested taskId)`.
pub fn message_from_wire(
    m: Message,
) -> Result<(MessageRecord, Option<String>, Option<String>), FieldError> {
    m.validate(&At::Root)?;
    let role = match Role::try_from(m.role) {
        Ok(Role::Agent) => record::Role::Agent,
        _ => record::Role::User,
    };
    let parts = parts_from_wire(m.parts)?;
    let record = MessageRecord {
        message_id: m.message_id,
        role,
        parts,
        metadata: m.metadata.as_ref().map(struct_to_json),
        extensions: m.extensions,
        reference_task_ids: m.reference_task_ids,
    };
    Ok((record, non_empty(m.context_id), non_empty(m.task_id)))
}

/// A stored message as the wire sees it, inside its Task's context.
pub fn message_to_wire(m: &MessageRecord, context_id: &str, task_id: Option<&str>) -> Message {
    Message {
        message_id: m.message_id.clone(),
        context_id: context_id.to_string(),
        task_id: task_id.unwrap_or_default().to_string(),
        role: match m.role {
            record::Role::User => Role::User,
            record::Role::Agent => Role::Agent,
        } as i32,
        parts: m.parts.iter().map(part_to_wire).collect(),
        metadata: m.metadata.as_ref().map(json_to_struct),
        extensions: m.extensions.clone(),
        reference_task_ids: m.reference_task_ids.clone(),
    }
}

pub fn artifact_to_wire(a: &ArtifactRecord) -> Artifact {
    Artifact {
        artifact_id: a.artifact_id.clone(),
        name: a.name.clone().unwrap_or_default(),
        description: a.description.clone().unwrap_or_default(),
        parts: a.parts.iter().map(part_to_wire).collect(),
        metadata: a.metadata.as_ref().map(json_to_struct),
        extensions: a.extensions.clone(),
    }
}

pub fn state_to_wire(state: record::TaskState) -> TaskState {
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

/// `TASK_STATE_*` as a native state; `UNSPECIFIED` has none.
pub fn state_from_wire(state: TaskState) -> Option<record::TaskState> {
    Some(match state {
        TaskState::Unspecified => return None,
        TaskState::Submitted => record::TaskState::Submitted,
        TaskState::Working => record::TaskState::Working,
        TaskState::InputRequired => record::TaskState::InputRequired,
        TaskState::AuthRequired => record::TaskState::AuthRequired,
        TaskState::Completed => record::TaskState::Completed,
        TaskState::Failed => record::TaskState::Failed,
        TaskState::Canceled => record::TaskState::Canceled,
        TaskState::Rejected => record::TaskState::Rejected,
    })
}

pub fn status_to_wire(t: &TaskRecord) -> TaskStatus {
    TaskStatus {
        state: state_to_wire(t.state) as i32,
        message: t
            .status_message
            .as_ref()
            .map(|m| message_to_wire(m, &t.context_id, Some(&t.task_id))),
        timestamp: Some(Timestamp::from_unix_millis(t.status_ms)),
    }
}

/// A stored Task as the wire sees it. History and artifacts are whatever the read
/// fetched; `metadata` is added by the caller (it depends on the request's extensions).
pub fn task_to_wire(t: &TaskRecord) -> Task {
    Task {
        id: t.task_id.clone(),
        context_id: t.context_id.clone(),
        status: Some(status_to_wire(t)),
        artifacts: t.artifacts.iter().map(artifact_to_wire).collect(),
        history: t
            .history
            .iter()
            .map(|m| message_to_wire(m, &t.context_id, Some(&t.task_id)))
            .collect(),
        metadata: None,
    }
}

/// A wire artifact (from the agent side) as a native record.
pub fn artifact_from_wire(a: Artifact) -> Result<ArtifactRecord, FieldError> {
    a.validate(&At::Root)?;
    let parts = parts_from_wire(a.parts)?;
    Ok(ArtifactRecord {
        artifact_id: a.artifact_id,
        name: non_empty(a.name),
        description: non_empty(a.description),
        parts,
        metadata: a.metadata.as_ref().map(struct_to_json),
        extensions: a.extensions,
    })
}
