//! What a client may hold: idle and slow clients are timed out, connections are bounded.

use std::sync::Arc;
use std::time::Duration;

use a2a_task_plane::plane::AlwaysTask;

use crate::common::http::request;
use crate::common::server::*;

#[test]
fn idle_and_slow_clients_are_timed_out_and_connections_are_bounded() {
    use std::io::{Read, Write};
    let server = Server::start_with(Arc::new(AlwaysTask), |c| {
        c.idle_timeout_ms = 300;
        c.max_connections = 2;
    });
    // A client that never sends a request head is dropped after the idle timeout.
    let mut idle = std::net::TcpStream::connect(server.addr()).unwrap();
    idle.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let started = std::time::Instant::now();
    let mut buf = [0u8; 64];
    let n = idle.read(&mut buf).unwrap_or(0);
    assert!(
        n == 0 || String::from_utf8_lossy(&buf[..n]).contains("408"),
        "the idle connection was closed"
    );
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "closed after {:?}",
        started.elapsed()
    );
    // A slow body is cut off too.
    let mut slow = std::net::TcpStream::connect(server.addr()).unwrap();
    slow.write_all(format!("POST /message:send HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {ALICE}\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{{").as_bytes()).unwrap();
    slow.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut reply = String::new();
    let _ = slow.read_to_string(&mut reply);
    assert!(reply.starts_with("HTTP/1.1 408"), "{reply}");
    // Two connections held open take both places: a third is still served while they are
    // held, because the longest-idle one makes room for it (`conn.rs`).
    let hold1 = std::net::TcpStream::connect(server.addr()).unwrap();
    let hold2 = std::net::TcpStream::connect(server.addr()).unwrap();
    let third = request(
        server.addr(),
        "GET",
        "/.well-known/agent-card.json",
        &[],
        b"",
    );
    assert_eq!(third.status, 200);
    drop((hold1, hold2));
}

/// Reads one response with a `Content-Length` body off `stream`; its status line.
fn read_one_response(stream: &mut std::net::TcpStream) -> String {
    use std::io::Read;
    let mut got = Vec::new();
    let mut byte = [0u8; 1];
    while !got.ends_with(b"\r\n\r\n") {
        assert_eq!(
            stream.read(&mut byte).unwrap(),
            1,
            "the connection closed mid-head"
        );
        got.push(byte[0]);
    }
    let head = String::from_utf8_lossy(&got).to_string();
    let length: usize = head
        .lines()
        .find_map(|l| {
            let (name, value) = l.split_once(':')?;
            name.eq_ignore_ascii_case("content-length")
                .then(|| value.trim().parse().ok())?
        })
        .expect("a Content-Length");
    let mut body = vec![0u8; length];
    stream.read_exact(&mut body).unwrap();
    head.lines().next().unwrap_or_default().to_string()
}

#[test]
fn a_keep_alive_connection_that_goes_quiet_after_its_requests_is_closed_at_the_idle_timeout() {
    use std::io::{Read, Write};
    // The header-read deadline of every request after the first reuses the connection's
    // timer (`src/http/timer.rs`): it must still fire, for the second request and later.
    // Pauses of half the timeout between requests: together longer than the timeout, so
    // a deadline left where an earlier request put it would close the connection early.
    let server = Server::start_with(Arc::new(AlwaysTask), |c| c.idle_timeout_ms = 500);
    let mut conn = std::net::TcpStream::connect(server.addr()).unwrap();
    conn.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    for _ in 0..3 {
        std::thread::sleep(Duration::from_millis(250));
        conn.write_all(b"GET /.well-known/agent-card.json HTTP/1.1\r\nHost: x\r\n\r\n")
            .unwrap();
        let status = read_one_response(&mut conn);
        assert!(status.starts_with("HTTP/1.1 200"), "{status}");
    }
    let quiet_from = std::time::Instant::now();
    let mut buf = [0u8; 256];
    let n = conn.read(&mut buf).unwrap_or(0);
    let waited = quiet_from.elapsed();
    assert!(
        n == 0 || String::from_utf8_lossy(&buf[..n]).contains("408"),
        "the quiet connection was closed, not answered: {:?}",
        String::from_utf8_lossy(&buf[..n])
    );
    assert!(
        waited >= Duration::from_millis(450),
        "closed before the idle timeout: {waited:?}"
    );
    assert!(
        waited < Duration::from_secs(3),
        "closed only after {waited:?}"
    );
}
