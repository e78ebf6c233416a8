//! A Task's live updates for a caller: waiting for a Task to settle (a blocking
//! `message:send`), and the SSE stream of `message:stream` and `tasks/{id}:subscribe` —
//! the snapshot first, then each update from the Task's broadcast (`events.rs`) as it is
//! committed, until the Task settles, the client leaves, or the listener shuts down.
//!
//! Framing and what a slow stream holds are `sse.rs`'s; what a frame carries is
//! `project.rs`'s.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;

use hyper::Response;

use super::conn::StreamGuard;
use super::error::ApiError;
use super::project::{event_frame, project_task, read_task, task_state};
use super::{sse, Body, Ctx};
use crate::events::{TaskEvent, TaskSubscription};
use crate::record::{TaskRecord, TaskState};
use crate::wire::Task;
use crate::wire::{stream_response, StreamResponse};

/// SSE keep-alive interval.
const KEEP_ALIVE: Duration = Duration::from_secs(15);

/// Waits until the Task is terminal or interrupted, `timeout` passes, or the listener
/// shuts down — whichever comes first. Returns the Task as the settling update left it
/// when that update carried it (`TaskEvent::Status::settled`); otherwise the caller reads
/// the snapshot it answers with. `since_acceptance` is a subscription taken at the
/// commit that made the Task wait for the agent (`TaskPlane::intake_watching`): it has
/// seen every update since, so the Task's state need not be read first.
pub async fn wait_settled(
    ctx: &Ctx,
    task_id: &str,
    since_acceptance: Option<TaskSubscription>,
    timeout: Duration,
) -> Result<Option<Arc<TaskRecord>>, ApiError> {
    let mut updates = match since_acceptance {
        Some(updates) => updates,
        None => {
            let updates = ctx.shared.plane.events().subscribe_until_settled(task_id);
            if task_state(ctx, task_id)?.is_settled() {
                return Ok(None);
            }
            updates
        }
    };
    let deadline = tokio::time::Instant::now() + timeout;
    let mut shutdown = ctx.shared.shutdown.clone();
    loop {
        tokio::select! {
            update = updates.recv() => match update {
                Ok(event) => if let TaskEvent::Status { state, settled, .. } = &*event {
                    if state.is_settled() {
                        return Ok(settled.clone());
                    }
                },
                Err(_) => return Ok(None), // fell behind: the snapshot read next tells the truth
            },
            _ = tokio::time::sleep_until(deadline) => return Ok(None),
            _ = shutdown.changed() => return Ok(None),
        }
    }
}

/// Streams a Task: its snapshot first, then live updates, until an update settles it
/// (terminal or interrupted), the client leaves, or the listener shuts down. With
/// `close_if_settled`, a snapshot that is settled already ends the stream at once.
pub async fn stream_updates(
    ctx: Ctx,
    slot: StreamGuard,
    task_id: String,
    history_length: Option<u32>,
    close_if_settled: bool,
) -> Result<Response<Body>, ApiError> {
    // Subscribe before reading the snapshot, so no update falls between the two.
    let updates = ctx.shared.plane.events().subscribe(&task_id);
    let record = read_task(&ctx, &task_id, history_length).await?;
    let first = project_task(&ctx, &record);
    Ok(stream_from(
        ctx,
        slot,
        first,
        record.state,
        updates,
        close_if_settled,
    ))
}

/// Streams `first`, a snapshot of the Task in `state`, then each update `updates` brings
/// (a subscription taken before the snapshot was), as [`stream_updates`] describes.
pub fn stream_from(
    ctx: Ctx,
    slot: StreamGuard,
    first: Task,
    state: TaskState,
    updates: TaskSubscription,
    close_if_settled: bool,
) -> Response<Body> {
    // A terminal snapshot always ends the stream (nothing more can happen), even when the
    // Task settled between the caller's checks and this read.
    let ends_now = state.is_terminal() || (close_if_settled && state.is_settled());
    // Encoded here, so the stream keeps neither the record nor its wire copy: only the
    // bytes, until the client has taken them.
    let first = sse::frame(&StreamResponse {
        payload: Some(stream_response::Payload::Task(first)),
    });
    let extensions = ctx.extensions.clone();
    let shutdown = ctx.shared.shutdown.clone();
    let then = TaskUpdates {
        ctx,
        updates,
        shutdown,
        ended: ends_now,
    };
    sse::response(&extensions, slot, first, then)
}

/// The frames after a Task stream's snapshot: one per update of the Task, a keep-alive
/// comment after [`KEEP_ALIVE`] without one; the stream ends after the update that
/// settles the Task, when the subscription falls behind or closes, or when the listener
/// shuts down. A client that leaves drops it with its connection.
struct TaskUpdates {
    ctx: Ctx,
    updates: TaskSubscription,
    shutdown: tokio::sync::watch::Receiver<bool>,
    ended: bool,
}

impl sse::Frames for TaskUpdates {
    async fn next(&mut self) -> Option<Bytes> {
        if self.ended {
            return None;
        }
        tokio::select! {
            update = self.updates.recv() => {
                let event = update.ok()?;
                self.ended = event.state().is_some_and(TaskState::is_settled);
                Some(sse::frame(&event_frame(&self.ctx, &event)))
            }
            _ = self.shutdown.changed() => None,
            _ = tokio::time::sleep(KEEP_ALIVE) => Some(sse::keep_alive()),
        }
    }
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
