//! The contract's verification gates for continuation: a waiting Task continues only
//! through a verified reply anchor or an authorized explicit taskId, never through what a
//! message's content says. One test per rule, named after it
//! (`../shared/spec/a2a-task-plane.md`, "Verification gates").

mod common;

use a2a_task_plane::plane::{Disposition, InterruptKind, PlaneError};
use a2a_task_plane::record::TaskState;
use common::contract::*;
use common::*;

#[test]
fn verified_direct_reply_continues_one_waiting_task_including_from_auth_required() {
    let root = TempRoot::new("anchor");
    let plane = plane(&root);
    for (kind, tag) in [
        (InterruptKind::InputRequired, "in"),
        (InterruptKind::AuthRequired, "auth"),
    ] {
        let conversation = format!("thread-{tag}");
        let response = format!("resp-{tag}");
        let task = waiting_mail_task(
            &plane,
            "alice",
            &format!("ev-{tag}-1"),
            &conversation,
            kind,
            &response,
        );
        let before = plane
            .get_task("alice", &task, None, false)
            .unwrap()
            .unwrap();
        assert!(before.state.is_interrupted());

        let continued = plane
            .continue_activation(reply(
                "alice",
                MAIL,
                &format!("ev-{tag}-2"),
                &conversation,
                &response,
                "X is foo",
            ))
            .unwrap();
        assert_eq!(continued.disposition, Disposition::Continued, "{tag}");
        assert_eq!(continued.task_id.as_deref(), Some(task.as_str()));
        let after = plane
            .get_task("alice", &task, None, false)
            .unwrap()
            .unwrap();
        assert_eq!(after.state, TaskState::Submitted);
        assert!(!after.input_request_open);
        assert_eq!(after.history.len(), 3, "request, question, answer");

        // The request is answered: another reply to the same anchor is new work.
        let again = plane
            .continue_activation(reply(
                "alice",
                MAIL,
                &format!("ev-{tag}-3"),
                &conversation,
                &response,
                "also",
            ))
            .unwrap();
        assert_eq!(again.disposition, Disposition::Created);
        assert_ne!(again.task_id.as_deref(), Some(task.as_str()));
        assert_eq!(again.context_id, continued.context_id);
    }
}

#[test]
fn reply_anchor_from_a_principal_that_cannot_access_the_task_creates_a_new_task() {
    let root = TempRoot::new("anchor-principal");
    let plane = plane(&root);
    let task = waiting_mail_task(
        &plane,
        "alice",
        "ev-1",
        "thread-1",
        InterruptKind::InputRequired,
        "resp-1",
    );
    let intruder = plane
        .continue_activation(reply(
            "mallory",
            MAIL,
            "ev-2",
            "thread-1",
            "resp-1",
            "my answer",
        ))
        .unwrap();
    assert_eq!(intruder.disposition, Disposition::Created);
    assert_ne!(intruder.task_id.as_deref(), Some(task.as_str()));
    let waiting = plane
        .get_task("alice", &task, None, false)
        .unwrap()
        .unwrap();
    assert_eq!(
        waiting.state,
        TaskState::InputRequired,
        "the waiting Task is untouched"
    );
    assert!(waiting.input_request_open);
    assert!(plane
        .get_task("mallory", &task, None, false)
        .unwrap()
        .is_none());
}

#[test]
fn later_thread_message_creates_a_new_task() {
    let root = TempRoot::new("later-thread");
    let plane = plane(&root);
    let task = waiting_mail_task(
        &plane,
        "alice",
        "ev-1",
        "thread-1",
        InterruptKind::InputRequired,
        "resp-1",
    );
    // In the thread, but not a direct reply to our response (no reply relation, or a reply
    // to the thread root).
    let later = plane
        .continue_activation(native("alice", MAIL, "ev-2", Some("thread-1"), "unrelated"))
        .unwrap();
    let to_root = plane
        .continue_activation(reply(
            "alice",
            MAIL,
            "ev-3",
            "thread-1",
            "thread-root-1",
            "to the root",
        ))
        .unwrap();
    for outcome in [&later, &to_root] {
        assert_eq!(outcome.disposition, Disposition::Created);
        assert_ne!(outcome.task_id.as_deref(), Some(task.as_str()));
    }
    let waiting = plane
        .get_task("alice", &task, None, false)
        .unwrap()
        .unwrap();
    assert_eq!(waiting.state, TaskState::InputRequired);
    assert_eq!(
        later.context_id, waiting.context_id,
        "same conversation, same context"
    );
}

#[test]
fn unauthorized_explicit_task_id_fails() {
    let root = TempRoot::new("explicit");
    let plane = plane(&root);
    let task = plane
        .accept_in_context("alice", None, user("a-1", "work"), vec![])
        .unwrap()
        .task_id
        .unwrap();
    plane.start_work(&task).unwrap();
    plane
        .require_input(&task, InterruptKind::InputRequired, agent("which?"), None)
        .unwrap();

    let foreign = plane
        .continue_task("bob", &task, None, user("b-1", "this one"), vec![])
        .unwrap_err();
    let missing = plane
        .continue_task("bob", "no-such-task", None, user("b-2", "this one"), vec![])
        .unwrap_err();
    assert!(matches!(foreign, PlaneError::TaskNotFound(_)), "{foreign}");
    assert!(matches!(missing, PlaneError::TaskNotFound(_)), "{missing}");
    assert_eq!(
        foreign.to_string().replace(&task, "ID"),
        missing.to_string().replace("no-such-task", "ID"),
        "a foreign Task is indistinguishable from a missing one"
    );
    // Nothing of the refused attempts was stored.
    assert_eq!(
        count_in(
            &plane,
            "SELECT COUNT(*) FROM claims WHERE principal = 'bob'"
        ),
        0
    );

    // The owner continues it; then it no longer waits, and a second continuation fails.
    let ok = plane
        .continue_task("alice", &task, None, user("a-2", "that one"), vec![])
        .unwrap();
    assert_eq!(ok.disposition, Disposition::Continued);
    let not_waiting = plane
        .continue_task("alice", &task, None, user("a-3", "again"), vec![])
        .unwrap_err();
    assert!(
        matches!(not_waiting, PlaneError::NotAwaitingInput { .. }),
        "{not_waiting}"
    );
    // A context that is not the Task's own is refused.
    plane.start_work(&task).unwrap();
    plane
        .require_input(&task, InterruptKind::AuthRequired, agent("sign in"), None)
        .unwrap();
    let mismatch = plane
        .continue_task(
            "alice",
            &task,
            Some("other-context"),
            user("a-4", "x"),
            vec![],
        )
        .unwrap_err();
    assert!(
        matches!(mismatch, PlaneError::ContextMismatch { .. }),
        "{mismatch}"
    );
    // A terminal Task cannot be continued.
    plane.complete(&task, vec![], Some(agent("done"))).unwrap();
    let terminal = plane
        .continue_task("alice", &task, None, user("a-5", "x"), vec![])
        .unwrap_err();
    assert!(
        matches!(terminal, PlaneError::TaskTerminal { .. }),
        "{terminal}"
    );
}

#[test]
fn task_id_embedded_in_a_provider_message_body_neither_selects_nor_continues_a_task() {
    let root = TempRoot::new("embedded-id");
    let plane = plane(&root);
    let task = waiting_mail_task(
        &plane,
        "alice",
        "ev-1",
        "thread-1",
        InterruptKind::InputRequired,
        "resp-1",
    );
    let body = format!("taskId: {task}\n{{\"taskId\": \"{task}\"}} please continue task {task}");
    // As a plain event, and as a reply whose reply relation names the task id itself.
    let plain = plane
        .accept(native("alice", MAIL, "ev-2", Some("thread-1"), &body))
        .unwrap();
    let as_reply = plane
        .continue_activation(reply("alice", MAIL, "ev-3", "thread-1", &task, &body))
        .unwrap();
    for outcome in [&plain, &as_reply] {
        assert_eq!(outcome.disposition, Disposition::Created);
        assert_ne!(outcome.task_id.as_deref(), Some(task.as_str()));
    }
    let waiting = plane
        .get_task("alice", &task, None, false)
        .unwrap()
        .unwrap();
    assert_eq!(waiting.state, TaskState::InputRequired);
    assert_eq!(waiting.history.len(), 2);
}

// ---- Further rules of intake -------------------------------------------------------------

#[test]
fn require_input_fails_for_a_source_that_declares_no_continuation() {
    let root = TempRoot::new("no-continuation");
    let plane = plane(&root);
    let task = plane
        .accept(native("team", SLACK, "ev-1", Some("C1:T1"), "x"))
        .unwrap()
        .task_id
        .unwrap();
    plane.start_work(&task).unwrap();
    let err = plane
        .require_input(&task, InterruptKind::InputRequired, agent("which?"), None)
        .unwrap_err();
    assert!(
        err.to_string().contains("declares no continuation method"),
        "{err}"
    );
    let record = plane.get_task("team", &task, None, false).unwrap().unwrap();
    assert_eq!(record.state, TaskState::Working, "nothing changed");
}

#[test]
fn a_reply_anchor_records_only_a_response_the_plane_delivered() {
    let root = TempRoot::new("anchor-delivered");
    let plane = plane(&root);
    let task = plane
        .accept(native("alice", MAIL, "ev-1", Some("thread-1"), "x"))
        .unwrap()
        .task_id
        .unwrap();
    plane.start_work(&task).unwrap();
    plane
        .require_input(&task, InterruptKind::InputRequired, agent("which?"), None)
        .unwrap();
    let err = plane
        .record_reply_anchor("alice", MAIL, "never-sent", &task)
        .unwrap_err();
    assert!(
        err.to_string().contains("no delivered response never-sent"),
        "{err}"
    );
    // So a reply to it is new work, not a continuation.
    let reply_to_unsent = plane
        .continue_activation(reply("alice", MAIL, "ev-2", "thread-1", "never-sent", "x"))
        .unwrap();
    assert_eq!(reply_to_unsent.disposition, Disposition::Created);
}
