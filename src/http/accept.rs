//! The accept loops: each connection admitted into the pool (at the limit the longest-idle
//! one makes room), served by hyper (HTTP/1 with the header-read deadline on the main port,
//! HTTP/2 for gRPC on its own) with the write deadline, closed gracefully on shutdown or
//! when the pool asks for its room, and each request counted in flight until hyper has
//! written its whole response body. One pool for both ports: `A2A_MAX_CONNECTIONS` counts
//! every connection, and a gRPC connection, however many calls it multiplexes, is one (idle
//! when none is in flight).
//!
//! With TLS each port has its own [`Tls`] (ALPN `http/1.1` on the main port, `h2` on
//! gRPC's); the handshake runs in the connection's own task, never in the accept loop, so
//! a client that stalls it holds only its own slot, for the idle timeout at most.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulConnection;
use tonic::codegen::Service as _;

use super::grpc::{A2aServiceServer, Service as GrpcService};
use super::router::handle;
use super::tls::{Socket, Tls};
use super::{conn, Body, Shared};

/// A connection's socket as hyper serves it.
type Io = TokioIo<Socket>;

/// How long `close()` waits for open connections to finish.
pub(super) const CLOSE_GRACE: Duration = Duration::from_secs(5);
/// hyper's read and write buffer per connection: a request head larger than this gets
/// hyper's own bare 431; a response waiting for a slow reader holds at most this (plus one
/// frame) here.
const WRITE_BUFFER_BYTES: usize = 64 * 1024;

/// Serves HTTP+JSON and JSON-RPC (HTTP/1.1) on `listener` until shutdown.
pub(super) async fn serve(
    listener: tokio::net::TcpListener,
    shared: Arc<Shared>,
    tls: Option<Arc<Tls>>,
) {
    let idle = Duration::from_millis(shared.handler.config.idle_timeout_ms);
    let serving = shared.clone();
    accept_loop(listener, shared, tls, move |io, slot| {
        let service = {
            let (shared, slot) = (serving.clone(), slot.clone());
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
        hyper::server::conn::http1::Builder::new()
            .timer(TokioTimer::new())
            .header_read_timeout(idle)
            .max_buf_size(WRITE_BUFFER_BYTES)
            .keep_alive(true)
            .serve_connection(io, service)
    })
    .await
}

/// Serves gRPC (HTTP/2) on `listener` until shutdown.
pub(super) async fn serve_grpc(
    listener: tokio::net::TcpListener,
    shared: Arc<Shared>,
    grpc: A2aServiceServer<GrpcService>,
    tls: Option<Arc<Tls>>,
) {
    let connections = shared.connections.clone();
    accept_loop(listener, shared, tls, move |io, slot| {
        let service = {
            let (connections, grpc) = (connections.clone(), grpc.clone());
            hyper::service::service_fn(move |req| {
                let request = connections.request_started(&slot);
                let mut grpc = grpc.clone();
                async move {
                    let response = grpc.call(req).await?;
                    Ok::<_, Infallible>(response.map(|body| Tracked {
                        inner: body,
                        _request: request,
                    }))
                }
            })
        };
        hyper::server::conn::http2::Builder::new(TokioExecutor::new())
            .timer(TokioTimer::new())
            // What one stream holds for a client that stops reading it (see grpc.rs).
            .max_send_buf_size(WRITE_BUFFER_BYTES)
            .serve_connection(io, service)
    })
    .await
}

/// Accepts connections on `listener` until shutdown, each served by the connection
/// `connect` makes of it (after the TLS handshake, with `tls`), then waits (at most
/// [`CLOSE_GRACE`]) for the open ones to finish.
async fn accept_loop<C>(
    listener: tokio::net::TcpListener,
    shared: Arc<Shared>,
    tls: Option<Arc<Tls>>,
    connect: impl Fn(Io, Arc<conn::Slot>) -> C + Send + Sync + 'static,
) where
    C: GracefulConnection<Error = hyper::Error> + Send + 'static,
{
    let connect = Arc::new(connect);
    let connections = shared.connections.clone();
    let mut shutdown = shared.handler.shutdown.clone();
    let write_timeout = Duration::from_millis(shared.handler.config.write_timeout_ms);
    let handshake_timeout = Duration::from_millis(shared.handler.config.idle_timeout_ms);
    loop {
        let (stream, peer) = tokio::select! {
            _ = shutdown.changed() => break,
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
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
        let stream = conn::WriteDeadline::new(stream, write_timeout);
        let mut shutdown = shutdown.clone();
        // Returns the slot when the task ends, even by a panic in a handler.
        let end = conn::ConnectionEnd::new(connections.clone(), slot.clone());
        let (connect, tls) = (connect.clone(), tls.clone());
        tokio::spawn(async move {
            let socket = match tls {
                None => Socket::Plain(stream),
                Some(tls) => tokio::select! {
                    socket = tls.handshake(stream, peer, handshake_timeout) => match socket {
                        Some(socket) => socket,
                        None => return,
                    },
                    _ = slot.close_requested() => return,
                    _ = shutdown.wait_for(|stop| *stop) => return,
                },
            };
            let conn = connect(TokioIo::new(socket), slot.clone());
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
                    GracefulConnection::graceful_shutdown(conn.as_mut());
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
struct Tracked<B = Body> {
    inner: B,
    _request: conn::RequestGuard,
}

impl<B: hyper::body::Body<Data = Bytes> + Unpin> hyper::body::Body for Tracked<B> {
    type Data = Bytes;
    type Error = B::Error;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<hyper::body::Frame<Bytes>, B::Error>>> {
        std::pin::Pin::new(&mut self.inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        self.inner.size_hint()
    }
}
