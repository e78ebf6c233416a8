//! `A2AListener`: the A2A HTTP+JSON listener over an open `TaskPlane`, and its options.

use std::sync::{Arc, Mutex};

use napi::bindgen_prelude::Promise;
use napi::threadsafe_function::ThreadsafeFunction;
use napi::Status;
use napi_derive::napi;
use serde_json::Value;

use super::convert::agent_message;
use super::plane::TaskPlane;
use super::{failed_precondition, invalid_arg, Result};
use crate::config::{self, ListenerConfig, ListenerOption};
use crate::handler::auth::Reloaded;
use crate::handler::Credentials;
use crate::http;
use crate::plane::{AlwaysTask, Answer, Executor};
use crate::record::MessageRecord;
use crate::wire;

/// What the listener's `executor` is asked about a new message (never a continuation or a
/// duplicate).
#[napi(object, object_from_js = false)]
pub struct ExecutorRequest {
    /// The authenticated caller.
    pub principal: String,
    /// The caller's message, an A2A `Message` object.
    #[napi(ts_type = "Record<string, unknown>")]
    pub message: Value,
}

/// The JS executor: called on the JS thread, its Promise awaited on the listener's runtime.
/// Weak: it never keeps Node's event loop alive.
type JsExecutorFn = ThreadsafeFunction<
    ExecutorRequest,
    Promise<Option<Value>>,
    ExecutorRequest,
    Status,
    false,
    true,
>;

/// An executor written in JS: `(request) => Promise<Message | null | undefined>`.
struct JsExecutor {
    callback: Arc<JsExecutorFn>,
}

impl Executor for JsExecutor {
    fn answer(&self, principal: &str, message: &MessageRecord) -> Answer {
        let request = serde_json::to_value(wire::convert::message_to_wire(message, "", None)).map(
            |message| ExecutorRequest {
                principal: principal.to_string(),
                message,
            },
        );
        let callback = self.callback.clone();
        Box::pin(async move {
            let request =
                request.map_err(|e| format!("cannot hand the message to the executor: {e}"))?;
            let promise = callback.call_async_catch(request).await.map_err(|e| {
                format!(
                    "the executor threw or did not return a Promise (use an async function): {}",
                    e.reason
                )
            })?;
            let reply = promise
                .await
                .map_err(|e| format!("the executor's Promise rejected: {}", e.reason))?;
            match reply {
                None | Some(Value::Null) => Ok(None),
                Some(reply) => crate::wire::json::decode_value_unchecked("Message", reply)
                    .map_err(invalid_arg)
                    .and_then(agent_message)
                    .map(Some)
                    .map_err(|e| {
                        format!("the executor's reply is not an A2A Message: {}", e.reason)
                    }),
            }
        })
    }
}

/// The executor for a JS function, or the one that makes every message a Task.
fn executor_of(callback: Option<JsExecutorFn>) -> Arc<dyn Executor> {
    match callback {
        Some(callback) => Arc::new(JsExecutor {
            callback: Arc::new(callback),
        }),
        None => Arc::new(AlwaysTask),
    }
}

/// Options of `A2AListener.start`; anything left out comes from the `A2A_*` environment
/// variables (and their defaults).
#[napi(object, object_to_js = false)]
#[derive(Default)]
pub struct ListenerOptions {
    pub host: Option<String>,
    /// 0 picks a free port.
    pub port: Option<u32>,
    pub public_url: Option<String>,
    pub credentials_path: Option<String>,
    pub agent_name: Option<String>,
    pub agent_description: Option<String>,
    pub agent_version: Option<String>,
    pub blocking_timeout_ms: Option<u32>,
    pub max_body_bytes: Option<u32>,
    pub max_connections: Option<u32>,
    pub idle_timeout_ms: Option<u32>,
    pub write_timeout_ms: Option<u32>,
    pub max_streams: Option<u32>,
    pub max_streams_per_principal: Option<u32>,
    /// How long at most `message:stream` holds a new Task's first frame for its first
    /// update (default 2; 0 sends it at once).
    pub stream_coalesce_ms: Option<u32>,
    /// How long `executor` may take before the message becomes a Task (default 2000).
    pub executor_timeout_ms: Option<u32>,
    /// Answers a simple interaction with a direct A2A Message before any Task exists:
    /// resolve to a Message (role `ROLE_AGENT`, at least one part; `messageId` minted if
    /// missing) or to `null`/`undefined` for a Task. Asked only for new work; a duplicate
    /// gets its first outcome verbatim. Late (`executorTimeoutMs`), throwing, rejecting or
    /// answering with something else: the message becomes a Task and a log line says so.
    #[napi(
        ts_type = "(request: ExecutorRequest) => Promise<Record<string, unknown> | null | undefined>"
    )]
    pub executor: Option<JsExecutorFn>,
}

/// The listener's configuration: each option given overrides its `A2A_*` variable
/// ([`ListenerConfig::with_options`]).
fn listener_config(o: ListenerOptions) -> Result<ListenerConfig> {
    let number = |n: Option<u32>| n.map(|n| n.to_string());
    let option = |name, variable, value| ListenerOption {
        name,
        variable,
        value,
    };
    let options = [
        option("host", "A2A_HOST", o.host),
        option("port", "A2A_PORT", number(o.port)),
        option("publicUrl", "A2A_PUBLIC_URL", o.public_url),
        option("agentName", "A2A_AGENT_NAME", o.agent_name),
        option(
            "agentDescription",
            "A2A_AGENT_DESCRIPTION",
            o.agent_description,
        ),
        option("agentVersion", "A2A_AGENT_VERSION", o.agent_version),
        option(
            "credentialsPath",
            "A2A_CREDENTIALS_PATH",
            o.credentials_path,
        ),
        option(
            "blockingTimeoutMs",
            "A2A_BLOCKING_TIMEOUT_MS",
            number(o.blocking_timeout_ms),
        ),
        option(
            "executorTimeoutMs",
            "A2A_EXECUTOR_TIMEOUT_MS",
            number(o.executor_timeout_ms),
        ),
        option(
            "maxBodyBytes",
            "A2A_MAX_BODY_BYTES",
            number(o.max_body_bytes),
        ),
        option(
            "maxConnections",
            "A2A_MAX_CONNECTIONS",
            number(o.max_connections),
        ),
        option(
            "idleTimeoutMs",
            "A2A_IDLE_TIMEOUT_MS",
            number(o.idle_timeout_ms),
        ),
        option(
            "writeTimeoutMs",
            "A2A_WRITE_TIMEOUT_MS",
            number(o.write_timeout_ms),
        ),
        option("maxStreams", "A2A_MAX_STREAMS", number(o.max_streams)),
        option(
            "maxStreamsPerPrincipal",
            "A2A_MAX_STREAMS_PER_PRINCIPAL",
            number(o.max_streams_per_principal),
        ),
        option(
            "streamCoalesceMs",
            "A2A_STREAM_COALESCE_MS",
            number(o.stream_coalesce_ms),
        ),
    ];
    ListenerConfig::with_options(&options, &config::process_env).map_err(invalid_arg)
}

/// The A2A HTTP+JSON listener over an open `TaskPlane`. Start it in `session_start` (when
/// `A2A_SERVER=1`) and close it in `session_shutdown`, before the plane.
#[napi(js_name = "A2AListener")]
pub struct A2aListener {
    inner: Mutex<Option<http::Listener>>,
    url: String,
    port: u32,
    warnings: Vec<String>,
}

#[napi]
impl A2aListener {
    /// Binds and starts serving; throws (naming the variable or file) when the
    /// configuration or the credentials file is unusable or the address is taken.
    #[napi(factory, catch_unwind)]
    pub fn start(plane: &TaskPlane, options: Option<ListenerOptions>) -> Result<A2aListener> {
        let mut options = options.unwrap_or_default();
        let executor = executor_of(options.executor.take());
        let config = listener_config(options)?;
        let listener = http::Listener::start(plane.plane.clone(), config, executor)
            .map_err(failed_precondition)?;
        Ok(A2aListener {
            url: listener.url().to_string(),
            port: u32::from(listener.local_addr().port()),
            warnings: listener.warnings().to_vec(),
            inner: Mutex::new(Some(listener)),
        })
    }

    /// What the operator should fix although the listener started (e.g. a credentials
    /// file readable by others).
    #[napi(getter)]
    pub fn warnings(&self) -> Vec<String> {
        self.warnings.clone()
    }

    /// Replaces the executor (see `ListenerOptions.executor`) for messages that arrive from
    /// now on; `null` removes it: every new message becomes a Task without a call into JS.
    /// Throws `FAILED_PRECONDITION` once the listener is closed.
    #[napi(
        catch_unwind,
        ts_args_type = "executor: ((request: ExecutorRequest) => Promise<Record<string, unknown> | null | undefined>) | null"
    )]
    pub fn set_executor(&self, executor: Option<JsExecutorFn>) -> Result<()> {
        match self
            .inner
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_ref()
        {
            Some(listener) => {
                listener.set_executor(executor_of(executor));
                Ok(())
            }
            None => Err(closed()),
        }
    }

    /// Reads the credentials file again and puts it in use (the resident does on SIGHUP):
    /// a new token works and a removed one is refused from the next request on. Throws
    /// `FAILED_PRECONDITION` naming the file and the problem when it is unusable; the
    /// credentials in use stay.
    #[napi(catch_unwind)]
    pub fn reload_credentials(&self) -> Result<CredentialsReload> {
        self.credentials(Credentials::reload)?
            .map(Into::into)
            .map_err(failed_precondition)
    }

    /// Reads the TLS certificate and key (`A2A_TLS_CERT`, `A2A_TLS_KEY`) again (the
    /// resident does on SIGHUP): connections accepted from now on get the new certificate.
    /// Returns whether TLS is on (`false`: nothing to reload). Throws `FAILED_PRECONDITION`
    /// naming the file and the problem when it is unusable; the certificate in use stays.
    #[napi(catch_unwind)]
    pub fn reload_tls(&self) -> Result<bool> {
        match self
            .inner
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_ref()
        {
            Some(listener) => listener.reload_tls().map_err(failed_precondition),
            None => Err(closed()),
        }
    }

    /// `reloadCredentials` when the file changed since it was last read (its time, size or
    /// inode); `null` when it did not. The resident asks every 2 s.
    #[napi(catch_unwind)]
    pub fn reload_credentials_if_changed(&self) -> Result<Option<CredentialsReload>> {
        self.credentials(Credentials::reload_if_changed)?
            .transpose()
            .map(|r| r.map(Into::into))
            .map_err(failed_precondition)
    }

    /// `f` of the serving listener's credentials; `FAILED_PRECONDITION` once it is closed.
    fn credentials<T>(&self, f: impl FnOnce(&Credentials) -> T) -> Result<T> {
        match self
            .inner
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_ref()
        {
            Some(listener) => Ok(f(&listener.handler().credentials)),
            None => Err(closed()),
        }
    }

    /// The interface URL (as in the Agent Card).
    #[napi(getter)]
    pub fn url(&self) -> String {
        self.url.clone()
    }

    /// The bound port.
    #[napi(getter)]
    pub fn port(&self) -> u32 {
        self.port
    }

    /// Stops accepting, ends open streams, lets in-flight sends return their snapshot, and
    /// frees the port (within a few seconds). Idempotent.
    #[napi(catch_unwind)]
    pub fn close(&self) {
        let listener = self.inner.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(mut listener) = listener {
            listener.close();
        }
    }
}

fn closed() -> super::Failure {
    failed_precondition("the A2A listener is closed; start a new one with A2AListener.start")
}

/// A credentials reload that took effect.
#[napi(object, object_from_js = false)]
pub struct CredentialsReload {
    /// How many credentials are in use now.
    pub credentials: u32,
    /// What the operator should fix although the file loaded.
    pub warnings: Vec<String>,
}

impl From<Reloaded> for CredentialsReload {
    fn from(r: Reloaded) -> Self {
        CredentialsReload {
            credentials: u32::try_from(r.credentials).unwrap_or(u32::MAX),
            warnings: r.warnings,
        }
    }
}

/// Whether `A2A_SERVER` asks for the listener (`1`/`true`; `0`/`false`/unset: no). Throws
/// naming the variable for any other value.
#[napi(catch_unwind)]
pub fn listener_enabled() -> Result<bool> {
    config::listener_enabled(&config::process_env).map_err(invalid_arg)
}
