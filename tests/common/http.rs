//! A small blocking HTTP/1.1 client for black-box tests over a real socket: one request per
//! connection (`Connection: close`), chunked bodies decoded, SSE frames parsed — all at
//! once ([`Reply::events`]) or one at a time as they arrive ([`EventStream`]).
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use serde_json::Value;

#[derive(Debug)]
pub struct Reply {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Reply {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&self.body)))
    }

    /// The `data:` payloads of an SSE body, as JSON.
    pub fn events(&self) -> Vec<Value> {
        String::from_utf8_lossy(&self.body)
            .split("\n\n")
            .filter_map(|frame| frame.lines().find_map(|l| l.strip_prefix("data: ")))
            .map(|data| serde_json::from_str(data).unwrap())
            .collect()
    }

    /// The A2A error reason of an error body.
    pub fn reason(&self) -> String {
        let body = self.json();
        assert_eq!(
            body["error"]["code"], self.status,
            "error.code is the HTTP status: {body}"
        );
        assert!(body["error"]["status"].is_string(), "{body}");
        assert!(
            body["error"]["message"]
                .as_str()
                .is_some_and(|m| !m.is_empty()),
            "{body}"
        );
        let info = &body["error"]["details"][0];
        assert_eq!(
            info["@type"], "type.googleapis.com/google.rpc.ErrorInfo",
            "{body}"
        );
        assert_eq!(info["domain"], "a2a-protocol.org", "{body}");
        info["reason"].as_str().unwrap().to_string()
    }
}

/// Sends one request head and body, and reads the response's status line and headers.
fn send_head(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
    timeout: Duration,
) -> (u16, Vec<(String, String)>, BufReader<TcpStream>) {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream.set_read_timeout(Some(timeout)).unwrap();
    let mut head = format!("{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n");
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    if !body.is_empty() || method == "POST" {
        head.push_str(&format!("Content-Length: {}\r\n", body.len()));
    }
    head.push_str("\r\n");
    stream.write_all(head.as_bytes()).unwrap();
    stream.write_all(body).unwrap();
    let mut reader = BufReader::new(stream);
    let mut status_line = String::new();
    reader.read_line(&mut status_line).unwrap();
    let status: u16 = status_line
        .split_whitespace()
        .nth(1)
        .unwrap()
        .parse()
        .unwrap();
    let mut headers = Vec::new();
    loop {
        let mut line = String::new();
        reader.read_line(&mut line).unwrap();
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        let (k, v) = line.split_once(':').unwrap();
        headers.push((k.trim().to_string(), v.trim().to_string()));
    }
    (status, headers, reader)
}

fn is_chunked(headers: &[(String, String)]) -> bool {
    headers
        .iter()
        .any(|(k, v)| k.eq_ignore_ascii_case("transfer-encoding") && v.contains("chunked"))
}

/// The next chunk of a chunked body; `None` after the last one (or when the connection
/// ended).
fn read_chunk(reader: &mut BufReader<TcpStream>) -> Option<Vec<u8>> {
    let mut size = String::new();
    if reader.read_line(&mut size).unwrap_or(0) == 0 {
        return None;
    }
    let n = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
    if n == 0 {
        return None;
    }
    let mut chunk = vec![0; n];
    reader.read_exact(&mut chunk).unwrap();
    let mut crlf = String::new();
    reader.read_line(&mut crlf).unwrap();
    Some(chunk)
}

/// Sends one request; `headers` are added as given. Waits at most `timeout` for the reply.
pub fn request_with_timeout(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
    timeout: Duration,
) -> Reply {
    let (status, headers, mut reader) = send_head(addr, method, path, headers, body, timeout);
    let mut body = Vec::new();
    if is_chunked(&headers) {
        while let Some(chunk) = read_chunk(&mut reader) {
            body.extend_from_slice(&chunk);
        }
    } else {
        let _ = reader.read_to_end(&mut body);
    }
    Reply {
        status,
        headers,
        body,
    }
}

/// A response read as it arrives, for SSE: the status and headers at once, then one event
/// at a time, so a test can act on an event (the snapshot, an update) while the stream is
/// still open.
pub struct EventStream {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    reader: BufReader<TcpStream>,
    chunked: bool,
    /// Body bytes read but not yet taken as events.
    pending: Vec<u8>,
    ended: bool,
}

impl EventStream {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// The next event's `data:` payload as JSON, waiting for it (at most the stream's read
    /// timeout); `None` once the stream has ended. Keep-alive comments are skipped.
    pub fn next_event(&mut self) -> Option<Value> {
        loop {
            if let Some(end) = self.pending.windows(2).position(|w| w == b"\n\n") {
                let frame: Vec<u8> = self.pending.drain(..end + 2).collect();
                let frame = String::from_utf8(frame).expect("an SSE frame is UTF-8");
                match frame.lines().find_map(|l| l.strip_prefix("data: ")) {
                    Some(data) => return Some(serde_json::from_str(data).unwrap()),
                    None => continue,
                }
            }
            if self.ended {
                assert!(
                    self.pending.iter().all(u8::is_ascii_whitespace),
                    "the stream ended inside a frame: {}",
                    String::from_utf8_lossy(&self.pending)
                );
                return None;
            }
            if self.chunked {
                match read_chunk(&mut self.reader) {
                    Some(chunk) => self.pending.extend_from_slice(&chunk),
                    None => self.ended = true,
                }
            } else {
                let _ = self.reader.read_to_end(&mut self.pending);
                self.ended = true;
            }
        }
    }

    /// Every event still to come, until the stream ends.
    pub fn rest(mut self) -> Vec<Value> {
        std::iter::from_fn(|| self.next_event()).collect()
    }
}

/// Sends one request and returns its response as an [`EventStream`]; each read waits at
/// most `timeout`.
pub fn open_stream(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
    timeout: Duration,
) -> EventStream {
    let (status, headers, reader) = send_head(addr, method, path, headers, body, timeout);
    EventStream {
        status,
        chunked: is_chunked(&headers),
        headers,
        reader,
        pending: Vec::new(),
        ended: false,
    }
}

pub fn request(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> Reply {
    request_with_timeout(addr, method, path, headers, body, Duration::from_secs(20))
}

/// Writes `request` (a whole HTTP/1.1 request) on a new connection and reads only the
/// status code: the socket stays open and is not read further, as a stalled stream reader's.
pub fn open_unread(addr: SocketAddr, request: &str) -> (u16, TcpStream) {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    stream.write_all(request.as_bytes()).unwrap();
    let mut head = [0u8; 12];
    stream.read_exact(&mut head).unwrap();
    let status = String::from_utf8_lossy(&head[9..12]).parse().unwrap();
    (status, stream)
}

/// Asks for a stream place with `open` until one is given (200), answered 429 meanwhile: a
/// stalled reader's place is freed only when its write times out, and nothing announces that
/// to a client that does not read. Bounded: fails after 30 s naming what it waited for.
pub fn wait_for_a_free_stream_place(open: impl Fn() -> (u16, TcpStream)) {
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let (status, stream) = open();
        drop(stream);
        if status == 200 {
            return;
        }
        assert_eq!(status, 429);
        assert!(
            std::time::Instant::now() < deadline,
            "the stalled reader still holds its place"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}
