//! `GET|POST /tasks/{id}:subscribe`: identical frames for every subscriber until the Task
//! settles; terminal Tasks are refused.

use std::time::Duration;

use serde_json::{json, Value};

use crate::common::http::request;
use crate::common::server::*;

#[test]
fn subscribe_uses_get_streams_updates_and_rejects_terminal_tasks() {
    let server = Server::start();
    let task = server.send(ALICE, "m-1", "ask", json!({})).json()["task"].clone();
    let id = task["id"].as_str().unwrap().to_string();
    // An interrupted Task stays subscribable; the stream ends once a continuation settles it.
    let addr = server.addr();
    let path = format!("/tasks/{id}:subscribe");
    let subscribers: Vec<_> = (0..3)
        .map(|i| {
            let path = path.clone();
            let method = if i == 2 { "POST" } else { "GET" };
            std::thread::spawn(move || {
                request(
                    addr,
                    method,
                    &path,
                    &[
                        ("Authorization", &format!("Bearer {ALICE}")),
                        ("Content-Type", "application/json"),
                    ],
                    b"",
                )
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(300));
    let answered = server.send(ALICE, "m-2", "fine", json!({"taskId": id}));
    assert_eq!(
        answered.json()["task"]["status"]["state"],
        "TASK_STATE_COMPLETED"
    );
    let streams: Vec<Vec<Value>> = subscribers
        .into_iter()
        .map(|s| s.join().unwrap().events())
        .collect();
    assert_eq!(
        streams[0][0]["task"]["status"]["state"],
        "TASK_STATE_INPUT_REQUIRED"
    );
    assert_eq!(
        streams[0].last().unwrap()["statusUpdate"]["status"]["state"],
        "TASK_STATE_COMPLETED"
    );
    assert!(streams[0].iter().any(|e| e.get("artifactUpdate").is_some()));
    assert_eq!(streams[0], streams[1], "subscribers see identical frames");
    assert_eq!(streams[0], streams[2], "POST subscribe works too");

    let terminal = server.call("GET", &path, Some(ALICE), None);
    assert_eq!(
        (terminal.status, terminal.reason().as_str()),
        (400, "UNSUPPORTED_OPERATION")
    );
    let foreign = server.call("GET", &path, Some(BOB), None);
    assert_eq!(
        (foreign.status, foreign.reason().as_str()),
        (404, "TASK_NOT_FOUND")
    );
}
