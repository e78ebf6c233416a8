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
