//! SendMessage and SendStreamingMessage: intake, then the Task (or a direct Message) back
//! to the caller.

use std::time::Duration;

use hyper::StatusCode;

use super::blocking::awaited;
use super::error::ApiError;
use super::project::{project_with_history, task_snapshot};
use super::streams::{hold_first_frame, stream_updates, wait_settled, EventStream};
use super::Ctx;
use crate::events::TaskSubscription;
use crate::plane::{Acceptance, Inbound, Watch};
use crate::wire::{self, send_message_response, SendMessageRequest, SendMessageResponse};

/// A push-notification config in a send is refused: this agent sends none.
fn refuse_push_config(request: &SendMessageRequest) -> Result<(), ApiError> {
    if request
        .configuration
        .as_ref()
        .is_some_and(|c| c.task_push_notification_config.is_some())
    {
        return Err(ApiError::push_notifications_unsupported(
            StatusCode::BAD_REQUEST,
            "push notifications are not supported by this agent; leave out configuration.taskPushNotificationConfig",
        ));
    }
    Ok(())
}

/// Accepts the message through the plane's one intake decision: continuation by explicit
/// taskId, the prior outcome of a duplicate, or new work (a Task, or a direct Message when
/// the executor answers directly in time).
/// With `watch`, the Task it creates or continues comes with a subscription from the
/// commit that accepted it (`TaskPlane::intake_watching`).
/// Takes the request's message (the rest of the request stays for the answer).
async fn accept(
    ctx: &Ctx,
    request: &mut SendMessageRequest,
    watch: Option<Watch>,
) -> Result<(Acceptance, Option<TaskSubscription>), ApiError> {
    let message = request
        .message
        .take()
        .ok_or_else(|| ApiError::invalid("message", "is required"))?;
    // The plane checks the rest (its role included) before anything is accepted.
    let (record, context_id, task_id) =
        wire::convert::message_from_wire(message).map_err(|e| e.within("message"))?;
    let inbound = Inbound {
        principal: ctx.principal.clone(),
        context_id,
        task_id,
        message: record,
        extensions: ctx.extensions.clone(),
    };
    let plane = ctx.handler.plane.clone();
    let executor = ctx.handler.executor();
    let bound = Duration::from_millis(ctx.handler.config.executor_timeout_ms);
    // A panic in the plane call answers 500, as every other route's does.
    let intake = async move {
        match watch {
            Some(watch) => plane.intake_watching(inbound, executor, bound, watch).await,
            None => Ok((plane.intake(inbound, executor, bound).await?, None)),
        }
    };
    awaited(intake).await
}

fn direct_message(acceptance: &Acceptance) -> Option<wire::Message> {
    acceptance
        .direct_reply
        .as_ref()
        .map(|reply| wire::convert::message_to_wire(reply, &acceptance.context_id, None))
}

/// SendMessage on every binding: the Task (blocking until it settles unless
/// `returnImmediately`, at most the blocking timeout), or the executor's direct Message.
pub async fn send_message(
    ctx: &Ctx,
    mut request: SendMessageRequest,
) -> Result<SendMessageResponse, ApiError> {
    refuse_push_config(&request)?;
    let blocking = !request
        .configuration
        .as_ref()
        .is_some_and(|c| c.return_immediately);
    let watch = blocking.then_some(Watch::UntilSettled);
    let (acceptance, updates) = accept(ctx, &mut request, watch).await?;
    let payload = match (direct_message(&acceptance), &acceptance.task_id) {
        (Some(message), _) => send_message_response::Payload::Message(message),
        (None, Some(task_id)) => {
            let config = request.configuration.as_ref();
            let history_length = config
                .and_then(|c| c.history_length)
                .map(|n| n.max(0) as u32);
            let settled = if !blocking {
                None
            } else {
                let timeout = Duration::from_millis(ctx.handler.config.blocking_timeout_ms);
                wait_settled(ctx, task_id, updates, timeout).await?
            };
            let task = match (settled, &acceptance.created) {
                // The Task this caller's own message created or continued: theirs.
                (Some(record), _) if record.principal == ctx.principal => {
                    project_with_history(ctx, &record, history_length)
                }
                // `returnImmediately` on a new Task of this caller's: the Task as its
                // acceptance created it (SUBMITTED), what a read right after the commit
                // returns, without that read.
                (None, Some(created)) if !blocking && created.principal == ctx.principal => {
                    project_with_history(ctx, created, history_length)
                }
                _ => task_snapshot(ctx, task_id, history_length).await?,
            };
            send_message_response::Payload::Task(task)
        }
        (None, None) => return Err(ApiError::internal("acceptance without a Task or a reply")),
    };
    Ok(SendMessageResponse {
        payload: Some(payload),
    })
}

/// SendStreamingMessage on every binding: the stream of the Task the message created or
/// continued, or of the executor's direct Message.
pub async fn stream_message(
    ctx: &Ctx,
    mut request: SendMessageRequest,
) -> Result<EventStream, ApiError> {
    refuse_push_config(&request)?;
    // The stream's place first: a message is never accepted and then refused a stream.
    let place = ctx.handler.streams.take(&ctx.principal)?;
    let (acceptance, updates) = accept(ctx, &mut request, Some(Watch::Updates)).await?;
    if let Some(message) = direct_message(&acceptance) {
        // A direct Message is exactly one event, then the stream closes.
        return Ok(EventStream::message(place, message));
    }
    let task_id = acceptance
        .task_id
        .ok_or_else(|| ApiError::internal("acceptance without a Task"))?;
    let history_length = request
        .configuration
        .as_ref()
        .and_then(|c| c.history_length)
        .map(|n| n.max(0) as u32);
    match (acceptance.created, updates) {
        // A new Task of this caller's: its first event is the Task as created, and the
        // subscription from that commit brings every update since.
        (Some(created), Some(mut updates)) if created.principal == ctx.principal => {
            if !created.state.is_settled() {
                hold_first_frame(ctx, &mut updates).await;
            }
            let first = project_with_history(ctx, &created, history_length);
            Ok(EventStream::task(
                ctx,
                place,
                first,
                created.state,
                updates,
                true,
            ))
        }
        _ => stream_updates(ctx, place, &task_id, history_length, true).await,
    }
}
