//! `GET /tasks/{id}`: durable state, `historyLength`, and a foreign Task reported as missing.

use serde_json::json;

use crate::common::server::*;

#[test]
fn get_task_reads_durable_state_and_a_foreign_task_is_not_found() {
    let server = Server::start();
    let task = server.send(ALICE, "m-1", "hello", json!({})).json()["task"].clone();
    let id = task["id"].as_str().unwrap();
    let got = server.call("GET", &format!("/tasks/{id}"), Some(ALICE), None);
    assert_eq!(got.status, 200);
    assert_eq!(got.json()["status"]["state"], "TASK_STATE_COMPLETED");
    let none = server
        .call(
            "GET",
            &format!("/tasks/{id}?historyLength=0"),
            Some(ALICE),
            None,
        )
        .json();
    assert!(
        none.get("history").is_none(),
        "historyLength=0 leaves history out: {none}"
    );
    let foreign = server.call("GET", &format!("/tasks/{id}"), Some(BOB), None);
    let missing = server.call("GET", "/tasks/no-such-task", Some(BOB), None);
    assert_eq!(
        (foreign.status, foreign.reason().as_str()),
        (404, "TASK_NOT_FOUND")
    );
    assert_eq!(
        (missing.status, missing.reason().as_str()),
        (404, "TASK_NOT_FOUND")
    );
    let bad = server.call(
        "GET",
        &format!("/tasks/{id}?historyLength=-1"),
        Some(ALICE),
        None,
    );
    assert_eq!(
        (bad.status, bad.reason().as_str()),
        (400, "INVALID_ARGUMENT")
    );
}
