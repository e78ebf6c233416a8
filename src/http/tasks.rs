//! `GET /tasks`, `GET /tasks/{id}`, `POST /tasks/{id}:cancel`, `GET|POST
//! /tasks/{id}:subscribe`, and the Task snapshots and streams `message:send` and
//! `message:stream` share.

use std::time::Duration;

use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};
use serde_json::{json, Value};

use super::conn::StreamGuard;
use super::error::ApiError;
use super::{json_response, negotiate, sse, Body, Ctx};
use crate::events::TaskEvent;
use crate::plane::{ListFilter, PlaneError};
use crate::record::TaskRecord;
use crate::wire::convert::{self, json_to_struct};
use crate::wire::extensions::{TaskLocator, ELICITATION_V1, OUTFITTER_TASK_V1};
use crate::wire::json::ListTasksResponseJson;
use crate::wire::{
    self, stream_response, ListTasksResponse, StreamResponse, Task, TaskState, Timestamp,
};

/// The metadata key of `outfitter-task/v1` payloads (as its schema says).
pub const OUTFITTER_METADATA_KEY: &str = "outfitter-task/v1";

/// Default and largest page of `GET /tasks`.
const DEFAULT_PAGE_SIZE: u32 = 50;
const MAX_PAGE_SIZE: u32 = 100;
/// SSE keep-alive interval.
const KEEP_ALIVE: Duration = Duration::from_secs(15);

/// Runs a blocking plane call off the async workers.
pub async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, PlaneError> + Send + 'static,
) -> Result<T, ApiError> {
    match tokio::task::spawn_blocking(work).await {
        Ok(result) => result.map_err(ApiError::from),
        Err(_) => Err(ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "INTERNAL",
            "the task plane call failed unexpectedly; nothing was acknowledged",
        )),
    }
}

/// Only extensions the caller activated are carried on what it reads.
fn keep_activated(
    extensions: &mut Vec<String>,
    metadata: &mut Option<pbjson_types::Struct>,
    activated: &[String],
) {
    extensions.retain(|uri| activated.iter().any(|a| a == uri));
    if let Some(metadata) = metadata {
        if !activated.iter().any(|a| a == OUTFITTER_TASK_V1) {
            metadata.fields.remove(OUTFITTER_METADATA_KEY);
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
            OUTFITTER_METADATA_KEY.into(),
            json!({ "task": locator.to_json() }),
        );
        task.metadata = Some(json_to_struct(&metadata));
    }
    task
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

async fn read_task(
    ctx: &Ctx,
    task_id: &str,
    history_length: Option<u32>,
) -> Result<TaskRecord, ApiError> {
    let plane = ctx.shared.plane.clone();
    let (principal, id) = (ctx.principal.clone(), task_id.to_string());
    blocking(move || plane.get_task(&principal, &id, history_length, true))
        .await?
        .ok_or_else(|| ApiError::task_not_found(task_id))
}

fn settled(state: crate::record::TaskState) -> bool {
    state.is_terminal() || state.is_interrupted()
}

/// Waits until the Task is terminal or interrupted, `timeout` passes, or the listener
/// shuts down — whichever comes first.
pub async fn wait_settled(ctx: &Ctx, task_id: &str, timeout: Duration) -> Result<(), ApiError> {
    let mut updates = ctx.shared.plane.events().subscribe(task_id);
    if settled(read_task(ctx, task_id, Some(0)).await?.state) {
        return Ok(());
    }
    let deadline = tokio::time::Instant::now() + timeout;
    let mut shutdown = ctx.shared.shutdown.clone();
    loop {
        tokio::select! {
            update = updates.recv() => match update {
                Ok(event) if event.state().is_some_and(settled) => return Ok(()),
                Ok(_) => {}
                Err(_) => return Ok(()), // fell behind: the snapshot read next tells the truth
            },
            _ = tokio::time::sleep_until(deadline) => return Ok(()),
            _ = shutdown.changed() => return Ok(()),
        }
    }
}

fn event_frame(ctx: &Ctx, event: &TaskEvent) -> StreamResponse {
    let activated = &ctx.extensions;
    let payload = match event {
        TaskEvent::Status {
            task_id,
            context_id,
            state,
            message,
            at_ms,
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

/// Streams a Task: its snapshot first, then live updates, until an update settles it
/// (terminal or interrupted), the client leaves, or the listener shuts down. With
/// `close_if_settled`, a snapshot that is settled already ends the stream at once.
async fn stream_updates(
    ctx: Ctx,
    slot: StreamGuard,
    task_id: String,
    history_length: Option<u32>,
    close_if_settled: bool,
) -> Result<Response<Body>, ApiError> {
    // Subscribe before reading the snapshot, so no update falls between the two.
    let mut updates = ctx.shared.plane.events().subscribe(&task_id);
    let record = read_task(&ctx, &task_id, history_length).await?;
    let (response, events) = sse::response(&ctx.extensions, slot, ctx.write_timeout());
    // A terminal snapshot always ends the stream (nothing more can happen), even when the
    // Task settled between the caller's checks and this read.
    let ends_now = record.state.is_terminal() || (close_if_settled && settled(record.state));
    // Encoded here, so the stream keeps neither the record nor its wire copy: only the
    // bytes, until the client has taken them.
    let first = sse::frame(&StreamResponse {
        payload: Some(stream_response::Payload::Task(project_task(&ctx, &record))),
    });
    drop(record);
    let mut shutdown = ctx.shared.shutdown.clone();
    tokio::spawn(async move {
        if !events.push(first).await || ends_now {
            return;
        }
        loop {
            tokio::select! {
                update = updates.recv() => {
                    let Ok(event) = update else { return };
                    let ends = event.state().is_some_and(settled);
                    // Only the encoded bytes wait for a slow client.
                    let frame = sse::frame(&event_frame(&ctx, &event));
                    drop(event);
                    // A stalled client must not hold up shutdown.
                    let sent = tokio::select! {
                        sent = events.push(frame) => sent,
                        _ = shutdown.changed() => false,
                    };
                    if !sent || ends {
                        return;
                    }
                }
                _ = shutdown.changed() => return,
                // The connection ended: let go of the subscription and the request now.
                _ = events.closed() => return,
                _ = tokio::time::sleep(KEEP_ALIVE) => {
                    if !events.keep_alive().await {
                        return;
                    }
                }
            }
        }
    });
    Ok(response)
}

/// `message:stream` after acceptance (`slot` was taken before intake, so an accepted
/// message is never refused for want of a stream).
pub async fn stream_task(
    ctx: Ctx,
    slot: StreamGuard,
    task_id: String,
    history_length: Option<u32>,
) -> Result<Response<Body>, ApiError> {
    stream_updates(ctx, slot, task_id, history_length, true).await
}

fn history_length_param(params: &[(String, String)]) -> Result<Option<u32>, ApiError> {
    match params.iter().find(|(k, _)| k == "historyLength") {
        None => Ok(None),
        Some((_, v)) => v
            .parse::<i64>()
            .ok()
            .filter(|n| *n >= 0)
            .map(|n| Some(n.min(i64::from(u32::MAX)) as u32))
            .ok_or_else(|| {
                ApiError::invalid(
                    "historyLength",
                    format!("must be a whole number ≥ 0, got `{v}`"),
                )
            }),
    }
}

pub async fn get(
    ctx: Ctx,
    req: Request<Incoming>,
    task_id: String,
) -> Result<Response<Body>, ApiError> {
    let params = negotiate::query_params(req.uri().query());
    let history_length = history_length_param(&params)?;
    let task = task_snapshot(&ctx, &task_id, history_length).await?;
    Ok(json_response(
        StatusCode::OK,
        wire::json::encode(&task).into(),
        &ctx.extensions,
    ))
}

pub async fn list(ctx: Ctx, req: Request<Incoming>) -> Result<Response<Body>, ApiError> {
    let params = negotiate::query_params(req.uri().query());
    let mut filter = ListFilter {
        page_size: DEFAULT_PAGE_SIZE,
        history_length: history_length_param(&params)?,
        ..ListFilter::default()
    };
    let mut page_token = None;
    for (name, value) in &params {
        match name.as_str() {
            "contextId" if !value.is_empty() => filter.context_id = Some(value.clone()),
            "status" if !value.is_empty() => {
                let state = TaskState::from_str_name(value).ok_or_else(|| {
                    ApiError::invalid(
                        "status",
                        format!("`{value}` is not a TaskState name such as TASK_STATE_WORKING"),
                    )
                })?;
                filter.state = convert::state_from_wire(state);
            }
            "pageSize" => {
                filter.page_size = value
                    .parse::<u32>()
                    .ok()
                    .filter(|n| (1..=MAX_PAGE_SIZE).contains(n))
                    .ok_or_else(|| {
                        ApiError::invalid(
                            "pageSize",
                            format!(
                                "must be between 1 and {MAX_PAGE_SIZE} inclusive, got `{value}`"
                            ),
                        )
                    })?;
            }
            "pageToken" if !value.is_empty() => page_token = Some(value),
            "statusTimestampAfter" if !value.is_empty() => {
                let ts = Timestamp::parse_rfc3339(value)
                    .map_err(|e| ApiError::invalid("statusTimestampAfter", e))?;
                filter.status_since_ms = Some(ts.to_unix_millis());
            }
            "includeArtifacts" => {
                filter.include_artifacts = match value.as_str() {
                    "true" => true,
                    "false" | "" => false,
                    other => {
                        return Err(ApiError::invalid(
                            "includeArtifacts",
                            format!("must be true or false, got `{other}`"),
                        ))
                    }
                }
            }
            _ => {}
        }
    }
    let tokens = &ctx.shared.page_tokens;
    if let Some(token) = page_token {
        // Checked against the whole query, so it is read after every other parameter.
        filter.after = Some(tokens.check(&ctx.principal, &filter, token).ok_or_else(|| {
            ApiError::invalid(
                "pageToken",
                "is not a page token this server issued to you for this query (same contextId, status and statusTimestampAfter); start again without one",
            )
        })?);
    }
    let plane = ctx.shared.plane.clone();
    let principal = ctx.principal.clone();
    let query = filter.clone();
    let page = blocking(move || plane.list_tasks(&principal, &query)).await?;
    let response = ListTasksResponse {
        tasks: page
            .tasks
            .iter()
            .map(|record| {
                let mut task = project_task(&ctx, record);
                if !filter.include_artifacts {
                    task.artifacts.clear();
                }
                task
            })
            .collect(),
        next_page_token: page
            .next
            .map(|cursor| tokens.issue(&ctx.principal, &filter, cursor))
            .unwrap_or_default(),
        page_size: filter.page_size as i32,
        total_size: page.total.min(i32::MAX as u64) as i32,
    };
    let body = wire::json::encode(&ListTasksResponseJson(&response));
    Ok(json_response(StatusCode::OK, body.into(), &ctx.extensions))
}

/// An optional body naming the Task: it must name the one in the path.
async fn optional_body_id(
    ctx: &Ctx,
    req: Request<Incoming>,
    task_id: &str,
) -> Result<(), ApiError> {
    let config = &ctx.shared.config;
    let body = negotiate::read_json_body(
        req,
        config.max_body_bytes,
        Duration::from_millis(config.idle_timeout_ms),
    )
    .await?;
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(()); // an empty body means {}
    }
    let value: Value = serde_json::from_slice(&body)
        .map_err(|e| ApiError::invalid("", format!("the body is not JSON: {e}")))?;
    if value.is_null() {
        return Ok(());
    }
    let object = value
        .as_object()
        .ok_or_else(|| ApiError::invalid("", "the body must be a JSON object (or empty)"))?;
    // Only `id` is checked; known members we do not use, and unknown ones, are ignored
    // (forward compatibility).
    if let Some(id) = object.get("id").and_then(Value::as_str) {
        if !id.is_empty() && id != task_id {
            return Err(ApiError::invalid(
                "id",
                format!("names another task than the path ({task_id})"),
            ));
        }
    }
    Ok(())
}

pub async fn cancel(
    ctx: Ctx,
    req: Request<Incoming>,
    task_id: String,
) -> Result<Response<Body>, ApiError> {
    optional_body_id(&ctx, req, &task_id).await?;
    let plane = ctx.shared.plane.clone();
    let (principal, id) = (ctx.principal.clone(), task_id.clone());
    blocking(move || plane.cancel(&principal, &id)).await?;
    let task = task_snapshot(&ctx, &task_id, None).await?;
    Ok(json_response(
        StatusCode::OK,
        wire::json::encode(&task).into(),
        &ctx.extensions,
    ))
}

pub async fn subscribe(
    ctx: Ctx,
    req: Request<Incoming>,
    task_id: String,
) -> Result<Response<Body>, ApiError> {
    optional_body_id(&ctx, req, &task_id).await?;
    let current = read_task(&ctx, &task_id, Some(0)).await?;
    if current.state.is_terminal() {
        return Err(ApiError::unsupported(format!(
            "task {task_id} is {} and will not change again; read it with GET /tasks/{task_id}",
            current.state.as_str()
        ))
        .with_metadata("taskId", task_id));
    }
    let slot = ctx.start_stream()?;
    // An interrupted Task stays subscribable: the stream waits for its continuation.
    stream_updates(ctx, slot, task_id, None, false).await
}
