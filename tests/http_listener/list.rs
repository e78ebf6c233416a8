//! `GET /tasks`: only the caller's Tasks, its filters, and stable signed pages.

use std::sync::Arc;

use a2a_task_plane::clock::ManualClock;
use a2a_task_plane::plane::AlwaysTask;
use a2a_task_plane::plane::PlaneOptions;
use serde_json::{json, Value};

use crate::common::server::*;
use crate::common::T0;

#[test]
fn list_tasks_shows_only_the_callers_tasks_with_filters_and_stable_pages() {
    // The plane's clock moves only when the test says: each Task's status is 1 ms newer
    // than the one before, however fast the machine.
    let clock = ManualClock::new(T0);
    let options = PlaneOptions {
        clock: Arc::new(clock.clone()),
        ..PlaneOptions::default()
    };
    let server = Server::start_with_plane(options, Arc::new(AlwaysTask), |_| {});
    let mut ids = Vec::new();
    for i in 0..5 {
        ids.push(
            server
                .send(ALICE, &format!("m-{i}"), "hello", json!({}))
                .json()["task"]["id"]
                .clone(),
        );
        clock.advance(1);
    }
    let asked = server.send(ALICE, "m-ask", "ask", json!({})).json()["task"].clone();
    clock.advance(1);
    server.send(BOB, "b-1", "hello", json!({}));

    let all = server.call("GET", "/tasks", Some(ALICE), None).json();
    assert_eq!(all["totalSize"], 6);
    assert_eq!(all["pageSize"], 50);
    assert_eq!(
        all["nextPageToken"], "",
        "always present, empty on the last page"
    );
    assert_eq!(all["tasks"][0]["id"], asked["id"], "newest status first");
    assert!(
        all["tasks"]
            .as_array()
            .unwrap()
            .iter()
            .all(|t| t.get("artifacts").is_none()),
        "no artifacts unless asked"
    );

    let waiting = server
        .call(
            "GET",
            "/tasks?status=TASK_STATE_INPUT_REQUIRED",
            Some(ALICE),
            None,
        )
        .json();
    assert_eq!(waiting["totalSize"], 1);
    let ctx = asked["contextId"].as_str().unwrap();
    let in_ctx = server
        .call(
            "GET",
            &format!("/tasks?contextId={ctx}&includeArtifacts=true"),
            Some(ALICE),
            None,
        )
        .json();
    assert_eq!(in_ctx["totalSize"], 1);
    let future = server
        .call(
            "GET",
            "/tasks?statusTimestampAfter=2999-01-01T00:00:00Z",
            Some(ALICE),
            None,
        )
        .json();
    assert_eq!(future["totalSize"], 0);
    assert_eq!(future["tasks"], json!([]));

    // Pages of 2; inserts between pages do not shift them.
    let page1 = server
        .call("GET", "/tasks?pageSize=2", Some(ALICE), None)
        .json();
    assert_eq!(page1["tasks"].as_array().unwrap().len(), 2);
    let token = page1["nextPageToken"].as_str().unwrap().to_string();
    assert!(!token.is_empty());
    server.send(ALICE, "m-new", "hello", json!({}));
    let page2 = server
        .call(
            "GET",
            &format!("/tasks?pageSize=2&pageToken={token}"),
            Some(ALICE),
            None,
        )
        .json();
    let seen: Vec<&Value> = page1["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .chain(page2["tasks"].as_array().unwrap())
        .map(|t| &t["id"])
        .collect();
    assert_eq!(seen, [&asked["id"], &ids[4], &ids[3], &ids[2]]);

    for bad in [
        "pageSize=0",
        "pageSize=101",
        "pageToken=garbage",
        "status=completed",
        "statusTimestampAfter=yesterday",
        "historyLength=-2",
    ] {
        let reply = server.call("GET", &format!("/tasks?{bad}"), Some(ALICE), None);
        assert_eq!(
            (reply.status, reply.reason().as_str()),
            (400, "INVALID_ARGUMENT"),
            "{bad}"
        );
    }
    let bob = server.call("GET", "/tasks", Some(BOB), None).json();
    assert_eq!(bob["totalSize"], 1);
}
