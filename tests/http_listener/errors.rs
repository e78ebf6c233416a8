//! The wrapped `google.rpc.Status` error body on every error, version negotiation, and
//! bodies that are not JSON.

use std::sync::Arc;

use a2a_task_plane::plane::AlwaysTask;
use serde_json::json;

use crate::common::http::request;
use crate::common::server::*;

#[test]
fn every_error_uses_the_wrapped_status_body() {
    let server = Server::start_with(Arc::new(AlwaysTask), |c| c.max_body_bytes = 2048);
    let auth = format!("Bearer {ALICE}");
    let not_found = server.call("GET", "/nope", Some(ALICE), None);
    assert_eq!(
        (not_found.status, not_found.reason().as_str()),
        (404, "NOT_FOUND")
    );
    let wrong_method = server.call("DELETE", "/message:send", Some(ALICE), None);
    assert_eq!(wrong_method.status, 405);
    assert_eq!(wrong_method.header("allow"), Some("POST"));
    assert_eq!(wrong_method.reason(), "METHOD_NOT_ALLOWED");
    let big = format!(
        r#"{{"message":{{"messageId":"m","role":"ROLE_USER","parts":[{{"text":"{}"}}]}}}}"#,
        "x".repeat(4096)
    );
    let too_large = request(
        server.addr(),
        "POST",
        "/message:send",
        &[
            ("Authorization", &auth),
            ("Content-Type", "application/json"),
        ],
        big.as_bytes(),
    );
    assert_eq!(
        (too_large.status, too_large.reason().as_str()),
        (413, "PAYLOAD_TOO_LARGE")
    );
    let wrong_type = request(
        server.addr(),
        "POST",
        "/message:send",
        &[("Authorization", &auth), ("Content-Type", "text/plain")],
        b"{}",
    );
    assert_eq!(
        (wrong_type.status, wrong_type.reason().as_str()),
        (415, "CONTENT_TYPE_NOT_SUPPORTED")
    );
    let a2a_type = request(
        server.addr(),
        "POST",
        "/message:send",
        &[
            ("Authorization", &auth),
            ("Content-Type", "application/a2a+json; charset=utf-8"),
        ],
        br#"{"message":{"messageId":"m-a2a","role":"ROLE_USER","parts":[{"text":"x"}]}}"#,
    );
    assert_eq!(a2a_type.status, 200);

    let malformed = request(
        server.addr(),
        "POST",
        "/message:send",
        &[
            ("Authorization", &auth),
            ("Content-Type", "application/json"),
        ],
        b"{not json",
    );
    assert_eq!(
        (malformed.status, malformed.reason().as_str()),
        (400, "INVALID_ARGUMENT")
    );
    let wrong_type_field = server.call(
        "POST",
        "/message:send",
        Some(ALICE),
        Some(json!({"message": {"messageId": 7, "role": "ROLE_USER", "parts": [{"text": "x"}]}})),
    );
    assert_eq!(wrong_type_field.status, 400);
    let body = wrong_type_field.json();
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("message.messageId"),
        "{body}"
    );
    assert_eq!(
        body["error"]["details"][1]["fieldViolations"][0]["field"],
        "message.messageId"
    );
    // Unknown members are ignored (a 0.3-style `kind`, a future member), on every route
    // that takes a body. (`hold`: the agent leaves the Task live, so it can be canceled.)
    let unknown = server.call("POST", "/message:send", Some(ALICE), Some(json!({"message": {"messageId": "m-unknown", "role": "ROLE_USER", "parts": [{"kind": "text", "text": "hold", "future": 1}], "kind": "message"}, "configuration": {"returnImmediately": true, "future": true}, "future": {}})));
    assert_eq!(unknown.status, 200, "{}", unknown.json());
    let task_id = unknown.json()["task"]["id"].as_str().unwrap().to_string();
    let cancel = server.call(
        "POST",
        &format!("/tasks/{task_id}:cancel"),
        Some(ALICE),
        Some(json!({"id": task_id, "future": "member"})),
    );
    assert_eq!(cancel.status, 200, "{}", cancel.json());
    let bad_id = server.send(ALICE, "has spaces", "x", json!({}));
    assert_eq!(
        (bad_id.status, bad_id.reason().as_str()),
        (400, "INVALID_ARGUMENT")
    );
}

#[test]
fn an_unsupported_version_fails_explicitly() {
    let server = Server::start();
    let body =
        json!({"message": {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "x"}]}})
            .to_string();
    let auth = format!("Bearer {ALICE}");
    for version in ["0.3", "2.0", "1.1", "one"] {
        let reply = request(
            server.addr(),
            "POST",
            "/message:send",
            &[
                ("A2A-Version", version),
                ("Authorization", &auth),
                ("Content-Type", "application/json"),
            ],
            body.as_bytes(),
        );
        assert_eq!(
            (reply.status, reply.reason().as_str()),
            (400, "VERSION_NOT_SUPPORTED"),
            "{version}"
        );
        assert_eq!(
            reply.json()["error"]["details"][0]["metadata"]["supportedVersions"],
            "1.0"
        );
    }
    let via_query = request(
        server.addr(),
        "GET",
        "/tasks?A2A-Version=0.3",
        &[("Authorization", &auth)],
        b"",
    );
    assert_eq!(via_query.status, 400);
    // Absent means 1.0; a patch component does not matter.
    let absent = request(
        server.addr(),
        "GET",
        "/tasks",
        &[("Authorization", &auth)],
        b"",
    );
    assert_eq!(absent.status, 200);
    let patch = request(
        server.addr(),
        "GET",
        "/tasks",
        &[("Authorization", &auth), ("A2A-Version", "1.0.1")],
        b"",
    );
    assert_eq!(patch.status, 200);
}

#[test]
fn a_body_that_is_not_json_is_named_as_the_body() {
    let server = Server::start();
    let auth = format!("Bearer {ALICE}");
    let headers = [
        ("A2A-Version", "1.0"),
        ("Content-Type", "application/json"),
        ("Authorization", auth.as_str()),
    ];
    let reply = request(server.addr(), "POST", "/message:send", &headers, b"{");
    assert_eq!(
        (reply.status, reply.reason().as_str()),
        (400, "INVALID_ARGUMENT")
    );
    let body = reply.json();
    let message = body["error"]["message"].as_str().unwrap();
    assert!(message.contains("the body is not valid JSON"), "{body}");
    assert!(!message.contains('?'), "{body}");
}
