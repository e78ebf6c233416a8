//! `Listener::close`: open streams end and in-flight sends return their snapshot.

use std::sync::Arc;
use std::time::Duration;

use a2a_task_plane::plane::AlwaysTask;
use a2a_task_plane::record::TaskState;
use serde_json::json;

use crate::common::http::request_with_timeout;
use crate::common::server::*;
use crate::common::wait_for_activity;

#[test]
fn close_ends_open_streams_and_returns_in_flight_sends() {
    let mut server = Server::start_with(Arc::new(AlwaysTask), |c| c.blocking_timeout_ms = 60_000);
    let task = server.send(ALICE, "m-1", "ask", json!({})).json()["task"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let addr = server.addr();
    // An open stream: the subscriber holds the snapshot.
    let mut stream = server.stream("GET", &format!("/tasks/{task}:subscribe"), ALICE, None);
    assert!(stream.next_event().is_some(), "the snapshot");
    // An in-flight blocking send: its Task is WORKING, and the send waits for it to settle.
    let (watch, activity) = server.plane.events().watch_activity();
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
    wait_for_activity(&activity, "the sent Task WORKING", |a| {
        a.task_id != task && a.state == Some(TaskState::Working)
    });
    server.plane.events().unwatch(watch);
    let started = std::time::Instant::now();
    server.listener.close();
    assert!(
        started.elapsed() < Duration::from_secs(6),
        "close took {:?}",
        started.elapsed()
    );
    assert_eq!(
        stream.rest(),
        Vec::<serde_json::Value>::new(),
        "after the snapshot, the stream ended"
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
