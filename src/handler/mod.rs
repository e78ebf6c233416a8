//! The A2A request handler every binding serves: one function per A2A operation, each
//! enforcing that operation's rules once for HTTP+JSON, JSON-RPC and gRPC alike. A binding
//! reads its request into the operation's typed request (the proto's message), calls the
//! operation with the caller's [`Ctx`], and writes the result, or the [`ApiError`], in
//! its own form; it adds nothing to the rules.
//!
//! What a request passes before its operation, in order, each here once: the protocol
//! version ([`negotiate::check_version`]), the principal from the bearer token
//! ([`Handler::authenticate`]) and the extensions it activates
//! ([`negotiate::activated_extensions`]).
//!
//! The operations: `send.rs` (SendMessage: intake, the executor's direct Message, the
//! blocking wait; SendStreamingMessage), `tasks.rs` (GetTask, ListTasks with signed page
//! tokens, CancelTask, SubscribeToTask). A stream is an [`streams::EventStream`]: its place
//! in the stream pool (overall and per principal), its first event and the Task's updates
//! after it, which the binding frames (SSE of `StreamResponse`s, SSE of JSON-RPC
//! responses, gRPC messages). What a caller sees of a Task is `project.rs`'s. Errors carry
//! their A2A reason (`error.rs`); each binding maps the reason to its own form.

pub mod auth;
pub mod blocking;
pub mod error;
pub mod negotiate;
pub mod page_token;
pub mod project;
pub mod send;
pub mod streams;
pub mod tasks;
pub mod timer;

use std::sync::Arc;

use tokio::sync::watch;

pub use auth::Credentials;
pub use error::ApiError;

use crate::config::ListenerConfig;
use crate::plane::{Executor, TaskPlane};

/// The executor, replaceable while the handler serves.
pub type ExecutorSlot = Arc<std::sync::RwLock<Arc<dyn Executor>>>;

/// Everything an operation needs, shared by every binding of one listener.
pub struct Handler {
    pub plane: TaskPlane,
    pub config: ListenerConfig,
    pub credentials: Credentials,
    /// Replaceable while serving (`Listener::set_executor`).
    pub executor: ExecutorSlot,
    /// The interface URL a Task's locator names (the card's first interface), without a
    /// trailing `/`.
    pub interface_url: String,
    pub page_tokens: page_token::PageTokens,
    /// The stream pool, overall and per principal, shared by every binding.
    pub streams: Arc<streams::StreamPool>,
    /// Becomes `true` when the listener closes: waits end, streams end.
    pub shutdown: watch::Receiver<bool>,
    /// The timers of held first frames ([`streams::hold_first_frame`]).
    pub holds: timer::Waves,
}

impl Handler {
    /// The caller's principal from its `Authorization` values (each binding passes every
    /// one it received): exactly one, a known bearer token. With two, which credential
    /// acts is ambiguous.
    pub fn authenticate<'a>(
        &self,
        mut authorizations: impl Iterator<Item = &'a str>,
    ) -> Result<String, ApiError> {
        let first = authorizations.next();
        if authorizations.next().is_some() {
            return Err(ApiError::unauthenticated(
                "the request has more than one Authorization header: send exactly one `Authorization: Bearer <token>`",
            ));
        }
        self.credentials.principal(first).ok_or_else(|| {
            ApiError::unauthenticated(
                "a valid bearer token is required: send `Authorization: Bearer <token>`",
            )
        })
    }

    /// The executor for a message that arrives now.
    pub fn executor(&self) -> Arc<dyn Executor> {
        self.executor
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }
}

/// A request that passed the common checks: who asks, and with which extensions.
#[derive(Clone)]
pub struct Ctx {
    pub handler: Arc<Handler>,
    pub principal: String,
    /// Supported extension URIs the client activated for this request.
    pub extensions: Vec<String>,
}

/// A runtime on the test's own thread, for the handler's unit tests.
#[cfg(test)]
pub(crate) fn test_runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a current-thread runtime for a test")
}
