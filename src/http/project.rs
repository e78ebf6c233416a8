//! What a caller sees of a Task: the durable record read for this principal (a foreign
//! Task is reported like a missing one), and the Task, its history, artifacts and live
//! updates projected onto the wire with only the extensions the caller activated (with
//! `outfitter-task/v1` active, the Task carries its locator).
//!
//! Every route that returns a Task or streams its updates (`GET /tasks`, `GET
//! /tasks/{id}`, cancel, subscribe, `message:send`, `message:stream`) goes through here.

use serde_json::json;

use super::blocking::short_read;
use super::error::ApiError;
use super::Ctx;
use crate::events::TaskEvent;
use crate::record::{TaskRecord, TaskState};
use crate::wire::convert::{self, json_to_struct};
use crate::wire::extensions::OUTFITTER_TASK_KEY;
use crate::wire::extensions::{TaskLocator, ELICITATION_V1, OUTFITTER_TASK_V1};
use crate::wire::{self, stream_response, StreamResponse, Task, Timestamp};

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
        let locator = TaskLocator::served_by(&ctx.shared.interface_url, None, &record.task_id);
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

/// One durable update of a Task as this caller's stream frame.
pub fn event_frame(activated: &[String], event: &TaskEvent) -> StreamResponse {
    let payload = match event {
        TaskEvent::Status {
            task_id,
            context_id,
            state,
            message,
            at_ms,
            ..
        } => {
            let mut message = message
                .as_ref()
                .map(|m| convert::message_to_wire(m, context_id, Some(task_id)));
            if let Some(m) = message.as_mut() {
                project_message(m, activated);
            }
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
            let mut artifact = convert::artifact_to_wire(artifact);
            project_artifact(&mut artifact, activated);
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
    let plane = &ctx.shared.plane;
    short_read(|| plane.get_task(&ctx.principal, task_id, history_length, include_artifacts))?
        .ok_or_else(|| ApiError::task_not_found(task_id))
}
