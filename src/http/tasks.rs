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
use super::{json_response, negotiate, Body, Ctx};
use crate::plane::ListFilter;
use crate::wire::convert;
use crate::wire::json::ListTasksResponseJson;
use crate::wire::{self, ListTasksResponse, TaskState, Timestamp};

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
        page_size: ListFilter::page_size(None)?,
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
            "pageSize" => filter.page_size = ListFilter::page_size(Some(value))?,
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
    // A page is at most 100 Tasks found by an index seek (about 0.15 ms for 50 at any store
    // size): a short read, run in place. On the blocking pool, 64 concurrent listings held
    // 64 threads and 64 read connections, each with its own page cache.
    let page = short_read(|| ctx.shared.plane.list_tasks(&ctx.principal, &filter))?;
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
    short_read(|| ctx.shared.plane.subscribable(&ctx.principal, &task_id))?;
    let slot = ctx.start_stream()?;
    stream_updates(ctx, slot, task_id, None, false).await
}
