//! Server-sent events: one `data: <StreamResponse>` line per event, a blank line after
//! each, no `event:`/`id:` fields, and the stream ends when the server closes the body.

use std::convert::Infallible;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body_util::BodyExt;
use hyper::body::Frame;
use hyper::header::{HeaderValue, CACHE_CONTROL, CONTENT_TYPE};
use hyper::{Response, StatusCode};
use tokio::sync::mpsc;

use super::{negotiate, Body};
use crate::wire::{self, StreamResponse};

/// Frames queued ahead of a slow client before the producer waits.
const BUFFER: usize = 64;

struct ChannelBody {
    frames: mpsc::Receiver<Bytes>,
}

impl hyper::body::Body for ChannelBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        self.frames
            .poll_recv(cx)
            .map(|frame| frame.map(|bytes| Ok(Frame::data(bytes))))
    }
}

/// The sending half of an SSE response. Dropping it ends the stream.
pub struct EventStream {
    frames: mpsc::Sender<Bytes>,
}

impl EventStream {
    /// Sends one event; `false` when the client has gone away.
    pub async fn send(&self, event: &StreamResponse) -> bool {
        let mut line = Vec::with_capacity(256);
        line.extend_from_slice(b"data: ");
        // Compact JSON never contains a raw newline, so one `data:` line holds the event.
        wire::json::encode_into(&mut line, event);
        line.extend_from_slice(b"\n\n");
        self.frames.send(Bytes::from(line)).await.is_ok()
    }

    /// A comment line that keeps idle connections (and proxies) from timing out.
    pub async fn keep_alive(&self) -> bool {
        self.frames
            .send(Bytes::from_static(b": keep-alive\n\n"))
            .await
            .is_ok()
    }
}

/// A `200 text/event-stream` response and the handle that feeds it.
pub fn response(extensions: &[String]) -> (Response<Body>, EventStream) {
    let (tx, rx) = mpsc::channel(BUFFER);
    let mut response = Response::new(ChannelBody { frames: rx }.boxed());
    *response.status_mut() = StatusCode::OK;
    let headers = response.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("text/event-stream"));
    headers.insert(CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    headers.insert("x-accel-buffering", HeaderValue::from_static("no"));
    negotiate::echo_extensions(headers, extensions);
    (response, EventStream { frames: tx })
}
