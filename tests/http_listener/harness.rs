//! The test harness itself: a scripted agent that meets an error fails loudly.

use serde_json::json;

use crate::common::server::*;

#[test]
fn a_broken_scripted_agent_fails_the_task_and_the_test_with_its_error() {
    let mut server = Server::start();
    let reply = server.send(ALICE, "m-1", "break", json!({}));
    let task = &reply.json()["task"];
    assert_eq!(
        task["status"]["state"], "TASK_STATE_FAILED",
        "the waiting client sees the failure at once, not a timeout: {task}"
    );
    let told = task["status"]["message"]["parts"][0]["text"]
        .as_str()
        .unwrap();
    assert!(told.contains("the scripted agent failed"), "{told}");
    let failure = server.stop_agent().unwrap_err();
    assert!(
        failure.contains("script `break`") && failure.contains("-missing"),
        "{failure}"
    );
}
