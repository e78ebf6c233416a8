//! `POST /tasks/{id}:cancel`: a live Task is canceled; a terminal one is not cancelable.

use serde_json::json;

use crate::common::server::*;

#[test]
fn cancel_stops_a_live_task_and_a_terminal_one_is_not_cancelable() {
    let server = Server::start();
    let held = server.send(ALICE, "m-1", "work", json!({})).json()["task"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    // Empty body (as the official client sends it).
    let canceled = server.call("POST", &format!("/tasks/{held}:cancel"), Some(ALICE), None);
    assert_eq!(
        canceled.status,
        200,
        "{}",
        String::from_utf8_lossy(&canceled.body)
    );
    assert_eq!(canceled.json()["status"]["state"], "TASK_STATE_CANCELED");
    let again = server.call(
        "POST",
        &format!("/tasks/{held}:cancel"),
        Some(ALICE),
        Some(json!({"metadata": {"why": "x"}})),
    );
    assert_eq!(
        (again.status, again.reason().as_str()),
        (400, "TASK_NOT_CANCELABLE")
    );
    // Cancel wins against the wake: the agent can no longer start the Task.
    assert!(server.plane.start_work(&held).is_err());
    let foreign = server.call("POST", &format!("/tasks/{held}:cancel"), Some(BOB), None);
    assert_eq!(
        (foreign.status, foreign.reason().as_str()),
        (404, "TASK_NOT_FOUND")
    );
    let mismatch = server.call(
        "POST",
        &format!("/tasks/{held}:cancel"),
        Some(ALICE),
        Some(json!({"id": "other"})),
    );
    assert_eq!(mismatch.status, 400);
}
