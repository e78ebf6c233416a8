//! A2A errors, for every binding: an A2A reason (the ErrorInfo `reason`), a message for
//! people, the field at fault and ErrorInfo metadata. A plane error's reason is its own
//! ([`PlaneError::reason`]); here it gets its HTTP status, from which its
//! `google.rpc.Code` follows ([`ApiError::status_name`]: the HTTP+JSON body's `status`,
//! and the gRPC status code). HTTP+JSON writes the wrapped `google.rpc.Status`
//! (`{"error": {code, status, message, details: [ErrorInfo, BadRequest?]}}`), JSON-RPC its
//! code for the reason with the same details as `data`, gRPC its status with them.

use bytes::Bytes;
use hyper::StatusCode;
use serde_json::{json, Value};

use crate::field_error::FieldError;
use crate::plane::PlaneError;
use crate::wire::json::WireError;

/// The ErrorInfo domain of A2A errors.
pub const DOMAIN: &str = "a2a-protocol.org";

/// An error on its way to the client.
#[derive(Debug, Clone)]
pub struct ApiError {
    pub status: StatusCode,
    /// The ErrorInfo reason (`TASK_NOT_FOUND`, `INVALID_ARGUMENT`, ...).
    pub reason: &'static str,
    pub message: String,
    /// A `BadRequest` field violation.
    pub field: Option<FieldError>,
    /// ErrorInfo metadata (string values only).
    pub metadata: Vec<(&'static str, String)>,
}

impl ApiError {
    pub fn new(status: StatusCode, reason: &'static str, message: impl Into<String>) -> Self {
        ApiError {
            status,
            reason,
            message: message.into(),
            field: None,
            metadata: Vec::new(),
        }
    }

    /// 400 INVALID_ARGUMENT naming `field`.
    pub fn invalid(field: impl Into<String>, message: impl Into<String>) -> Self {
        ApiError::from(FieldError::new(field, message))
    }

    pub fn with_metadata(mut self, key: &'static str, value: impl Into<String>) -> Self {
        self.metadata.push((key, value.into()));
        self
    }

    pub fn task_not_found(task_id: &str) -> Self {
        ApiError::new(
            StatusCode::NOT_FOUND,
            "TASK_NOT_FOUND",
            format!("task {task_id} not found"),
        )
        .with_metadata("taskId", task_id)
    }

    /// 429 RESOURCE_EXHAUSTED: a limit that frees up again (streams, connections).
    pub fn resource_exhausted(message: impl Into<String>) -> Self {
        ApiError::new(StatusCode::TOO_MANY_REQUESTS, "RESOURCE_EXHAUSTED", message)
    }

    /// Push notifications are not supported (the card says `pushNotifications: false`).
    pub fn push_notifications_unsupported(status: StatusCode, message: impl Into<String>) -> Self {
        ApiError::new(status, "PUSH_NOTIFICATION_NOT_SUPPORTED", message)
    }

    /// A push-notification-config operation: none are kept (`pushNotifications: false`).
    pub fn push_config_operations_unsupported() -> Self {
        ApiError::push_notifications_unsupported(
            StatusCode::NOT_IMPLEMENTED,
            "push notifications are not supported by this agent (its card declares pushNotifications: false); poll the Task or subscribe",
        )
    }

    /// GetExtendedAgentCard: there is none (`extendedAgentCard: false`).
    pub fn extended_card_not_configured() -> Self {
        ApiError::new(
            StatusCode::BAD_REQUEST,
            "EXTENDED_AGENT_CARD_NOT_CONFIGURED",
            "this agent has no extended Agent Card (its card declares extendedAgentCard: false); the public card at /.well-known/agent-card.json is the whole card",
        )
    }

    /// 401 UNAUTHENTICATED: no (known) bearer token.
    pub fn unauthenticated(message: impl Into<String>) -> Self {
        ApiError::new(StatusCode::UNAUTHORIZED, "UNAUTHENTICATED", message)
    }

    /// 500 INTERNAL: a failure of the task plane itself, not of the request.
    pub fn internal(message: impl Into<String>) -> Self {
        ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "INTERNAL", message)
    }

    /// The `google.rpc.Code` name of this error (by its HTTP status, and for 400 its reason).
    pub fn status_name(&self) -> &'static str {
        match self.status {
            StatusCode::BAD_REQUEST => match self.reason {
                "INVALID_ARGUMENT" | "CONTENT_TYPE_NOT_SUPPORTED" => "INVALID_ARGUMENT",
                _ => "FAILED_PRECONDITION",
            },
            StatusCode::UNAUTHORIZED => "UNAUTHENTICATED",
            StatusCode::FORBIDDEN => "PERMISSION_DENIED",
            StatusCode::NOT_FOUND => "NOT_FOUND",
            StatusCode::METHOD_NOT_ALLOWED => "UNIMPLEMENTED",
            StatusCode::CONFLICT => "ALREADY_EXISTS",
            StatusCode::PAYLOAD_TOO_LARGE => "OUT_OF_RANGE",
            StatusCode::UNSUPPORTED_MEDIA_TYPE => "INVALID_ARGUMENT",
            StatusCode::NOT_IMPLEMENTED => "UNIMPLEMENTED",
            StatusCode::SERVICE_UNAVAILABLE => "UNAVAILABLE",
            StatusCode::TOO_MANY_REQUESTS => "RESOURCE_EXHAUSTED",
            StatusCode::URI_TOO_LONG | StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE => {
                "INVALID_ARGUMENT"
            }
            StatusCode::REQUEST_TIMEOUT => "DEADLINE_EXCEEDED",
            _ => "INTERNAL",
        }
    }

    /// The `google.rpc.Status` details: the ErrorInfo with the A2A reason, then the
    /// BadRequest naming the field, if any (HTTP+JSON's `details`, JSON-RPC's `data`).
    pub fn details(&self) -> Vec<Value> {
        let mut info = json!({
            "@type": "type.googleapis.com/google.rpc.ErrorInfo",
            "reason": self.reason,
            "domain": DOMAIN,
        });
        if !self.metadata.is_empty() {
            info["metadata"] = Value::Object(
                self.metadata
                    .iter()
                    .map(|(k, v)| (k.to_string(), Value::String(v.clone())))
                    .collect(),
            );
        }
        let mut details = vec![info];
        if let Some(violation) = &self.field {
            details.push(json!({
                "@type": "type.googleapis.com/google.rpc.BadRequest",
                "fieldViolations": [{ "field": violation.field, "description": violation.message }],
            }));
        }
        details
    }

    /// The wrapped `google.rpc.Status` body.
    pub fn body(&self) -> Bytes {
        let details = self.details();
        let body = json!({
            "error": {
                "code": self.status.as_u16(),
                "status": self.status_name(),
                "message": self.message,
                "details": details,
            }
        });
        Bytes::from(serde_json::to_vec(&body).unwrap_or_default())
    }
}

impl From<FieldError> for ApiError {
    fn from(err: FieldError) -> Self {
        ApiError {
            field: Some(err.clone()),
            ..ApiError::new(StatusCode::BAD_REQUEST, "INVALID_ARGUMENT", err.to_string())
        }
    }
}

impl From<WireError> for ApiError {
    fn from(err: WireError) -> Self {
        let message = err.to_string();
        ApiError {
            field: Some(err.error),
            ..ApiError::new(StatusCode::BAD_REQUEST, "INVALID_ARGUMENT", message)
        }
    }
}

impl From<PlaneError> for ApiError {
    fn from(err: PlaneError) -> Self {
        let reason = err.reason();
        let status = match &err {
            PlaneError::TaskNotFound(_) | PlaneError::ContextNotFound(_) => StatusCode::NOT_FOUND,
            PlaneError::DuplicateMessageId { .. } => StatusCode::CONFLICT,
            PlaneError::Store(_) if reason == "UNAVAILABLE" => StatusCode::SERVICE_UNAVAILABLE,
            PlaneError::Store(_) => StatusCode::INTERNAL_SERVER_ERROR,
            _ => StatusCode::BAD_REQUEST,
        };
        let message = if err.is_closed() {
            "the task plane is shutting down; retry".to_string()
        } else if status == StatusCode::INTERNAL_SERVER_ERROR {
            format!("the task plane failed; nothing was recorded for this request: {err}")
        } else {
            err.to_string()
        };
        match err {
            PlaneError::Invalid(field) => ApiError::from(field),
            PlaneError::ContextMismatch { .. } => ApiError::invalid("message.contextId", message),
            PlaneError::TaskNotFound(task_id)
            | PlaneError::TaskTerminal { task_id, .. }
            | PlaneError::NotSubscribable { task_id, .. }
            | PlaneError::NotCancelable { task_id, .. }
            | PlaneError::NotAwaitingInput { task_id, .. } => {
                ApiError::new(status, reason, message).with_metadata("taskId", task_id)
            }
            PlaneError::DuplicateMessageId { message_id } => {
                ApiError::new(status, reason, message).with_metadata("messageId", message_id)
            }
            _ => ApiError::new(status, reason, message),
        }
    }
}
