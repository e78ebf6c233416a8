//! The plane's error enum: what a caller did wrong, or what the store could not do. Each
//! variant's A2A reason (`TASK_NOT_FOUND`, ...) is given here, in [`PlaneError::reason`],
//! and nowhere else: the HTTP layer adds the status code, the addon passes the reason on.

use std::fmt;

use crate::field_error::FieldError;
use crate::record::TaskState;
use crate::store::StoreError;

#[derive(Debug, Clone)]
pub enum PlaneError {
    /// A field of the request is malformed.
    Invalid(FieldError),
    /// The source has not registered with the plane.
    UnknownSource(String),
    /// No such Task for this principal (a foreign Task is reported the same way).
    TaskNotFound(String),
    /// No such context for this principal.
    ContextNotFound(String),
    /// The (principal, messageId) was used before with a different payload.
    DuplicateMessageId { message_id: String },
    /// The Task is terminal: it never changes again.
    TaskTerminal { task_id: String, state: TaskState },
    /// The Task is not waiting for input, so an explicit continuation cannot attach.
    NotAwaitingInput { task_id: String, state: TaskState },
    /// A subscription to a terminal Task: there is nothing left to stream.
    NotSubscribable { task_id: String, state: TaskState },
    /// Cancel of a terminal Task.
    NotCancelable { task_id: String, state: TaskState },
    /// A message names a Task and a different context.
    ContextMismatch { task_id: String, context_id: String },
    /// The operation does not fit the Task's current state (e.g. recording an output
    /// outside WORKING) or the source's declared capabilities.
    FailedPrecondition(String),
    /// A delivery or operation id was reused with a different payload.
    DeliveryConflict(String),
    /// The store failed; nothing was recorded.
    Store(StoreError),
}

impl fmt::Display for PlaneError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PlaneError::Invalid(err) => err.fmt(f),
            PlaneError::UnknownSource(source) => write!(
                f,
                "source `{source}` is not registered with the task plane; register it with its continuation method first"
            ),
            PlaneError::TaskNotFound(id) => write!(f, "task {id} not found"),
            PlaneError::ContextNotFound(id) => write!(f, "context {id} not found"),
            PlaneError::DuplicateMessageId { message_id } => write!(
                f,
                "messageId {message_id} was already used with a different payload; send new work with a new messageId"
            ),
            PlaneError::TaskTerminal { task_id, state } => write!(
                f,
                "task {task_id} is {} and can no longer change; send a new message without a taskId to start new work",
                state.as_str()
            ),
            PlaneError::NotAwaitingInput { task_id, state } => write!(
                f,
                "task {task_id} is {} and is not waiting for input; only a task in input_required or auth_required with an open request can be continued",
                state.as_str()
            ),
            PlaneError::NotSubscribable { task_id, state } => write!(
                f,
                "task {task_id} is {} and will not change again; read it with GET /tasks/{task_id}",
                state.as_str()
            ),
            PlaneError::NotCancelable { task_id, state } => write!(
                f,
                "task {task_id} is {} and cannot be canceled",
                state.as_str()
            ),
            PlaneError::ContextMismatch { task_id, context_id } => write!(
                f,
                "task {task_id} does not belong to context {context_id}; send the task's own contextId or none"
            ),
            PlaneError::FailedPrecondition(message) => f.write_str(message),
            PlaneError::DeliveryConflict(message) => f.write_str(message),
            PlaneError::Store(err) => err.fmt(f),
        }
    }
}

impl std::error::Error for PlaneError {}

impl From<StoreError> for PlaneError {
    fn from(err: StoreError) -> Self {
        PlaneError::Store(err)
    }
}

impl From<FieldError> for PlaneError {
    fn from(err: FieldError) -> Self {
        PlaneError::Invalid(err)
    }
}

impl PlaneError {
    /// The A2A error reason of this error (the `ErrorInfo.reason` of the HTTP binding):
    /// the one mapping from the plane's errors to the contract's reasons.
    pub fn reason(&self) -> &'static str {
        match self {
            PlaneError::Invalid(_) | PlaneError::ContextMismatch { .. } => "INVALID_ARGUMENT",
            PlaneError::TaskNotFound(_) => "TASK_NOT_FOUND",
            PlaneError::ContextNotFound(_) => "NOT_FOUND",
            PlaneError::DuplicateMessageId { .. } => "DUPLICATE_MESSAGE_ID",
            // A terminal Task, or one that does not wait for input, cannot take a message;
            // a terminal one has no updates to subscribe to.
            PlaneError::TaskTerminal { .. }
            | PlaneError::NotAwaitingInput { .. }
            | PlaneError::NotSubscribable { .. } => "UNSUPPORTED_OPERATION",
            PlaneError::NotCancelable { .. } => "TASK_NOT_CANCELABLE",
            PlaneError::UnknownSource(_)
            | PlaneError::FailedPrecondition(_)
            | PlaneError::DeliveryConflict(_) => "FAILED_PRECONDITION",
            // Retryable: a full disk frees up, a closing plane reopens.
            PlaneError::Store(StoreError::Full(_) | StoreError::Closed) => "UNAVAILABLE",
            PlaneError::Store(_) => "INTERNAL",
        }
    }

    /// The store was closed (the plane is shutting down): nothing was recorded, and there
    /// is nothing to report but that.
    pub fn is_closed(&self) -> bool {
        matches!(self, PlaneError::Store(StoreError::Closed))
    }
}
