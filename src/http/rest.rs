//! The HTTP+JSON routes: each reads its request (path, query parameters, body) into the
//! handler's typed request, calls the operation, and writes its result as JSON or SSE.

use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};
use serde::Serialize;
use serde_json::Value;

use super::{json_response, negotiate, sse, task_stream, Body, Caller};
use crate::handler::send::{send_message, stream_message};
use crate::handler::tasks::{cancel_task, get_task, list_tasks, subscribe_task, ListQuery};
use crate::handler::ApiError;
use crate::wire::json::ListTasksResponseJson;
use crate::wire::{self, SendMessageRequest, TaskState, Timestamp};

/// `200 application/json` with `value` as ProtoJSON.
fn ok_json<T: Serialize + ?Sized>(value: &T, caller: &Caller) -> Response<Body> {
    json_response(
        StatusCode::OK,
        wire::json::encode(value).into(),
        &caller.ctx.extensions,
    )
}

/// The body of a send: a `SendMessageRequest`.
async fn send_request(
    caller: &Caller,
    req: Request<Incoming>,
) -> Result<SendMessageRequest, ApiError> {
    let body = caller.read_body(req).await?;
    if body.is_empty() {
        return Err(ApiError::invalid(
            "",
            "the request body must be a SendMessageRequest, e.g. {\"message\": {...}}",
        ));
    }
    Ok(wire::json::decode("SendMessageRequest", &body)?)
}

/// `POST /message:send`.
pub async fn send(caller: Caller, req: Request<Incoming>) -> Result<Response<Body>, ApiError> {
    let request = send_request(&caller, req).await?;
    let response = send_message(&caller.ctx, request).await?;
    Ok(ok_json(&response, &caller))
}

/// `POST /message:stream`.
pub async fn stream(caller: Caller, req: Request<Incoming>) -> Result<Response<Body>, ApiError> {
    let request = send_request(&caller, req).await?;
    let stream = stream_message(&caller.ctx, request).await?;
    Ok(task_stream::respond(&caller, stream, sse::Framing::Rest))
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

/// `GET /tasks/{id}`.
pub async fn get(
    caller: Caller,
    req: Request<Incoming>,
    task_id: String,
) -> Result<Response<Body>, ApiError> {
    let params = negotiate::query_params(req.uri().query());
    let history_length = history_length_param(&params)?;
    let task = get_task(&caller.ctx, &task_id, history_length).await?;
    Ok(ok_json(&task, &caller))
}

/// `GET /tasks`.
pub async fn list(caller: Caller, req: Request<Incoming>) -> Result<Response<Body>, ApiError> {
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
    let response = list_tasks(&caller.ctx, query)?;
    Ok(ok_json(&ListTasksResponseJson(&response), &caller))
}

/// An optional body naming the Task: it must name the one in the path.
async fn optional_body_id(
    caller: &Caller,
    req: Request<Incoming>,
    task_id: &str,
) -> Result<(), ApiError> {
    let body = caller.read_body(req).await?;
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
    caller: Caller,
    req: Request<Incoming>,
    task_id: String,
) -> Result<Response<Body>, ApiError> {
    optional_body_id(&caller, req, &task_id).await?;
    let task = cancel_task(&caller.ctx, &task_id).await?;
    Ok(ok_json(&task, &caller))
}

/// `GET|POST /tasks/{id}:subscribe`.
pub async fn subscribe(
    caller: Caller,
    req: Request<Incoming>,
    task_id: String,
) -> Result<Response<Body>, ApiError> {
    optional_body_id(&caller, req, &task_id).await?;
    let stream = subscribe_task(&caller.ctx, &task_id).await?;
    Ok(task_stream::respond(&caller, stream, sse::Framing::Rest))
}
