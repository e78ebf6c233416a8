//! `GET|POST /tasks/{id}:subscribe`: identical frames for every subscriber until the Task
//! settles; terminal Tasks are refused.

use serde_json::{json, Value};

use crate::common::server::*;

#[test]
fn subscribe_uses_get_streams_updates_and_rejects_terminal_tasks() {
    let server = Server::start();
    let task = server.send(ALICE, "m-1", "ask", json!({})).json()["task"].clone();
    let id = task["id"].as_str().unwrap().to_string();
    // An interrupted Task stays subscribable; the stream ends once a continuation settles it.
    let path = format!("/tasks/{id}:subscribe");
    let mut subscribers: Vec<_> = ["GET", "GET", "POST"]
        .into_iter()
        .map(|method| server.stream(method, &path, ALICE, None))
        .collect();
    // Each subscriber holds the snapshot before the continuation is sent.
    let snapshots: Vec<Value> = subscribers
        .iter_mut()
        .map(|s| s.next_event().expect("the snapshot"))
        .collect();
    let answered = server.send(ALICE, "m-2", "fine", json!({"taskId": id}));
    assert_eq!(
        answered.json()["task"]["status"]["state"],
        "TASK_STATE_COMPLETED"
    );
    let streams: Vec<Vec<Value>> = subscribers
        .into_iter()
        .zip(snapshots)
        .map(|(s, first)| std::iter::once(first).chain(s.rest()).collect())
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
