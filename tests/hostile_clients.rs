//! Slow, idle and greedy clients cannot starve the listener (issue 11): a reader that stops
//! reading is dropped and frees its place, streams have their own pool, idle connections
//! make room for new ones, oversized heads get the documented error body, and page tokens
//! are bound to the caller and the query.

mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::time::{Duration, Instant};

use a2a_task_plane::plane::AlwaysTask;
use a2a_task_plane::record::TaskState;
use common::server::*;
use serde_json::{json, Value};

/// A Task the scripted agent keeps WORKING.
fn working_task(server: &Server, token: &str, message_id: &str) -> String {
    // Watched before the send, so the agent's start is seen however fast it comes.
    let (watch, activity) = server.plane.events().watch_activity();
    let reply = server.call(
        "POST",
        "/message:send",
        Some(token),
        Some(json!({"message": {"messageId": message_id, "role": "ROLE_USER", "parts": [{"text": "work"}]}, "configuration": {"returnImmediately": true}})),
    );
    assert_eq!(
        reply.status,
        200,
        "{}",
        String::from_utf8_lossy(&reply.body)
    );
    let id = reply.json()["task"]["id"].as_str().unwrap().to_string();
    common::wait_for_activity(&activity, &format!("the agent starting {id}"), |a| {
        a.task_id == id && a.state == Some(TaskState::Working)
    });
    server.plane.events().unwatch(watch);
    id
}

/// Opens `GET /tasks/{id}:subscribe` on a raw socket and reads only the status code (the
/// socket stays open, and is not read further).
fn open_subscription(addr: SocketAddr, token: &str, task_id: &str) -> (u16, TcpStream) {
    common::http::open_unread(
        addr,
        &format!("GET /tasks/{task_id}:subscribe HTTP/1.1\r\nHost: {addr}\r\nA2A-Version: 1.0\r\nAuthorization: Bearer {token}\r\n\r\n"),
    )
}

/// Reads a chunked stream up to its last chunk (the connection stays open: keep-alive).
fn read_until_stream_end(stream: &mut TcpStream) -> String {
    let mut seen = Vec::new();
    let mut buf = [0u8; 4096];
    while !seen.ends_with(b"\r\n0\r\n\r\n") {
        let n = stream.read(&mut buf).unwrap();
        assert!(n > 0, "the stream closed before its last chunk");
        seen.extend_from_slice(&buf[..n]);
    }
    String::from_utf8_lossy(&seen).into_owned()
}

/// `GET /tasks` as alice on a connection of its own; waits at most 20 s for the answer.
fn list_on_a_new_connection(server: &Server) -> u16 {
    let auth = format!("Bearer {ALICE}");
    common::http::request_with_timeout(
        server.addr(),
        "GET",
        "/tasks",
        &[("A2A-Version", "1.0"), ("Authorization", &auth)],
        b"",
        Duration::from_secs(20),
    )
    .status
}

#[test]
fn a_slow_stream_reader_is_dropped_and_frees_its_place() {
    let server = Server::start_with(Arc::new(AlwaysTask), |c| {
        c.write_timeout_ms = 300;
        c.max_streams_per_principal = 1;
    });
    let id = working_task(&server, ALICE, "m-slow");
    let (status, _never_read) = open_subscription(server.addr(), ALICE, &id);
    assert_eq!(status, 200);
    // The stream holds the caller's only place.
    let (second, _) = open_subscription(server.addr(), ALICE, &id);
    assert_eq!(second, 429);
    // 200 updates of 256 KiB: far more than any buffer holds for a reader that reads
    // nothing. The agent's writes never wait for the reader.
    for n in 0..200 {
        server
            .plane
            .record_artifact(&id, common::big_artifact(n))
            .unwrap();
    }
    // The stalled reader is dropped after the write timeout, and its place is free again.
    // Nothing announces the drop to a client that does not read, so this asks for a place
    // until it gets one (bounded, and failing with what it waited for).
    common::http::wait_for_a_free_stream_place(|| open_subscription(server.addr(), ALICE, &id));
}

#[test]
fn streams_have_their_own_pool_limited_per_principal_and_overall() {
    let server = Server::start_with(Arc::new(AlwaysTask), |c| {
        c.max_connections = 2;
        c.max_streams = 5;
        c.max_streams_per_principal = 3;
    });
    let alices = working_task(&server, ALICE, "m-a");
    let bobs = working_task(&server, BOB, "m-b");
    let mut open = Vec::new();
    for _ in 0..3 {
        let (status, stream) = open_subscription(server.addr(), ALICE, &alices);
        assert_eq!(status, 200);
        open.push(stream);
    }
    let refused = server.call(
        "GET",
        &format!("/tasks/{alices}:subscribe"),
        Some(ALICE),
        None,
    );
    assert_eq!(
        (refused.status, refused.reason().as_str()),
        (429, "RESOURCE_EXHAUSTED")
    );
    assert!(refused.json()["error"]["message"]
        .as_str()
        .unwrap()
        .contains("A2A_MAX_STREAMS_PER_PRINCIPAL"));
    for _ in 0..2 {
        let (status, stream) = open_subscription(server.addr(), BOB, &bobs);
        assert_eq!(status, 200);
        open.push(stream);
    }
    let full = server.call(
        "POST",
        "/message:stream",
        Some(BOB),
        Some(json!({"message": {"messageId": "m-b2", "role": "ROLE_USER", "parts": [{"text": "hi"}]}})),
    );
    assert_eq!(full.status, 429);
    assert!(full.json()["error"]["message"]
        .as_str()
        .unwrap()
        .contains("A2A_MAX_STREAMS"));
    // A stream refused for want of a place accepted nothing.
    assert!(
        server.call("GET", "/tasks", Some(BOB), None).json()["tasks"]
            .as_array()
            .unwrap()
            .iter()
            .all(|t| t["id"] == bobs.as_str())
    );
    // Five streams, two connection slots: short requests are still served.
    for _ in 0..5 {
        assert_eq!(server.call("GET", "/tasks", Some(ALICE), None).status, 200);
    }
    // The owner cancels; its streams end and their places free up.
    let canceled = server.call(
        "POST",
        &format!("/tasks/{alices}:cancel"),
        Some(ALICE),
        None,
    );
    assert_eq!(canceled.status, 200);
    for stream in open.iter_mut().take(3) {
        assert!(read_until_stream_end(stream).contains("TASK_STATE_CANCELED"));
    }
    // A connection whose stream ended goes back to the connection pool while it has room
    // (two slots) and serves the next request; the others are closed.
    let reused = open
        .iter_mut()
        .take(3)
        .filter(|stream| {
            // `&TcpStream` reads and writes too.
            let mut stream: &TcpStream = stream;
            let asked = write!(
                stream,
                "GET /tasks HTTP/1.1\r\nHost: x\r\nA2A-Version: 1.0\r\nAuthorization: Bearer {ALICE}\r\n\r\n"
            );
            let mut head = [0u8; 12];
            asked.is_ok() && stream.read_exact(&mut head).is_ok() && &head[9..12] == b"200"
        })
        .count();
    assert!((1..=2).contains(&reused), "{reused} connections reused");
    let again = working_task(&server, ALICE, "m-a2");
    let (status, _stream) = open_subscription(server.addr(), ALICE, &again);
    assert_eq!(status, 200);
}

#[test]
fn idle_connections_make_room_for_new_ones_at_the_limit() {
    let server = Server::start_with(Arc::new(AlwaysTask), |c| {
        c.max_connections = 4;
        c.idle_timeout_ms = 60_000;
    });
    // Twelve sockets that never send a request, and one that idles on keep-alive.
    let idle: Vec<TcpStream> = (0..12)
        .map(|_| TcpStream::connect(server.addr()).unwrap())
        .collect();
    let mut keep_alive = TcpStream::connect(server.addr()).unwrap();
    write!(
        keep_alive,
        "GET /.well-known/agent-card.json HTTP/1.1\r\nHost: x\r\n\r\n"
    )
    .unwrap();
    // Without making room, these would wait for the 60 s idle timeout.
    for _ in 0..3 {
        assert_eq!(list_on_a_new_connection(&server), 200);
    }
    drop(idle);
}

#[test]
fn connections_stuck_in_a_partial_request_head_make_room_too() {
    let server = Server::start_with(Arc::new(AlwaysTask), |c| {
        c.max_connections = 2;
        c.idle_timeout_ms = 60_000;
    });
    // Slowloris: heads that never complete. Closing them gracefully would wait for the
    // 60 s head timeout; asked to make room, they are dropped.
    let stuck: Vec<TcpStream> = (0..4)
        .map(|_| {
            let mut s = TcpStream::connect(server.addr()).unwrap();
            s.write_all(b"GET /tasks HTTP/1.1\r\nHost: x\r\nA2A-Vers")
                .unwrap();
            s
        })
        .collect();
    for _ in 0..2 {
        assert_eq!(list_on_a_new_connection(&server), 200);
    }
    drop(stuck);
}

#[test]
fn the_owner_gets_and_cancels_with_a_thousand_subscribers_and_two_hundred_idle_sockets() {
    // Each subscriber costs two descriptors in this process (client and server side).
    let subscribers = fd_budget().saturating_sub(600) / 2;
    let subscribers = subscribers.min(1000);
    let server = Server::start_with(Arc::new(AlwaysTask), |c| {
        c.max_connections = 64;
        c.max_streams_per_principal = 1000;
    });
    let id = working_task(&server, ALICE, "m-crowd");
    let mut streams = Vec::with_capacity(subscribers);
    for _ in 0..subscribers {
        let (status, stream) = open_subscription(server.addr(), ALICE, &id);
        assert_eq!(status, 200);
        streams.push(stream);
    }
    let idle: Vec<TcpStream> = (0..200)
        .map(|_| TcpStream::connect(server.addr()).unwrap())
        .collect();
    let auth = format!("Bearer {ALICE}");
    let headers = [("A2A-Version", "1.0"), ("Authorization", auth.as_str())];
    let started = Instant::now();
    let list = common::http::request_with_timeout(
        server.addr(),
        "GET",
        "/tasks",
        &headers,
        b"",
        Duration::from_secs(20),
    );
    assert_eq!(list.status, 200);
    let listed = started.elapsed();
    let started = Instant::now();
    let cancel = common::http::request_with_timeout(
        server.addr(),
        "POST",
        &format!("/tasks/{id}:cancel"),
        &headers,
        b"",
        Duration::from_secs(20),
    );
    assert_eq!(cancel.status, 200);
    assert_eq!(cancel.json()["status"]["state"], "TASK_STATE_CANCELED");
    eprintln!(
        "{subscribers} subscribers, 200 idle sockets: GET /tasks {listed:?}, cancel {:?}",
        started.elapsed()
    );
    drop(idle);
    drop(streams);
}

/// The soft limit on open descriptors of this process.
fn fd_budget() -> usize {
    std::fs::read_to_string("/proc/self/limits")
        .ok()
        .and_then(|limits| {
            limits
                .lines()
                .find(|l| l.starts_with("Max open files"))
                .and_then(|l| l.split_whitespace().nth(3))
                .and_then(|n| n.parse().ok())
        })
        .unwrap_or(1024)
}

#[test]
fn an_oversized_request_target_or_header_section_gets_the_documented_error_body() {
    let server = Server::start();
    let long = format!("/tasks?contextId={}", "c".repeat(9 * 1024));
    let reply = server.call("GET", &long, Some(ALICE), None);
    assert_eq!(
        (reply.status, reply.reason().as_str()),
        (414, "URI_TOO_LONG")
    );
    assert_eq!(reply.json()["error"]["status"], "INVALID_ARGUMENT");
    let big = "v".repeat(8 * 1024);
    let headers: Vec<(String, String)> = (0..5)
        .map(|n| (format!("x-big-{n}"), big.clone()))
        .collect();
    let headers: Vec<(&str, &str)> = headers
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    let reply = server.call_with("GET", "/tasks", Some(ALICE), None, &headers);
    assert_eq!(
        (reply.status, reply.reason().as_str()),
        (431, "HEADERS_TOO_LARGE")
    );
}

#[test]
fn page_tokens_are_bound_to_the_caller_and_the_query() {
    let server = Server::start();
    for n in 0..3 {
        assert_eq!(
            server
                .send(ALICE, &format!("m-{n}"), "hello", json!({}))
                .status,
            200
        );
    }
    let first = server
        .call("GET", "/tasks?pageSize=1", Some(ALICE), None)
        .json();
    let token = first["nextPageToken"].as_str().unwrap().to_string();
    let next = server.call(
        "GET",
        &format!("/tasks?pageSize=1&pageToken={token}"),
        Some(ALICE),
        None,
    );
    assert_eq!(next.status, 200);
    assert_ne!(next.json()["tasks"][0]["id"], first["tasks"][0]["id"]);
    let refused = |path: String, token_of: &str| {
        let reply = server.call("GET", &path, Some(token_of), None);
        assert_eq!(reply.status, 400, "{path}");
        let body: Value = reply.json();
        assert_eq!(
            body["error"]["details"][1]["fieldViolations"][0]["field"],
            "pageToken"
        );
    };
    // Another caller's token.
    refused(format!("/tasks?pageSize=1&pageToken={token}"), BOB);
    // Another query.
    refused(
        format!("/tasks?pageSize=1&status=TASK_STATE_WORKING&pageToken={token}"),
        ALICE,
    );
    // Altered: one character of the position changed.
    let mut forged = token.clone().into_bytes();
    forged[0] = if forged[0] == b'M' { b'N' } else { b'M' };
    refused(
        format!(
            "/tasks?pageSize=1&pageToken={}",
            String::from_utf8(forged).unwrap()
        ),
        ALICE,
    );
    // The key lives in the store: a new listener on the same store honours the token.
    let mut config =
        a2a_task_plane::config::ListenerConfig::new(server._tmp.path().join("credentials.json"));
    config.port = 0;
    let mut again =
        a2a_task_plane::http::Listener::start(server.plane.clone(), config, Arc::new(AlwaysTask))
            .unwrap();
    let reply = common::http::request(
        again.local_addr(),
        "GET",
        &format!("/tasks?pageSize=1&pageToken={token}"),
        &[
            ("A2A-Version", "1.0"),
            ("Authorization", &format!("Bearer {ALICE}")),
        ],
        b"",
    );
    assert_eq!(reply.status, 200);
    assert_eq!(
        reply.json()["tasks"][0]["id"],
        next.json()["tasks"][0]["id"]
    );
    again.close();
}
