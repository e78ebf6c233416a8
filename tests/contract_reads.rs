//! The contract's rules for what a caller reads and hears of its Tasks: settling updates
//! carry the committed Task, a watched intake misses no update, listings keep the newest
//! status first, a listing's page size, and who may subscribe. One test per rule, named
//! after it (`../shared/spec/a2a-task-plane.md`).

mod common;

use std::sync::Arc;

use a2a_task_plane::plane::{Disposition, InterruptKind, ListFilter, PlaneError};
use a2a_task_plane::record::TaskState;
use common::contract::*;
use common::*;

/// A settling update carries the Task as its commit left it (every history message and
/// artifact) when someone waited to answer with the Task as the update was written, so a
/// blocking caller need not read it again; a non-settling update never does, nor one that
/// only streams watched.
#[test]
fn a_settling_update_carries_the_committed_task_to_those_waiting_to_answer_with_it() {
    use a2a_task_plane::events::TaskEvent;
    use a2a_task_plane::record::ArtifactRecord;
    let tmp = TempRoot::new("settled-snapshot");
    let plane = plane(&tmp);
    let rt = runtime();
    let accept = |id: &str| {
        plane
            .accept_in_context("alice", None, user(id, "x"), vec![])
            .unwrap()
            .task_id
            .unwrap()
    };
    let artifact = ArtifactRecord {
        artifact_id: "a-1".into(),
        name: None,
        description: None,
        parts: agent("result").parts,
        metadata: None,
        extensions: vec![],
    };
    let watched = accept("m-1");
    let mut updates = plane.events().subscribe_until_settled(&watched);
    // A stream's subscription sees the same updates.
    let mut streamed = plane.events().subscribe(&watched);
    plane.start_work(&watched).unwrap();
    plane
        .complete(&watched, vec![artifact.clone()], Some(agent("done")))
        .unwrap();
    let mut settled = None;
    rt.block_on(async {
        while let Ok(event) = updates.recv().await {
            if let TaskEvent::Status {
                state, settled: s, ..
            } = &*event
            {
                if *state == TaskState::Working {
                    assert!(s.is_none(), "WORKING does not settle");
                }
                if state.is_settled() {
                    settled = s.clone();
                    break;
                }
            }
        }
    });
    let carried = settled.expect("the settling update carried the Task");
    let seen = rt.block_on(async { streamed.recv().await.unwrap() });
    assert_eq!(seen.state(), Some(TaskState::Working));
    assert_eq!(*carried, plane.task(&watched, None, true).unwrap().unwrap());
    assert_eq!(carried.state, TaskState::Completed);
    assert_eq!((carried.history.len(), carried.artifacts.len()), (2, 1));
    drop(updates);

    // Only a subscription that waits to answer with the Task asks for it.
    let streamed_only = accept("m-2");
    let mut streamed = plane.events().subscribe(&streamed_only);
    plane.start_work(&streamed_only).unwrap();
    plane
        .complete(&streamed_only, vec![], Some(agent("done")))
        .unwrap();
    let last = rt.block_on(async {
        loop {
            let event = streamed.recv().await.unwrap();
            if event.state().is_some_and(TaskState::is_settled) {
                return event;
            }
        }
    });
    assert!(matches!(&*last, TaskEvent::Status { settled: None, .. }));
}

/// A watched intake's subscription starts at the acceptance's commit: it sees every later
/// update even when the agent acted before the caller looked (a blocking caller's, every
/// later update that settles the Task), so a blocking caller need not read the Task's state
/// first. A duplicate (whose Task may be long settled) comes without one.
#[test]
fn a_watched_intake_sees_every_update_after_its_acceptance() {
    use a2a_task_plane::events::TaskEvent;
    use a2a_task_plane::plane::{AlwaysTask, Inbound, Watch};
    let tmp = TempRoot::new("watched-intake");
    let plane = plane(&tmp);
    let rt = runtime();
    let inbound = |id: &str| Inbound {
        principal: "alice".into(),
        context_id: None,
        task_id: None,
        message: user(id, "x"),
        extensions: vec![],
    };
    let intake = |inbound, watch| {
        rt.block_on(plane.intake_watching(
            inbound,
            Arc::new(AlwaysTask),
            std::time::Duration::ZERO,
            watch,
        ))
        .unwrap()
    };
    for (id, watch, seen) in [
        (
            "m-1",
            Watch::Updates,
            vec![TaskState::Working, TaskState::Completed],
        ),
        ("m-2", Watch::UntilSettled, vec![TaskState::Completed]),
    ] {
        let (accepted, updates) = intake(inbound(id), watch);
        let task = accepted.task_id.clone().unwrap();
        // The agent settles the Task before the caller reads a single update.
        plane.start_work(&task).unwrap();
        plane.complete(&task, vec![], Some(agent("done"))).unwrap();
        let mut updates = updates.expect("a created Task comes with its subscription");
        let mut states = vec![];
        let settled = rt.block_on(async {
            tokio::time::timeout(std::time::Duration::from_secs(5), async {
                while let Ok(event) = updates.recv().await {
                    if let TaskEvent::Status { state, .. } = &*event {
                        states.push(*state);
                        if state.is_settled() {
                            return;
                        }
                    }
                }
            })
            .await
        });
        assert!(settled.is_ok(), "missed updates: saw only {states:?}");
        assert_eq!(states, seen, "{id}");
    }
    let (again, none) = intake(inbound("m-1"), Watch::UntilSettled);
    assert_eq!(again.disposition, Disposition::Duplicate);
    assert!(none.is_none(), "a duplicate comes without a subscription");
}

/// A status change in the same millisecond as the Task's last one (an agent's `startWork`
/// and `complete` issued together) is recorded like any other: the new state and status
/// time, the kept counts moved, and the Task's place in listings (newest status first)
/// where that time puts it, for the principal and within its context.
#[test]
fn a_status_change_in_the_same_millisecond_keeps_the_task_where_its_status_time_puts_it() {
    use a2a_task_plane::clock::ManualClock;
    use a2a_task_plane::plane::ListFilter;
    let tmp = TempRoot::new("same-ms");
    let clock = ManualClock::new(T0);
    let plane = open_with_clock(&tmp.store(), &clock);
    let accept = |id: &str| {
        plane
            .accept_in_context("alice", None, user(id, "work"), vec![])
            .unwrap()
    };
    let first = accept("m-1");
    clock.set(T0 + 5);
    let second = accept("m-2");
    let (first_id, second_id) = (first.task_id.unwrap(), second.task_id.unwrap());

    // WORKING and COMPLETED of the first Task, both at T0 + 9: the second change keeps
    // the status time the first one set.
    clock.set(T0 + 9);
    assert_eq!(plane.start_work(&first_id).unwrap(), TaskState::Working);
    plane
        .complete(&first_id, vec![], Some(agent("done")))
        .unwrap();

    let task = plane
        .get_task("alice", &first_id, None, false)
        .unwrap()
        .unwrap();
    assert_eq!(task.state, TaskState::Completed);
    assert_eq!(task.status_ms, T0 + 9);
    let list = |filter: ListFilter| {
        let page = plane.list_tasks("alice", &filter).unwrap();
        (
            page.tasks
                .into_iter()
                .map(|t| t.task_id)
                .collect::<Vec<_>>(),
            page.total,
        )
    };
    let all = ListFilter {
        page_size: 10,
        ..ListFilter::default()
    };
    assert_eq!(
        list(all.clone()),
        (vec![first_id.clone(), second_id.clone()], 2),
        "newest status first"
    );
    let in_context = ListFilter {
        context_id: Some(task.context_id.clone()),
        ..all.clone()
    };
    assert_eq!(list(in_context).0, vec![first_id.clone()]);
    let since = ListFilter {
        status_since_ms: Some(T0 + 9),
        ..all.clone()
    };
    assert_eq!(list(since).0, vec![first_id.clone()]);
    let completed_only = ListFilter {
        state: Some(TaskState::Completed),
        ..all.clone()
    };
    assert_eq!(list(completed_only), (vec![first_id.clone()], 1));
    let working = ListFilter {
        state: Some(TaskState::Working),
        ..all
    };
    assert_eq!(list(working), (vec![], 0));
    plane.close();
}

#[test]
fn a_page_size_left_out_is_the_default() {
    assert_eq!(ListFilter::page_size(None).unwrap(), 50);
}

/// A listing's page size is a whole number from 1 to 100; anything else is refused naming
/// `pageSize` and repeating what was sent, whichever binding sent it.
#[test]
fn a_page_size_outside_1_to_100_is_refused_naming_page_size() {
    for (sent, size) in [("1", 1), ("37", 37), ("100", 100)] {
        assert_eq!(ListFilter::page_size(Some(sent)).unwrap(), size, "{sent}");
    }
    for sent in ["0", "101", "-1", "4294967296", "ten", "", "2.5"] {
        match ListFilter::page_size(Some(sent)) {
            Err(PlaneError::Invalid(error)) => {
                assert_eq!(error.field, "pageSize", "{sent}");
                assert_eq!(
                    error.message,
                    format!("must be between 1 and 100 inclusive, got `{sent}`")
                );
            }
            other => panic!("pageSize {sent:?} was not refused: {other:?}"),
        }
    }
}

/// A terminal Task never changes again, so there is nothing to subscribe to: refused as
/// an unsupported operation naming the Task and its state. A Task still open, or
/// interrupted (its stream waits for the continuation), is subscribable; another
/// principal's Task is not found.
#[test]
fn subscribing_to_a_terminal_task_is_refused() {
    let tmp = TempRoot::new("subscribe-terminal");
    let plane = plane(&tmp);
    let accept = |id: &str| {
        plane
            .accept_in_context("alice", None, user(id, "x"), vec![])
            .unwrap()
            .task_id
            .unwrap()
    };
    let waiting = accept("m-1");
    plane.subscribable("alice", &waiting).unwrap();
    plane.start_work(&waiting).unwrap();
    plane
        .require_input(
            &waiting,
            InterruptKind::InputRequired,
            agent("which?"),
            None,
        )
        .unwrap();
    plane.subscribable("alice", &waiting).unwrap();
    assert!(matches!(
        plane.subscribable("bob", &waiting),
        Err(PlaneError::TaskNotFound(id)) if id == waiting
    ));

    let completed = accept("m-2");
    plane.start_work(&completed).unwrap();
    plane
        .complete(&completed, vec![], Some(agent("done")))
        .unwrap();
    let canceled = accept("m-3");
    plane.cancel("alice", &canceled).unwrap();
    for (task, state) in [
        (completed, TaskState::Completed),
        (canceled, TaskState::Canceled),
    ] {
        let refused = plane.subscribable("alice", &task).unwrap_err();
        assert!(
            matches!(&refused, PlaneError::NotSubscribable { task_id, state: s } if *task_id == task && *s == state),
            "{refused:?}"
        );
        assert_eq!(refused.reason(), "UNSUPPORTED_OPERATION");
        assert_eq!(
            refused.to_string(),
            format!(
                "task {task} is {} and will not change again; read it with GET /tasks/{task}",
                state.as_str()
            )
        );
    }
}
