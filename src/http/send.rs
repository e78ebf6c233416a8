//! `POST /message:send` and `POST /message:stream`: intake, then the Task (or a direct
//! Message) back to the caller.

use std::time::Duration;

use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};

use super::blocking::awaited;
use super::error::ApiError;
use super::project::{project_with_history, task_snapshot};
use super::task_stream::{hold_first_frame, stream_from, stream_task, wait_settled};
use super::{json_response, negotiate, sse, Body, Ctx};
use crate::events::TaskSubscription;
use crate::plane::{Acceptance, Inbound, Watch};
use crate::wire::{
    self, send_message_response, stream_response, SendMessageRequest, SendMessageResponse,
    StreamResponse,
};

/// The HTTP+JSON body of a send: a `SendMessageRequest`.
async fn parse(ctx: &Ctx, req: Request<Incoming>) -> Result<SendMessageRequest, ApiError> {
    let config = &ctx.shared.config;
    let body = negotiate::read_json_body(
        req,
        config.max_body_bytes,
        Duration::from_millis(config.idle_timeout_ms),
    )
    .await?;
    if body.is_empty() {
        return Err(ApiError::invalid(
            "",
            "the request body must be a SendMessageRequest, e.g. {\"message\": {...}}",
        ));
    }
    Ok(wire::json::decode("SendMessageRequest", &body)?)
}

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
    let plane = ctx.shared.plane.clone();
    let executor = ctx
        .shared
        .executor
        .read()
        .unwrap_or_else(|p| p.into_inner())
        .clone();
    let bound = Duration::from_millis(ctx.shared.config.executor_timeout_ms);
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

/// `POST /message:send`.
pub async fn send(ctx: Ctx, req: Request<Incoming>) -> Result<Response<Body>, ApiError> {
    let request = parse(&ctx, req).await?;
    let response = send_message(&ctx, request).await?;
    let body = wire::json::encode(&response);
    Ok(json_response(StatusCode::OK, body.into(), &ctx.extensions))
}

/// `POST /message:stream`.
pub async fn stream(ctx: Ctx, req: Request<Incoming>) -> Result<Response<Body>, ApiError> {
    let request = parse(&ctx, req).await?;
    stream_message(ctx, request, sse::Framing::Rest).await
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
                let timeout = Duration::from_millis(ctx.shared.config.blocking_timeout_ms);
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

/// SendStreamingMessage on every binding: an SSE stream framed by `framing`.
pub async fn stream_message(
    ctx: Ctx,
    mut request: SendMessageRequest,
    framing: sse::Framing,
) -> Result<Response<Body>, ApiError> {
    refuse_push_config(&request)?;
    // The stream's place first: a message is never accepted and then refused a stream.
    let slot = ctx.start_stream()?;
    let (acceptance, updates) = accept(&ctx, &mut request, Some(Watch::Updates)).await?;
    if let Some(message) = direct_message(&acceptance) {
        // A direct Message is exactly one event, then the stream closes.
        let first = framing.frame(&StreamResponse {
            payload: Some(stream_response::Payload::Message(message)),
        });
        let response = sse::response(&ctx.extensions, slot, first, sse::Once);
        return Ok(response);
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
        // A new Task of this caller's: its first frame is the Task as created, and the
        // subscription from that commit brings every update since.
        (Some(created), Some(mut updates)) if created.principal == ctx.principal => {
            if !created.state.is_settled() {
                hold_first_frame(&ctx, &mut updates).await;
            }
            let first = project_with_history(&ctx, &created, history_length);
            Ok(stream_from(
                ctx,
                slot,
                framing,
                first,
                created.state,
                updates,
                true,
            ))
        }
        _ => stream_task(ctx, slot, framing, task_id, history_length).await,
    }
}
