//! What the operator and the agent find beside a Task: a Task named by part of its id (the
//! short id shown, or any 6+ characters of its start or end), the earlier Tasks of its
//! conversation, and a turn held for refused credentials (no retry spent, the hold's note
//! on the Task, the plane knowing the queue is held).

mod common;

use a2a_task_plane::plane::{Inspector, PlaneError, TaskPlane};
use a2a_task_plane::record::TaskState;
use a2a_task_plane::tools::Outcome;
use a2a_task_plane::wake::{TurnOutcome, WakeQueue};
use common::wake::*;
use common::*;

fn accept(
    plane: &TaskPlane,
    principal: &str,
    context: Option<&str>,
    text: &str,
) -> (String, String) {
    let acc = plane
        .accept_in_context(
            principal,
            context,
            user(&a2a_task_plane::ids::mint(), text),
            vec![],
        )
        .unwrap();
    (acc.task_id.unwrap(), acc.context_id)
}

fn status_text(plane: &TaskPlane, task: &str) -> (TaskState, String) {
    let t = plane.task(task, Some(0), false).unwrap().unwrap();
    (
        t.state,
        t.status_message.map(|m| m.text()).unwrap_or_default(),
    )
}

#[test]
fn a_task_is_found_by_any_unique_prefix_or_suffix_of_six_or_more_characters() {
    let tmp = TempRoot::new("lookup-ids");
    let plane = open(&tmp.store());
    let (a, _) = accept(&plane, "alice", None, "first");
    let (b, _) = accept(&plane, "bob", None, "second");
    let short = a2a_task_plane::ids::short_id(&a);
    for typed in [
        a.as_str(),
        short,
        &a[a.len() - 6..],
        &a[..13],
        &a.to_uppercase(),
    ] {
        assert_eq!(
            plane.resolve_task_id(typed).unwrap().as_deref(),
            Some(a.as_str()),
            "{typed}"
        );
    }
    // The time prefix is shared by both: ambiguous, and both are named.
    let Err(PlaneError::Invalid(err)) = plane.resolve_task_id(&a[..6]) else {
        panic!("an ambiguous prefix is refused")
    };
    let text = err.to_string();
    assert!(
        text.contains(&a) && text.contains(&b) && text.contains("type more of the id"),
        "{text}"
    );
    assert_eq!(plane.resolve_task_id("ffffff").unwrap(), None);
    assert!(
        plane.resolve_task_id("fffff").is_err(),
        "5 characters are too few"
    );
    // The operator's read-only view (of a SQLite store's file) follows the same rule.
    if !on_sqlite("the offline inspector's lookups") {
        return;
    }
    let inspector = Inspector::open(&tmp.store()).unwrap();
    assert_eq!(
        inspector.resolve_task_id(short).unwrap().as_deref(),
        Some(a.as_str())
    );
}

#[test]
fn earlier_tasks_are_the_same_callers_tasks_of_the_context_oldest_first_with_request_and_answer() {
    let tmp = TempRoot::new("lookup-earlier");
    let plane = open(&tmp.store());
    let queue = WakeQueue::start(plane.clone()).unwrap();
    let (first, context) = accept(&plane, "alice", None, "my name is Ada");
    let wake = queue.next_wake(LONG).unwrap();
    tools(&queue)
        .complete_task(&wake.task_id, Outcome::Completed, "hello Ada", vec![])
        .unwrap();
    queue.turn_ended(&first, TurnOutcome::Ended, None).unwrap();
    let (second, _) = accept(&plane, "alice", Some(&context), "and my city?");
    let (third, _) = accept(&plane, "alice", Some(&context), "what is my name?");
    accept(&plane, "alice", None, "another conversation");
    accept(&plane, "bob", None, "bob's own");

    let earlier = plane.earlier_tasks(&third, 5).unwrap();
    let ids: Vec<&str> = earlier.iter().map(|t| t.task_id.as_str()).collect();
    assert_eq!(
        ids,
        [first.as_str(), second.as_str()],
        "oldest first, this context only"
    );
    assert_eq!(earlier[0].state, TaskState::Completed);
    assert_eq!(
        earlier[0].request.as_ref().unwrap().text(),
        "my name is Ada"
    );
    assert_eq!(
        earlier[0].answer.as_ref().unwrap()[0].content,
        a2a_task_plane::record::PartContent::Text("hello Ada".into())
    );
    assert_eq!(
        earlier[1].answer, None,
        "an unsettled Task has no answer yet"
    );
    assert_eq!(
        plane.earlier_tasks(&third, 1).unwrap().len(),
        1,
        "bounded, the newest kept"
    );
    assert_eq!(plane.earlier_tasks(&third, 1).unwrap()[0].task_id, second);
    assert!(plane.earlier_tasks(&first, 5).unwrap().is_empty());
    queue.close();
}

#[test]
fn a_turn_held_for_refused_credentials_spends_no_retry_and_its_task_says_why() {
    let tmp = TempRoot::new("lookup-held");
    let plane = open(&tmp.store());
    let queue = WakeQueue::start_with(plane.clone(), quick_retries()).unwrap();
    let (task, _) = accept(&plane, "alice", None, "hi");
    let wake = queue.next_wake(LONG).unwrap();
    let why = "The model provider refused the credentials; set ANTHROPIC_API_KEY.";
    queue.hold(Some(why.into()));
    assert_eq!(
        plane.queue_hold().as_deref(),
        Some(why),
        "the plane knows the queue is held"
    );
    queue
        .turn_ended(&task, TurnOutcome::Held, Some("401 authentication_error"))
        .unwrap();
    assert_eq!(
        status_text(&plane, &task),
        (TaskState::Working, why.to_string())
    );
    assert!(
        queue.next_wake(SHORT).is_none(),
        "nothing is delivered while held"
    );
    queue.hold(None);
    assert_eq!(plane.queue_hold(), None);
    let again = queue.next_wake(LONG).expect("offered again once released");
    assert_eq!(
        (again.task_id.as_str(), again.delivery),
        (task.as_str(), wake.delivery + 1)
    );
    // Three failures are still allowed: the held turn spent none of the retries.
    for _ in 0..3 {
        queue
            .turn_ended(&task, TurnOutcome::Failed, Some("overloaded"))
            .unwrap();
        queue.next_wake(LONG).expect("a retry");
    }
    queue.close();
}
