//! The wake queue's rules (bound, delivery cap, turn retries, restart eligibility,
//! authority, one active turn), against a real store. What it tells callers is in
//! `wake_status_messages.rs`; the agent tools' rules are in `agent_tools.rs`.

mod common;

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Barrier};
use std::task::Poll;
use std::time::Duration;

use a2a_task_plane::plane::InterruptKind;
use a2a_task_plane::record::TaskState;
use a2a_task_plane::tools::Outcome;
use a2a_task_plane::wake::{TurnOutcome, WakeQueue, MAX_WAITING};
use common::wake::*;
use common::*;
use serde_json::json;

#[test]
fn delivery_grants_authority_and_records_woken_before_the_prompt() {
    let tmp = TempRoot::new("wake-deliver");
    let plane = open(&tmp.store());
    let queue = WakeQueue::start(plane.clone()).unwrap();
    let acc = plane
        .accept_in_context("alice", None, user("m-1", "do it"), vec![])
        .unwrap();
    let task = acc.task_id.unwrap();
    assert_eq!(queue.authority(), None);
    let wake = queue.next_wake(LONG).expect("a wake");
    assert_eq!((wake.task_id.as_str(), wake.delivery), (task.as_str(), 1));
    assert_eq!(queue.authority().as_deref(), Some(task.as_str()));
    assert_eq!(
        plane.task(&task, Some(0), false).unwrap().unwrap().state,
        TaskState::Working
    );
    assert_eq!(
        claim_states(&plane, &acc.activation_id),
        ["ACCEPTED", "WOKEN", "WAKE_DELIVERED 1"]
    );
    tools(&queue)
        .complete_task(&task, Outcome::Completed, "done", vec![])
        .unwrap();
    queue.turn_ended(&task, TurnOutcome::Ended, None).unwrap();
    assert_eq!(queue.authority(), None, "authority ends with the turn");
    assert!(
        queue.next_wake(SHORT).is_none(),
        "a settled Task is not offered again"
    );
    queue.close();
}

#[test]
fn authority_is_cleared_before_another_task_is_offered_and_tools_refuse_other_tasks() {
    let tmp = TempRoot::new("wake-authority");
    let plane = open(&tmp.store());
    let queue = WakeQueue::start(plane.clone()).unwrap();
    let a = plane
        .accept_in_context("alice", None, user("a", "first"), vec![])
        .unwrap()
        .task_id
        .unwrap();
    let b = plane
        .accept_in_context("alice", None, user("b", "second"), vec![])
        .unwrap()
        .task_id
        .unwrap();
    assert_eq!(queue.next_wake(LONG).unwrap().task_id, a);
    assert!(
        queue.next_wake(SHORT).is_none(),
        "nothing is offered while a turn is active"
    );
    let agent = tools(&queue);
    for result in [
        agent.read_task(&b).map(|_| ()),
        agent.complete_task(&b, Outcome::Completed, "x", vec![]),
        agent.record_output(&b, "pull-request", json!({"n": 1})),
        agent.require_input(&b, "q?", None),
    ] {
        let err = result.unwrap_err();
        assert!(
            err.to_string().contains("not the task of this turn"),
            "{err}"
        );
    }
    assert!(
        queue.turn_ended(&b, TurnOutcome::Ended, None).is_err(),
        "only the active Task's turn can end"
    );
    agent
        .complete_task(&a, Outcome::Completed, "done", vec![])
        .unwrap();
    queue.turn_ended(&a, TurnOutcome::Ended, None).unwrap();
    let err = agent.read_task(&a).unwrap_err();
    assert!(err.to_string().contains("no task turn is active"), "{err}");
    assert_eq!(queue.next_wake(LONG).unwrap().task_id, b);
    queue.close();
}

#[test]
fn an_unsettled_task_is_re_offered_at_most_five_times_then_wake_failed_and_never_resurrected() {
    let tmp = TempRoot::new("wake-cap");
    let plane = open(&tmp.store());
    let queue = WakeQueue::start(plane.clone()).unwrap();
    let acc = plane
        .accept_in_context("alice", None, user("m-1", "x"), vec![])
        .unwrap();
    let task = acc.task_id.unwrap();
    for n in 1..=5 {
        let wake = queue.next_wake(LONG).expect("re-offered");
        assert_eq!(wake.delivery, n);
        queue.turn_ended(&task, TurnOutcome::Ended, None).unwrap(); // the agent did not settle it
    }
    assert!(queue.next_wake(SHORT).is_none());
    let states = claim_states(&plane, &acc.activation_id);
    assert_eq!(states.last().unwrap(), "WAKE_FAILED");
    assert_eq!(
        states
            .iter()
            .filter(|s| s.starts_with("WAKE_DELIVERED"))
            .count(),
        5
    );
    let evidence = plane.evidence_for_task(&task).unwrap();
    assert!(evidence
        .iter()
        .any(|(_, kind, healthy, _)| kind == "wake_failed" && !healthy));
    queue.close();
    plane.close();
    // Startup does not resurrect it...
    let plane = open(&tmp.store());
    assert!(plane.wakes_to_replay().unwrap().is_empty());
    let queue = WakeQueue::start(plane.clone()).unwrap();
    assert!(queue.next_wake(SHORT).is_none());
    queue.close();
}

#[test]
fn a_failed_turn_is_retried_three_times_then_recorded_unhealthy_and_replayed_after_restart() {
    let tmp = TempRoot::new("wake-fail");
    let plane = open(&tmp.store());
    let queue = WakeQueue::start_with(plane.clone(), quick_retries()).unwrap();
    let acc = plane
        .accept_in_context("alice", None, user("m-1", "x"), vec![])
        .unwrap();
    let task = acc.task_id.unwrap();
    for _ in 0..4 {
        let wake = queue.next_wake(LONG).expect("retried");
        assert_eq!(wake.task_id, task);
        queue.turn_ended(&task, TurnOutcome::Failed, None).unwrap();
    }
    assert!(
        queue.next_wake(SHORT).is_none(),
        "three retries, then it stops"
    );
    let evidence = plane.evidence_for_task(&task).unwrap();
    assert!(evidence
        .iter()
        .any(|(_, kind, healthy, _)| kind == "turn_failed" && !healthy));
    assert_ne!(
        claim_states(&plane, &acc.activation_id).last().unwrap(),
        "WAKE_FAILED"
    );
    queue.close();
    plane.close();
    let plane = open(&tmp.store());
    let queue = WakeQueue::start(plane.clone()).unwrap();
    assert_eq!(
        queue
            .next_wake(LONG)
            .expect("replayed after restart")
            .task_id,
        task
    );
    queue.close();
}

#[test]
fn restart_with_an_unsettled_task_re_offers_it() {
    let tmp = TempRoot::new("wake-restart");
    let plane = open(&tmp.store());
    let queue = WakeQueue::start(plane.clone()).unwrap();
    let task = plane
        .accept_in_context("alice", None, user("m-1", "x"), vec![])
        .unwrap()
        .task_id
        .unwrap();
    assert_eq!(queue.next_wake(LONG).unwrap().task_id, task); // WOKEN, then the process "dies"
    queue.close();
    plane.close();
    let plane = open(&tmp.store());
    let queue = WakeQueue::start(plane.clone()).unwrap();
    let wake = queue
        .next_wake(LONG)
        .expect("the WOKEN activation is eligible again");
    assert_eq!((wake.task_id.as_str(), wake.delivery), (task.as_str(), 2));
    queue.close();
}

#[test]
fn startup_offers_only_the_newest_activation_of_each_non_terminal_task() {
    let tmp = TempRoot::new("wake-eligible");
    let plane = open(&tmp.store());
    let done = plane
        .accept_in_context("alice", None, user("done", "x"), vec![])
        .unwrap()
        .task_id
        .unwrap();
    plane.complete(&done, vec![], None).unwrap();
    let waiting = plane
        .accept_in_context("alice", None, user("wait", "x"), vec![])
        .unwrap()
        .task_id
        .unwrap();
    plane.start_work(&waiting).unwrap();
    plane
        .require_input(
            &waiting,
            InterruptKind::InputRequired,
            agent("which?"),
            None,
        )
        .unwrap();
    let answered = plane
        .accept_in_context("alice", None, user("ans", "x"), vec![])
        .unwrap()
        .task_id
        .unwrap();
    plane.start_work(&answered).unwrap();
    plane
        .require_input(
            &answered,
            InterruptKind::AuthRequired,
            agent("sign in"),
            None,
        )
        .unwrap();
    let continuation = plane
        .continue_task("alice", &answered, None, user("ans-2", "signed in"), vec![])
        .unwrap();
    let fresh = plane
        .accept_in_context("alice", None, user("fresh", "x"), vec![])
        .unwrap();

    let replay = plane.wakes_to_replay().unwrap();
    let ids: Vec<(&str, &str)> = replay
        .iter()
        .map(|w| (w.task_id.as_str(), w.activation_id.as_str()))
        .collect();
    assert_eq!(
        ids,
        [
            (answered.as_str(), continuation.activation_id.as_str()),
            (fresh.task_id.as_deref().unwrap(), fresh.activation_id.as_str())
        ],
        "not the terminal Task, not the one waiting for its caller, only the newest activation of the continued one"
    );
}

#[test]
fn admission_is_bounded_and_overflow_is_logged_and_durable() {
    let tmp = TempRoot::new("wake-bound");
    let plane = open(&tmp.store());
    let queue = WakeQueue::start(plane.clone()).unwrap();
    let first = plane
        .accept_in_context("alice", None, user("m-0", "x"), vec![])
        .unwrap()
        .task_id
        .unwrap();
    assert_eq!(queue.next_wake(LONG).unwrap().task_id, first); // the active turn
    let (watch, activity) = plane.events().watch_activity();
    for i in 1..=MAX_WAITING + 3 {
        plane
            .accept_in_context("alice", None, user(&format!("m-{i}"), "x"), vec![])
            .unwrap();
    }
    // Admission is in acceptance order: the three given up (their Tasks FAILED) come after
    // the MAX_WAITING admitted.
    for n in 1..=3 {
        wait_for_activity(&activity, &format!("overflow {n} of 3 FAILED"), |a| {
            a.state == Some(TaskState::Failed)
        });
    }
    plane.events().unwatch(watch);
    assert_eq!(queue.waiting(), MAX_WAITING);
    assert_eq!(
        count_in(
            &plane,
            "SELECT COUNT(*) FROM claims WHERE state = 'WAKE_FAILED'"
        ),
        3
    );
    assert_eq!(
        count_in(
            &plane,
            "SELECT COUNT(*) FROM evidence WHERE kind = 'wake_overflow' AND NOT healthy"
        ),
        3
    );
    // Terminal claims do not count toward the bound at startup either.
    queue.close();
}

#[test]
fn cancel_wins_against_a_concurrent_wake() {
    // The caller's cancel and the wake's delivery race, started together, many times. In
    // either order the cancel succeeds and the Task ends CANCELED: a wake that lost the race
    // is never prompted; one delivered first gives the agent a turn in which it can no
    // longer settle the Task, and the Task is not offered again.
    const ROUNDS: usize = 40;
    // How long the wake side waits after its delivery was skipped (the cancel won).
    const SKIPPED: Duration = Duration::from_millis(20);
    let tmp = TempRoot::new("wake-cancel");
    let plane = open(&tmp.store());
    let queue = WakeQueue::start(plane.clone()).unwrap();
    let agent = tools(&queue);
    let (mut delivered_first, mut canceled_first) = (0, 0);
    for round in 0..ROUNDS {
        let task = plane
            .accept_in_context("alice", None, user(&format!("m-{round}"), "x"), vec![])
            .unwrap()
            .task_id
            .unwrap();
        // The wake is ready before the race starts (no event announces an admission).
        wait_until("the Task's wake is admitted", || queue.waiting() == 1);
        let start = Arc::new(Barrier::new(2));
        let canceler = std::thread::spawn({
            let (plane, task, start) = (plane.clone(), task.clone(), start.clone());
            move || {
                start.wait();
                plane.cancel("alice", &task).map(|t| t.state)
            }
        });
        start.wait();
        let wake = queue.next_wake(SKIPPED);
        let canceled = canceler.join().unwrap();
        assert_eq!(
            canceled.as_ref().ok(),
            Some(&TaskState::Canceled),
            "round {round}: the cancel of a live Task succeeds in either order: {canceled:?}"
        );
        match wake {
            None => canceled_first += 1,
            Some(wake) => {
                delivered_first += 1;
                assert_eq!(wake.task_id, task, "round {round}");
                let refused = agent.complete_task(&task, Outcome::Completed, "done", vec![]);
                assert!(
                    refused.is_err(),
                    "round {round}: a canceled Task cannot be settled by the turn it raced"
                );
                queue.turn_ended(&task, TurnOutcome::Ended, None).unwrap();
            }
        }
        assert_eq!(
            plane.task(&task, Some(0), false).unwrap().unwrap().state,
            TaskState::Canceled,
            "round {round}"
        );
        assert_eq!(
            (queue.authority(), queue.waiting()),
            (None, 0),
            "round {round}: a canceled Task is not offered (again)"
        );
    }
    eprintln!(
        "{ROUNDS} races: the wake was delivered first {delivered_first} times, the cancel won {canceled_first} times"
    );
    queue.close();
}

#[test]
fn an_answer_arriving_during_the_turn_is_offered_once_not_alongside_the_old_activation() {
    let tmp = TempRoot::new("wake-supersede");
    let plane = open(&tmp.store());
    let queue = WakeQueue::start(plane.clone()).unwrap();
    let first = plane
        .accept_in_context("alice", None, user("m-1", "x"), vec![])
        .unwrap();
    let task = first.task_id.clone().unwrap();
    assert_eq!(
        queue.next_wake(LONG).unwrap().activation_id,
        first.activation_id
    );
    tools(&queue).require_input(&task, "which?", None).unwrap();
    // The caller answers before the turn has ended.
    let answer = plane
        .continue_task("alice", &task, None, user("m-2", "that one"), vec![])
        .unwrap();
    // No event announces an admission: poll the queue (bounded).
    wait_until("the answer is admitted behind the turn", || {
        queue.waiting() == 1
    });
    queue.turn_ended(&task, TurnOutcome::Ended, None).unwrap(); // unsettled (SUBMITTED again)
    assert_eq!(queue.waiting(), 1, "one wake per Task");
    let next = queue.next_wake(LONG).unwrap();
    assert_eq!(
        (next.activation_id.as_str(), next.delivery),
        (answer.activation_id.as_str(), 1)
    );
    queue.close();
}

#[test]
fn activity_reports_arrivals_and_status_changes_of_every_task_until_unwatched() {
    let tmp = TempRoot::new("activity");
    let plane = open(&tmp.store());
    let (id, activity) = plane.events().watch_activity();
    let task = plane
        .accept_in_context("alice", None, user("m-1", "x"), vec![])
        .unwrap()
        .task_id
        .unwrap();
    plane.start_work(&task).unwrap();
    let mut seen = vec![];
    while !seen.contains(&Some(TaskState::Working)) {
        let a = activity.recv_timeout(LONG).expect("activity");
        assert_eq!(a.task_id, task);
        seen.push(a.state);
    }
    assert!(seen.contains(&None), "the arrival is reported: {seen:?}");
    plane.events().unwatch(id);
    assert!(activity.recv_timeout(LONG).is_err(), "the watch ends");
}

#[test]
fn one_active_turn_whoever_calls_next_wake_concurrently() {
    let tmp = TempRoot::new("wake-one-turn");
    let plane = open(&tmp.store());
    let queue = WakeQueue::start(plane.clone()).unwrap();
    for n in 0..2 {
        plane
            .accept_in_context("alice", None, user(&format!("m-{n}"), "x"), vec![])
            .unwrap();
    }
    // No event announces an admission: poll the queue (bounded).
    wait_until("both Tasks are admitted", || queue.waiting() == 2);
    // Two blocking callers and one async caller race for the two waiting wakes: only one
    // turn may be active, so exactly one of them gets a wake.
    let runtime = runtime();
    let (a, b) = (queue.clone(), queue.clone());
    let first = std::thread::spawn(move || a.next_wake(Duration::from_millis(500)));
    let second = std::thread::spawn(move || b.next_wake(Duration::from_millis(500)));
    let third = runtime.block_on(queue.next_wake_async(Duration::from_millis(500)));
    let got: Vec<_> = [first.join().unwrap(), second.join().unwrap(), third]
        .into_iter()
        .flatten()
        .collect();
    assert_eq!(got.len(), 1, "one active turn: {got:?}");
    assert_eq!(queue.authority().as_deref(), Some(got[0].task_id.as_str()));
    queue.close();
}

#[test]
fn an_async_wait_is_woken_by_an_acceptance_and_by_close() {
    let tmp = TempRoot::new("wake-async");
    let plane = open(&tmp.store());
    let queue = WakeQueue::start(plane.clone()).unwrap();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    // Polled once before the acceptance, so it is waiting when the acceptance comes. (The
    // plane's blocking calls are made outside the runtime, as a driver would.)
    let mut waiting = Box::pin(queue.next_wake_async(LONG));
    assert!(
        runtime.block_on(poll_once(waiting.as_mut())).is_none(),
        "nothing is ready yet: it waits"
    );
    let task = plane
        .accept_in_context("alice", None, user("m-1", "x"), vec![])
        .unwrap()
        .task_id
        .unwrap();
    let wake = runtime.block_on(waiting).expect("woken by the acceptance");
    assert_eq!(wake.task_id, task);
    queue.turn_ended(&task, TurnOutcome::Ended, None).unwrap();
    let _ = queue.next_wake(LONG); // re-offered (unsettled): take it so nothing is ready
    let mut waiting = Box::pin(queue.next_wake_async(Duration::from_secs(30)));
    assert!(
        runtime.block_on(poll_once(waiting.as_mut())).is_none(),
        "a turn is active: it waits"
    );
    let started = std::time::Instant::now();
    queue.close();
    assert_eq!(runtime.block_on(waiting), None);
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "close ends the wait"
    );
}

/// Polls `future` once: its output if it is ready, `None` if it now waits (registered to
/// be woken).
async fn poll_once<F: Future>(mut future: Pin<&mut F>) -> Option<F::Output> {
    std::future::poll_fn(|cx| match future.as_mut().poll(cx) {
        Poll::Ready(output) => Poll::Ready(Some(output)),
        Poll::Pending => Poll::Ready(None),
    })
    .await
}
