//! The Task operations: GetTask, ListTasks, CancelTask and SubscribeToTask.
//!
//! What a caller sees of a Task is `project.rs`'s; the subscription stream is
//! `streams.rs`'s (shared with SendStreamingMessage in `send.rs`).

use super::blocking::{blocking, short_read};
use super::error::ApiError;
use super::project::{project_task, task_snapshot};
use super::streams::{stream_updates, EventStream};
use super::Ctx;
use crate::plane::ListFilter;
use crate::wire::convert;
use crate::wire::{ListTasksRequest, ListTasksResponse, Task, TaskState, Timestamp};

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

impl ListQuery {
    /// A `ListTasksRequest` message as the bindings that carry it whole read it (JSON-RPC's
    /// params, gRPC's message); HTTP+JSON reads the same fields from its query string.
    pub fn from_request(request: ListTasksRequest) -> Result<ListQuery, ApiError> {
        let status = match TaskState::try_from(request.status) {
            Ok(TaskState::Unspecified) => None,
            Ok(state) => Some(state),
            Err(_) => {
                return Err(ApiError::invalid(
                    "status",
                    format!("`{}` is not a TaskState", request.status),
                ))
            }
        };
        Ok(ListQuery {
            context_id: Some(request.context_id).filter(|c| !c.is_empty()),
            status,
            page_size: request.page_size.map(|n| n.to_string()),
            page_token: Some(request.page_token).filter(|t| !t.is_empty()),
            status_timestamp_after: request.status_timestamp_after,
            include_artifacts: request.include_artifacts.unwrap_or(false),
            history_length: history_length(request.history_length)?,
        })
    }
}

/// A request message's `historyLength`: absent, or a whole number ≥ 0.
pub fn history_length(value: Option<i32>) -> Result<Option<u32>, ApiError> {
    match value {
        Some(n) if n < 0 => Err(ApiError::invalid(
            "historyLength",
            format!("must be a whole number ≥ 0, got `{n}`"),
        )),
        other => Ok(other.map(|n| n as u32)),
    }
}

/// A request message's REQUIRED Task id.
pub fn task_id(id: String) -> Result<String, ApiError> {
    if id.is_empty() {
        return Err(ApiError::invalid("id", "is required: the Task's id"));
    }
    Ok(id)
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
    let tokens = &ctx.handler.page_tokens;
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
    let page = short_read(|| ctx.handler.plane.list_tasks(&ctx.principal, &filter))?;
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

/// CancelTask on every binding: the Task as the cancel left it.
pub async fn cancel_task(ctx: &Ctx, task_id: &str) -> Result<Task, ApiError> {
    let plane = ctx.handler.plane.clone();
    let (principal, id) = (ctx.principal.clone(), task_id.to_string());
    blocking(move || plane.cancel(&principal, &id)).await?;
    task_snapshot(ctx, task_id, None).await
}

/// SubscribeToTask on every binding: refused for a terminal Task, else its stream.
pub async fn subscribe_task(ctx: &Ctx, task_id: &str) -> Result<EventStream, ApiError> {
    short_read(|| ctx.handler.plane.subscribable(&ctx.principal, task_id))?;
    let place = ctx.handler.streams.take(&ctx.principal)?;
    stream_updates(ctx, place, task_id, None, false).await
}
