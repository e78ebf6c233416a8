//! `POST /message:send`: blocking and non-blocking sends, continuation by explicit `taskId`,
//! direct Messages, duplicates, foreign contexts, and the checks on what a send carries.

use std::sync::Arc;
use std::time::Duration;

use a2a_task_plane::plane::AlwaysTask;
use serde_json::json;

use crate::common::server::*;

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
fn a_blocking_answer_holds_the_artifacts_recorded_before_completion_and_with_it() {
    // The writer answers a waiter without reading back the artifacts of the completion
    // when the Task had none before; with one recorded earlier, it reads them all.
    let server = Server::start();
    for (n, (text, expected)) in [
        ("gated", vec!["half way", "all done"]),
        ("plain", vec!["echo: plain"]),
    ]
    .into_iter()
    .enumerate()
    {
        if text == "gated" {
            server.open_gate();
        }
        let reply = server.send(ALICE, &format!("m-{n}"), text, json!({}));
        let task = &reply.json()["task"];
        assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED", "{task}");
        let texts: Vec<&str> = task["artifacts"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a["parts"][0]["text"].as_str().unwrap())
            .collect();
        assert_eq!(texts, expected);
        // What a read returns is the same Task.
        let id = task["id"].as_str().unwrap();
        let read = server.call("GET", &format!("/tasks/{id}"), Some(ALICE), None);
        assert_eq!(&read.json(), task);
    }
}

#[test]
fn numbers_an_agent_records_are_answered_and_read_back_digit_for_digit() {
    // 17 significant digits: serde_json's default parser reads these back one step off in
    // the last digit; the store's JSON must read back as the numbers it was written from.
    let server = Server::start();
    let reply = server.send(ALICE, "m-1", "measure", json!({}));
    let body = String::from_utf8_lossy(&reply.body).to_string();
    assert!(body.contains("51.248178375505404"), "{body}");
    assert!(body.contains("-93.31137037688033"), "{body}");
    let task = &reply.json()["task"];
    let id = task["id"].as_str().unwrap();
    let read = server.call("GET", &format!("/tasks/{id}"), Some(ALICE), None);
    let read_body = String::from_utf8_lossy(&read.body).to_string();
    assert!(read_body.contains("51.248178375505404"), "{read_body}");
    assert!(read_body.contains("-93.31137037688033"), "{read_body}");
    assert_eq!(&read.json(), task);
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
fn a_return_immediately_answer_is_the_task_a_read_right_after_its_acceptance_returns() {
    // The answer is made from the Task the acceptance created, not read back: it must be
    // what a read returns (nothing here moves the Task on), history length and all.
    let server = Server::start_with(Arc::new(AlwaysTask), |_| {});
    for (n, config) in [
        json!({"returnImmediately": true}),
        json!({"returnImmediately": true, "historyLength": 0}),
        json!({"returnImmediately": true, "historyLength": 1}),
    ]
    .into_iter()
    .enumerate()
    {
        let answered = server.call(
            "POST",
            "/message:send",
            Some(ALICE),
            Some(json!({"message": {"messageId": format!("m-{n}"), "role": "ROLE_USER", "parts": [{"text": "hold"}], "metadata": {"k": n}}, "configuration": config})),
        );
        assert_eq!(answered.status, 200);
        let task = answered.json()["task"].clone();
        let id = task["id"].as_str().unwrap();
        let query = match config.get("historyLength") {
            Some(h) => format!("?historyLength={h}"),
            None => String::new(),
        };
        let read = server.call("GET", &format!("/tasks/{id}{query}"), Some(ALICE), None);
        assert_eq!(read.json(), task, "config {config}");
    }
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
    let server = Server::start_with(Arc::new(Direct::default()), |_| {});
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
fn the_executor_is_asked_only_for_new_work() {
    let executor = Arc::new(Direct::default());
    let server = Server::start_with(executor.clone(), |_| {});
    let asked = || executor.asked.load(std::sync::atomic::Ordering::SeqCst);
    let ping = server.send(ALICE, "p-1", "ping", json!({}));
    assert_eq!(ping.json()["message"]["role"], "ROLE_AGENT");
    assert_eq!(asked(), 1);
    // A duplicate gets its prior outcome without asking again.
    server.send(ALICE, "p-1", "ping", json!({}));
    assert_eq!(asked(), 1, "a duplicate is not new work");
    // A message the executor declines is a Task.
    let ask = server.send(ALICE, "m-1", "ask", json!({}));
    let task = &ask.json()["task"];
    assert_eq!(task["status"]["state"], "TASK_STATE_INPUT_REQUIRED");
    assert_eq!(asked(), 2);
    // An explicit taskId continues that Task, even with a text the executor would answer.
    let answer = server.send(ALICE, "m-2", "ping", json!({"taskId": task["id"]}));
    assert_eq!(
        answer.json()["task"]["id"],
        task["id"],
        "{:?}",
        answer.json()
    );
    assert_eq!(asked(), 2, "a continuation is not new work");
}

/// Each misbehaviour of an executor makes the message a Task that the agent then works:
/// nothing is lost or refused.
fn misbehaving_executor_falls_back_to_a_task(executor: Misbehaving) {
    let server = Server::start_with(Arc::new(executor), |c| c.executor_timeout_ms = 200);
    let reply = server.send(ALICE, "m-1", "hello", json!({}));
    assert_eq!(
        reply.status,
        200,
        "{}",
        String::from_utf8_lossy(&reply.body)
    );
    let task = &reply.json()["task"];
    assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED");
    assert_eq!(task["history"][0]["parts"][0]["text"], "hello");
    // Its duplicate is the same Task.
    let again = server.send(ALICE, "m-1", "hello", json!({}));
    assert_eq!(again.json()["task"]["id"], task["id"]);
}

#[test]
fn an_executor_that_does_not_answer_in_time_makes_the_message_a_task() {
    misbehaving_executor_falls_back_to_a_task(Misbehaving::Silent);
}

#[test]
fn an_executor_that_fails_or_panics_makes_the_message_a_task() {
    misbehaving_executor_falls_back_to_a_task(Misbehaving::Failing);
    misbehaving_executor_falls_back_to_a_task(Misbehaving::Panicking);
}

#[test]
fn an_executor_reply_that_is_not_an_agent_message_makes_the_message_a_task() {
    misbehaving_executor_falls_back_to_a_task(Misbehaving::UserReply);
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

/// A blocking send answers with the Task its settling update carried (read by the writer
/// in the commit that settled it); that answer is exactly what a read of the Task returns
/// right after, for every history length and for a continued Task.
#[test]
fn a_blocking_send_answers_with_what_a_read_of_the_settled_task_returns() {
    let server = Server::start();
    let get = |id: &str, history: Option<u32>| {
        let path = match history {
            Some(n) => format!("/tasks/{id}?historyLength={n}"),
            None => format!("/tasks/{id}"),
        };
        let read = server.call("GET", &path, Some(ALICE), None);
        assert_eq!(read.status, 200);
        read.json()
    };
    let send = |id: &str, text: &str, extra: serde_json::Value, history: Option<u32>| {
        let mut message = json!({"messageId": id, "role": "ROLE_USER", "parts": [{"text": text}]});
        if let Some(extra) = extra.as_object() {
            for (k, v) in extra {
                message[k] = v.clone();
            }
        }
        let mut body = json!({ "message": message });
        if let Some(n) = history {
            body["configuration"] = json!({ "historyLength": n });
        }
        let reply = server.call("POST", "/message:send", Some(ALICE), Some(body));
        assert_eq!(
            reply.status,
            200,
            "{}",
            String::from_utf8_lossy(&reply.body)
        );
        reply.json()["task"].clone()
    };
    for (n, history) in [None, Some(0), Some(1), Some(5)].into_iter().enumerate() {
        let done = send(&format!("m-{n}"), "summarise", json!({}), history);
        assert_eq!(done["status"]["state"], "TASK_STATE_COMPLETED");
        assert_eq!(
            done,
            get(done["id"].as_str().unwrap(), history),
            "history {history:?}"
        );
    }
    // Interrupted, then continued to completion: four history messages.
    let asked = send("a-1", "ask", json!({}), None);
    assert_eq!(asked["status"]["state"], "TASK_STATE_INPUT_REQUIRED");
    let id = asked["id"].as_str().unwrap().to_string();
    assert_eq!(asked, get(&id, None));
    let continued = json!({"taskId": id, "contextId": asked["contextId"]});
    let done = send("a-2", "the blue one", continued, Some(3));
    assert_eq!(done["status"]["state"], "TASK_STATE_COMPLETED");
    assert_eq!(done["history"].as_array().unwrap().len(), 3);
    assert_eq!(done, get(&id, Some(3)));
    assert_eq!(get(&id, None)["history"].as_array().unwrap().len(), 4);
}
