//! Server-sent events: one `data: <StreamResponse>` line per event, a blank line after
//! each, no `event:`/`id:` fields, and the stream ends when the server closes the body.
//!
//! A subscriber that reads slowly costs a bounded amount: at most [`BACKLOG_BYTES`] of
//! encoded frames wait here (or one frame, when a single frame is larger), plus hyper's
//! write buffer (`WRITE_BUFFER_BYTES` in `mod.rs`). When the backlog stays full for the
//! write timeout, the stream ends; the durable Task stays the record, and the client reads
//! it with `GET /tasks/{id}` or subscribes again.

use std::convert::Infallible;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::BodyExt;
use hyper::body::Frame;
use hyper::header::{HeaderValue, CACHE_CONTROL, CONTENT_TYPE};
use hyper::{Response, StatusCode};
use tokio::sync::{mpsc, Notify};

use super::conn::StreamGuard;
use super::{negotiate, Body};
use crate::wire::{self, StreamResponse};

/// Encoded frames that may wait for a slow client before the producer waits.
pub const BACKLOG_BYTES: usize = 64 * 1024;

/// What the producer and the body share: the bytes queued and not yet taken by hyper.
struct Backlog {
    queued: AtomicUsize,
    drained: Notify,
}

struct ChannelBody {
    frames: mpsc::UnboundedReceiver<Bytes>,
    backlog: Arc<Backlog>,
    /// Holds the stream's place in the stream pool until hyper drops the body.
    _slot: StreamGuard,
}

impl hyper::body::Body for ChannelBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        let polled = self.frames.poll_recv(cx);
        if let Poll::Ready(Some(bytes)) = &polled {
            self.backlog.queued.fetch_sub(bytes.len(), Ordering::AcqRel);
            self.backlog.drained.notify_one();
        }
        polled.map(|frame| frame.map(|bytes| Ok(Frame::data(bytes))))
    }
}

/// The sending half of an SSE response. Dropping it ends the stream.
pub struct EventStream {
    frames: mpsc::UnboundedSender<Bytes>,
    backlog: Arc<Backlog>,
    write_timeout: Duration,
}

impl EventStream {
    /// Sends one event; `false` when the client has gone away or has not read for the
    /// write timeout (the stream should end).
    pub async fn send(&self, event: &StreamResponse) -> bool {
        self.push(frame(event)).await
    }

    /// Resolves when the response body is gone (the connection ended).
    pub async fn closed(&self) {
        self.frames.closed().await
    }

    /// A comment line that keeps idle connections (and proxies) from timing out.
    pub async fn keep_alive(&self) -> bool {
        self.push(Bytes::from_static(b": keep-alive\n\n")).await
    }

    /// Queues an encoded `frame` once the backlog has room for it (an empty backlog always
    /// has); `false` as for [`EventStream::send`].
    pub async fn push(&self, frame: Bytes) -> bool {
        let deadline = tokio::time::Instant::now() + self.write_timeout;
        loop {
            let drained = self.backlog.drained.notified();
            tokio::pin!(drained);
            drained.as_mut().enable();
            let queued = self.backlog.queued.load(Ordering::Acquire);
            if queued == 0 || queued + frame.len() <= BACKLOG_BYTES {
                break;
            }
            if self.frames.is_closed() {
                return false;
            }
            tokio::select! {
                _ = drained => {}
                _ = tokio::time::sleep_until(deadline) => return false,
                _ = self.frames.closed() => return false,
            }
        }
        self.backlog.queued.fetch_add(frame.len(), Ordering::AcqRel);
        self.frames.send(frame).is_ok()
    }
}

/// One event as an SSE frame: a `data:` line and a blank line.
pub fn frame(event: &StreamResponse) -> Bytes {
    let mut line = Vec::with_capacity(256);
    line.extend_from_slice(b"data: ");
    // Compact JSON never contains a raw newline, so one `data:` line holds the event.
    wire::json::encode_into(&mut line, event);
    line.extend_from_slice(b"\n\n");
    Bytes::from(line)
}

/// A `200 text/event-stream` response and the handle that feeds it. `slot` is the stream's
/// place in the stream pool, held until hyper drops the body.
pub fn response(
    extensions: &[String],
    slot: StreamGuard,
    write_timeout: Duration,
) -> (Response<Body>, EventStream) {
    let (tx, rx) = mpsc::unbounded_channel();
    let backlog = Arc::new(Backlog {
        queued: AtomicUsize::new(0),
        drained: Notify::new(),
    });
    let body = ChannelBody {
        frames: rx,
        backlog: backlog.clone(),
        _slot: slot,
    };
    let mut response = Response::new(body.boxed());
    *response.status_mut() = StatusCode::OK;
    let headers = response.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("text/event-stream"));
    headers.insert(CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    headers.insert("x-accel-buffering", HeaderValue::from_static("no"));
    negotiate::echo_extensions(headers, extensions);
    (
        response,
        EventStream {
            frames: tx,
            backlog,
            write_timeout,
        },
    )
}
