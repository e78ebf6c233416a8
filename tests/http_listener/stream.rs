//! `POST /message:stream`: the Task, then its live updates, until it settles; a direct
//! Message is one event.

use std::sync::Arc;
use std::time::Duration;

use a2a_task_plane::plane::AlwaysTask;

use serde_json::json;

use crate::common::server::*;

#[test]
fn message_stream_sends_the_task_then_live_updates_and_closes_when_settled() {
    let server = Server::start();
    let body =
        json!({"message": {"messageId": "s-1", "role": "ROLE_USER", "parts": [{"text": "gated"}]}});
    let mut stream = server.stream("POST", "/message:stream", ALICE, Some(body));
    assert_eq!(stream.status, 200);
    assert_eq!(stream.header("content-type"), Some("text/event-stream"));
    let first = stream.next_event().expect("the Task first");
    assert_eq!(
        first["task"]["status"]["state"], "TASK_STATE_SUBMITTED",
        "{first}"
    );
    // The agent works the Task only once the client holds its snapshot.
    server.open_gate();
    let events: Vec<_> = std::iter::once(first).chain(stream.rest()).collect();
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
    let server = Server::start_with(Arc::new(Direct::default()), |_| {});
    let body =
        json!({"message": {"messageId": "s-1", "role": "ROLE_USER", "parts": [{"text": "ping"}]}});
    let events = server
        .call("POST", "/message:stream", Some(ALICE), Some(body))
        .events();
    assert_eq!(events.len(), 1);
    assert_eq!(events[0]["message"]["role"], "ROLE_AGENT");
}

/// A new Task's stream starts from the Task as its acceptance created it (no read back):
/// that first frame is exactly what a read of the Task returns then, for every history
/// length, and the updates after it are the ones a read would show next.
#[test]
fn a_new_tasks_stream_starts_with_what_a_read_of_the_task_returns() {
    let server = Server::start();
    for (n, history) in [None, Some(0u32), Some(1)].into_iter().enumerate() {
        let mut body = json!({"message": {"messageId": format!("h-{n}"), "role": "ROLE_USER",
            "parts": [{"text": "hold"}], "metadata": {"n": n}}});
        if let Some(h) = history {
            body["configuration"] = json!({ "historyLength": h });
        }
        let mut stream = server.stream("POST", "/message:stream", ALICE, Some(body));
        let first = stream.next_event().expect("the Task first")["task"].clone();
        let path = match history {
            Some(h) => format!("/tasks/{}?historyLength={h}", first["id"].as_str().unwrap()),
            None => format!("/tasks/{}", first["id"].as_str().unwrap()),
        };
        let read = server.call("GET", &path, Some(ALICE), None);
        assert_eq!(first, read.json(), "history {history:?}");
    }
    // And one the agent settles: the frames after the first bring it to what a read says.
    let body = json!({"message": {"messageId": "w-1", "role": "ROLE_USER", "parts": [{"text": "summarise"}]}});
    let events = server
        .call("POST", "/message:stream", Some(ALICE), Some(body))
        .events();
    let id = events[0]["task"]["id"].as_str().unwrap();
    let last = events.last().unwrap();
    let read = server
        .call("GET", &format!("/tasks/{id}"), Some(ALICE), None)
        .json();
    assert_eq!(last["statusUpdate"]["status"], read["status"]);
    let artifacts: Vec<_> = events
        .iter()
        .filter_map(|e| e.get("artifactUpdate").map(|a| a["artifact"].clone()))
        .collect();
    assert_eq!(serde_json::Value::from(artifacts), read["artifacts"]);
}

#[test]
fn a_new_tasks_first_stream_frame_waits_for_its_first_update_at_most_the_coalescing_window() {
    // Held for the Task's first update: the snapshot cannot arrive before the agent acts,
    // and then arrives with the updates, in order.
    let server = Server::start_with(Arc::new(AlwaysTask), |c| c.stream_coalesce_ms = 600);
    let body =
        json!({"message": {"messageId": "s-1", "role": "ROLE_USER", "parts": [{"text": "gated"}]}});
    let started = std::time::Instant::now();
    let gate_after = Duration::from_millis(200);
    std::thread::scope(|scope| {
        scope.spawn(|| {
            std::thread::sleep(gate_after);
            server.open_gate();
        });
        let mut stream = server.stream("POST", "/message:stream", ALICE, Some(body));
        let first = stream.next_event().expect("the Task first");
        assert!(
            started.elapsed() >= gate_after,
            "the snapshot left before the Task moved"
        );
        assert_eq!(
            first["task"]["status"]["state"], "TASK_STATE_SUBMITTED",
            "{first}"
        );
        let states: Vec<_> = stream
            .rest()
            .iter()
            .filter_map(|e| {
                e["statusUpdate"]["status"]["state"]
                    .as_str()
                    .map(str::to_string)
            })
            .collect();
        assert_eq!(states, ["TASK_STATE_WORKING", "TASK_STATE_COMPLETED"]);
    });
    // A Task that does not move: the snapshot goes out when the window ends, not later
    // than the Task's first update would have let it. Holds that start close together
    // share one timer, so this one (started within the first's window) waits at least
    // half of it.
    let started = std::time::Instant::now();
    let body =
        json!({"message": {"messageId": "s-2", "role": "ROLE_USER", "parts": [{"text": "hold"}]}});
    let mut stream = server.stream("POST", "/message:stream", ALICE, Some(body));
    let first = stream.next_event().expect("the Task first");
    assert_eq!(
        first["task"]["status"]["state"], "TASK_STATE_SUBMITTED",
        "{first}"
    );
    let held = started.elapsed();
    assert!(
        held >= Duration::from_millis(300),
        "the window was not kept"
    );
    // At most the window (600 ms from the wave's start, ~200 ms before this request);
    // the margin is for a loaded machine.
    assert!(
        held < Duration::from_secs(5),
        "held {held:?}, past its window"
    );
}

#[test]
fn a_stream_its_first_piece_ends_goes_out_whole_with_its_length_and_a_live_one_chunked() {
    let server = Server::start();
    let body =
        json!({"message": {"messageId": "w-1", "role": "ROLE_USER", "parts": [{"text": "hi"}]}});
    let sent = server.call("POST", "/message:send", Some(ALICE), Some(body.clone()));
    assert_eq!(sent.status, 200);
    // The same message again: its Task is completed, so the stream is its snapshot alone,
    // one body of known length (no chunked framing, nothing to wait for).
    let mut replay = server.stream("POST", "/message:stream", ALICE, Some(body));
    assert_eq!(replay.status, 200);
    assert_eq!(replay.header("transfer-encoding"), None);
    assert!(replay.header("content-length").is_some());
    assert_eq!(replay.header("content-type"), Some("text/event-stream"));
    let only = replay.next_event().expect("the Task");
    assert_eq!(
        only["task"]["status"]["state"], "TASK_STATE_COMPLETED",
        "{only}"
    );
    assert_eq!(replay.next_event(), None);
    // A Task that goes on (the agent starts work and stops): frames as they come, chunked.
    let body =
        json!({"message": {"messageId": "w-2", "role": "ROLE_USER", "parts": [{"text": "work"}]}});
    let mut live = server.stream("POST", "/message:stream", ALICE, Some(body));
    assert_eq!(live.header("transfer-encoding"), Some("chunked"));
    assert_eq!(live.header("content-length"), None);
    let first = live.next_event().expect("the Task");
    assert_eq!(
        first["task"]["status"]["state"], "TASK_STATE_SUBMITTED",
        "{first}"
    );
}
