//! The A2A HTTP+JSON listener, black-box over a real loopback socket: every route and
//! every error, principals kept apart, streams, shutdown. The agent is a scripted driver
//! of the plane's agent API (not Pi): what it does depends on the last message's text.

mod common;

use std::sync::Arc;
use std::time::Duration;

use a2a_task_plane::config::ListenerConfig;
use a2a_task_plane::http::{AlwaysTask, Listener};
use a2a_task_plane::wire::extensions::{ELICITATION_V1, OUTFITTER_TASK_V1};
use common::http::{request, request_with_timeout, Reply};
use common::server::*;
use common::*;
use serde_json::{json, Value};

// ---- Agent card -----------------------------------------------------------------------------

#[test]
fn agent_card_is_public_cacheable_and_declares_the_binding() {
    let server = Server::start();
    let reply = request(
        server.addr(),
        "GET",
        "/.well-known/agent-card.json",
        &[],
        b"",
    );
    assert_eq!(reply.status, 200);
    assert!(reply.header("cache-control").unwrap().contains("max-age="));
    let etag = reply.header("etag").unwrap().to_string();
    assert!(reply.header("last-modified").unwrap().ends_with("GMT"));
    let card = reply.json();
    let interface = &card["supportedInterfaces"][0];
    assert_eq!(interface["url"], server.listener.url());
    assert_eq!(interface["protocolBinding"], "HTTP+JSON");
    assert_eq!(interface["protocolVersion"], "1.0");
    assert_eq!(card["capabilities"]["streaming"], true);
    assert_eq!(card["capabilities"]["pushNotifications"], false);
    let uris: Vec<&str> = card["capabilities"]["extensions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["uri"].as_str().unwrap())
        .collect();
    assert_eq!(uris, [OUTFITTER_TASK_V1, ELICITATION_V1]);
    assert_eq!(
        card["securitySchemes"]["bearer"]["httpAuthSecurityScheme"]["scheme"],
        "Bearer"
    );
    assert!(card["securityRequirements"][0]["schemes"]["bearer"].is_object());
    assert!(!card["skills"].as_array().unwrap().is_empty());
    assert_eq!(card["defaultInputModes"][0], "text/plain");
    let again = request(
        server.addr(),
        "GET",
        "/.well-known/agent-card.json",
        &[("If-None-Match", &etag)],
        b"",
    );
    assert_eq!(again.status, 304);
    assert!(again.body.is_empty());
}

// ---- message:send ---------------------------------------------------------------------------

#[test]
fn blocking_send_returns_the_settled_task_with_its_artifacts() {
    let server = Server::start();
    let reply = server.send(ALICE, "m-1", "summarise", json!({}));
    assert_eq!(
        reply.status,
        200,
        "{}",
        String::from_utf8_lossy(&reply.body)
    );
    assert_eq!(reply.header("content-type"), Some("application/json"));
    let task = &reply.json()["task"];
    assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED");
    assert_eq!(task["artifacts"][0]["parts"][0]["text"], "echo: summarise");
    assert_eq!(task["history"][0]["parts"][0]["text"], "summarise");
    assert_eq!(task["history"][0]["taskId"], task["id"]);
    assert!(task["contextId"].as_str().is_some_and(|c| !c.is_empty()));
    // historyLength limits what comes back.
    let short = server.call(
        "POST",
        "/message:send",
        Some(ALICE),
        Some(json!({"message": {"messageId": "m-2", "role": "ROLE_USER", "parts": [{"text": "x"}]}, "configuration": {"historyLength": 1}})),
    );
    assert_eq!(short.json()["task"]["history"].as_array().unwrap().len(), 1);
    assert_eq!(short.json()["task"]["history"][0]["role"], "ROLE_AGENT");
}

#[test]
fn return_immediately_answers_right_after_acceptance_and_a_blocking_send_is_bounded() {
    let server = Server::start_with(Arc::new(AlwaysTask), |c| c.blocking_timeout_ms = 300);
    let quick = server.call(
        "POST",
        "/message:send",
        Some(ALICE),
        Some(json!({"message": {"messageId": "m-1", "role": "ROLE_USER", "parts": [{"text": "hold"}]}, "configuration": {"returnImmediately": true}})),
    );
    assert_eq!(
        quick.json()["task"]["status"]["state"],
        "TASK_STATE_SUBMITTED"
    );
    let started = std::time::Instant::now();
    let bounded = server.send(ALICE, "m-2", "work", json!({}));
    assert_eq!(
        bounded.json()["task"]["status"]["state"],
        "TASK_STATE_WORKING",
        "the current snapshot at the timeout"
    );
    assert!(started.elapsed() < Duration::from_secs(4));
}

#[test]
fn interrupted_states_settle_a_blocking_send_and_an_explicit_task_id_continues_it() {
    let server = Server::start();
    let asked = server.send(ALICE, "m-1", "ask", json!({}));
    let task = asked.json()["task"].clone();
    assert_eq!(task["status"]["state"], "TASK_STATE_INPUT_REQUIRED");
    assert_eq!(task["status"]["message"]["parts"][0]["text"], "which one?");
    let task_id = task["id"].as_str().unwrap();
    let answered = server.send(
        ALICE,
        "m-2",
        "the blue one",
        json!({"taskId": task_id, "contextId": task["contextId"]}),
    );
    assert_eq!(
        answered.status,
        200,
        "{}",
        String::from_utf8_lossy(&answered.body)
    );
    let done = answered.json()["task"].clone();
    assert_eq!(done["id"], task_id);
    assert_eq!(done["status"]["state"], "TASK_STATE_COMPLETED");
    assert_eq!(
        done["history"].as_array().unwrap().len(),
        4,
        "ask, question, answer, final message"
    );
    // A terminal Task cannot be continued.
    let late = server.send(ALICE, "m-3", "more", json!({"taskId": task_id}));
    assert_eq!(
        (late.status, late.reason().as_str()),
        (400, "UNSUPPORTED_OPERATION")
    );
    // AUTH_REQUIRED settles too.
    let auth = server.send(ALICE, "m-4", "auth", json!({}));
    assert_eq!(
        auth.json()["task"]["status"]["state"],
        "TASK_STATE_AUTH_REQUIRED"
    );
}

#[test]
fn a_simple_interaction_returns_a_direct_message_and_a_duplicate_returns_the_prior_direct_result() {
    let server = Server::start_with(Arc::new(Direct), |_| {});
    let first = server.send(ALICE, "p-1", "ping", json!({}));
    let message = first.json()["message"].clone();
    assert_eq!(message["role"], "ROLE_AGENT");
    assert!(message["parts"][0]["text"]
        .as_str()
        .unwrap()
        .starts_with("pong "));
    assert!(message.get("taskId").is_none(), "no Task exists");
    let again = server.send(ALICE, "p-1", "ping", json!({}));
    assert_eq!(
        again.json()["message"],
        message,
        "the prior direct result, verbatim"
    );
    let list = server.call("GET", "/tasks", Some(ALICE), None).json();
    assert_eq!(list["totalSize"], 0);
}

#[test]
fn a_duplicate_message_id_returns_the_prior_task_or_409_for_another_payload() {
    let server = Server::start();
    let first = server.send(ALICE, "m-1", "hello", json!({}));
    let again = server.send(ALICE, "m-1", "hello", json!({}));
    assert_eq!(again.json()["task"]["id"], first.json()["task"]["id"]);
    let conflict = server.send(ALICE, "m-1", "something else", json!({}));
    assert_eq!(
        (conflict.status, conflict.reason().as_str()),
        (409, "DUPLICATE_MESSAGE_ID")
    );
    // The same id from another principal is another message.
    let bob = server.send(BOB, "m-1", "hello", json!({}));
    assert_ne!(bob.json()["task"]["id"], first.json()["task"]["id"]);
}

#[test]
fn a_foreign_context_id_does_not_join_local_work_over_http() {
    let server = Server::start();
    let alice = server.send(ALICE, "m-1", "hello", json!({})).json()["task"].clone();
    let bob = server
        .send(
            BOB,
            "b-1",
            "hello",
            json!({"contextId": alice["contextId"]}),
        )
        .json()["task"]
        .clone();
    assert_ne!(bob["contextId"], alice["contextId"]);
    let own = server
        .send(
            ALICE,
            "m-2",
            "again",
            json!({"contextId": alice["contextId"]}),
        )
        .json()["task"]
        .clone();
    assert_eq!(own["contextId"], alice["contextId"]);
}

// ---- message:stream -------------------------------------------------------------------------

#[test]
fn message_stream_sends_the_task_then_live_updates_and_closes_when_settled() {
    let server = Server::start();
    let body =
        json!({"message": {"messageId": "s-1", "role": "ROLE_USER", "parts": [{"text": "slow"}]}});
    let reply = server.call("POST", "/message:stream", Some(ALICE), Some(body));
    assert_eq!(reply.status, 200);
    assert_eq!(reply.header("content-type"), Some("text/event-stream"));
    let events = reply.events();
    assert_eq!(
        events[0]["task"]["status"]["state"], "TASK_STATE_SUBMITTED",
        "{events:?}"
    );
    let kinds: Vec<String> = events[1..]
        .iter()
        .map(|e| match (e.get("statusUpdate"), e.get("artifactUpdate")) {
            (Some(s), _) => s["status"]["state"].as_str().unwrap().to_string(),
            (_, Some(a)) => format!("artifact:{}", a["artifact"]["name"].as_str().unwrap()),
            _ => panic!("unexpected frame {e}"),
        })
        .collect();
    assert_eq!(
        kinds,
        [
            "TASK_STATE_WORKING",
            "artifact:progress",
            "artifact:answer",
            "TASK_STATE_COMPLETED"
        ]
    );
    let task_id = events[0]["task"]["id"].clone();
    assert!(events[1..]
        .iter()
        .all(|e| e.as_object().unwrap().values().next().unwrap()["taskId"] == task_id));
}

#[test]
fn message_stream_of_a_direct_message_is_one_event() {
    let server = Server::start_with(Arc::new(Direct), |_| {});
    let body =
        json!({"message": {"messageId": "s-1", "role": "ROLE_USER", "parts": [{"text": "ping"}]}});
    let events = server
        .call("POST", "/message:stream", Some(ALICE), Some(body))
        .events();
    assert_eq!(events.len(), 1);
    assert_eq!(events[0]["message"]["role"], "ROLE_AGENT");
}

// ---- tasks ---------------------------------------------------------------------------------------

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

#[test]
fn list_tasks_shows_only_the_callers_tasks_with_filters_and_stable_pages() {
    let server = Server::start();
    let mut ids = Vec::new();
    for i in 0..5 {
        ids.push(
            server
                .send(ALICE, &format!("m-{i}"), "hello", json!({}))
                .json()["task"]["id"]
                .clone(),
        );
        std::thread::sleep(Duration::from_millis(3));
    }
    let asked = server.send(ALICE, "m-ask", "ask", json!({})).json()["task"].clone();
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

#[test]
fn push_notification_routes_are_explicitly_not_implemented() {
    let server = Server::start();
    for (method, path) in [
        ("POST", "/tasks/t-1/pushNotificationConfigs"),
        ("GET", "/tasks/t-1/pushNotificationConfigs/c-1"),
        ("DELETE", "/tasks/t-1/pushNotificationConfigs/c-1"),
    ] {
        let reply = server.call(method, path, Some(ALICE), Some(json!({"url": "https://x"})));
        assert_eq!(
            (reply.status, reply.reason().as_str()),
            (501, "PUSH_NOTIFICATION_NOT_SUPPORTED"),
            "{method} {path}"
        );
    }
    let in_send = server.call(
        "POST",
        "/message:send",
        Some(ALICE),
        Some(json!({"message": {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "x"}]}, "configuration": {"taskPushNotificationConfig": {"url": "https://x"}}})),
    );
    assert_eq!(
        (in_send.status, in_send.reason().as_str()),
        (400, "PUSH_NOTIFICATION_NOT_SUPPORTED")
    );
}

// ---- cross-cutting ---------------------------------------------------------------------------

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
    // that takes a body.
    let unknown = server.call("POST", "/message:send", Some(ALICE), Some(json!({"message": {"messageId": "m-unknown", "role": "ROLE_USER", "parts": [{"kind": "text", "text": "x", "future": 1}], "kind": "message"}, "configuration": {"returnImmediately": true, "future": true}, "future": {}})));
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

#[test]
fn close_ends_open_streams_and_returns_in_flight_sends() {
    let mut server = Server::start_with(Arc::new(AlwaysTask), |c| c.blocking_timeout_ms = 60_000);
    let task = server.send(ALICE, "m-1", "ask", json!({})).json()["task"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let addr = server.addr();
    let subscriber = std::thread::spawn(move || {
        request_with_timeout(
            addr,
            "GET",
            &format!("/tasks/{task}:subscribe"),
            &[("Authorization", &format!("Bearer {ALICE}"))],
            b"",
            Duration::from_secs(10),
        )
    });
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
    std::thread::sleep(Duration::from_millis(400));
    let started = std::time::Instant::now();
    server.listener.close();
    assert!(
        started.elapsed() < Duration::from_secs(6),
        "close took {:?}",
        started.elapsed()
    );
    let stream = subscriber.join().unwrap();
    assert_eq!(
        stream.events().len(),
        1,
        "the snapshot, then the stream ended"
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
fn idle_and_slow_clients_are_timed_out_and_connections_are_bounded() {
    use std::io::{Read, Write};
    let server = Server::start_with(Arc::new(AlwaysTask), |c| {
        c.idle_timeout_ms = 300;
        c.max_connections = 2;
    });
    // A client that never sends a request head is dropped after the idle timeout.
    let mut idle = std::net::TcpStream::connect(server.addr()).unwrap();
    idle.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let started = std::time::Instant::now();
    let mut buf = [0u8; 64];
    let n = idle.read(&mut buf).unwrap_or(0);
    assert!(
        n == 0 || String::from_utf8_lossy(&buf[..n]).contains("408"),
        "the idle connection was closed"
    );
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "closed after {:?}",
        started.elapsed()
    );
    // A slow body is cut off too.
    let mut slow = std::net::TcpStream::connect(server.addr()).unwrap();
    slow.write_all(format!("POST /message:send HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {ALICE}\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{{").as_bytes()).unwrap();
    slow.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut reply = String::new();
    let _ = slow.read_to_string(&mut reply);
    assert!(reply.starts_with("HTTP/1.1 408"), "{reply}");
    // Two connections held open: a third waits until one is released, then is served.
    let hold1 = std::net::TcpStream::connect(server.addr()).unwrap();
    let hold2 = std::net::TcpStream::connect(server.addr()).unwrap();
    let addr = server.addr();
    let third = std::thread::spawn(move || {
        request(addr, "GET", "/.well-known/agent-card.json", &[], b"").status
    });
    std::thread::sleep(Duration::from_millis(100));
    drop((hold1, hold2));
    assert_eq!(third.join().unwrap(), 200);
}

#[test]
fn a_structured_answer_that_misses_the_requested_schema_is_a_400_naming_the_field() {
    let server = Server::start();
    let asked = server.send(ALICE, "m-1", "elicit", json!({})).json()["task"].clone();
    assert_eq!(asked["status"]["state"], "TASK_STATE_INPUT_REQUIRED");
    let id = asked["id"].as_str().unwrap();
    let wrong = server.call(
        "POST",
        "/message:send",
        Some(ALICE),
        Some(json!({"message": {"messageId": "m-2", "role": "ROLE_USER", "taskId": id, "parts": [{"data": {"action": "accept", "content": {"color": "green"}}}]}})),
    );
    assert_eq!(
        (wrong.status, wrong.reason().as_str()),
        (400, "INVALID_ARGUMENT")
    );
    assert_eq!(
        wrong.json()["error"]["details"][1]["fieldViolations"][0]["field"],
        "message.parts[0].data.content.color"
    );
    let still = server
        .call("GET", &format!("/tasks/{id}"), Some(ALICE), None)
        .json();
    assert_eq!(
        still["status"]["state"], "TASK_STATE_INPUT_REQUIRED",
        "the Task is still waiting"
    );
    let right = server.call(
        "POST",
        "/message:send",
        Some(ALICE),
        Some(json!({"message": {"messageId": "m-3", "role": "ROLE_USER", "taskId": id, "parts": [{"data": {"action": "accept", "content": {"color": "blue"}}}]}})),
    );
    assert_eq!(
        right.json()["task"]["status"]["state"],
        "TASK_STATE_COMPLETED"
    );
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

#[test]
fn a_requested_context_id_is_bounded_like_every_identifier() {
    let server = Server::start();
    let long = "c".repeat(4000);
    let reply = server.send(ALICE, "m-long-context", "x", json!({"contextId": long}));
    assert_eq!(
        (reply.status, reply.reason().as_str()),
        (400, "INVALID_ARGUMENT")
    );
    assert_eq!(
        reply.json()["error"]["details"][1]["fieldViolations"][0]["field"],
        "message.contextId"
    );
}
