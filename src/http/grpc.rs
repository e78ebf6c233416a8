//! A2A's gRPC binding: the proto's `A2AService` (tonic's generated server over our prost
//! messages), on its own port (`ListenerConfig::grpc_bind_port`), served by the listener's
//! accept loop over HTTP/2 (`accept::serve_grpc`). Like the other bindings it is a thin
//! adapter over `crate::handler`: each RPC reads the caller from its metadata, calls the
//! operation, and writes the result, or the error as a gRPC status.
//!
//! Every RPC first passes, in order: `a2a-version` (VERSION_NOT_SUPPORTED), `authorization`
//! (exactly one `Bearer <token>`: UNAUTHENTICATED otherwise), `a2a-extensions` (the
//! activated ones are echoed in the response's metadata, errors' included). Errors carry
//! `google.rpc.ErrorInfo` (the A2A reason, domain `a2a-protocol.org`, metadata) and, for a
//! field at fault, `google.rpc.BadRequest` in `grpc-status-details-bin`; the status code is
//! [`code_of`]'s.
//!
//! A stream is a task that forwards the handler's events into a short queue that tonic
//! drains as HTTP/2 lets it write. A client that stops reading closes its HTTP/2 window,
//! hyper stops polling, the queue fills: when a frame waits longer than the write timeout
//! the stream ends, its place in the stream pool is freed, and the client that reads again
//! finds the status DEADLINE_EXCEEDED after the frames it had not read. A client that
//! stops reading the whole connection is dropped by the connection's write deadline.

use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::sync::mpsc;
use tokio_stream::Stream;
use tonic::metadata::{MetadataMap, MetadataValue};
use tonic::{Code, Request, Response, Status};
use tonic_types::{ErrorDetails, StatusExt};

use super::conn::Connections;
use crate::handler::negotiate::{
    activated_extensions, check_version, EXTENSIONS_HEADER, VERSION_HEADER,
};
use crate::handler::send::{send_message, stream_message};
use crate::handler::streams::EventStream;
use crate::handler::tasks::{
    cancel_task, get_task, history_length, list_tasks, subscribe_task, task_id, ListQuery,
};
use crate::handler::{error::DOMAIN, project, ApiError, Ctx, Handler};
use crate::wire::a2a_service_server::A2aService;
use crate::wire::validate::{At, Validate};
use crate::wire::{self, json::WireError};

pub use crate::wire::a2a_service_server::A2aServiceServer;

/// Frames a stream may have waiting for the client beyond what HTTP/2 buffers.
const FRAMES_QUEUED: usize = 4;

/// The gRPC code of an A2A error: the A2A errors' codes are the spec's (A2A v1.0.1 §5.4),
/// every other error's is the `google.rpc.Code` its HTTP status maps to
/// ([`ApiError::status_name`]), so gRPC and HTTP+JSON name the same code.
pub fn code_of(err: &ApiError) -> Code {
    match err.reason {
        "TASK_NOT_FOUND" => Code::NotFound,
        "TASK_NOT_CANCELABLE"
        | "PUSH_NOTIFICATION_NOT_SUPPORTED"
        | "UNSUPPORTED_OPERATION"
        | "EXTENDED_AGENT_CARD_NOT_CONFIGURED"
        | "EXTENSION_SUPPORT_REQUIRED"
        | "VERSION_NOT_SUPPORTED" => Code::FailedPrecondition,
        "CONTENT_TYPE_NOT_SUPPORTED" => Code::InvalidArgument,
        "INVALID_AGENT_RESPONSE" => Code::Internal,
        _ => match err.status_name() {
            "INVALID_ARGUMENT" => Code::InvalidArgument,
            "FAILED_PRECONDITION" => Code::FailedPrecondition,
            "UNAUTHENTICATED" => Code::Unauthenticated,
            "PERMISSION_DENIED" => Code::PermissionDenied,
            "NOT_FOUND" => Code::NotFound,
            "UNIMPLEMENTED" => Code::Unimplemented,
            "ALREADY_EXISTS" => Code::AlreadyExists,
            "OUT_OF_RANGE" => Code::OutOfRange,
            "UNAVAILABLE" => Code::Unavailable,
            "RESOURCE_EXHAUSTED" => Code::ResourceExhausted,
            "DEADLINE_EXCEEDED" => Code::DeadlineExceeded,
            _ => Code::Internal,
        },
    }
}

/// `err` as a gRPC status: [`code_of`], its message, ErrorInfo and BadRequest details, and
/// the activated extensions.
pub fn status_of(err: &ApiError, extensions: &[String]) -> Status {
    let metadata = err
        .metadata
        .iter()
        .map(|(k, v)| (k.to_string(), v.clone()))
        .collect::<std::collections::HashMap<_, _>>();
    let mut details = ErrorDetails::with_error_info(err.reason, DOMAIN, metadata);
    if let Some(violation) = &err.field {
        details.add_bad_request_violation(violation.field.clone(), violation.message.clone());
    }
    let mut status = Status::with_error_details(code_of(err), err.message.clone(), details);
    echo_extensions(status.metadata_mut(), extensions);
    status
}

fn echo_extensions(metadata: &mut MetadataMap, extensions: &[String]) {
    if extensions.is_empty() {
        return;
    }
    if let Ok(value) = MetadataValue::try_from(extensions.join(", ")) {
        metadata.insert(EXTENSIONS_HEADER, value);
    }
}

/// The metadata values under `key` (a value that is not text reads as empty: no token, no
/// extension).
fn values<'a>(metadata: &'a MetadataMap, key: &str) -> impl Iterator<Item = &'a str> {
    metadata
        .get_all(key)
        .iter()
        .map(|value| value.to_str().unwrap_or(""))
}

/// The gRPC service: every RPC of `A2AService`, over the listener's handler.
pub struct Service {
    handler: Arc<Handler>,
    /// Where a stream dropped for stalling is logged (with the HTTP ones).
    connections: Arc<Connections>,
}

impl Service {
    /// The service, refusing a message larger than `A2A_MAX_BODY_BYTES` (OUT_OF_RANGE).
    pub fn new(handler: Arc<Handler>, connections: Arc<Connections>) -> A2aServiceServer<Service> {
        let max = handler.config.max_body_bytes;
        A2aServiceServer::new(Service {
            handler,
            connections,
        })
        .max_decoding_message_size(max)
    }

    /// The caller of `request`, past the checks every RPC passes (see the module doc).
    fn caller(&self, metadata: &MetadataMap) -> Result<Ctx, Status> {
        let extensions = activated_extensions(values(metadata, EXTENSIONS_HEADER));
        let refuse = |err: ApiError| status_of(&err, &extensions);
        // The first entry, as HTTP reads the first header.
        let version = metadata
            .get(VERSION_HEADER)
            .map(|v| v.to_str().unwrap_or("<not text>"));
        check_version(version).map_err(refuse)?;
        let principal = self
            .handler
            .authenticate(values(metadata, "authorization"))
            .map_err(refuse)?;
        Ok(Ctx {
            handler: self.handler.clone(),
            principal,
            extensions,
        })
    }

    /// Runs `operation` for the caller of `request` and answers with its result.
    async fn unary<T, R, F>(
        &self,
        request: Request<T>,
        operation: impl FnOnce(Ctx, T) -> F,
    ) -> Result<Response<R>, Status>
    where
        F: std::future::Future<Output = Result<R, ApiError>>,
    {
        let (metadata, _, message) = request.into_parts();
        let ctx = self.caller(&metadata)?;
        let extensions = ctx.extensions.clone();
        match operation(ctx, message).await {
            Ok(result) => {
                let mut response = Response::new(result);
                echo_extensions(response.metadata_mut(), &extensions);
                Ok(response)
            }
            Err(err) => Err(status_of(&err, &extensions)),
        }
    }

    /// Opens the stream `operation` gives for the caller of `request`.
    async fn stream<T, F>(
        &self,
        request: Request<T>,
        operation: impl FnOnce(Ctx, T) -> F,
    ) -> Result<Response<Frames>, Status>
    where
        F: std::future::Future<Output = Result<EventStream, ApiError>>,
    {
        let (metadata, _, message) = request.into_parts();
        let ctx = self.caller(&metadata)?;
        let extensions = ctx.extensions.clone();
        match operation(ctx.clone(), message).await {
            Ok(stream) => {
                let frames = Frames::forward(ctx, stream, self.connections.clone());
                let mut response = Response::new(frames);
                echo_extensions(response.metadata_mut(), &extensions);
                Ok(response)
            }
            Err(err) => Err(status_of(&err, &extensions)),
        }
    }
}

/// The REQUIRED members of a received message, as HTTP+JSON and JSON-RPC check them.
fn validated<T: Validate>(what: &'static str, message: T) -> Result<T, ApiError> {
    message
        .validate(&At::Root)
        .map_err(|error| ApiError::from(WireError { what, error }))?;
    Ok(message)
}

#[tonic::async_trait]
impl A2aService for Service {
    async fn send_message(
        &self,
        request: Request<wire::SendMessageRequest>,
    ) -> Result<Response<wire::SendMessageResponse>, Status> {
        self.unary(request, |ctx, message| async move {
            send_message(&ctx, validated("SendMessageRequest", message)?).await
        })
        .await
    }

    type SendStreamingMessageStream = Frames;

    async fn send_streaming_message(
        &self,
        request: Request<wire::SendMessageRequest>,
    ) -> Result<Response<Frames>, Status> {
        self.stream(request, |ctx, message| async move {
            stream_message(&ctx, validated("SendMessageRequest", message)?).await
        })
        .await
    }

    async fn get_task(
        &self,
        request: Request<wire::GetTaskRequest>,
    ) -> Result<Response<wire::Task>, Status> {
        self.unary(request, |ctx, message| async move {
            let history = history_length(message.history_length)?;
            get_task(&ctx, &task_id(message.id)?, history).await
        })
        .await
    }

    async fn list_tasks(
        &self,
        request: Request<wire::ListTasksRequest>,
    ) -> Result<Response<wire::ListTasksResponse>, Status> {
        self.unary(request, |ctx, message| async move {
            list_tasks(&ctx, ListQuery::from_request(message)?)
        })
        .await
    }

    async fn cancel_task(
        &self,
        request: Request<wire::CancelTaskRequest>,
    ) -> Result<Response<wire::Task>, Status> {
        self.unary(request, |ctx, message| async move {
            cancel_task(&ctx, &task_id(message.id)?).await
        })
        .await
    }

    type SubscribeToTaskStream = Frames;

    async fn subscribe_to_task(
        &self,
        request: Request<wire::SubscribeToTaskRequest>,
    ) -> Result<Response<Frames>, Status> {
        self.stream(request, |ctx, message| async move {
            subscribe_task(&ctx, &task_id(message.id)?).await
        })
        .await
    }

    async fn create_task_push_notification_config(
        &self,
        request: Request<wire::TaskPushNotificationConfig>,
    ) -> Result<Response<wire::TaskPushNotificationConfig>, Status> {
        self.unary(request, |_, _| async {
            Err(ApiError::push_config_operations_unsupported())
        })
        .await
    }

    async fn get_task_push_notification_config(
        &self,
        request: Request<wire::GetTaskPushNotificationConfigRequest>,
    ) -> Result<Response<wire::TaskPushNotificationConfig>, Status> {
        self.unary(request, |_, _| async {
            Err(ApiError::push_config_operations_unsupported())
        })
        .await
    }

    async fn list_task_push_notification_configs(
        &self,
        request: Request<wire::ListTaskPushNotificationConfigsRequest>,
    ) -> Result<Response<wire::ListTaskPushNotificationConfigsResponse>, Status> {
        self.unary(request, |_, _| async {
            Err(ApiError::push_config_operations_unsupported())
        })
        .await
    }

    async fn get_extended_agent_card(
        &self,
        request: Request<wire::GetExtendedAgentCardRequest>,
    ) -> Result<Response<wire::AgentCard>, Status> {
        self.unary(request, |_, _| async {
            Err(ApiError::extended_card_not_configured())
        })
        .await
    }

    async fn delete_task_push_notification_config(
        &self,
        request: Request<wire::DeleteTaskPushNotificationConfigRequest>,
    ) -> Result<Response<pbjson_types::Empty>, Status> {
        self.unary(request, |_, _| async {
            Err(ApiError::push_config_operations_unsupported())
        })
        .await
    }
}

/// A stream's frames as tonic takes them: what the forwarding task queued, then, if the
/// client took nothing for the write timeout, DEADLINE_EXCEEDED.
pub struct Frames {
    queue: mpsc::Receiver<wire::StreamResponse>,
    stalled: Arc<AtomicBool>,
    ended: bool,
}

impl Frames {
    /// Starts forwarding `stream`'s events; the task holds the stream's place until the
    /// stream ends, the client leaves, or it stalls.
    fn forward(ctx: Ctx, stream: EventStream, connections: Arc<Connections>) -> Frames {
        let (queue, frames) = mpsc::channel(FRAMES_QUEUED);
        let stalled = Arc::new(AtomicBool::new(false));
        let write_timeout = Duration::from_millis(ctx.handler.config.write_timeout_ms);
        let stall = Stall {
            after: write_timeout,
            stalled: stalled.clone(),
            connections,
        };
        tokio::spawn(forward(ctx, stream, queue, stall));
        Frames {
            queue: frames,
            stalled,
            ended: false,
        }
    }
}

impl Stream for Frames {
    type Item = Result<wire::StreamResponse, Status>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        if self.ended {
            return Poll::Ready(None);
        }
        match self.queue.poll_recv(cx) {
            Poll::Ready(Some(frame)) => Poll::Ready(Some(Ok(frame))),
            Poll::Ready(None) => {
                self.ended = true;
                if self.stalled.load(Ordering::Acquire) {
                    return Poll::Ready(Some(Err(Status::deadline_exceeded(
                        "the stream ended: the client read nothing of it for A2A_WRITE_TIMEOUT_MS",
                    ))));
                }
                Poll::Ready(None)
            }
            Poll::Pending => Poll::Pending,
        }
    }
}

/// When a stream's client counts as gone, and whom to tell.
struct Stall {
    after: Duration,
    stalled: Arc<AtomicBool>,
    connections: Arc<Connections>,
}

/// Forwards `stream`'s first event and its updates into `queue` (see the module doc).
async fn forward(
    ctx: Ctx,
    stream: EventStream,
    queue: mpsc::Sender<wire::StreamResponse>,
    stall: Stall,
) {
    let EventStream {
        place: _place,
        first,
        updates,
    } = stream;
    let deliver = |frame| async {
        // A queue with room takes the frame at once: no timer (registering one with tokio's
        // driver per frame costs more than the send). Only a full queue waits, bounded.
        let frame = match queue.try_send(frame) {
            Ok(()) => return true,
            Err(mpsc::error::TrySendError::Closed(_)) => return false,
            Err(mpsc::error::TrySendError::Full(frame)) => frame,
        };
        match tokio::time::timeout(stall.after, queue.send(frame)).await {
            Ok(sent) => sent.is_ok(),
            Err(_) => {
                stall.stalled.store(true, Ordering::Release);
                stall.connections.dropped_for_stalling(stall.after);
                false
            }
        }
    };
    if !deliver(first).await {
        return;
    }
    let Some(mut updates) = updates else {
        return;
    };
    loop {
        let event = tokio::select! {
            event = updates.next() => event,
            // A client that cancels the call leaves without a further event to notice it by.
            _ = queue.closed() => None,
        };
        let Some(event) = event else {
            return;
        };
        if !deliver(project::event_frame(&ctx.extensions, &event)).await {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hyper::StatusCode;

    #[test]
    fn a2a_errors_get_the_grpc_codes_of_a2a_v1_and_others_their_google_rpc_code() {
        let with = |status, reason| code_of(&ApiError::new(status, reason, "m"));
        let bad = StatusCode::BAD_REQUEST;
        assert_eq!(
            with(StatusCode::NOT_FOUND, "TASK_NOT_FOUND"),
            Code::NotFound
        );
        for reason in [
            "TASK_NOT_CANCELABLE",
            "UNSUPPORTED_OPERATION",
            "EXTENDED_AGENT_CARD_NOT_CONFIGURED",
            "VERSION_NOT_SUPPORTED",
            "FAILED_PRECONDITION",
        ] {
            assert_eq!(with(bad, reason), Code::FailedPrecondition, "{reason}");
        }
        assert_eq!(
            code_of(&ApiError::push_config_operations_unsupported()),
            Code::FailedPrecondition
        );
        assert_eq!(with(bad, "INVALID_ARGUMENT"), Code::InvalidArgument);
        assert_eq!(
            with(StatusCode::CONFLICT, "DUPLICATE_MESSAGE_ID"),
            Code::AlreadyExists
        );
        assert_eq!(with(StatusCode::NOT_FOUND, "NOT_FOUND"), Code::NotFound);
        assert_eq!(
            with(StatusCode::UNAUTHORIZED, "UNAUTHENTICATED"),
            Code::Unauthenticated
        );
        assert_eq!(
            with(StatusCode::TOO_MANY_REQUESTS, "RESOURCE_EXHAUSTED"),
            Code::ResourceExhausted
        );
        assert_eq!(
            with(StatusCode::SERVICE_UNAVAILABLE, "UNAVAILABLE"),
            Code::Unavailable
        );
        assert_eq!(
            with(StatusCode::INTERNAL_SERVER_ERROR, "INTERNAL"),
            Code::Internal
        );
    }

    #[test]
    fn an_error_status_carries_error_info_and_the_field_at_fault() {
        let err = ApiError::invalid("message.parts", "is required").with_metadata("k", "v");
        let status = status_of(&err, &["urn:x".to_string()]);
        assert_eq!(status.code(), Code::InvalidArgument);
        let details = status.get_error_details();
        let info = details.error_info().expect("ErrorInfo");
        assert_eq!(
            (info.reason.as_str(), info.domain.as_str()),
            ("INVALID_ARGUMENT", DOMAIN)
        );
        assert_eq!(info.metadata.get("k").map(String::as_str), Some("v"));
        let violation = &details.bad_request().expect("BadRequest").field_violations[0];
        assert_eq!(violation.field, "message.parts");
        assert_eq!(status.metadata().get(EXTENSIONS_HEADER).unwrap(), "urn:x");
    }
}
