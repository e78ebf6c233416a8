//! What an operator sees of a running listener over its real socket: `GET /healthz` (no
//! credential, no caller data), `GET /metrics` (Prometheus text, with a credential), every
//! binding's requests counted, and a credentials reload taking effect on the next request.

mod common;

use a2a_task_plane::wake::WakeQueue;
use common::http::request;
use common::server::*;
use serde_json::json;

fn health(server: &Server) -> serde_json::Value {
    let reply = request(server.addr(), "GET", "/healthz", &[], b"");
    assert_eq!(reply.status, 200);
    reply.json()
}

fn metrics(server: &Server) -> String {
    let reply = server.call("GET", "/metrics", Some(ALICE), None);
    let text = String::from_utf8_lossy(&reply.body).to_string();
    assert_eq!(reply.status, 200, "{text}");
    assert!(reply
        .header("content-type")
        .unwrap()
        .starts_with("text/plain"));
    text
}

#[test]
fn healthz_tells_ok_held_or_degraded_without_a_credential_or_caller_data() {
    let server = Server::start();
    let body = health(&server);
    assert_eq!(body["status"], "ok", "{body}");
    assert_eq!(
        body["queue"],
        serde_json::Value::Null,
        "no wake queue runs yet"
    );
    assert_eq!(body["store"]["state"], "open");
    assert!(body["store"]["bytes"].as_u64().unwrap() > 0);

    let queue = WakeQueue::start(server.plane.clone()).unwrap();
    assert_eq!(health(&server)["status"], "ok");
    server.send(ALICE, "m-held", "hold private words", json!({}));
    queue.hold(Some(
        "no API key for provider anthropic: set ANTHROPIC_API_KEY".into(),
    ));
    let body = health(&server);
    assert_eq!(body["status"], "held");
    assert_eq!(body["held"], "credentials");
    assert_eq!(body["queue"]["held"], true);
    let text = body.to_string();
    assert!(
        !text.contains("ANTHROPIC") && !text.contains("private words"),
        "{text}"
    );

    server
        .plane
        .metrics()
        .set_problem("workflow_manifest", Some("bad file".into()));
    assert_eq!(health(&server)["status"], "degraded");
    assert_eq!(health(&server)["problems"], json!(["workflow_manifest"]));
    server
        .plane
        .metrics()
        .set_problem("workflow_manifest", None);
    assert_eq!(health(&server)["status"], "held");
    queue.close();
    assert_eq!(health(&server)["queue"], serde_json::Value::Null, "closed");
    server.plane.close();
    let body = health(&server);
    assert_eq!(body["status"], "degraded", "the store closed");
    assert_eq!(body["store"]["state"], "closed");
}

#[test]
fn metrics_need_a_credential_and_count_messages_tasks_and_every_bindings_requests() {
    let server = Server::start();
    let reply = server.call("GET", "/metrics", None, None);
    assert_eq!(reply.status, 401);
    assert!(reply.header("www-authenticate").is_some());

    assert_eq!(server.send(ALICE, "m-1", "hello", json!({})).status, 200);
    assert_eq!(server.send(ALICE, "m-1", "hello", json!({})).status, 200);
    let rpc = json!({"jsonrpc": "2.0", "id": 1, "method": "ListTasks", "params": {}});
    assert_eq!(server.call("POST", "/", Some(ALICE), Some(rpc)).status, 200);
    assert_eq!(
        server.call("GET", "/nowhere", Some(ALICE), None).status,
        404
    );

    let text = metrics(&server);
    for line in [
        "a2a_messages_total{outcome=\"accepted\"} 1",
        "a2a_messages_total{outcome=\"duplicate\"} 1",
        "a2a_tasks_settled_total{state=\"completed\"} 1",
        "a2a_requests_total{binding=\"http_json\",route=\"send\",status=\"200\"} 2",
        "a2a_requests_total{binding=\"jsonrpc\",route=\"jsonrpc\",status=\"200\"} 1",
        "a2a_requests_total{binding=\"http\",route=\"none\",status=\"404\"} 1",
        "a2a_requests_total{binding=\"http\",route=\"metrics\",status=\"401\"} 1",
        "a2a_request_duration_seconds_count{binding=\"http_json\",route=\"send\"} 2",
        "a2a_live_streams 0",
    ] {
        assert!(text.contains(line), "missing {line} in\n{text}");
    }
    assert!(!text.contains("hello"), "no caller data");
}

#[test]
fn a_credentials_reload_takes_effect_on_the_next_request() {
    let server = Server::start();
    let path = server._tmp.path().join("credentials.json");
    let carol = "carol-token-0123456789abcdef";
    std::fs::write(
        &path,
        json!({"credentials": [{"token": carol, "principal": "carol"}]}).to_string(),
    )
    .unwrap();
    assert_eq!(server.call("GET", "/tasks", Some(ALICE), None).status, 200);
    server.listener.handler().credentials.reload().unwrap();
    assert_eq!(server.call("GET", "/tasks", Some(ALICE), None).status, 401);
    assert_eq!(server.call("GET", "/tasks", Some(carol), None).status, 200);
    std::fs::write(&path, "[]").unwrap();
    assert!(server.listener.handler().credentials.reload().is_err());
    assert_eq!(
        server.call("GET", "/tasks", Some(carol), None).status,
        200,
        "kept"
    );
}
