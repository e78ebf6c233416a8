//! Server-sent events: one `data: <StreamResponse>` line per event, a blank line after
//! each, no `event:`/`id:` fields, and the stream ends when the server closes the body.
//!
//! The response body produces its frames itself: hyper polls it when it has room for
//! more, and each poll awaits the next frame of the stream's [`Frames`] (for a Task, its
//! next update) right there, on the connection's own task. No producer task, channel or
//! backlog sits between an update and the socket, so a frame that is ready when the head
//! is written goes out with it, and frames ready together go out in one write.
//!
//! A subscriber that reads slowly costs a bounded amount: hyper stops polling the body
//! while its write buffer holds `WRITE_BUFFER_BYTES` (`mod.rs`) or more, so a stalled
//! stream holds that buffer and at most one more piece of the body: the frames of the
//! updates that waited together, [`PIECE_AT_MOST`] bytes and one frame at most (the updates
//! after them wait in the subscription, shared, until it lags). A connection whose writes
//! make no progress for the write timeout is closed (`conn.rs`), which drops the body and
//! its subscription; the durable Task stays the record, and the client reads it with
//! `GET /tasks/{id}` or subscribes again.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body_util::BodyExt;
use hyper::body::Frame;
use hyper::header::{HeaderName, HeaderValue, CACHE_CONTROL, CONTENT_TYPE};
use hyper::{Response, StatusCode};

use super::conn::Carrying;
use super::{negotiate, Body};
use crate::handler::streams::StreamPlace;
use crate::wire::{self, StreamResponse};

/// What a stream sends after its first frame: each call of [`Frames::next`] resolves to
/// the next frame, or `None` when the stream ends.
pub trait Frames: Send + Sync + 'static {
    /// The next frame to send. It is polled only while hyper has room for it, and dropped
    /// (unfinished) when the connection ends.
    fn next(&mut self) -> impl Future<Output = Option<Bytes>> + Send + Sync + '_;

    /// Whether the stream is known to end after its first frame (`next` would be `None`).
    fn ended(&self) -> bool;
}

/// The next frame of a stream, with the source that produces the ones after it.
type Pending<F> = Pin<Box<dyn Future<Output = Option<(Bytes, F)>> + Send + Sync>>;

/// A response body that sends `first`, then whatever its [`Frames`] produce.
struct EventBody<F: Frames> {
    first: Option<Bytes>,
    next: Option<Pending<F>>,
    /// Holds the stream's place in the stream pool, and its connection out of the
    /// connection pool, until hyper drops the body.
    _hold: Hold,
}

fn pending<F: Frames>(mut frames: F) -> Pending<F> {
    Box::pin(async move {
        let frame = frames.next().await?;
        Some((frame, frames))
    })
}

impl<F: Frames> hyper::body::Body for EventBody<F> {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        if let Some(first) = self.first.take() {
            return Poll::Ready(Some(Ok(Frame::data(first))));
        }
        let Some(next) = self.next.as_mut() else {
            return Poll::Ready(None);
        };
        match next.as_mut().poll(cx) {
            Poll::Pending => Poll::Pending,
            Poll::Ready(None) => {
                self.next = None;
                Poll::Ready(None)
            }
            Poll::Ready(Some((frame, frames))) => {
                self.next = Some(pending(frames));
                Poll::Ready(Some(Ok(Frame::data(frame))))
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.first.is_none() && self.next.is_none()
    }

    /// Exact once nothing follows what is there (a stream whose first piece ends it):
    /// hyper then sends it with a `Content-Length` in one piece, without chunked framing.
    fn size_hint(&self) -> hyper::body::SizeHint {
        match (&self.first, &self.next) {
            (first, None) => {
                hyper::body::SizeHint::with_exact(first.as_ref().map_or(0, |f| f.len() as u64))
            }
            _ => hyper::body::SizeHint::default(),
        }
    }
}

/// A piece of a stream's body takes no more of the updates that wait once it holds this
/// many bytes (it may end one frame past it).
pub const PIECE_AT_MOST: usize = 16 * 1024;

/// What one event's `data:` line holds, by binding: the `StreamResponse` itself
/// (HTTP+JSON), or a JSON-RPC response carrying it, with the id of the request that opened
/// the stream (JSON-RPC).
#[derive(Debug, Clone)]
pub enum Framing {
    Rest,
    /// The request's id, as JSON text (`1`, `"a"`).
    JsonRpc(std::sync::Arc<str>),
}

impl Framing {
    /// Appends an SSE frame whose event JSON `write_json` appends, in this framing.
    pub fn frame_with(&self, frames: &mut Vec<u8>, write_json: impl FnOnce(&mut Vec<u8>)) {
        match self {
            Framing::Rest => frame_with(frames, write_json),
            Framing::JsonRpc(id) => frame_with(frames, |out| {
                out.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"id\":");
                out.extend_from_slice(id.as_bytes());
                out.extend_from_slice(b",\"result\":");
                write_json(out);
                out.push(b'}');
            }),
        }
    }

    /// Appends `event` to `frames` as an SSE frame: frames that are ready together go to
    /// hyper as one piece of the body, one chunk on the wire.
    pub fn frame_into(&self, frames: &mut Vec<u8>, event: &StreamResponse) {
        self.frame_with(frames, |json| wire::json::encode_into(json, event));
    }
}

/// Appends `event` to `frames` as an HTTP+JSON SSE frame.
#[cfg(test)]
pub fn frame_into(frames: &mut Vec<u8>, event: &StreamResponse) {
    Framing::Rest.frame_into(frames, event);
}

/// Appends an SSE frame whose JSON `write_json` appends: a `data:` line and a blank line.
/// `write_json` writes compact JSON, which never holds a raw newline, so one `data:` line
/// holds the event.
pub fn frame_with(frames: &mut Vec<u8>, write_json: impl FnOnce(&mut Vec<u8>)) {
    frames.extend_from_slice(b"data: ");
    write_json(frames);
    frames.extend_from_slice(b"\n\n");
}

/// A comment frame that keeps idle connections (and proxies) from timing out.
pub fn keep_alive() -> Bytes {
    Bytes::from_static(b": keep-alive\n\n")
}

/// Asks nginx-like proxies not to buffer the stream. Named once (a `&str` name is parsed
/// and checked again on every insert).
const X_ACCEL_BUFFERING: HeaderName = HeaderName::from_static("x-accel-buffering");

/// What a stream holds while hyper has its body: its place in the stream pool, and its
/// connection out of the connection pool.
pub struct Hold {
    _place: StreamPlace,
    _carrying: Carrying,
}

impl Hold {
    pub fn new(place: StreamPlace, carrying: Carrying) -> Self {
        Hold {
            _place: place,
            _carrying: carrying,
        }
    }
}

/// A `200 text/event-stream` response that sends `first`, then each frame `then`
/// produces until it ends, holding `hold` until hyper drops the body.
pub fn response<F: Frames>(
    extensions: &[String],
    hold: Hold,
    first: Bytes,
    then: F,
) -> Response<Body> {
    let body = EventBody {
        first: Some(first),
        // A stream that its first piece ends (a Task settled at once) is one body of known
        // length: no frames to wait for, no chunked framing.
        next: (!then.ended()).then(|| pending(then)),
        _hold: hold,
    };
    let mut response = Response::new(body.boxed());
    *response.status_mut() = StatusCode::OK;
    let headers = response.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("text/event-stream"));
    headers.insert(CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    headers.insert(X_ACCEL_BUFFERING, HeaderValue::from_static("no"));
    negotiate::echo_extensions(headers, extensions);
    response
}
