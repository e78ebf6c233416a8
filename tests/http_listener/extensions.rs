//! `A2A-Extensions`: negotiated per request; the locator rides on `outfitter-task/v1`.

use a2a_task_plane::wire::extensions::OUTFITTER_TASK_V1;
use serde_json::json;

use crate::common::server::*;

#[test]
fn extensions_are_negotiated_per_request_and_the_locator_rides_on_outfitter_task() {
    let server = Server::start();
    let asked = format!("{OUTFITTER_TASK_V1}, https://example.com/unknown/v1");
    let reply = server.call_with(
        "POST",
        "/message:send",
        Some(ALICE),
        Some(
            json!({"message": {"messageId": "m-1", "role": "ROLE_USER", "parts": [{"text": "x"}]}}),
        ),
        &[("A2A-Extensions", &asked)],
    );
    assert_eq!(
        reply.header("a2a-extensions"),
        Some(OUTFITTER_TASK_V1),
        "the supported subset is echoed"
    );
    let task = reply.json()["task"].clone();
    let locator = &task["metadata"]["outfitter-task/v1"]["task"];
    assert_eq!(locator["agentInterface"], server.listener.url());
    assert_eq!(locator["protocolBinding"], "HTTP+JSON");
    assert_eq!(locator["protocolVersion"], "1.0");
    assert_eq!(locator["taskId"], task["id"]);
    // Without activation: no header, no extension metadata.
    let plain = server.call(
        "GET",
        &format!("/tasks/{}", task["id"].as_str().unwrap()),
        Some(ALICE),
        None,
    );
    assert_eq!(plain.header("a2a-extensions"), None);
    assert!(plain.json().get("metadata").is_none());
}
