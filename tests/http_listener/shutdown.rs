//! `Listener::close`: open streams end and in-flight sends return their snapshot.

use std::sync::Arc;
use std::time::Duration;

use a2a_task_plane::http::AlwaysTask;
use serde_json::json;

use crate::common::http::request_with_timeout;
use crate::common::server::*;

#[test]
fn close_ends_open_streams_and_returns_in_flight_sends() {
    let mut server = Server::start_with(Arc::new(AlwaysTask), |c| c.blocking_timeout_ms = 60_000);
    let task = server.send(ALICE, "m-1", "ask", json!({})).json()["task"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let addr = server.addr();
    let subscriber = std::thread::spawn(move || {
        request_with_timeout(
            addr,
            "GET",
            &format!("/tasks/{task}:subscribe"),
            &[("Authorization", &format!("Bearer {ALICE}"))],
            b"",
            Duration::from_secs(10),
        )
    });
    let sender = std::thread::spawn(move || {
        request_with_timeout(
            addr,
            "POST",
            "/message:send",
            &[
                ("Authorization", &format!("Bearer {ALICE}")),
                ("Content-Type", "application/json"),
            ],
            br#"{"message":{"messageId":"m-2","role":"ROLE_USER","parts":[{"text":"work"}]}}"#,
            Duration::from_secs(10),
        )
    });
    std::thread::sleep(Duration::from_millis(400));
    let started = std::time::Instant::now();
    server.listener.close();
    assert!(
        started.elapsed() < Duration::from_secs(6),
        "close took {:?}",
        started.elapsed()
    );
    let stream = subscriber.join().unwrap();
    assert_eq!(
        stream.events().len(),
        1,
        "the snapshot, then the stream ended"
    );
    let sent = sender.join().unwrap();
    assert_eq!(
        sent.json()["task"]["status"]["state"],
        "TASK_STATE_WORKING",
        "the snapshot at shutdown"
    );
    assert!(
        std::net::TcpStream::connect(addr).is_err(),
        "nothing listens after close"
    );
}
