//! Every typed operation of the storage boundary on PostgreSQL has the SQLite store's
//! semantics: one scenario of acceptance, reads, agent writes, wake records, anchors,
//! checkpoints, evidence, deliveries and retention runs on both backends, and what each
//! step returns must be the same on both. Then what only a fleet does: the same messageId
//! accepted on two nodes at once, one conversation's first messages on two nodes at once,
//! and two nodes appending to one Task at once.

mod common;

use std::sync::{Arc, Barrier};

use a2a_task_plane::config::{store_backend, StoreBackend};
use a2a_task_plane::pg::{PgOptions, PgStore};
use a2a_task_plane::record::{
    ArtifactRecord, ClaimRoute, ClaimState, Continuation, DeliveryState, EvidenceKind,
    MessageRecord, PartRecord, Recovery, TaskState,
};
use a2a_task_plane::store::anchors::Anchor;
use a2a_task_plane::store::claims::NewClaim;
use a2a_task_plane::store::deliveries::NewDelivery;
use a2a_task_plane::store::evidence::{self, NewEvidence};
use a2a_task_plane::store::tasks::{InputRequest, NewTask, PageQuery, SummaryFilter};
use a2a_task_plane::store::{Store, StoreError, StoreOptions, WriteTx};
use common::postgres::TestDatabase;
use common::TempRoot;

fn pg_store(db: &TestDatabase, root: &TempRoot) -> Store {
    let text = db.url();
    let env = |name: &str| (name == "A2A_STORE_URL").then(|| text.clone());
    let Ok(StoreBackend::Postgres(url)) = store_backend(&env) else {
        panic!("{text} is a PostgreSQL URL");
    };
    let pg = PgStore::open(&url, &root.store(), PgOptions::default()).unwrap();
    Store::with_backend(Arc::new(pg), None)
}

/// An outcome as the transcript shows it: a database's refusal by kind only (its words
/// differ between SQLite and PostgreSQL), anything else in full.
fn show<T: std::fmt::Debug>(result: Result<T, StoreError>) -> String {
    match result {
        Ok(value) => format!("{value:?}"),
        Err(StoreError::Database { .. }) => "Err(the database refused)".into(),
        Err(other) => format!("Err({other})"),
    }
}

fn artifact(id: &str, text: &str) -> ArtifactRecord {
    ArtifactRecord {
        artifact_id: id.into(),
        name: Some(id.into()),
        description: None,
        parts: vec![PartRecord::text(text)],
        metadata: None,
        extensions: vec![],
    }
}

/// The writes of one acceptance that creates a Task, as the plane makes them.
fn accept(
    tx: &dyn WriteTx,
    task_id: &str,
    activation_id: &str,
    message_id: &str,
    context_id: &str,
    now_ms: i64,
) -> Result<i64, StoreError> {
    let seq = tx.insert_task(&NewTask {
        task_id,
        principal: "alice",
        context_id,
        source: "a2a",
        continuation: Continuation::ExplicitTaskId,
        state: TaskState::Submitted,
        extensions: &["https://example.com/ext/v1".to_string()],
        now_ms,
    })?;
    tx.insert_first_message(seq, &MessageRecord::user_text(message_id, "hello"))?;
    tx.insert_claim(&NewClaim {
        activation_id,
        principal: "alice",
        dedupe_key: message_id,
        source: "a2a",
        route: ClaimRoute::Created,
        task_id: Some(task_id),
        context_id,
        digest: "sha256:00",
        requested_context_id: None,
        requested_task_id: None,
        direct_reply: None,
        now_ms,
    })?;
    tx.record_claim_accepted(activation_id, now_ms)?;
    Ok(seq)
}

/// The scenario: each step's outcome, one line each.
fn scenario(store: &Store) -> Vec<String> {
    let mut lines = Vec::new();
    let mut log = |step: &str, outcome: String| lines.push(format!("{step}: {outcome}"));

    // --- Acceptance: contexts, the Task, its claim; dedupe ---------------------------
    log(
        "first message of a conversation",
        show(store.write(|tx| tx.context_of_conversation("ctx-a", "alice", "a2a", "conv-1", 100))),
    );
    log(
        "same conversation again, earlier clock",
        show(store.write(|tx| tx.context_of_conversation("ctx-b", "alice", "a2a", "conv-1", 90))),
    );
    log(
        "same key, other principal",
        show(store.write(|tx| tx.context_of_conversation("ctx-bob", "bob", "a2a", "conv-1", 100))),
    );
    log(
        "fresh context",
        show(store.write(|tx| tx.insert_fresh_context("ctx-fresh", "alice", "a2a", 100))),
    );
    log(
        "context owners",
        show(store.read(|tx| Ok((tx.context_owner("ctx-fresh")?, tx.context_owner("nope")?)))),
    );
    log(
        "acceptance",
        show(store.write(|tx| accept(tx, "task-1", "act-1", "m-1", "ctx-a", 1000))),
    );
    log(
        "a second claim of the same messageId",
        show(store.write(|tx| {
            tx.insert_claim(&NewClaim {
                activation_id: "act-dup",
                principal: "alice",
                dedupe_key: "m-1",
                source: "a2a",
                route: ClaimRoute::Created,
                task_id: None,
                context_id: "ctx-a",
                digest: "sha256:01",
                requested_context_id: None,
                requested_task_id: None,
                direct_reply: None,
                now_ms: 1001,
            })
        })),
    );
    log(
        "claims by dedupe key",
        show(store.read(|tx| {
            Ok((
                tx.claim_by_dedupe_key("alice", "m-1")?,
                tx.claim_by_dedupe_key("bob", "m-1")?.is_some(),
                tx.claim_state_of_event("alice", "a2a", "m-1")?,
                tx.claim_state_of_event("alice", "other", "m-1")?,
            ))
        })),
    );
    log(
        "the Task, its owner's view and a stranger's",
        show(store.read(|tx| {
            Ok((
                tx.task_by_id("task-1")?,
                tx.task_owned_by("bob", "task-1")?,
                tx.task_owned_by("alice", "task-1")?.map(|t| t.seq),
            ))
        })),
    );
    log(
        "history and first message",
        show(store.read(|tx| Ok((tx.task_history(1, None)?, tx.task_first_message(1)?)))),
    );
    log(
        "the wake",
        show(store.read(|tx| {
            Ok((
                tx.wake_claim("act-1", "task-1")?,
                tx.wake_claim("act-1", "task-other")?,
                tx.newest_claim_of_task("task-1")?,
                tx.newest_deliverable_claims()?,
            ))
        })),
    );
    let page = |store: &Store, state: Option<TaskState>| {
        show(store.read(|tx| {
            let page = tx.task_page(
                "alice",
                &PageQuery {
                    state,
                    limit: 1,
                    ..PageQuery::default()
                },
            )?;
            let ids: Vec<String> = page.rows.iter().map(|t| t.record.task_id.clone()).collect();
            Ok((ids, page.next, page.total))
        }))
    };
    log("alice's first page", page(store, None));
    log(
        "counts",
        show(store.read(|tx| {
            let mut by_state = tx.tasks_by_state()?;
            by_state.sort_by_key(|(s, _)| s.map(TaskState::as_str));
            Ok((
                by_state,
                tx.record_counts()?,
                tx.secret("page_tokens")?.len(),
            ))
        })),
    );

    // --- The agent's writes -------------------------------------------------------------
    log(
        "startWork, a message, two artifacts",
        show(store.write(|tx| {
            let task = tx.task_by_id("task-1")?.expect("task-1");
            tx.set_task_status(
                &task,
                TaskState::Working,
                None,
                2000,
                InputRequest::Unchanged,
            )?;
            tx.append_history(&task, &MessageRecord::user_text("m-agent", "working on it"))?;
            let first = tx.next_artifact_n(&task)?;
            tx.append_artifact(&task, &artifact("a-1", "one"))?;
            tx.append_artifact(&task, &artifact("a-2", "two"))?;
            Ok((first, tx.next_artifact_n(&task)?))
        })),
    );
    log(
        "an input request with a schema",
        show(store.write(|tx| {
            let task = tx.task_by_id("task-1")?.expect("task-1");
            let schema =
                serde_json::json!({"type": "object", "properties": {"ok": {"type": "boolean"}}});
            let question = MessageRecord::user_text("m-q", "which one?");
            tx.set_task_status(
                &task,
                TaskState::InputRequired,
                Some(&question),
                2000,
                InputRequest::Open(Some(&schema)),
            )?;
            tx.task_by_id("task-1")
        })),
    );
    log(
        "reads after the agent's writes",
        show(store.read(|tx| {
            Ok((
                tx.task_history(1, Some(1))?,
                tx.task_history(1, None)?
                    .iter()
                    .map(|m| m.message_id.clone())
                    .collect::<Vec<_>>(),
                tx.task_artifacts(1)?,
                tx.newest_deliverable_claims()?,
            ))
        })),
    );
    log(
        "reply anchor, replaced; checkpoint, replaced",
        show(store.write(|tx| {
            for seq in [1, 2] {
                let anchor = Anchor {
                    task_id: "task-1".into(),
                    input_request_seq: seq,
                };
                tx.upsert_reply_anchor("alice", "chat", "resp-1", &anchor, 2100 + seq)?;
                tx.set_checkpoint("alice", "chat", &format!("cursor-{seq}"), 2100 + seq)?;
            }
            Ok((
                tx.reply_anchor("alice", "chat", "resp-1")?,
                tx.reply_anchor("bob", "chat", "resp-1")?,
                tx.checkpoint("alice", "chat")?,
                tx.checkpoint("alice", "other")?,
            ))
        })),
    );
    log(
        "wake records",
        show(store.write(|tx| {
            tx.push_claim_state("act-1", ClaimState::Woken, None, 2200)?;
            tx.record_wake_delivery("act-1", 1, 2201)?;
            tx.push_claim_state("act-1", ClaimState::Woken, Some("again"), 2202)?;
            tx.wake_claim("act-1", "task-1")
        })),
    );
    log(
        "evidence, the same content twice",
        show(store.write(|tx| {
            let locator = serde_json::json!({"at": "here"});
            let mut ids = Vec::new();
            for task_id in [Some("task-1"), Some("task-1"), None, None] {
                ids.push(evidence::insert(
                    tx,
                    &NewEvidence {
                        kind: &EvidenceKind::Source("chat_event".into()),
                        healthy: task_id.is_some(),
                        task_id,
                        activation_id: Some("act-1"),
                        locator: &locator,
                        content: &serde_json::json!({"said": "hi"}),
                        now_ms: 2300,
                    },
                )?);
            }
            ids.dedup();
            Ok((ids, tx.evidence_of_task("task-1")?))
        })),
    );
    log(
        "a delivery prepared, sent, delivered",
        show(store.write(|tx| {
            tx.insert_delivery(&NewDelivery {
                delivery_id: "d-1",
                principal: "alice",
                source: "chat",
                task_id: Some("task-1"),
                operation_id: "op-1",
                payload_digest: "sha256:02",
                recovery: Recovery::IdempotencyKey,
                now_ms: 2400,
            })?;
            tx.set_delivery_state("d-1", DeliveryState::Sending, None, None, 2401)?;
            tx.set_delivery_state(
                "d-1",
                DeliveryState::Delivered,
                Some("resp-9"),
                Some("ok"),
                2402,
            )?;
            Ok((
                tx.delivery_by_id("d-1")?,
                tx.delivery_by_operation("chat", "op-1")?,
                tx.delivered_response("task-1", "chat", "resp-9")?,
                tx.delivered_response("task-1", "chat", "resp-8")?,
            ))
        })),
    );
    log(
        "a second Task in another context; the first completes",
        show(store.write(|tx| {
            accept(tx, "task-2", "act-2", "m-2", "ctx-fresh", 3000)?;
            let task = tx.task_by_id("task-1")?.expect("task-1");
            let done = MessageRecord::user_text("m-done", "done");
            tx.set_task_status(
                &task,
                TaskState::Completed,
                Some(&done),
                3100,
                InputRequest::Closed,
            )?;
            tx.touch_context("ctx-a", 50)?;
            tx.touch_context("ctx-fresh", 3000)?;
            tx.task_by_id("task-1")
        })),
    );
    log(
        "alice's completed page",
        page(store, Some(TaskState::Completed)),
    );
    log("alice's first page after", page(store, None));
    log(
        "listings and lookups",
        show(store.read(|tx| {
            Ok((
                tx.task_summaries(&SummaryFilter {
                    limit: 10,
                    ..SummaryFilter::default()
                })?,
                tx.task_ids_matching("task-", 10)?,
                tx.task_ids_matching("-2", 10)?,
                tx.tasks_earlier_in_context("alice", "ctx-a", 99, 5)?.len(),
                tx.oldest_live_task()?,
                tx.problems()?,
            ))
        })),
    );

    // --- Retention ------------------------------------------------------------------------
    log(
        "compaction",
        show(store.write(|tx| {
            Ok((
                tx.delete_settled_tasks(10_000)?,
                tx.take_orphaned_claims()?,
                tx.take_orphaned_claims()?,
                tx.delete_unused_claims(10_000)?,
                tx.delete_unused_evidence(10_000)?,
                tx.delete_unused_anchors(10_000)?,
                tx.delete_unused_deliveries(10_000)?,
                tx.delete_unused_contexts(10_000)?,
            ))
        })),
    );
    log(
        "after compaction",
        show(store.read(|tx| {
            let mut by_state = tx.tasks_by_state()?;
            by_state.sort_by_key(|(s, _)| s.map(TaskState::as_str));
            Ok((
                by_state,
                tx.record_counts()?,
                tx.task_by_id("task-1")?,
                tx.task_history(1, None)?,
                tx.context_owner("ctx-a")?,
                tx.context_owner("ctx-fresh")?,
                tx.problems()?,
            ))
        })),
    );
    lines
}

#[test]
fn every_operation_has_the_sqlite_stores_semantics() {
    let sqlite_root = TempRoot::new("ops-sqlite");
    let sqlite = Store::open(&sqlite_root.store(), StoreOptions::default()).unwrap();
    let expected = scenario(&sqlite);
    sqlite.close();

    let (db, pg_root) = (TestDatabase::new(), TempRoot::new("ops-pg"));
    let pg = pg_store(&db, &pg_root);
    let got = scenario(&pg);
    pg.close();

    assert_eq!(expected.len(), got.len());
    for (sqlite_line, pg_line) in expected.iter().zip(&got) {
        assert_eq!(
            sqlite_line, pg_line,
            "SQLite (left) and PostgreSQL (right) differ"
        );
    }
    // The scenario did what it says (not two backends agreeing on nothing).
    let joined = expected.join("\n");
    assert!(joined.contains("a second claim of the same messageId: Err(the database refused)"));
    assert!(joined.contains("same conversation again, earlier clock: \"ctx-a\""));
    assert!(joined.contains("after compaction: ([(Some(Submitted), 1)], (1, 1, 1), None, [], None, Some(\"alice\"), [])"), "{joined}");
}

/// Two nodes (two stores on one database), each accepting on `threads` threads at once.
fn two_nodes(db: &TestDatabase) -> (Store, Store, TempRoot, TempRoot) {
    let (root_a, root_b) = (TempRoot::new("node-a"), TempRoot::new("node-b"));
    let a = pg_store(db, &root_a);
    let b = pg_store(db, &root_b);
    (a, b, root_a, root_b)
}

/// The plane's dedupe: a prior claim of (principal, messageId) answers; else accept.
fn accept_once(
    store: &Store,
    node: &'static str,
    message_id: String,
) -> Result<String, StoreError> {
    store.write(move |tx| {
        if let Some(prior) = tx.claim_by_dedupe_key("alice", &message_id)? {
            return Ok(prior.task_id.expect("a Task"));
        }
        let task_id = format!("task-{node}-{message_id}");
        let context_id = format!("ctx-{node}-{message_id}");
        tx.insert_fresh_context(&context_id, "alice", "a2a", 1)?;
        accept(
            tx,
            &task_id,
            &format!("act-{node}-{message_id}"),
            &message_id,
            &context_id,
            1,
        )?;
        Ok(task_id)
    })
}

#[test]
fn the_same_message_id_accepted_on_two_nodes_at_once_gives_one_task() {
    let db = TestDatabase::new();
    let (a, b, _ra, _rb) = two_nodes(&db);
    let rounds = 20;
    let barrier = Barrier::new(8);
    // Every thread goes through every round (an error is kept, not raised), so a failed
    // acceptance cannot leave the others waiting at the barrier.
    let answers: Vec<(String, Result<String, StoreError>)> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..8)
            .map(|i| {
                let (store, node) = if i % 2 == 0 { (&a, "a") } else { (&b, "b") };
                let barrier = &barrier;
                s.spawn(move || {
                    (0..rounds)
                        .map(|round| {
                            barrier.wait();
                            let message_id = format!("m-{round}");
                            (message_id.clone(), accept_once(store, node, message_id))
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap())
            .collect()
    });
    let answers: Vec<(String, String)> = answers
        .into_iter()
        .map(|(m, task)| (m, task.expect("every acceptance is answered")))
        .collect();
    for round in 0..rounds {
        let message_id = format!("m-{round}");
        let tasks: std::collections::BTreeSet<&String> = answers
            .iter()
            .filter(|(m, _)| *m == message_id)
            .map(|(_, t)| t)
            .collect();
        assert_eq!(
            tasks.len(),
            1,
            "{message_id}: every sender hears of one Task: {tasks:?}"
        );
    }
    assert_eq!(db.psql("SELECT count(*) FROM tasks"), rounds.to_string());
    assert_eq!(db.psql("SELECT count(*) FROM claims"), rounds.to_string());
    assert_eq!(db.psql("SELECT n FROM task_counts"), rounds.to_string());
    let problems = a.read(|tx| tx.problems()).unwrap();
    assert!(problems.is_empty(), "{problems:?}");
}

#[test]
fn one_conversations_first_messages_on_two_nodes_at_once_share_one_context() {
    let db = TestDatabase::new();
    let (a, b, _ra, _rb) = two_nodes(&db);
    let barrier = Barrier::new(8);
    let contexts: Vec<String> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..8)
            .map(|i| {
                let store = if i % 2 == 0 { &a } else { &b };
                let barrier = &barrier;
                s.spawn(move || {
                    barrier.wait();
                    store
                        .write(move |tx| {
                            tx.context_of_conversation(
                                &format!("ctx-{i}"),
                                "alice",
                                "chat",
                                "thread-7",
                                i,
                            )
                        })
                        .unwrap()
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert!(contexts.iter().all(|c| *c == contexts[0]), "{contexts:?}");
    assert_eq!(db.psql("SELECT count(*) FROM contexts"), "1");
    assert_eq!(
        db.psql("SELECT last_event_ms FROM contexts"),
        "7",
        "the latest event wins"
    );
}

#[test]
fn two_nodes_appending_to_one_task_at_once_keep_every_message_in_order() {
    let db = TestDatabase::new();
    let (a, b, _ra, _rb) = two_nodes(&db);
    a.write(|tx| accept(tx, "task-1", "act-1", "m-1", "ctx-1", 1))
        .unwrap();
    let per_thread = 25;
    std::thread::scope(|s| {
        for i in 0..4 {
            let store = if i % 2 == 0 { &a } else { &b };
            s.spawn(move || {
                for n in 0..per_thread {
                    store
                        .write(move |tx| {
                            let task = tx.task_by_id("task-1")?.expect("task-1");
                            tx.append_history(
                                &task,
                                &MessageRecord::user_text(format!("m-{i}-{n}"), "x"),
                            )?;
                            tx.append_artifact(&task, &artifact(&format!("a-{i}-{n}"), "x"))
                        })
                        .unwrap();
                }
            });
        }
    });
    let (history, artifacts) = a
        .read(|tx| Ok::<_, StoreError>((tx.task_history(1, None)?, tx.task_artifacts(1)?)))
        .unwrap();
    assert_eq!(history.len(), 1 + 4 * per_thread);
    assert_eq!(artifacts.len(), 4 * per_thread);
    // Each writer's own messages keep their order.
    for i in 0..4 {
        let mine: Vec<String> = history
            .iter()
            .filter(|m| m.message_id.starts_with(&format!("m-{i}-")))
            .map(|m| m.message_id.clone())
            .collect();
        let expected: Vec<String> = (0..per_thread).map(|n| format!("m-{i}-{n}")).collect();
        assert_eq!(mine, expected);
    }
}
