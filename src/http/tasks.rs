//! The Task routes: `GET /tasks`, `GET /tasks/{id}`, `POST /tasks/{id}:cancel` and `GET|POST
//! /tasks/{id}:subscribe` — their parameters and bodies checked, then the plane asked.
//!
//! What a caller sees of a Task is `project.rs`'s; the subscription stream is
//! `task_stream.rs`'s (shared with `message:send` and `message:stream` in `send.rs`).

use std::time::Duration;

use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};
use serde_json::Value;

use super::blocking::{blocking, short_read};
use super::error::ApiError;
use super::project::{project_task, task_snapshot};
use super::task_stream::stream_updates;
use super::{json_response, negotiate, sse, Body, Ctx};
use crate::plane::ListFilter;
use crate::wire::convert;
use crate::wire::json::ListTasksResponseJson;
use crate::wire::{self, ListTasksResponse, Task, TaskState, Timestamp};

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

/// `GET /tasks/{id}`.
pub async fn get(
    ctx: Ctx,
    req: Request<Incoming>,
    task_id: String,
) -> Result<Response<Body>, ApiError> {
    let params = negotiate::query_params(req.uri().query());
    let history_length = history_length_param(&params)?;
    let task = get_task(&ctx, &task_id, history_length).await?;
    Ok(json_response(
        StatusCode::OK,
        wire::json::encode(&task).into(),
        &ctx.extensions,
    ))
}

/// GetTask on every binding: the caller's Task, with at most `history_length` messages.
pub async fn get_task(
    ctx: &Ctx,
    task_id: &str,
    history_length: Option<u32>,
) -> Result<Task, ApiError> {
    task_snapshot(ctx, task_id, history_length).await
}

/// What a listing asked for, as each binding reads it from its request.
#[derive(Debug, Default)]
pub struct ListQuery {
    pub context_id: Option<String>,
    pub status: Option<TaskState>,
    /// As sent (a query parameter's text or a number's digits), checked by the plane.
    pub page_size: Option<String>,
    pub page_token: Option<String>,
    pub status_timestamp_after: Option<Timestamp>,
    pub include_artifacts: bool,
    pub history_length: Option<u32>,
}

/// `GET /tasks`.
pub async fn list(ctx: Ctx, req: Request<Incoming>) -> Result<Response<Body>, ApiError> {
    let params = negotiate::query_params(req.uri().query());
    let mut query = ListQuery {
        history_length: history_length_param(&params)?,
        ..ListQuery::default()
    };
    for (name, value) in &params {
        match name.as_str() {
            "contextId" if !value.is_empty() => query.context_id = Some(value.clone()),
            "status" if !value.is_empty() => {
                query.status = Some(TaskState::from_str_name(value).ok_or_else(|| {
                    ApiError::invalid(
                        "status",
                        format!("`{value}` is not a TaskState name such as TASK_STATE_WORKING"),
                    )
                })?);
            }
            "pageSize" => query.page_size = Some(value.clone()),
            "pageToken" if !value.is_empty() => query.page_token = Some(value.clone()),
            "statusTimestampAfter" if !value.is_empty() => {
                query.status_timestamp_after = Some(
                    Timestamp::parse_rfc3339(value)
                        .map_err(|e| ApiError::invalid("statusTimestampAfter", e))?,
                );
            }
            "includeArtifacts" => {
                query.include_artifacts = match value.as_str() {
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
    let response = list_tasks(&ctx, query)?;
    let body = wire::json::encode(&ListTasksResponseJson(&response));
    Ok(json_response(StatusCode::OK, body.into(), &ctx.extensions))
}

/// ListTasks on every binding: one page of the caller's Tasks, with a signed token for the
/// next.
pub fn list_tasks(ctx: &Ctx, query: ListQuery) -> Result<ListTasksResponse, ApiError> {
    let mut filter = ListFilter {
        page_size: ListFilter::page_size(query.page_size.as_deref())?,
        history_length: query.history_length,
        context_id: query.context_id,
        state: query.status.and_then(convert::state_from_wire),
        status_since_ms: query.status_timestamp_after.map(|ts| ts.to_unix_millis()),
        include_artifacts: query.include_artifacts,
        ..ListFilter::default()
    };
    let tokens = &ctx.shared.page_tokens;
    if let Some(token) = &query.page_token {
        // Checked against the whole query, so it is read after every other parameter.
        filter.after = Some(tokens.check(&ctx.principal, &filter, token).ok_or_else(|| {
            ApiError::invalid(
                "pageToken",
                "is not a page token this server issued to you for this query (same contextId, status and statusTimestampAfter); start again without one",
            )
        })?);
    }
    // A page is at most 100 Tasks found by an index seek (about 0.15 ms for 50 at any store
    // size): a short read, run in place. On the blocking pool, 64 concurrent listings held
    // 64 threads and 64 read connections, each with its own page cache.
    let page = short_read(|| ctx.shared.plane.list_tasks(&ctx.principal, &filter))?;
    Ok(ListTasksResponse {
        tasks: page
            .tasks
            .iter()
            .map(|record| {
                let mut task = project_task(ctx, record);
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
    })
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

/// `POST /tasks/{id}:cancel`.
pub async fn cancel(
    ctx: Ctx,
    req: Request<Incoming>,
    task_id: String,
) -> Result<Response<Body>, ApiError> {
    optional_body_id(&ctx, req, &task_id).await?;
    let task = cancel_task(&ctx, &task_id).await?;
    Ok(json_response(
        StatusCode::OK,
        wire::json::encode(&task).into(),
        &ctx.extensions,
    ))
}

/// CancelTask on every binding: the Task as the cancel left it.
pub async fn cancel_task(ctx: &Ctx, task_id: &str) -> Result<Task, ApiError> {
    let plane = ctx.shared.plane.clone();
    let (principal, id) = (ctx.principal.clone(), task_id.to_string());
    blocking(move || plane.cancel(&principal, &id)).await?;
    task_snapshot(ctx, task_id, None).await
}

/// `GET|POST /tasks/{id}:subscribe`.
pub async fn subscribe(
    ctx: Ctx,
    req: Request<Incoming>,
    task_id: String,
) -> Result<Response<Body>, ApiError> {
    optional_body_id(&ctx, req, &task_id).await?;
    subscribe_task(ctx, task_id, sse::Framing::Rest).await
}

/// SubscribeToTask on every binding: refused for a terminal Task, else its SSE stream
/// framed by `framing`.
pub async fn subscribe_task(
    ctx: Ctx,
    task_id: String,
    framing: sse::Framing,
) -> Result<Response<Body>, ApiError> {
    short_read(|| ctx.shared.plane.subscribable(&ctx.principal, &task_id))?;
    let slot = ctx.start_stream()?;
    stream_updates(ctx, slot, framing, task_id, None, false).await
}
