//! The contract's verification gates for the task plane's intake: which Task and context a
//! message lands in (identity, conversations, trusted contexts, identifiers, no authority
//! from content) and idempotency (duplicates, retries, checkpoints). One test per rule,
//! named after it (`../shared/spec/a2a-task-plane.md`, "Verification gates"); the gates for
//! continuation are in `contract_continuation.rs`, for what callers read in
//! `contract_reads.rs`.

mod common;

use std::sync::{Arc, Barrier};

use a2a_task_plane::plane::{Disposition, PlaneError};
use a2a_task_plane::record::{Continuation, TaskState};
use a2a_task_plane::wire::extensions::TaskLocator;
use common::contract::*;
use common::*;

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
    assert_eq!(count_in(&plane, "SELECT COUNT(*) FROM tasks"), 0);
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
    assert_eq!(count_in(&plane, "SELECT COUNT(*) FROM contexts"), 1);
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
    assert_eq!(count_in(&plane, "SELECT COUNT(*) FROM tasks"), 1);
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
