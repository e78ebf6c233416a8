//! The A2A listener: hyper 1 on a tokio runtime owned by the listener (never a global),
//! with our own small router (`/tasks/{id}:cancel`-style paths), serving two bindings on one
//! port: HTTP+JSON (`rest.rs`), and JSON-RPC 2.0 at the interface URL itself
//! (`jsonrpc.rs`); and gRPC (`grpc.rs`, tonic over HTTP/2) on a port of its own
//! (`ListenerConfig::grpc_bind_port`). All are thin adapters over the request handler (`crate::handler`),
//! where every rule of each A2A operation lives: a binding reads its request into the
//! operation's typed request, and writes the result, or the error, in its own form; a
//! stream's framing is an `sse::Framing`.
//!
//! The checks every request passes, in order, are in `router.rs` (JSON-RPC's own, after
//! auth, in `jsonrpc.rs`). Every HTTP+JSON error body is the wrapped `google.rpc.Status`;
//! JSON-RPC carries the same details in its error's `data`.
//!
//! Lifecycle: [`Listener::start`] binds and serves; [`Listener::close`] stops accepting,
//! ends open streams, lets in-flight sends return their snapshot, waits for connections to
//! finish (bounded) and shuts the runtime down.
//!
//! What a client may hold is bounded (`conn.rs`): connections in number, with the
//! longest-idle one closed first when a newcomer arrives at the limit; streams in the
//! handler's stream pool, overall and per principal (a connection carrying a stream
//! leaves the connection pool meanwhile); a client that sends no request head in time,
//! idles on keep-alive, or stops reading a response for the write timeout is dropped.
//!
//! Files: `accept.rs` (the accept loop: connections in, each request tracked until its
//! response is written), `router.rs` (the routes and the checks every request passes in
//! the order above); the routes are `card.rs` (the Agent Card), `rest.rs` (HTTP+JSON)
//! and `jsonrpc.rs` (every method), and `grpc.rs` serves the gRPC port; what they share is `task_stream.rs` (a handler stream
//! as SSE), `sse.rs` (framing and backpressure), `negotiate.rs` (headers and bodies) and
//! `conn.rs`; `tls.rs` serves each port over TLS when `A2A_TLS_CERT`/`A2A_TLS_KEY` are set
//! (one reloadable certificate per port: `http/1.1` on the main one, `h2` on gRPC's).

mod accept;
mod card;
mod conn;
mod grpc;
mod jsonrpc;
mod negotiate;
mod rest;
mod router;
mod sse;
mod task_stream;
pub mod tls;

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full};
use hyper::header::{HeaderValue, CONTENT_TYPE};
use hyper::{Response, StatusCode};
use serde_json::json;
use tokio::sync::watch;

use crate::config::ListenerConfig;
use crate::handler::streams::{StreamLimits, StreamPool};
use crate::handler::{page_token, timer, ApiError, Credentials, Ctx, ExecutorSlot, Handler};
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

/// Everything a request of this listener needs.
pub(crate) struct Shared {
    pub handler: Arc<Handler>,
    pub card: card::CardDocument,
    /// The path prefix of the interface URL (`/a2a` for `https://h/a2a`), or empty.
    pub base_path: String,
    pub connections: Arc<conn::Connections>,
}

/// A running listener.
pub struct Listener {
    handler: Arc<Handler>,
    executor: ExecutorSlot,
    runtime: Option<tokio::runtime::Runtime>,
    shutdown: watch::Sender<bool>,
    serve: Option<tokio::task::JoinHandle<()>>,
    local_addr: SocketAddr,
    grpc_addr: Option<SocketAddr>,
    interface_url: String,
    warnings: Vec<String>,
    /// The certificate of each port (main, then gRPC's), with TLS.
    tls: Vec<Arc<tls::Tls>>,
}

impl Listener {
    /// Loads the credentials, binds `config.host:config.port` and starts serving `plane`.
    pub fn start(
        plane: TaskPlane,
        config: ListenerConfig,
        executor: Arc<dyn Executor>,
    ) -> Result<Listener, String> {
        let credentials = Credentials::load(&config.credentials_path)?;
        let (main_tls, grpc_tls) = match &config.tls {
            Some(files) => (
                Some(Arc::new(tls::Tls::load(
                    &files.cert,
                    &files.key,
                    &[b"http/1.1"],
                )?)),
                Some(Arc::new(tls::Tls::load(&files.cert, &files.key, &[b"h2"])?)),
            ),
            None => (None, None),
        };
        let tls: Vec<Arc<tls::Tls>> = main_tls.iter().chain(&grpc_tls).cloned().collect();
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
        let grpc_listener = match config.grpc_bind_port().map_err(|e| e.to_string())? {
            Some(port) => Some(bind_grpc(&config.host, port)?),
            None => None,
        };
        let grpc_addr = match &grpc_listener {
            Some(listener) => Some(listener.local_addr().map_err(|e| e.to_string())?),
            None => None,
        };
        let interface_url = match &config.public_url {
            Some(url) => url.clone(),
            None if main_tls.is_some() => format!("https://{local_addr}"),
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
        let connections = conn::Connections::new(config.max_connections);
        let streams = StreamPool::new(StreamLimits {
            max_streams: config.max_streams,
            max_streams_per_principal: config.max_streams_per_principal,
        });
        let executor: ExecutorSlot = Arc::new(std::sync::RwLock::new(executor));
        let card = card::build(
            &config,
            &interface_url,
            grpc_addr.map(|addr| card::grpc_target(&interface_url, addr.port())),
            started_ms,
        );
        let handler = Arc::new(Handler {
            page_tokens,
            plane,
            config,
            credentials,
            executor: executor.clone(),
            interface_url: interface_url.clone(),
            streams,
            shutdown: shutdown_rx,
            holds: timer::Waves::default(),
        });
        let shared = Arc::new(Shared {
            handler: handler.clone(),
            card,
            base_path,
            connections,
        });
        let (listener, grpc_listener) = {
            let _guard = runtime.enter();
            let listener =
                tokio::net::TcpListener::from_std(std_listener).map_err(|e| e.to_string())?;
            let grpc_listener = match grpc_listener {
                Some(std) => {
                    Some(tokio::net::TcpListener::from_std(std).map_err(|e| e.to_string())?)
                }
                None => None,
            };
            (listener, grpc_listener)
        };
        let grpc = grpc_listener.map(|grpc_listener| {
            let service = grpc::Service::new(shared.handler.clone(), shared.connections.clone());
            accept::serve_grpc(grpc_listener, shared.clone(), service, grpc_tls)
        });
        let serve = runtime.spawn(async move {
            match grpc {
                Some(grpc) => {
                    tokio::join!(accept::serve(listener, shared, main_tls), grpc);
                }
                None => accept::serve(listener, shared, main_tls).await,
            }
        });
        crate::log::event(
            "a2a_server_started",
            json!({
                "bind": local_addr.to_string(),
                "url": interface_url,
                "grpc_bind": grpc_addr.map(|addr| addr.to_string()),
                "tls": !tls.is_empty(),
            }),
        );
        Ok(Listener {
            handler,
            executor,
            runtime: Some(runtime),
            shutdown: shutdown_tx,
            serve: Some(serve),
            local_addr,
            grpc_addr,
            interface_url,
            warnings,
            tls,
        })
    }

    /// Reads the TLS certificate and key again (on SIGHUP); they serve the connections
    /// accepted from now on. `Ok(false)`: no TLS configured. On an error (naming the file)
    /// the certificate in use stays.
    pub fn reload_tls(&self) -> Result<bool, String> {
        for tls in &self.tls {
            tls.reload().inspect_err(|reason| {
                crate::log::warn("a2a_tls_reload_failed", json!({ "reason": reason }));
            })?;
        }
        if !self.tls.is_empty() {
            crate::log::event(
                "a2a_tls_reloaded",
                json!({ "bind": self.local_addr.to_string() }),
            );
        }
        Ok(!self.tls.is_empty())
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

    /// The request handler it serves (its credentials, its plane's metrics).
    pub fn handler(&self) -> &Handler {
        &self.handler
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// Where gRPC listens (`None`: turned off by `A2A_GRPC=0`).
    pub fn grpc_addr(&self) -> Option<SocketAddr> {
        self.grpc_addr
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
                tokio::time::timeout(accept::CLOSE_GRACE + Duration::from_secs(1), serve).await
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

/// Binds the gRPC port on the listener's host.
fn bind_grpc(host: &str, port: u16) -> Result<std::net::TcpListener, String> {
    let listener = std::net::TcpListener::bind((host, port)).map_err(|e| {
        let fix = match e.kind() {
            std::io::ErrorKind::AddrInUse => "another process is listening there: set A2A_GRPC_PORT to a free port (by default it is A2A_PORT + 1), or A2A_GRPC=0 to turn gRPC off",
            _ => "check A2A_HOST and A2A_GRPC_PORT",
        };
        format!("A2A_GRPC_PORT: cannot listen for gRPC on {host}:{port}: {e}; {fix}")
    })?;
    listener
        .set_nonblocking(true)
        .map_err(|e| format!("cannot configure the gRPC listening socket: {e}"))?;
    Ok(listener)
}

fn base_path_of(url: &str) -> String {
    let rest = url.split_once("://").map(|(_, r)| r).unwrap_or(url);
    match rest.find('/') {
        Some(i) => rest[i..].trim_end_matches('/').to_string(),
        None => String::new(),
    }
}

/// An HTTP request that passed the common checks: the handler's caller, and the
/// connection it came on (a stream's connection leaves the connection pool).
pub(crate) struct Caller {
    pub ctx: Ctx,
    pub connections: Arc<conn::Connections>,
    pub slot: Arc<conn::Slot>,
}

impl Caller {
    /// Reads the request's JSON body within the listener's limits (size, content type,
    /// time).
    pub async fn read_body(
        &self,
        req: hyper::Request<hyper::body::Incoming>,
    ) -> Result<Bytes, ApiError> {
        let config = &self.ctx.handler.config;
        negotiate::read_json_body(
            req,
            config.max_body_bytes,
            Duration::from_millis(config.idle_timeout_ms),
        )
        .await
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_base_path_comes_from_the_interface_url() {
        assert_eq!(base_path_of("https://h.example/a2a/"), "/a2a");
        assert_eq!(base_path_of("http://127.0.0.1:8788"), "");
    }
}
