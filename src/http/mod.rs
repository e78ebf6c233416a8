//! The A2A HTTP+JSON listener: hyper 1 on a tokio runtime owned by the listener (never a
//! global), with our own small router (`/tasks/{id}:cancel`-style paths).
//!
//! Per request, in order: route (404) → method (405) → `A2A-Version` (400
//! `VERSION_NOT_SUPPORTED`) → bearer principal (401) → content type (415) → body size (413)
//! → ProtoJSON (400 naming the field) → the route's handler. Every error body is the
//! wrapped `google.rpc.Status` (`error.rs`).
//!
//! Lifecycle: [`Listener::start`] binds and serves; [`Listener::close`] stops accepting,
//! ends open streams, lets in-flight sends return their snapshot, waits for connections to
//! finish (bounded) and shuts the runtime down.
//!
//! What a client may hold is bounded (`conn.rs`): connections in number, with the
//! longest-idle one closed first when a newcomer arrives at the limit; streams in their own
//! pool, overall and per principal; a client that sends no request head in time, idles on
//! keep-alive, or stops reading a response for the write timeout is dropped.
//!
//! Files: the routes are `card.rs` (the Agent Card), `send.rs` (`message:send`,
//! `message:stream`) and `tasks.rs` (get, list, cancel, subscribe); what they share is
//! `project.rs` (what a caller sees of a Task and its updates), `task_stream.rs` (waiting
//! for a Task to settle, and its SSE stream), `sse.rs` (framing and backpressure),
//! `blocking.rs` (plane calls off the async workers), `auth.rs`, `negotiate.rs`,
//! `error.rs`, `page_token.rs` and `conn.rs`.

mod auth;
mod blocking;
mod card;
mod conn;
mod error;
mod negotiate;
mod page_token;
mod project;
mod send;
mod sse;
mod task_stream;
mod tasks;
mod timer;

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::header::{
    HeaderValue, ALLOW, CACHE_CONTROL, CONTENT_TYPE, ETAG, IF_NONE_MATCH, LAST_MODIFIED,
    WWW_AUTHENTICATE,
};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use serde_json::json;
use tokio::sync::watch;

pub use auth::Credentials;
pub use error::ApiError;

use crate::config::ListenerConfig;
use crate::plane::{Executor, TaskPlane};

/// The listener's async workers: two, or one when this process may run on one CPU only
/// (`taskset`, a cgroup's cpuset): a second worker on the same CPU only adds thread
/// switches (tasks hop between workers) and buys no parallelism.
fn listener_workers() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get().min(2))
        .unwrap_or(2)
}

/// The body type of every response.
pub type Body = BoxBody<Bytes, Infallible>;

/// Everything a request handler needs.
pub(crate) struct Shared {
    pub plane: TaskPlane,
    pub config: ListenerConfig,
    pub credentials: Credentials,
    /// Replaceable while serving ([`Listener::set_executor`]).
    pub executor: ExecutorSlot,
    pub card: card::CardDocument,
    /// The interface URL (the card's `supportedInterfaces[0].url`), without a trailing `/`.
    pub interface_url: String,
    /// The path prefix of the interface URL (`/a2a` for `https://h/a2a`), or empty.
    pub base_path: String,
    pub shutdown: watch::Receiver<bool>,
    pub connections: Arc<conn::Connections>,
    pub page_tokens: page_token::PageTokens,
    /// The timers of held first frames ([`task_stream::hold_first_frame`]).
    pub holds: timer::Waves,
}

/// The listener's executor, replaceable while it serves.
pub(crate) type ExecutorSlot = Arc<std::sync::RwLock<Arc<dyn Executor>>>;

/// A running listener.
pub struct Listener {
    executor: ExecutorSlot,
    runtime: Option<tokio::runtime::Runtime>,
    shutdown: watch::Sender<bool>,
    serve: Option<tokio::task::JoinHandle<()>>,
    local_addr: SocketAddr,
    interface_url: String,
    warnings: Vec<String>,
}

/// How long `close()` waits for open connections to finish.
const CLOSE_GRACE: Duration = Duration::from_secs(5);
/// hyper's read and write buffer per connection: a request head larger than this gets
/// hyper's own bare 431; a response waiting for a slow reader holds at most this (plus one
/// frame) here.
const WRITE_BUFFER_BYTES: usize = 64 * 1024;
/// Longest request target we answer (414 with the documented body beyond).
const MAX_URI_BYTES: usize = 8 * 1024;
/// Largest request header section we answer (431 with the documented body beyond; hyper
/// itself refuses heads beyond `WRITE_BUFFER_BYTES`, and more than 100 header fields).
const MAX_HEADER_BYTES: usize = 32 * 1024;

impl Listener {
    /// Loads the credentials, binds `config.host:config.port` and starts serving `plane`.
    pub fn start(
        plane: TaskPlane,
        config: ListenerConfig,
        executor: Arc<dyn Executor>,
    ) -> Result<Listener, String> {
        let credentials = Credentials::load(&config.credentials_path)?;
        let page_tokens = page_token::PageTokens::new(plane.page_token_key().map_err(|e| {
            format!("cannot read the page-token key from the task-plane store: {e}")
        })?);
        let std_listener = std::net::TcpListener::bind((config.host.as_str(), config.port))
            .map_err(|e| {
                let fix = match e.kind() {
                    std::io::ErrorKind::AddrInUse => "another process (another resident?) is listening there: stop it, or set A2A_PORT to a free port",
                    std::io::ErrorKind::PermissionDenied => "ports below 1024 need privileges: set A2A_PORT to 1024 or above",
                    _ => "check A2A_HOST and A2A_PORT",
                };
                format!(
                    "A2A_HOST/A2A_PORT: cannot listen on {}:{}: {e}; {fix}",
                    config.host, config.port
                )
            })?;
        std_listener
            .set_nonblocking(true)
            .map_err(|e| format!("cannot configure the listening socket: {e}"))?;
        let local_addr = std_listener.local_addr().map_err(|e| e.to_string())?;
        let interface_url = match &config.public_url {
            Some(url) => url.clone(),
            None => format!("http://{local_addr}"),
        };
        let base_path = base_path_of(&interface_url);
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(listener_workers())
            .thread_name("a2a-http")
            // Only cancel and a write waiting for room in a full queue use it: a few threads
            // (each with its own stack and read connection) are plenty; more calls queue.
            .max_blocking_threads(16)
            .enable_all()
            .build()
            .map_err(|e| format!("cannot start the listener runtime: {e}"))?;
        let (shutdown_tx, shutdown_rx) = watch::channel(false);
        let started_ms = crate::clock::Clock::now_ms(&crate::clock::SystemClock);
        let warnings = credentials.warnings.clone();
        let connections = conn::Connections::new(conn::Limits {
            max_connections: config.max_connections,
            max_streams: config.max_streams,
            max_streams_per_principal: config.max_streams_per_principal,
        });
        let executor: ExecutorSlot = Arc::new(std::sync::RwLock::new(executor));
        let shared = Arc::new(Shared {
            connections,
            page_tokens,
            card: card::build(&config, &interface_url, started_ms),
            plane,
            config,
            credentials,
            executor: executor.clone(),
            interface_url: interface_url.clone(),
            base_path,
            shutdown: shutdown_rx,
            holds: timer::Waves::default(),
        });
        let listener = {
            let _guard = runtime.enter();
            tokio::net::TcpListener::from_std(std_listener).map_err(|e| e.to_string())?
        };
        let serve = runtime.spawn(serve(listener, shared));
        crate::log::event(
            "a2a_server_started",
            json!({ "bind": local_addr.to_string(), "url": interface_url }),
        );
        Ok(Listener {
            executor,
            runtime: Some(runtime),
            shutdown: shutdown_tx,
            serve: Some(serve),
            local_addr,
            interface_url,
            warnings,
        })
    }

    /// Replaces the executor for the messages that arrive from now on (a message already
    /// being decided keeps the one it started with).
    pub fn set_executor(&self, executor: Arc<dyn Executor>) {
        *self.executor.write().unwrap_or_else(|p| p.into_inner()) = executor;
    }

    /// What the operator should fix although the listener started (e.g. a credentials
    /// file readable by others).
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// The interface URL clients use (also in the Agent Card).
    pub fn url(&self) -> &str {
        &self.interface_url
    }

    /// Stops the listener: no new connections; open streams end; in-flight sends return
    /// their snapshot; then the runtime stops. Idempotent.
    pub fn close(&mut self) {
        let Some(runtime) = self.runtime.take() else {
            return;
        };
        let _ = self.shutdown.send(true);
        if let Some(serve) = self.serve.take() {
            let _ = runtime.block_on(async {
                tokio::time::timeout(CLOSE_GRACE + Duration::from_secs(1), serve).await
            });
        }
        runtime.shutdown_timeout(Duration::from_secs(1));
        crate::log::event(
            "a2a_server_stopped",
            json!({ "bind": self.local_addr.to_string() }),
        );
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        self.close();
    }
}

fn base_path_of(url: &str) -> String {
    let rest = url.split_once("://").map(|(_, r)| r).unwrap_or(url);
    match rest.find('/') {
        Some(i) => rest[i..].trim_end_matches('/').to_string(),
        None => String::new(),
    }
}

async fn serve(listener: tokio::net::TcpListener, shared: Arc<Shared>) {
    let connections = shared.connections.clone();
    let mut shutdown = shared.shutdown.clone();
    let idle = Duration::from_millis(shared.config.idle_timeout_ms);
    let write_timeout = Duration::from_millis(shared.config.write_timeout_ms);
    loop {
        let stream = tokio::select! {
            _ = shutdown.changed() => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(_) => {
                    // Out of file descriptors and the like: back off instead of spinning.
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        // At the limit, the longest-idle connection makes room for this one.
        let slot = tokio::select! {
            _ = shutdown.changed() => break,
            slot = connections.admit() => slot,
        };
        let _ = stream.set_nodelay(true);
        let service = {
            let (shared, slot) = (shared.clone(), slot.clone());
            hyper::service::service_fn(move |req| {
                let shared = shared.clone();
                let request = shared.connections.request_started(&slot);
                let slot = slot.clone();
                async move {
                    let response = handle(shared, slot, req).await;
                    // The request counts as in flight until hyper has written (and dropped)
                    // the whole response body.
                    Ok::<_, Infallible>(response.map(|body| {
                        http_body_util::BodyExt::boxed(Tracked {
                            inner: body,
                            _request: request,
                        })
                    }))
                }
            })
        };
        let io = TokioIo::new(conn::WriteDeadline::new(stream, write_timeout));
        let conn = hyper::server::conn::http1::Builder::new()
            .timer(timer::ConnTimer::default())
            .header_read_timeout(idle)
            .max_buf_size(WRITE_BUFFER_BYTES)
            .keep_alive(true)
            .serve_connection(io, service);
        let mut shutdown = shutdown.clone();
        // Returns the slot when the task ends, even by a panic in a handler.
        let end = conn::ConnectionEnd::new(connections.clone(), slot.clone());
        tokio::spawn(async move {
            tokio::pin!(conn);
            let ended = tokio::select! {
                ended = conn.as_mut() => Some(ended),
                _ = slot.close_requested() => None,
                _ = shutdown.wait_for(|stop| *stop) => None,
            };
            let ended = match ended {
                Some(ended) => ended,
                None => {
                    // Idle: closes now; busy: after the response in progress. A connection
                    // that serves no request yet does not close (a partial request head, a
                    // response still flushing to a slow reader) is dropped shortly after.
                    conn.as_mut().graceful_shutdown();
                    loop {
                        tokio::select! {
                            ended = conn.as_mut() => break ended,
                            _ = tokio::time::sleep(conn::ROOM_PATIENCE) => {
                                if !slot.is_serving() {
                                    break Ok(());
                                }
                            }
                        }
                    }
                }
            };
            if ended.as_ref().is_err_and(conn::is_write_stall) {
                end.dropped_for_stalling(write_timeout);
            }
            drop(end);
        });
    }
    drop(listener);
    let _ = tokio::time::timeout(CLOSE_GRACE, connections.wait_all_closed()).await;
}

/// A response body that marks its request done when hyper drops it.
struct Tracked {
    inner: Body,
    _request: conn::RequestGuard,
}

impl hyper::body::Body for Tracked {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<hyper::body::Frame<Bytes>, Infallible>>> {
        std::pin::Pin::new(&mut self.inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        self.inner.size_hint()
    }
}

/// The routes of the binding.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Route {
    Card,
    Send,
    Stream,
    ListTasks,
    GetTask(String),
    CancelTask(String),
    Subscribe(String),
    PushConfigs,
}

impl Route {
    fn allows(&self, method: &Method) -> bool {
        match self {
            Route::Card | Route::ListTasks | Route::GetTask(_) => {
                method == Method::GET || method == Method::HEAD
            }
            Route::Send | Route::Stream | Route::CancelTask(_) => method == Method::POST,
            Route::Subscribe(_) => method == Method::GET || method == Method::POST,
            Route::PushConfigs => true,
        }
    }

    fn allow_header(&self) -> &'static str {
        match self {
            Route::Card | Route::ListTasks | Route::GetTask(_) => "GET, HEAD",
            Route::Send | Route::Stream | Route::CancelTask(_) => "POST",
            Route::Subscribe(_) => "GET, POST",
            Route::PushConfigs => "GET, POST, DELETE",
        }
    }
}

/// Matches a request path (already stripped of the interface's base path).
fn route(path: &str) -> Option<Route> {
    match path {
        "/message:send" => return Some(Route::Send),
        "/message:stream" => return Some(Route::Stream),
        "/tasks" | "/tasks/" => return Some(Route::ListTasks),
        _ => {}
    }
    let rest = path.strip_prefix("/tasks/")?;
    let (segment, tail) = match rest.split_once('/') {
        Some((segment, tail)) => (segment, Some(tail)),
        None => (rest, None),
    };
    if segment.is_empty() {
        return None;
    }
    if let Some(tail) = tail {
        let is_push =
            tail == "pushNotificationConfigs" || tail.starts_with("pushNotificationConfigs/");
        return is_push.then_some(Route::PushConfigs);
    }
    // The verb sits inside the last segment: split on its last `:` before decoding, so
    // an encoded `%3A` in an id is never taken for a verb.
    let (raw_id, verb) = match segment.rsplit_once(':') {
        Some((id, verb)) if verb == "cancel" || verb == "subscribe" => (id, Some(verb)),
        _ => (segment, None),
    };
    let id = percent_encoding::percent_decode_str(raw_id)
        .decode_utf8()
        .ok()?
        .into_owned();
    if id.is_empty() {
        return None;
    }
    Some(match verb {
        Some("cancel") => Route::CancelTask(id),
        Some(_) => Route::Subscribe(id),
        None => Route::GetTask(id),
    })
}

/// A request that passed the common checks.
pub(crate) struct Ctx {
    pub shared: Arc<Shared>,
    pub principal: String,
    /// Supported extension URIs the client activated for this request.
    pub extensions: Vec<String>,
    /// The connection the request came on.
    pub slot: Arc<conn::Slot>,
}

impl Ctx {
    /// A place in the stream pool for this caller (429 when the pool is full).
    pub fn start_stream(&self) -> Result<conn::StreamGuard, ApiError> {
        self.shared
            .connections
            .start_stream(&self.slot, &self.principal)
    }
}

/// 414 or 431 with the documented body, for heads hyper accepted but we do not serve.
fn check_head(req: &Request<Incoming>) -> Result<(), ApiError> {
    let target = req.uri().path_and_query().map_or(0, |pq| pq.as_str().len());
    if target > MAX_URI_BYTES {
        return Err(ApiError::new(
            StatusCode::URI_TOO_LONG,
            "URI_TOO_LONG",
            format!("the request target is {target} bytes; at most {MAX_URI_BYTES} are served (shorten the query, e.g. the pageToken or contextId)"),
        ));
    }
    let headers: usize = req
        .headers()
        .iter()
        .map(|(name, value)| name.as_str().len() + value.len() + 4)
        .sum();
    if headers > MAX_HEADER_BYTES {
        return Err(ApiError::new(
            StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
            "HEADERS_TOO_LARGE",
            format!(
                "the request headers are {headers} bytes; at most {MAX_HEADER_BYTES} are served"
            ),
        ));
    }
    Ok(())
}

async fn handle(
    shared: Arc<Shared>,
    slot: Arc<conn::Slot>,
    req: Request<Incoming>,
) -> Response<Body> {
    if let Err(err) = check_head(&req) {
        return error_response(&err, &[]);
    }
    let path = req.uri().path().to_string();
    if path == "/.well-known/agent-card.json" {
        if !Route::Card.allows(req.method()) {
            return method_not_allowed(&Route::Card);
        }
        return serve_card(&shared, &req);
    }
    let Some(local) = path.strip_prefix(shared.base_path.as_str()) else {
        return not_found(&path);
    };
    let Some(route) = route(local) else {
        return not_found(&path);
    };
    if !route.allows(req.method()) {
        return method_not_allowed(&route);
    }
    let extensions = negotiate::activated_extensions(req.headers());
    let respond = |result: Result<Response<Body>, ApiError>| match result {
        Ok(response) => response,
        Err(err) => error_response(&err, &extensions),
    };
    if let Err(err) = negotiate::check_version(&req) {
        return respond(Err(err));
    }
    // Exactly one Authorization header: with two, which credential acts is ambiguous.
    let mut authorizations = req.headers().get_all(hyper::header::AUTHORIZATION).iter();
    let authorization = authorizations.next().and_then(|v| v.to_str().ok());
    let ambiguous = authorizations.next().is_some();
    let principal = if ambiguous {
        None
    } else {
        shared
            .credentials
            .principal(authorization)
            .map(str::to_string)
    };
    let Some(principal) = principal else {
        let mut response = error_response(
            &ApiError::new(
                StatusCode::UNAUTHORIZED,
                "UNAUTHENTICATED",
                if ambiguous {
                    "the request has more than one Authorization header: send exactly one `Authorization: Bearer <token>`"
                } else {
                    "a valid bearer token is required: send `Authorization: Bearer <token>`"
                },
            ),
            &extensions,
        );
        response.headers_mut().insert(
            WWW_AUTHENTICATE,
            HeaderValue::from_static("Bearer realm=\"a2a\""),
        );
        return response;
    };
    if route == Route::PushConfigs {
        return respond(Err(ApiError::push_notifications_unsupported(
            StatusCode::NOT_IMPLEMENTED,
            "push notifications are not supported by this agent (its card declares pushNotifications: false); poll the Task or subscribe",
        )));
    }
    let ctx = Ctx {
        shared,
        principal,
        extensions: extensions.clone(),
        slot,
    };
    let result = match route {
        Route::Send => send::send(ctx, req).await,
        Route::Stream => send::stream(ctx, req).await,
        Route::ListTasks => tasks::list(ctx, req).await,
        Route::GetTask(id) => tasks::get(ctx, req, id).await,
        Route::CancelTask(id) => tasks::cancel(ctx, req, id).await,
        Route::Subscribe(id) => tasks::subscribe(ctx, req, id).await,
        Route::Card | Route::PushConfigs => unreachable!("handled above"),
    };
    respond(result)
}

fn serve_card(shared: &Shared, req: &Request<Incoming>) -> Response<Body> {
    let card = &shared.card;
    let matches = req
        .headers()
        .get(IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| {
            v.split(',')
                .any(|tag| tag.trim() == card.etag || tag.trim() == "*")
        });
    let mut builder = Response::builder()
        .header(
            CACHE_CONTROL,
            format!("public, max-age={}", card::MAX_AGE_SECONDS),
        )
        .header(ETAG, card.etag.as_str())
        .header(LAST_MODIFIED, card.last_modified.as_str());
    if matches {
        builder = builder.status(StatusCode::NOT_MODIFIED);
        return builder
            .body(empty())
            .unwrap_or_else(|_| Response::new(empty()));
    }
    let body = if req.method() == Method::HEAD {
        empty()
    } else {
        full(card.body.clone())
    };
    builder
        .status(StatusCode::OK)
        .header(CONTENT_TYPE, "application/json")
        .body(body)
        .unwrap_or_else(|_| Response::new(empty()))
}

pub(crate) fn full(bytes: Bytes) -> Body {
    Full::new(bytes).boxed()
}

pub(crate) fn empty() -> Body {
    Full::new(Bytes::new()).boxed()
}

/// A JSON response carrying the activated extensions.
pub(crate) fn json_response(
    status: StatusCode,
    body: Bytes,
    extensions: &[String],
) -> Response<Body> {
    let mut response = Response::new(full(body));
    *response.status_mut() = status;
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    negotiate::echo_extensions(response.headers_mut(), extensions);
    response
}

pub(crate) fn error_response(err: &ApiError, extensions: &[String]) -> Response<Body> {
    json_response(err.status, err.body(), extensions)
}

fn not_found(path: &str) -> Response<Body> {
    error_response(
        &ApiError::new(
            StatusCode::NOT_FOUND,
            "NOT_FOUND",
            format!("no A2A route at {path}; see /.well-known/agent-card.json for this agent's interface"),
        ),
        &[],
    )
}

fn method_not_allowed(route: &Route) -> Response<Body> {
    let mut response = error_response(
        &ApiError::new(
            StatusCode::METHOD_NOT_ALLOWED,
            "METHOD_NOT_ALLOWED",
            format!("this route accepts {}", route.allow_header()),
        ),
        &[],
    );
    response
        .headers_mut()
        .insert(ALLOW, HeaderValue::from_static(route.allow_header()));
    response
}

/// A runtime on the test's own thread, for the listener's unit tests.
#[cfg(test)]
fn test_runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a current-thread runtime for a test")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes_split_the_verb_on_the_last_colon_before_decoding() {
        assert_eq!(
            route("/tasks/abc:cancel"),
            Some(Route::CancelTask("abc".into()))
        );
        assert_eq!(
            route("/tasks/abc:subscribe"),
            Some(Route::Subscribe("abc".into()))
        );
        assert_eq!(route("/tasks/abc"), Some(Route::GetTask("abc".into())));
        assert_eq!(route("/tasks/a%3Ab"), Some(Route::GetTask("a:b".into())));
        assert_eq!(
            route("/tasks/a%2Fb%20c:cancel"),
            Some(Route::CancelTask("a/b c".into()))
        );
        assert_eq!(
            route("/tasks/x:other"),
            Some(Route::GetTask("x:other".into()))
        );
        assert_eq!(
            route("/tasks/t/pushNotificationConfigs/c1"),
            Some(Route::PushConfigs)
        );
        assert_eq!(route("/tasks/t/other"), None);
        assert_eq!(route("/tasks"), Some(Route::ListTasks));
        assert_eq!(route("/message:send"), Some(Route::Send));
        assert_eq!(route("/nope"), None);
    }

    #[test]
    fn the_base_path_comes_from_the_interface_url() {
        assert_eq!(base_path_of("https://h.example/a2a/"), "/a2a");
        assert_eq!(base_path_of("http://127.0.0.1:8788"), "");
    }
}
