//! What the wake queue tells a caller in its Task's status message while the Task does not
//! progress: a failed turn and its retry, a held queue, a Task failed at the delivery cap
//! (with the last error the agent met and advice that is true for it).

mod common;

use std::time::Duration;

use a2a_task_plane::plane::TaskPlane;
use a2a_task_plane::record::TaskState;
use a2a_task_plane::tools::manifest::Outputs;
use a2a_task_plane::tools::AgentTools;
use a2a_task_plane::wake::{QueueOptions, TurnOutcome, WakeQueue};
use common::wake::*;
use common::*;
use serde_json::json;

fn status_text(plane: &TaskPlane, task: &str) -> (TaskState, String) {
    let t = plane.task(task, Some(0), false).unwrap().unwrap();
    (
        t.state,
        t.status_message.map(|m| m.text()).unwrap_or_default(),
    )
}

#[test]
fn a_failed_turn_tells_its_caller_why_and_is_retried_only_after_its_delay() {
    let tmp = TempRoot::new("wake-fail-why");
    let plane = open(&tmp.store());
    let queue = WakeQueue::start_with(
        plane.clone(),
        QueueOptions {
            retry_delays: vec![Duration::from_millis(400)],
        },
    )
    .unwrap();
    let a = plane
        .accept_in_context("alice", None, user("a", "first"), vec![])
        .unwrap()
        .task_id
        .unwrap();
    assert_eq!(queue.next_wake(LONG).unwrap().task_id, a);
    let failed_at = std::time::Instant::now();
    queue
        .turn_ended(&a, TurnOutcome::Failed, Some("the provider answered 503"))
        .unwrap();
    let (state, text) = status_text(&plane, &a);
    assert_eq!(state, TaskState::Working, "still working, per the contract");
    assert!(text.contains("the provider answered 503"), "{text}");
    assert!(text.contains("retry 1 of 3"), "{text}");
    // Not retried at once; another Task goes first meanwhile.
    let b = plane
        .accept_in_context("alice", None, user("b", "second"), vec![])
        .unwrap()
        .task_id
        .unwrap();
    assert_eq!(queue.next_wake(LONG).unwrap().task_id, b);
    queue.turn_ended(&b, TurnOutcome::Ended, None).unwrap();
    let started = std::time::Instant::now();
    let mut retried = None;
    while retried.is_none() && started.elapsed() < LONG {
        retried = queue
            .next_wake(SHORT)
            .filter(|w| w.task_id == a)
            .or_else(|| {
                // b is re-offered (unsettled): end it again.
                if let Some(auth) = queue.authority() {
                    queue.turn_ended(&auth, TurnOutcome::Ended, None).unwrap();
                }
                None
            });
    }
    assert!(retried.is_some(), "retried after its delay");
    assert!(
        failed_at.elapsed() >= Duration::from_millis(400),
        "not before its delay"
    );
    // The delivery replaces the note: WORKING with no message.
    assert_eq!(status_text(&plane, &a), (TaskState::Working, String::new()));
    queue.close();
}

#[test]
fn a_held_queue_delivers_nothing_and_each_waiting_task_says_why_until_released() {
    let tmp = TempRoot::new("wake-hold");
    let plane = open(&tmp.store());
    let queue = WakeQueue::start(plane.clone()).unwrap();
    let before = plane
        .accept_in_context("alice", None, user("a", "first"), vec![])
        .unwrap()
        .task_id
        .unwrap();
    // Admission is asynchronous, and no event announces it: poll the queue (bounded), so
    // the first Task is told by `hold` itself and the second when it is admitted.
    wait_until("the first Task is admitted", || queue.waiting() == 1);
    let why = "the resident Pi has no model selected, so tasks wait until one is";
    let (watch, activity) = plane.events().watch_activity();
    queue.hold(Some(why.into()));
    assert_eq!(queue.held().as_deref(), Some(why));
    let after = plane
        .accept_in_context("bob", None, user("b", "second"), vec![])
        .unwrap()
        .task_id
        .unwrap();
    assert!(
        queue.next_wake(Duration::from_millis(200)).is_none(),
        "nothing is delivered while held"
    );
    // Admission (and so the note) is asynchronous: wait for both notes as they are written.
    for task in [&before, &after] {
        wait_for_activity(&activity, &format!("the note on {task}"), |a| {
            a.task_id == *task && a.message.as_deref() == Some(why)
        });
    }
    plane.events().unwatch(watch);
    for task in [&before, &after] {
        let (state, text) = status_text(&plane, task);
        assert_eq!(state, TaskState::Submitted);
        assert_eq!(text, why);
    }
    queue.hold(None);
    let wake = queue.next_wake(LONG).expect("released");
    assert_eq!(wake.task_id, before);
    assert_eq!(
        status_text(&plane, &before),
        (TaskState::Working, String::new())
    );
    queue.close();
}

#[test]
fn a_task_failed_at_the_delivery_cap_names_the_last_error_and_advice_that_is_true() {
    let tmp = TempRoot::new("wake-cap-why");
    let plane = open(&tmp.store());
    let queue = WakeQueue::start(plane.clone()).unwrap();
    // A manifest that did not load: a configuration error; sending again cannot help.
    let broken = AgentTools::new(
        queue.clone(),
        Outputs::Failed("A2A_WORKFLOW_MANIFEST: /etc/wf.json is not JSON".into()),
    );
    let task = plane
        .accept_in_context("alice", None, user("m-1", "x"), vec![])
        .unwrap()
        .task_id
        .unwrap();
    for _ in 0..5 {
        queue.next_wake(LONG).expect("offered");
        assert!(broken
            .record_output(&task, "summary", json!({"text": "t"}))
            .is_err());
        queue.turn_ended(&task, TurnOutcome::Ended, None).unwrap();
    }
    let (state, text) = status_text(&plane, &task);
    assert_eq!(state, TaskState::Failed);
    assert!(text.contains("/etc/wf.json is not JSON"), "{text}");
    assert!(text.contains("configuration"), "{text}");
    assert!(!text.contains("Send it again"), "{text}");

    // No error at all: the agent simply never settled it; sending again may help.
    let other = plane
        .accept_in_context("alice", None, user("m-2", "y"), vec![])
        .unwrap()
        .task_id
        .unwrap();
    for _ in 0..5 {
        queue.next_wake(LONG).expect("offered");
        queue.turn_ended(&other, TurnOutcome::Ended, None).unwrap();
    }
    let (state, text) = status_text(&plane, &other);
    assert_eq!(state, TaskState::Failed);
    assert!(text.contains("without settling"), "{text}");
    assert!(text.contains("Send it again as a new message"), "{text}");
    queue.close();
}
