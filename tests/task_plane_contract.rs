//! The contract's verification gates for the task plane's intake, one test per rule, named
//! after it (`../shared/spec/a2a-task-plane.md`, "Verification gates").

mod common;

use std::sync::{Arc, Barrier};

use a2a_task_plane::plane::{Disposition, InterruptKind, PlaneError};
use a2a_task_plane::record::{Continuation, TaskState};
use a2a_task_plane::wire::extensions::TaskLocator;
use common::*;

const SLACK: &str = "slack";
const MAIL: &str = "mail";

/// A plane with a reply-anchor source (`mail`) and a no-continuation source (`slack`).
fn plane(root: &TempRoot) -> a2a_task_plane::plane::TaskPlane {
    let plane = open(&root.store());
    plane.register_source(SLACK, Continuation::None).unwrap();
    plane
        .register_source(MAIL, Continuation::ReplyAnchors)
        .unwrap();
    plane
}

/// Puts a fresh Task from `mail` into `kind` with an anchor `response_id` for its question.
fn waiting_mail_task(
    plane: &a2a_task_plane::plane::TaskPlane,
    principal: &str,
    event: &str,
    conversation: &str,
    kind: InterruptKind,
    response_id: &str,
) -> String {
    let task = plane
        .accept(native(
            principal,
            MAIL,
            event,
            Some(conversation),
            "please do X",
        ))
        .unwrap()
        .task_id
        .unwrap();
    plane.start_work(&task).unwrap();
    plane
        .require_input(&task, kind, agent("which X?"), None)
        .unwrap();
    deliver_question(plane, principal, MAIL, &task, response_id);
    plane
        .record_reply_anchor(principal, MAIL, response_id, &task)
        .unwrap();
    task
}

#[test]
fn equal_task_ids_from_two_servers_do_not_collide() {
    // Identity is the locator, not the bare id: the same id served by two servers names
    // two different Tasks.
    let a = TaskLocator::served_by("https://a.example/a2a", None, "task-1");
    let b = TaskLocator::served_by("https://b.example/a2a", None, "task-1");
    assert_ne!(a, b);
    assert_ne!(a.to_json(), b.to_json());
    assert_eq!(a.to_json()["protocolBinding"], "HTTP+JSON");
    assert_eq!(a.to_json()["protocolVersion"], "1.0");
    let with_tenant = TaskLocator::served_by("https://a.example/a2a", Some("acme"), "task-1");
    assert_ne!(a, with_tenant);

    // And a Task minted by one server is unknown to another, even under the same id.
    let (root_a, root_b) = (TempRoot::new("srv-a"), TempRoot::new("srv-b"));
    let (a, b) = (open(&root_a.store()), open(&root_b.store()));
    let task = a
        .accept_in_context("alice", None, user("m-1", "hi"), vec![])
        .unwrap()
        .task_id
        .unwrap();
    assert!(a.get_task("alice", &task, None, false).unwrap().is_some());
    assert!(b.get_task("alice", &task, None, false).unwrap().is_none());
    let other = b
        .accept_in_context("alice", None, user("m-1", "hi"), vec![])
        .unwrap();
    assert_ne!(
        other.task_id.as_deref(),
        Some(task.as_str()),
        "each server mints its own ids"
    );
}

#[test]
fn foreign_context_id_does_not_join_local_work() {
    let root = TempRoot::new("foreign-ctx");
    let plane = plane(&root);
    let alice = plane
        .accept_in_context("alice", None, user("a-1", "alice's work"), vec![])
        .unwrap();
    let bob = plane
        .accept_in_context(
            "bob",
            Some(&alice.context_id),
            user("b-1", "bob tries to join"),
            vec![],
        )
        .unwrap();
    assert_eq!(bob.disposition, Disposition::Created);
    assert_ne!(
        bob.context_id, alice.context_id,
        "a foreign contextId gets a fresh context"
    );
    // An unknown contextId also gets a fresh one.
    let unknown = plane
        .accept_in_context("bob", Some("no-such-context"), user("b-2", "x"), vec![])
        .unwrap();
    assert_ne!(unknown.context_id, "no-such-context");
    // The owner's own contextId is honoured.
    let again = plane
        .accept_in_context(
            "alice",
            Some(&alice.context_id),
            user("a-2", "more"),
            vec![],
        )
        .unwrap();
    assert_eq!(again.context_id, alice.context_id);
    // The trusted interface refuses a foreign context outright.
    let err = plane
        .create_task("bob", &alice.context_id, user("b-3", "x"))
        .unwrap_err();
    assert!(matches!(err, PlaneError::ContextNotFound(_)), "{err}");
}

#[test]
fn reconnect_can_miss_transient_messages_without_losing_critical_state() {
    let root = TempRoot::new("reconnect");
    let task;
    {
        let plane = plane(&root);
        task = plane
            .accept_in_context("alice", None, user("m-1", "summarise"), vec![])
            .unwrap()
            .task_id
            .unwrap();
        plane.start_work(&task).unwrap();
        // Whatever a client streamed (or missed) while these happened, they are durable.
        let artifact = a2a_task_plane::record::ArtifactRecord {
            artifact_id: "art-1".into(),
            name: Some("summary".into()),
            description: None,
            parts: vec![a2a_task_plane::record::PartRecord::text("the summary")],
            metadata: None,
            extensions: vec![],
        };
        plane
            .complete(&task, vec![artifact], Some(agent("done")))
            .unwrap();
        plane.close();
    }
    // The client reconnects (here: to a restarted server) and reads the Task.
    let plane = plane(&root);
    let record = plane.get_task("alice", &task, None, true).unwrap().unwrap();
    assert_eq!(record.state, TaskState::Completed);
    assert_eq!(record.artifacts.len(), 1);
    assert_eq!(record.artifacts[0].artifact_id, "art-1");
    assert_eq!(
        record.history.len(),
        2,
        "the request and the agent's final message"
    );
    assert_eq!(record.status_message.unwrap().parts, agent("done").parts);
}

#[test]
fn simple_interaction_returns_a_direct_message_and_a_duplicate_returns_the_prior_direct_result() {
    let root = TempRoot::new("direct");
    let plane = plane(&root);
    let first = plane
        .respond_directly(
            "alice",
            None,
            user("hello-1", "hello"),
            agent("Hello! How can I help?"),
        )
        .unwrap();
    assert_eq!(first.task_id, None, "no Task exists for a direct Message");
    let reply = first.direct_reply.clone().unwrap();
    // The executor would answer differently the second time; the duplicate still gets the
    // first reply verbatim.
    let dup = plane
        .respond_directly(
            "alice",
            None,
            user("hello-1", "hello"),
            agent("something else"),
        )
        .unwrap();
    assert_eq!(dup.disposition, Disposition::Duplicate);
    assert_eq!(dup.direct_reply.unwrap(), reply);
    assert_eq!(dup.context_id, first.context_id);
    // The lookup an executor can do before deciding gives the same.
    let prior = plane
        .prior_outcome("alice", None, None, &user("hello-1", "hello"))
        .unwrap()
        .unwrap();
    assert_eq!(prior.direct_reply.unwrap(), reply);
    assert_eq!(
        count(plane.store().db_path(), "SELECT COUNT(*) FROM tasks"),
        0
    );
}

#[test]
fn two_messages_in_one_provider_thread_create_two_tasks_in_one_context() {
    let root = TempRoot::new("thread");
    let plane = plane(&root);
    let first = plane
        .accept(native("team", SLACK, "ev-1", Some("C1:T1"), "first"))
        .unwrap();
    let second = plane
        .accept(native("team", SLACK, "ev-2", Some("C1:T1"), "second"))
        .unwrap();
    assert_eq!(first.disposition, Disposition::Created);
    assert_eq!(second.disposition, Disposition::Created);
    assert_ne!(first.task_id, second.task_id);
    assert_eq!(first.context_id, second.context_id);
    // Another thread is another context; no conversation key is a fresh context each time.
    let other = plane
        .accept(native("team", SLACK, "ev-3", Some("C1:T2"), "other"))
        .unwrap();
    assert_ne!(other.context_id, first.context_id);
    let a = plane
        .accept(native("team", SLACK, "ev-4", None, "dm"))
        .unwrap();
    let b = plane
        .accept(native("team", SLACK, "ev-5", None, "dm"))
        .unwrap();
    assert_ne!(a.context_id, b.context_id);
}

#[test]
fn concurrent_first_messages_resolve_one_context_id() {
    let root = TempRoot::new("concurrent-ctx");
    let plane = plane(&root);
    let n = 16;
    let barrier = Arc::new(Barrier::new(n));
    let handles: Vec<_> = (0..n)
        .map(|i| {
            let (plane, barrier) = (plane.clone(), barrier.clone());
            std::thread::spawn(move || {
                barrier.wait();
                plane
                    .accept(native(
                        "team",
                        SLACK,
                        &format!("ev-{i}"),
                        Some("C9:T9"),
                        "first!",
                    ))
                    .unwrap()
            })
        })
        .collect();
    let results: Vec<_> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    let context = &results[0].context_id;
    assert!(
        results.iter().all(|r| &r.context_id == context),
        "one contextId for the conversation"
    );
    let mut tasks: Vec<_> = results.iter().map(|r| r.task_id.clone().unwrap()).collect();
    tasks.sort();
    tasks.dedup();
    assert_eq!(tasks.len(), n, "each message is its own Task");
    assert_eq!(
        count(plane.store().db_path(), "SELECT COUNT(*) FROM contexts"),
        1
    );
}

#[test]
fn trusted_interface_creates_a_new_task_in_an_existing_context() {
    let root = TempRoot::new("trusted-create");
    let plane = plane(&root);
    let first = plane
        .accept(native("team", SLACK, "ev-1", Some("C1:T1"), "first"))
        .unwrap();
    let created = plane
        .create_task("team", &first.context_id, user("follow-up-1", "next step"))
        .unwrap();
    assert_eq!(created.disposition, Disposition::Created);
    assert_eq!(created.context_id, first.context_id);
    assert_ne!(created.task_id, first.task_id);
    let err = plane
        .create_task("team", "missing-context", user("follow-up-2", "x"))
        .unwrap_err();
    assert!(matches!(err, PlaneError::ContextNotFound(_)), "{err}");
}

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
fn redelivered_duplicate_provider_event_returns_the_prior_task() {
    let root = TempRoot::new("redelivery");
    let plane = plane(&root);
    let event = native("team", SLACK, "ev-1", Some("C1:T1"), "do it");
    let first = plane.accept(event.clone()).unwrap();
    plane.start_work(first.task_id.as_deref().unwrap()).unwrap();
    let again = plane.accept(event.clone()).unwrap();
    assert_eq!(again.disposition, Disposition::Duplicate);
    assert_eq!(again.task_id, first.task_id);
    assert_eq!(again.activation_id, first.activation_id);
    assert_eq!(
        again.state,
        Some(TaskState::Working),
        "the prior Task in its current state"
    );
    // Redelivered through the reply path, it is still the same event.
    let via_reply = plane.continue_activation(event.clone()).unwrap();
    assert_eq!(via_reply.task_id, first.task_id);
    // The same event identity with another payload is refused, never replayed silently.
    let mut changed = event;
    changed.message.parts = vec![a2a_task_plane::record::PartRecord::text("something else")];
    let err = plane.accept(changed).unwrap_err();
    assert!(
        matches!(err, PlaneError::DuplicateMessageId { .. }),
        "{err}"
    );
    assert_eq!(
        count(plane.store().db_path(), "SELECT COUNT(*) FROM tasks"),
        1
    );
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
        count(
            plane.store().db_path(),
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
fn a_retry_naming_the_server_minted_ids_is_the_same_message() {
    let root = TempRoot::new("retry-ids");
    let plane = plane(&root);
    let first = plane
        .accept_in_context("alice", None, user("m-1", "hi"), vec![])
        .unwrap();
    let retry = plane
        .accept_in_context("alice", Some(&first.context_id), user("m-1", "hi"), vec![])
        .unwrap();
    assert_eq!(retry.disposition, Disposition::Duplicate);
    assert_eq!(retry.task_id, first.task_id);
    // Another context than the one minted, or other content, is a different payload.
    let other_ctx = plane
        .accept_in_context("alice", Some("elsewhere"), user("m-1", "hi"), vec![])
        .unwrap_err();
    assert!(
        matches!(other_ctx, PlaneError::DuplicateMessageId { .. }),
        "{other_ctx}"
    );
    let other_text = plane
        .accept_in_context("alice", None, user("m-1", "hello"), vec![])
        .unwrap_err();
    assert!(
        matches!(other_text, PlaneError::DuplicateMessageId { .. }),
        "{other_text}"
    );
    // The same messageId from another principal is another message.
    let bob = plane
        .accept_in_context("bob", None, user("m-1", "hi"), vec![])
        .unwrap();
    assert_eq!(bob.disposition, Disposition::Created);
}

#[test]
fn identifiers_follow_one_strict_pattern_and_errors_name_the_field() {
    let root = TempRoot::new("identifiers");
    let plane = plane(&root);
    let cases: Vec<(a2a_task_plane::plane::Activation, &str)> = vec![
        (native("", SLACK, "ev", None, "x"), "principal"),
        (native("team", SLACK, "ev/1", None, "x"), "eventId"),
        (
            native("team", SLACK, "ev", Some("C1 T1"), "x"),
            "conversationKey",
        ),
        (
            native("team", SLACK, &"e".repeat(129), None, "x"),
            "eventId",
        ),
        (native("team", "-slack", "ev", None, "x"), "source"),
    ];
    for (activation, field) in cases {
        match plane.accept(activation) {
            Err(PlaneError::Invalid(e)) => assert_eq!(e.field, field, "{}", e.message),
            other => panic!("expected an error naming {field}, got {other:?}"),
        }
    }
    let mut long_locator = native("team", SLACK, "ev", None, "x");
    long_locator.locator.insert("raw".into(), "x".repeat(4097));
    assert!(
        matches!(plane.accept(long_locator), Err(PlaneError::Invalid(e)) if e.field == "locator.raw")
    );
    let unregistered = plane
        .accept(native("team", "discord", "ev", None, "x"))
        .unwrap_err();
    assert!(
        matches!(unregistered, PlaneError::UnknownSource(_)),
        "{unregistered}"
    );
    let bad_message_id = plane
        .accept_in_context("alice", None, user("has space", "x"), vec![])
        .unwrap_err();
    assert!(matches!(bad_message_id, PlaneError::Invalid(ref e) if e.field == "message.messageId"));
    assert!(a2a_task_plane::ids::check_identifier("x", &"a".repeat(128)).is_ok());
    assert!(a2a_task_plane::ids::check_identifier("x", "A-1.b_c:d").is_ok());
}

#[test]
fn a_checkpoint_advances_only_after_every_selected_event_is_accepted() {
    let root = TempRoot::new("checkpoint");
    let plane = plane(&root);
    plane
        .accept(native("team", SLACK, "ev-1", None, "x"))
        .unwrap();
    let err = plane
        .advance_checkpoint(
            "team",
            SLACK,
            "cursor-2",
            vec!["ev-1".into(), "ev-2".into()],
        )
        .unwrap_err();
    assert!(err.to_string().contains("ev-2"), "{err}");
    assert_eq!(plane.checkpoint("team", SLACK).unwrap(), None);
    plane
        .accept(native("team", SLACK, "ev-2", None, "y"))
        .unwrap();
    plane
        .advance_checkpoint(
            "team",
            SLACK,
            "cursor-2",
            vec!["ev-1".into(), "ev-2".into()],
        )
        .unwrap();
    assert_eq!(
        plane.checkpoint("team", SLACK).unwrap().as_deref(),
        Some("cursor-2")
    );
}

#[test]
fn task_creation_grants_no_authority() {
    // Whatever the message says, intake stores it as content: the Task records only who
    // sent it, from where, and the source's declared continuation.
    let root = TempRoot::new("no-authority");
    let plane = plane(&root);
    let mut activation = native(
        "team",
        SLACK,
        "ev-1",
        None,
        "use agent=root tools=[bash] workflow=deploy",
    );
    activation.message.metadata = Some(
        serde_json::from_str(
            r#"{"agent":"root","workflow":"deploy","continuation":"explicit_task_id"}"#,
        )
        .unwrap(),
    );
    let task = plane.accept(activation).unwrap().task_id.unwrap();
    let record = plane.get_task("team", &task, None, false).unwrap().unwrap();
    assert_eq!(record.source, SLACK);
    assert_eq!(
        record.continuation,
        Continuation::None,
        "metadata cannot change the source's declaration"
    );
    assert!(record.extensions.is_empty());
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
/// update even when the agent acted before the caller looked, so a blocking caller need
/// not read the Task's state first. A duplicate (whose Task may be long settled) comes
/// without one.
#[test]
fn a_watched_intake_sees_every_update_after_its_acceptance() {
    use a2a_task_plane::events::TaskEvent;
    use a2a_task_plane::plane::{AlwaysTask, Inbound, Watch};
    let tmp = TempRoot::new("watched-intake");
    let plane = plane(&tmp);
    let rt = runtime();
    let inbound = || Inbound {
        principal: "alice".into(),
        context_id: None,
        task_id: None,
        message: user("m-1", "x"),
        extensions: vec![],
    };
    let intake = |inbound| {
        rt.block_on(plane.intake_watching(
            inbound,
            Arc::new(AlwaysTask),
            std::time::Duration::ZERO,
            Watch::UntilSettled,
        ))
        .unwrap()
    };
    let (accepted, updates) = intake(inbound());
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
    assert_eq!(states, vec![TaskState::Working, TaskState::Completed]);
    let (again, none) = intake(inbound());
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
