//! What a caller sees of a Task: the durable record read for this principal (a foreign
//! Task is reported like a missing one), and the Task, its history, artifacts and live
//! updates projected onto the wire with only the extensions the caller activated (with
//! `outfitter-task/v1` active, the Task carries its locator).
//!
//! Every operation that returns a Task or streams its updates (ListTasks, GetTask,
//! CancelTask, SubscribeToTask, SendMessage, SendStreamingMessage) goes through here, on
//! every binding.

use serde_json::json;

use super::blocking::short_read;
use super::error::ApiError;
use super::Ctx;
use crate::events::TaskEvent;
use crate::record::{ArtifactRecord, MessageRecord, TaskRecord, TaskState};
use crate::wire::convert::{self, json_to_struct};
use crate::wire::extensions::OUTFITTER_TASK_KEY;
use crate::wire::extensions::{TaskLocator, ELICITATION_V1, OUTFITTER_TASK_V1};
use crate::wire::{self, Task, Timestamp};

/// Only extensions the caller activated are carried on what it reads.
fn keep_activated(
    extensions: &mut Vec<String>,
    metadata: &mut Option<pbjson_types::Struct>,
    activated: &[String],
) {
    extensions.retain(|uri| activated.iter().any(|a| a == uri));
    if let Some(metadata) = metadata {
        if !activated.iter().any(|a| a == OUTFITTER_TASK_V1) {
            metadata.fields.remove(OUTFITTER_TASK_KEY);
            metadata.fields.remove(OUTFITTER_TASK_V1);
        }
        if !activated.iter().any(|a| a == ELICITATION_V1) {
            metadata.fields.remove(ELICITATION_V1);
        }
    }
}

fn project_message(message: &mut wire::Message, activated: &[String]) {
    keep_activated(&mut message.extensions, &mut message.metadata, activated);
}

fn project_artifact(artifact: &mut wire::Artifact, activated: &[String]) {
    keep_activated(&mut artifact.extensions, &mut artifact.metadata, activated);
}

/// A stored Task as this caller sees it: extensions it did not activate are left out, and
/// with `outfitter-task/v1` active the Task carries its locator.
pub fn project_task(ctx: &Ctx, record: &TaskRecord) -> Task {
    let activated = &ctx.extensions;
    let mut task = convert::task_to_wire(record);
    task.history
        .iter_mut()
        .for_each(|m| project_message(m, activated));
    task.artifacts
        .iter_mut()
        .for_each(|a| project_artifact(a, activated));
    if let Some(message) = task.status.as_mut().and_then(|s| s.message.as_mut()) {
        project_message(message, activated);
    }
    if activated.iter().any(|a| a == OUTFITTER_TASK_V1) {
        let locator = TaskLocator::served_by(&ctx.handler.interface_url, None, &record.task_id);
        let mut metadata = serde_json::Map::new();
        metadata.insert(
            OUTFITTER_TASK_KEY.into(),
            json!({ "task": locator.to_json() }),
        );
        task.metadata = Some(json_to_struct(&metadata));
    }
    task
}

/// A whole Task the plane handed over (every history message: a settling update's
/// `TaskEvent::Status::settled`, an acceptance's `created`) as this caller sees it, with
/// the history cut to its last `history_length` messages as a read with that length
/// returns it.
pub fn project_with_history(ctx: &Ctx, record: &TaskRecord, history_length: Option<u32>) -> Task {
    let mut task = project_task(ctx, record);
    if let Some(keep) = history_length {
        let drop = task.history.len().saturating_sub(keep as usize);
        task.history.drain(..drop);
    }
    task
}

/// One durable update of a Task as this caller's stream event: the wire event that
/// [`event_json_into`] writes as JSON without building it.
pub fn event_frame(activated: &[String], event: &TaskEvent) -> wire::StreamResponse {
    use crate::wire::{stream_response, StreamResponse};
    let payload = match event {
        TaskEvent::Status {
            task_id,
            context_id,
            state,
            message,
            at_ms,
            ..
        } => {
            let message = message
                .as_ref()
                .map(|m| status_message(m, task_id, context_id, activated));
            stream_response::Payload::StatusUpdate(wire::TaskStatusUpdateEvent {
                task_id: task_id.clone(),
                context_id: context_id.clone(),
                status: Some(wire::TaskStatus {
                    state: convert::state_to_wire(*state) as i32,
                    message,
                    timestamp: Some(Timestamp::from_unix_millis(*at_ms)),
                }),
                metadata: None,
            })
        }
        TaskEvent::Artifact {
            task_id,
            context_id,
            artifact,
        } => {
            let artifact = update_artifact(artifact, activated);
            stream_response::Payload::ArtifactUpdate(wire::TaskArtifactUpdateEvent {
                task_id: task_id.clone(),
                context_id: context_id.clone(),
                artifact: Some(artifact),
                append: false,
                last_chunk: true,
                metadata: None,
            })
        }
    };
    StreamResponse {
        payload: Some(payload),
    }
}

/// Appends one durable update of a Task to `frames` as this caller's event JSON: the bytes
/// ProtoJSON encodes for [`event_frame`]'s wire event, written straight from the update. A stream writes two or three of these per Task (WORKING, each artifact,
/// COMPLETED), and building each wire event first (its ids, status and artifact copied
/// into prost types, then dropped) cost more than writing it (callgrind, one core: the
/// three frames of a Task settled at once 6.2k instructions through the wire types).
/// Only the parts with their own shape (a status message, an artifact) still go through
/// the wire types. `event_frames_are_written_as_the_wire_events_encode` holds the two to
/// the same bytes.
pub fn event_json_into(frames: &mut Vec<u8>, activated: &[String], event: &TaskEvent) {
    match event {
        TaskEvent::Status {
            task_id,
            context_id,
            state,
            message,
            at_ms,
            ..
        } => {
            frames.extend_from_slice(b"{\"statusUpdate\":");
            ids_into(frames, task_id, context_id);
            frames.extend_from_slice(b",\"status\":{\"state\":");
            wire::json::encode_into(frames, convert::state_to_wire(*state).as_str_name());
            if let Some(message) = message {
                frames.extend_from_slice(b",\"message\":");
                let message = status_message(message, task_id, context_id, activated);
                wire::json::encode_into(frames, &message);
            }
            frames.extend_from_slice(b",\"timestamp\":");
            wire::json::encode_into(frames, &Timestamp::from_unix_millis(*at_ms));
            frames.extend_from_slice(b"}}}");
        }
        TaskEvent::Artifact {
            task_id,
            context_id,
            artifact,
        } => {
            frames.extend_from_slice(b"{\"artifactUpdate\":");
            ids_into(frames, task_id, context_id);
            frames.extend_from_slice(b",\"artifact\":");
            wire::json::encode_into(frames, &update_artifact(artifact, activated));
            frames.extend_from_slice(b",\"lastChunk\":true}}");
        }
    }
}

/// A status update's message as this caller sees it.
fn status_message(
    message: &MessageRecord,
    task_id: &str,
    context_id: &str,
    activated: &[String],
) -> wire::Message {
    let mut message = convert::message_to_wire(message, context_id, Some(task_id));
    project_message(&mut message, activated);
    message
}

/// An artifact update's artifact as this caller sees it.
fn update_artifact(artifact: &ArtifactRecord, activated: &[String]) -> wire::Artifact {
    let mut artifact = convert::artifact_to_wire(artifact);
    project_artifact(&mut artifact, activated);
    artifact
}

/// `{"taskId":…,"contextId":…` of an update event (ids are never empty: a Task's are
/// minted by the server).
fn ids_into(frames: &mut Vec<u8>, task_id: &str, context_id: &str) {
    debug_assert!(!task_id.is_empty() && !context_id.is_empty());
    frames.extend_from_slice(b"{\"taskId\":");
    wire::json::encode_into(frames, task_id);
    frames.extend_from_slice(b",\"contextId\":");
    wire::json::encode_into(frames, context_id);
}

/// The durable Task for this caller, or `TASK_NOT_FOUND` (a foreign Task is reported the
/// same way as a missing one).
pub async fn task_snapshot(
    ctx: &Ctx,
    task_id: &str,
    history_length: Option<u32>,
) -> Result<Task, ApiError> {
    let record = read_task(ctx, task_id, history_length).await?;
    Ok(project_task(ctx, &record))
}

/// The stored record behind [`task_snapshot`], unprojected, or `TASK_NOT_FOUND`.
pub async fn read_task(
    ctx: &Ctx,
    task_id: &str,
    history_length: Option<u32>,
) -> Result<TaskRecord, ApiError> {
    read(ctx, task_id, history_length, true)
}

/// The Task's state only (its row: no history, no artifacts), or `TASK_NOT_FOUND`: for a
/// route that decides by the state and answers with a snapshot read later, if at all.
pub fn task_state(ctx: &Ctx, task_id: &str) -> Result<TaskState, ApiError> {
    Ok(read(ctx, task_id, Some(0), false)?.state)
}

fn read(
    ctx: &Ctx,
    task_id: &str,
    history_length: Option<u32>,
    include_artifacts: bool,
) -> Result<TaskRecord, ApiError> {
    let plane = &ctx.handler.plane;
    short_read(|| plane.get_task(&ctx.principal, task_id, history_length, include_artifacts))?
        .ok_or_else(|| ApiError::task_not_found(task_id))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::{ArtifactRecord, MessageRecord, PartContent, PartRecord, Role};

    /// Metadata carrying the outfitter-task locator and a field of the caller's own.
    fn metadata() -> Option<serde_json::Map<String, serde_json::Value>> {
        let value = json!({OUTFITTER_TASK_KEY: {"taskId": "x"}, "note": "a \"quoted\"\nline", "n": 42, "f": 1.5});
        value.as_object().cloned()
    }

    fn every_kind_of_update() -> Vec<TaskEvent> {
        let message = MessageRecord {
            message_id: "m-1".into(),
            role: Role::Agent,
            parts: vec![
                PartRecord::of(PartContent::Text("which one?\n\"a\" or \\b".into())),
                PartRecord {
                    metadata: metadata(),
                    filename: Some("f.txt".into()),
                    media_type: Some("text/plain".into()),
                    ..PartRecord::of(PartContent::Raw(vec![0, 1, 255]))
                },
                PartRecord::of(PartContent::Url("https://example.com/x".into())),
                PartRecord::of(PartContent::Data(
                    json!({"x": [1, 2.5, null, true], "y": "ü"}),
                )),
            ],
            metadata: metadata(),
            extensions: vec![OUTFITTER_TASK_V1.into(), ELICITATION_V1.into()],
            reference_task_ids: vec!["t-0".into()],
        };
        let mut events = Vec::new();
        for (i, state) in TaskState::ALL.into_iter().enumerate() {
            for message in [None, Some(message.clone())] {
                events.push(TaskEvent::Status {
                    task_id: "01a24f5f-d844-7748-9c22-f3145e4c3be8".into(),
                    context_id: "ctx \"quoted\"".into(),
                    state,
                    message,
                    at_ms: 1_765_000_000_000 + i as i64 * 1_001,
                    settled: None,
                });
            }
        }
        let artifacts = [
            ArtifactRecord {
                artifact_id: "a-1".into(),
                name: None,
                description: None,
                parts: vec![PartRecord::of(PartContent::Text("done".into()))],
                metadata: None,
                extensions: Vec::new(),
            },
            ArtifactRecord {
                artifact_id: "a-2".into(),
                name: Some("answer".into()),
                description: Some("the \"whole\" answer".into()),
                parts: message.parts.clone(),
                metadata: metadata(),
                extensions: vec![OUTFITTER_TASK_V1.into()],
            },
        ];
        for artifact in artifacts {
            events.push(TaskEvent::Artifact {
                task_id: "t-1".into(),
                context_id: "c-1".into(),
                artifact,
            });
        }
        events
    }

    #[test]
    fn event_frames_are_written_as_the_wire_events_encode() {
        let everything = [OUTFITTER_TASK_V1.to_string(), ELICITATION_V1.to_string()];
        for activated in [&[][..], &everything[..1], &everything[..]] {
            for event in every_kind_of_update() {
                let mut written = Vec::new();
                event_json_into(&mut written, activated, &event);
                let encoded = wire::json::encode(&event_frame(activated, &event));
                let written = String::from_utf8(written).unwrap();
                if written != encoded {
                    // The one freedom: a protobuf Struct (metadata, data) is a hash map, so
                    // its members come in any order; the same members, the same bytes.
                    let value =
                        |frame: &str| -> serde_json::Value { serde_json::from_str(frame).unwrap() };
                    assert_eq!(value(&written), value(&encoded), "{event:?} {activated:?}");
                    assert_eq!(written.len(), encoded.len(), "{written}\n{encoded}");
                }
            }
        }
    }
}
