//! Bearer credentials: the challenge, ambiguous headers, a malformed credentials file,
//! and principals kept apart on every route.

use std::sync::Arc;

use a2a_task_plane::config::ListenerConfig;
use a2a_task_plane::http::Listener;
use a2a_task_plane::plane::AlwaysTask;
use serde_json::json;

use crate::common::http::{request, Reply};
use crate::common::server::*;
use crate::common::*;

#[test]
fn missing_or_bad_credentials_are_401_with_a_bearer_challenge() {
    let server = Server::start();
    for token in [None, Some("wrong-token-0123456789"), Some("")] {
        let reply = server.call("GET", "/tasks", token, None);
        assert_eq!(
            (reply.status, reply.reason().as_str()),
            (401, "UNAUTHENTICATED")
        );
        assert!(reply
            .header("www-authenticate")
            .unwrap()
            .starts_with("Bearer"));
    }
    let basic = request(
        server.addr(),
        "GET",
        "/tasks",
        &[("Authorization", "Basic YWxpY2U6eA==")],
        b"",
    );
    assert_eq!(basic.status, 401);
}

#[test]
fn two_authorization_headers_are_refused_as_ambiguous() {
    let server = Server::start();
    let bob = format!("Bearer {BOB}");
    let reply = server.call_with(
        "GET",
        "/tasks",
        Some(ALICE),
        None,
        &[("Authorization", bob.as_str())],
    );
    assert_eq!(
        (reply.status, reply.reason().as_str()),
        (401, "UNAUTHENTICATED")
    );
    assert!(
        reply.json()["error"]["message"]
            .as_str()
            .unwrap()
            .contains("more than one Authorization header"),
        "{}",
        reply.json()
    );
}

#[test]
fn a_malformed_credentials_file_is_a_startup_error_naming_it() {
    let tmp = TempRoot::new("creds");
    let plane = open(&tmp.store());
    for (content, expect) in [
        ("{not json", "is not"),
        (r#"{"credentials": []}"#, "lists no credentials"),
        (
            r#"{"credentials": [{"token": "short", "principal": "a"}]}"#,
            "at least 16",
        ),
        (
            r#"{"credentials": [{"token": "long-enough-token-123", "principal": "a b"}]}"#,
            "principal",
        ),
    ] {
        let path = tmp.path().join("creds.json");
        std::fs::write(&path, content).unwrap();
        let mut config = ListenerConfig::new(path.clone());
        config.port = 0;
        let err = Listener::start(plane.clone(), config, Arc::new(AlwaysTask))
            .err()
            .expect(content);
        assert!(
            err.contains(&path.display().to_string()) && err.contains(expect),
            "{err}"
        );
    }
    let mut config = ListenerConfig::new(tmp.path().join("missing.json"));
    config.port = 0;
    let err = Listener::start(plane.clone(), config, Arc::new(AlwaysTask))
        .err()
        .unwrap();
    assert!(err.contains("missing.json"), "{err}");
}

#[test]
fn principal_b_cannot_read_list_cancel_subscribe_to_or_continue_principal_as_task() {
    let server = Server::start();
    let task = server.send(ALICE, "m-1", "ask", json!({})).json()["task"].clone();
    let id = task["id"].as_str().unwrap();
    let not_found = |reply: Reply| {
        assert_eq!(
            (reply.status, reply.reason()),
            (404, "TASK_NOT_FOUND".to_string())
        )
    };
    not_found(server.call("GET", &format!("/tasks/{id}"), Some(BOB), None));
    not_found(server.call("POST", &format!("/tasks/{id}:cancel"), Some(BOB), None));
    not_found(server.call("GET", &format!("/tasks/{id}:subscribe"), Some(BOB), None));
    not_found(server.send(BOB, "b-1", "let me in", json!({"taskId": id})));
    let list = server
        .call(
            "GET",
            &format!("/tasks?contextId={}", task["contextId"].as_str().unwrap()),
            Some(BOB),
            None,
        )
        .json();
    assert_eq!(list["totalSize"], 0);
    // Alice's Task is untouched.
    let mine = server
        .call("GET", &format!("/tasks/{id}"), Some(ALICE), None)
        .json();
    assert_eq!(mine["status"]["state"], "TASK_STATE_INPUT_REQUIRED");
    assert_eq!(mine["history"].as_array().unwrap().len(), 2);
}
