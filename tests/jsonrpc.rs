//! A2A's JSON-RPC 2.0 binding, black-box over a real loopback socket: every method, the
//! mapping of every error to its JSON-RPC code, auth on every method, JSON-RPC's own rules
//! (parse errors, invalid requests, unknown methods, batches, notifications), principals
//! kept apart, and what a JSON-RPC stream may hold (the stream pool, a reader that stops).

mod common;

use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::time::Duration;

use a2a_task_plane::plane::AlwaysTask;
use a2a_task_plane::record::TaskState;
use common::http::{open_stream, request, EventStream, Reply};
use common::server::*;
use serde_json::{json, Value};

/// Posts `body` (any JSON, or raw text) to the JSON-RPC URL (the interface URL itself).
fn post(server: &Server, token: Option<&str>, body: &str, extra: &[(&str, &str)]) -> Reply {
    let auth = token.map(|t| format!("Bearer {t}"));
    let mut headers: Vec<(&str, &str)> = vec![("Content-Type", "application/json")];
    if let Some(auth) = &auth {
        headers.push(("Authorization", auth));
    }
    headers.extend_from_slice(extra);
    request(server.addr(), "POST", "/", &headers, body.as_bytes())
}

fn call(method: &str, params: Value) -> String {
    json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}).to_string()
}

/// Calls `method` as `token` and returns the JSON-RPC response (HTTP 200 checked).
fn rpc(server: &Server, token: &str, method: &str, params: Value) -> Value {
    let reply = post(server, Some(token), &call(method, params), &[]);
    assert_eq!(
        reply.status,
        200,
        "{}",
        String::from_utf8_lossy(&reply.body)
    );
    let body = reply.json();
    assert_eq!(body["jsonrpc"], "2.0", "{body}");
    assert_eq!(body["id"], 1, "{body}");
    body
}

/// The result of a call that must succeed.
fn ok(server: &Server, token: &str, method: &str, params: Value) -> Value {
    let body = rpc(server, token, method, params);
    assert!(body.get("error").is_none(), "{body}");
    body["result"].clone()
}

/// The JSON-RPC code and A2A reason of a call that must fail.
fn refused(server: &Server, token: &str, method: &str, params: Value) -> (i64, String) {
    let body = rpc(server, token, method, params);
    code_and_reason(&body)
}

fn code_and_reason(body: &Value) -> (i64, String) {
    let error = &body["error"];
    assert!(body.get("result").is_none(), "{body}");
    assert!(
        error["message"].as_str().is_some_and(|m| !m.is_empty()),
        "{body}"
    );
    let reason = error["data"][0]["reason"]
        .as_str()
        .unwrap_or("")
        .to_string();
    if !reason.is_empty() {
        assert_eq!(error["data"][0]["domain"], "a2a-protocol.org", "{body}");
    }
    (error["code"].as_i64().unwrap(), reason)
}

fn text(message_id: &str, text: &str) -> Value {
    json!({"messageId": message_id, "role": "ROLE_USER", "parts": [{"text": text}]})
}

/// Opens a JSON-RPC stream method to be read event by event.
fn open(server: &Server, token: &str, method: &str, params: Value) -> EventStream {
    let auth = format!("Bearer {token}");
    let headers = [
        ("Content-Type", "application/json"),
        ("Accept", "text/event-stream"),
        ("Authorization", auth.as_str()),
    ];
    open_stream(
        server.addr(),
        "POST",
        "/",
        &headers,
        call(method, params).as_bytes(),
        Duration::from_secs(20),
    )
}

/// The `StreamResponse` each frame of a JSON-RPC stream carries (each frame checked to be a
/// JSON-RPC response to request 1).
fn results(events: Vec<Value>) -> Vec<Value> {
    events
        .into_iter()
        .map(|e| {
            assert_eq!((&e["jsonrpc"], &e["id"]), (&json!("2.0"), &json!(1)), "{e}");
            e["result"].clone()
        })
        .collect()
}

/// A Task the scripted agent keeps WORKING.
fn working_task(server: &Server, token: &str, message_id: &str) -> String {
    let (watch, activity) = server.plane.events().watch_activity();
    let params =
        json!({"message": text(message_id, "work"), "configuration": {"returnImmediately": true}});
    let id = ok(server, token, "SendMessage", params)["task"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    common::wait_for_activity(&activity, &format!("the agent starting {id}"), |a| {
        a.task_id == id && a.state == Some(TaskState::Working)
    });
    server.plane.events().unwatch(watch);
    id
}

fn completed_task(server: &Server, token: &str, message_id: &str) -> String {
    let task = &ok(
        server,
        token,
        "SendMessage",
        json!({"message": text(message_id, "hello")}),
    )["task"];
    assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED", "{task}");
    task["id"].as_str().unwrap().to_string()
}

#[test]
fn the_card_lists_json_rpc_beside_http_json_and_a2a_jsonrpc_0_turns_it_off() {
    let server = Server::start();
    let card = server
        .call("GET", "/.well-known/agent-card.json", None, None)
        .json();
    let interfaces = card["supportedInterfaces"].as_array().unwrap();
    let url = server.listener.url();
    assert_eq!(interfaces[0]["protocolBinding"], "HTTP+JSON");
    assert_eq!(
        interfaces[1],
        json!({"url": url, "protocolBinding": "JSONRPC", "protocolVersion": "1.0"})
    );
    let off = Server::start_with(Arc::new(AlwaysTask), |c| c.jsonrpc = false);
    let card = off
        .call("GET", "/.well-known/agent-card.json", None, None)
        .json();
    let bindings: Vec<&Value> = card["supportedInterfaces"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| &i["protocolBinding"])
        .collect();
    assert_eq!(bindings, [&json!("HTTP+JSON"), &json!("GRPC")]);
    let reply = post(&off, Some(ALICE), &call("GetTask", json!({"id": "t"})), &[]);
    assert_eq!(reply.status, 404);
}

#[test]
fn send_message_blocks_until_completed_and_get_task_honours_history_length() {
    let server = Server::start();
    let task = ok(
        &server,
        ALICE,
        "SendMessage",
        json!({"message": text("m-1", "hello")}),
    )["task"]
        .clone();
    assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED", "{task}");
    assert_eq!(task["artifacts"][0]["name"], "answer");
    let id = task["id"].as_str().unwrap();
    let got = ok(
        &server,
        ALICE,
        "GetTask",
        json!({"id": id, "historyLength": 1}),
    );
    assert_eq!(got["id"], id);
    assert_eq!(got["history"].as_array().map_or(0, Vec::len), 1, "{got}");
    let all = ok(&server, ALICE, "GetTask", json!({"id": id}));
    assert!(all["history"].as_array().unwrap().len() >= 2, "{all}");
    assert_eq!(
        refused(
            &server,
            ALICE,
            "GetTask",
            json!({"id": id, "historyLength": -1})
        )
        .0,
        -32602
    );
    assert_eq!(
        refused(&server, ALICE, "GetTask", json!({})),
        (-32602, "INVALID_ARGUMENT".into())
    );
}

#[test]
fn a_direct_message_is_the_result_of_send_message_and_the_one_event_of_its_stream() {
    let server = Server::start_with(Arc::new(Direct::default()), |_| {});
    let result = ok(
        &server,
        ALICE,
        "SendMessage",
        json!({"message": text("d-1", "ping")}),
    );
    assert!(
        result["message"]["parts"][0]["text"]
            .as_str()
            .unwrap()
            .starts_with("pong"),
        "{result}"
    );
    let events = results(
        open(
            &server,
            ALICE,
            "SendStreamingMessage",
            json!({"message": text("d-2", "ping")}),
        )
        .rest(),
    );
    assert_eq!(events.len(), 1, "{events:?}");
    assert!(events[0]["message"].is_object(), "{events:?}");
}

#[test]
fn send_streaming_message_frames_each_event_as_a_json_rpc_response_until_the_task_settles() {
    let server = Server::start();
    let mut stream = open(
        &server,
        ALICE,
        "SendStreamingMessage",
        json!({"message": text("s-1", "gated")}),
    );
    assert_eq!(stream.status, 200);
    assert_eq!(stream.header("content-type"), Some("text/event-stream"));
    let first = stream.next_event().expect("the Task first");
    server.open_gate();
    let events = results(std::iter::once(first).chain(stream.rest()).collect());
    assert_eq!(
        events[0]["task"]["status"]["state"], "TASK_STATE_SUBMITTED",
        "{events:?}"
    );
    let last = events.last().unwrap();
    assert_eq!(
        last["statusUpdate"]["status"]["state"], "TASK_STATE_COMPLETED",
        "{events:?}"
    );
    assert!(events
        .iter()
        .any(|e| e["artifactUpdate"]["artifact"]["name"] == "answer"));
}

#[test]
fn list_tasks_pages_with_signed_tokens_and_checks_page_size() {
    let server = Server::start();
    for n in 0..3 {
        completed_task(&server, ALICE, &format!("l-{n}"));
    }
    let first = ok(&server, ALICE, "ListTasks", json!({"pageSize": 2}));
    assert_eq!(first["tasks"].as_array().unwrap().len(), 2, "{first}");
    assert_eq!(
        (first["pageSize"].as_i64(), first["totalSize"].as_i64()),
        (Some(2), Some(3))
    );
    assert!(
        first["tasks"][0].get("artifacts").is_none(),
        "artifacts only when asked"
    );
    let token = first["nextPageToken"].as_str().unwrap();
    let second = ok(
        &server,
        ALICE,
        "ListTasks",
        json!({"pageSize": 2, "pageToken": token, "includeArtifacts": true}),
    );
    assert_eq!(second["tasks"].as_array().unwrap().len(), 1, "{second}");
    assert_eq!(second["nextPageToken"], "");
    assert!(second["tasks"][0]["artifacts"].is_array());
    for size in [0, 101] {
        assert_eq!(
            refused(&server, ALICE, "ListTasks", json!({"pageSize": size})),
            (-32602, "INVALID_ARGUMENT".into())
        );
    }
    // A token is the caller's own: bob cannot page alice's listing with it.
    assert_eq!(
        refused(
            &server,
            BOB,
            "ListTasks",
            json!({"pageSize": 2, "pageToken": token})
        )
        .0,
        -32602
    );
    let working = ok(
        &server,
        ALICE,
        "ListTasks",
        json!({"status": "TASK_STATE_WORKING"}),
    );
    assert_eq!(working["tasks"].as_array().unwrap().len(), 0, "{working}");
}

#[test]
fn an_input_required_task_is_continued_by_send_message_with_its_task_id() {
    let server = Server::start();
    let task = ok(
        &server,
        ALICE,
        "SendMessage",
        json!({"message": text("q-1", "ask what colour?")}),
    )["task"]
        .clone();
    assert_eq!(
        task["status"]["state"], "TASK_STATE_INPUT_REQUIRED",
        "{task}"
    );
    let mut answer = text("q-2", "blue");
    answer["taskId"] = task["id"].clone();
    answer["contextId"] = task["contextId"].clone();
    let done = ok(&server, ALICE, "SendMessage", json!({"message": answer}))["task"].clone();
    assert_eq!(done["id"], task["id"]);
    assert_eq!(done["status"]["state"], "TASK_STATE_COMPLETED", "{done}");
}

#[test]
fn subscribe_then_cancel_ends_the_stream_and_terminal_or_unknown_tasks_are_refused() {
    let server = Server::start();
    let id = working_task(&server, ALICE, "c-1");
    let mut stream = open(&server, ALICE, "SubscribeToTask", json!({"id": id}));
    assert_eq!(stream.status, 200);
    let first = stream.next_event().expect("the snapshot");
    assert_eq!(
        first["result"]["task"]["status"]["state"], "TASK_STATE_WORKING",
        "{first}"
    );
    let canceled = ok(&server, ALICE, "CancelTask", json!({"id": id}));
    assert_eq!(canceled["status"]["state"], "TASK_STATE_CANCELED");
    let rest = results(stream.rest());
    assert_eq!(
        rest.last().unwrap()["statusUpdate"]["status"]["state"],
        "TASK_STATE_CANCELED"
    );
    // A terminal Task: not cancelable, nothing to subscribe to.
    assert_eq!(
        refused(&server, ALICE, "CancelTask", json!({"id": id})),
        (-32002, "TASK_NOT_CANCELABLE".into())
    );
    assert_eq!(
        refused(&server, ALICE, "SubscribeToTask", json!({"id": id})),
        (-32004, "UNSUPPORTED_OPERATION".into())
    );
    for method in ["GetTask", "CancelTask", "SubscribeToTask"] {
        assert_eq!(
            refused(&server, ALICE, method, json!({"id": "no-such-task"})),
            (-32001, "TASK_NOT_FOUND".into()),
            "{method}"
        );
    }
    let body = rpc(&server, ALICE, "GetTask", json!({"id": "no-such-task"}));
    assert_eq!(
        body["error"]["data"][0]["metadata"]["taskId"],
        "no-such-task"
    );
}

#[test]
fn a_reused_message_id_returns_the_prior_task_or_the_conflict() {
    let server = Server::start();
    let first = ok(
        &server,
        ALICE,
        "SendMessage",
        json!({"message": text("r-1", "hello")}),
    );
    let again = ok(
        &server,
        ALICE,
        "SendMessage",
        json!({"message": text("r-1", "hello")}),
    );
    assert_eq!(again["task"]["id"], first["task"]["id"]);
    assert_eq!(
        refused(
            &server,
            ALICE,
            "SendMessage",
            json!({"message": text("r-1", "something else")})
        ),
        (-32602, "DUPLICATE_MESSAGE_ID".into())
    );
    // Another caller's messageId is theirs alone.
    let bobs = ok(
        &server,
        BOB,
        "SendMessage",
        json!({"message": text("r-1", "hello")}),
    );
    assert_ne!(bobs["task"]["id"], first["task"]["id"]);
}

#[test]
fn every_a2a_error_has_its_json_rpc_code() {
    let server = Server::start();
    let two = post(
        &server,
        Some(ALICE),
        &call("GetTask", json!({"id": "t"})),
        &[("A2A-Version", "2.0")],
    );
    assert_eq!(two.status, 200);
    let body = two.json();
    assert_eq!(
        body["id"], 1,
        "the version error answers the request: {body}"
    );
    assert_eq!(
        code_and_reason(&body),
        (-32009, "VERSION_NOT_SUPPORTED".into())
    );
    for method in [
        "CreateTaskPushNotificationConfig",
        "GetTaskPushNotificationConfig",
        "ListTaskPushNotificationConfigs",
        "DeleteTaskPushNotificationConfig",
    ] {
        assert_eq!(
            refused(&server, ALICE, method, json!({"taskId": "t"})),
            (-32003, "PUSH_NOTIFICATION_NOT_SUPPORTED".into()),
            "{method}"
        );
    }
    let push_in_send = json!({"message": text("p-1", "hi"), "configuration": {"taskPushNotificationConfig": {"url": "https://example.com/hook"}}});
    assert_eq!(
        refused(&server, ALICE, "SendMessage", push_in_send).0,
        -32003
    );
    assert_eq!(
        refused(&server, ALICE, "GetExtendedAgentCard", json!({})),
        (-32007, "EXTENDED_AGENT_CARD_NOT_CONFIGURED".into())
    );
    let bad_part = json!({"message": {"messageId": "b-1", "role": "ROLE_USER", "parts": []}});
    let body = rpc(&server, ALICE, "SendMessage", bad_part);
    assert_eq!(code_and_reason(&body), (-32602, "INVALID_ARGUMENT".into()));
    assert_eq!(
        body["error"]["data"][1]["@type"], "type.googleapis.com/google.rpc.BadRequest",
        "{body}"
    );
    let auth = format!("Bearer {ALICE}");
    let headers = [
        ("Content-Type", "text/plain"),
        ("Authorization", auth.as_str()),
    ];
    let wrong_type = request(
        server.addr(),
        "POST",
        "/",
        &headers,
        call("GetTask", json!({"id": "t"})).as_bytes(),
    );
    assert_eq!(wrong_type.status, 415);
    assert_eq!(
        code_and_reason(&wrong_type.json()),
        (-32005, "CONTENT_TYPE_NOT_SUPPORTED".into())
    );
}

#[test]
fn parse_errors_invalid_requests_unknown_methods_batches_and_notifications_follow_json_rpc_2_0() {
    let server = Server::start();
    let answer = |body: &str| {
        let reply = post(&server, Some(ALICE), body, &[]);
        assert_eq!(reply.status, 200, "{body}");
        let json = reply.json();
        (json["id"].clone(), json["error"]["code"].as_i64().unwrap())
    };
    assert_eq!(answer("{not json"), (Value::Null, -32700));
    assert_eq!(
        answer(r#"{"jsonrpc": "1.0", "id": "a", "method": "GetTask"}"#),
        (json!("a"), -32600)
    );
    assert_eq!(
        answer(r#"{"jsonrpc": "2.0", "id": {}, "method": "GetTask"}"#),
        (Value::Null, -32600)
    );
    assert_eq!(
        answer(r#"{"jsonrpc": "2.0", "id": 3, "method": "tasks/get"}"#),
        (json!(3), -32601)
    );
    assert_eq!(
        answer(r#"{"jsonrpc": "2.0", "id": 4, "method": "GetTask", "params": [1]}"#),
        (json!(4), -32602)
    );
    assert_eq!(
        answer(&format!("[{}]", call("GetTask", json!({"id": "t"})))),
        (Value::Null, -32600)
    );
    assert_eq!(answer("[]"), (Value::Null, -32600));
    // A notification runs, and is not answered.
    let note = json!({"jsonrpc": "2.0", "method": "SendMessage", "params": {"message": text("n-1", "hello")}});
    let reply = post(&server, Some(ALICE), &note.to_string(), &[]);
    assert_eq!((reply.status, reply.body.len()), (204, 0));
    let listed = ok(&server, ALICE, "ListTasks", json!({}));
    assert_eq!(listed["tasks"].as_array().unwrap().len(), 1, "{listed}");
}

#[test]
fn every_method_asks_for_a_bearer_token() {
    let server = Server::start();
    for method in [
        "SendMessage",
        "SendStreamingMessage",
        "GetTask",
        "ListTasks",
        "CancelTask",
        "SubscribeToTask",
        "GetExtendedAgentCard",
        "CreateTaskPushNotificationConfig",
        "NoSuchMethod",
    ] {
        let body = call(method, json!({"id": "t", "message": text("a-1", "hi")}));
        for token in [None, Some("not-a-known-token-at-all")] {
            let reply = post(&server, token, &body, &[]);
            assert_eq!(reply.status, 401, "{method}");
            assert_eq!(
                reply.header("www-authenticate"),
                Some("Bearer realm=\"a2a\"")
            );
        }
    }
    assert_eq!(
        ok(&server, ALICE, "ListTasks", json!({}))["totalSize"],
        0,
        "nothing was accepted"
    );
}

#[test]
fn another_callers_task_is_not_found_listed_cancelled_subscribed_to_or_continued() {
    let server = Server::start();
    let id = working_task(&server, ALICE, "i-1");
    for method in ["GetTask", "CancelTask", "SubscribeToTask"] {
        assert_eq!(
            refused(&server, BOB, method, json!({"id": id})),
            (-32001, "TASK_NOT_FOUND".into()),
            "{method}"
        );
    }
    assert_eq!(ok(&server, BOB, "ListTasks", json!({}))["totalSize"], 0);
    let mut continuing = text("i-2", "more");
    continuing["taskId"] = json!(id);
    assert_eq!(
        refused(&server, BOB, "SendMessage", json!({"message": continuing})).0,
        -32001
    );
    let stream = post(
        &server,
        Some(BOB),
        &call("SendStreamingMessage", json!({"message": continuing})),
        &[],
    );
    assert_eq!(code_and_reason(&stream.json()).0, -32001);
    assert_eq!(
        ok(&server, ALICE, "GetTask", json!({"id": id}))["status"]["state"],
        "TASK_STATE_WORKING"
    );
}

/// Opens `SubscribeToTask` on a raw socket and reads only the status code (the socket stays
/// open, and is not read further).
fn open_subscription(addr: SocketAddr, token: &str, task_id: &str) -> (u16, TcpStream) {
    let body = call("SubscribeToTask", json!({"id": task_id}));
    common::http::open_unread(
        addr,
        &format!(
            "POST / HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {token}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        ),
    )
}

#[test]
fn json_rpc_streams_take_places_in_the_stream_pool_and_a_full_pool_is_resource_exhausted() {
    let server = Server::start_with(Arc::new(AlwaysTask), |c| {
        c.max_streams = 3;
        c.max_streams_per_principal = 2;
    });
    let alices = working_task(&server, ALICE, "p-a");
    let bobs = working_task(&server, BOB, "p-b");
    let mut held = Vec::new();
    for _ in 0..2 {
        let (status, stream) = open_subscription(server.addr(), ALICE, &alices);
        assert_eq!(status, 200);
        held.push(stream);
    }
    let over = post(
        &server,
        Some(ALICE),
        &call("SubscribeToTask", json!({"id": alices})),
        &[],
    );
    assert_eq!(over.status, 429);
    assert_eq!(
        code_and_reason(&over.json()),
        (-32000, "RESOURCE_EXHAUSTED".into())
    );
    let (status, stream) = open_subscription(server.addr(), BOB, &bobs);
    assert_eq!(status, 200);
    held.push(stream);
    let full = post(
        &server,
        Some(BOB),
        &call(
            "SendStreamingMessage",
            json!({"message": text("p-b2", "hi")}),
        ),
        &[],
    );
    assert_eq!(full.status, 429);
    assert!(full.json()["error"]["message"]
        .as_str()
        .unwrap()
        .contains("A2A_MAX_STREAMS"));
    assert_eq!(
        ok(&server, BOB, "ListTasks", json!({}))["totalSize"],
        1,
        "a refused stream accepted nothing"
    );
}

#[test]
fn a_json_rpc_stream_reader_that_stops_reading_is_dropped_and_frees_its_place() {
    let server = Server::start_with(Arc::new(AlwaysTask), |c| {
        c.write_timeout_ms = 300;
        c.max_streams_per_principal = 1;
    });
    let id = working_task(&server, ALICE, "w-1");
    let (status, _never_read) = open_subscription(server.addr(), ALICE, &id);
    assert_eq!(status, 200);
    assert_eq!(open_subscription(server.addr(), ALICE, &id).0, 429);
    for n in 0..200 {
        server
            .plane
            .record_artifact(&id, common::big_artifact(n))
            .unwrap();
    }
    common::http::wait_for_a_free_stream_place(|| open_subscription(server.addr(), ALICE, &id));
}
