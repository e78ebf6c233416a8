//! Startup compaction keeps exactly what the contract says, under an injected clock.

mod common;

use a2a_task_plane::clock::{ManualClock, DAY_MS};
use a2a_task_plane::plane::{
    DeliveryOutcome, DeliveryRequest, Disposition, InterruptKind, Recovery, TaskPlane,
};
use a2a_task_plane::record::{Continuation, TaskState};
use common::*;

fn reopen(plane: TaskPlane, root: &std::path::Path, clock: &ManualClock) -> TaskPlane {
    plane.close();
    let plane = open_with_clock(root, clock);
    plane
        .register_source("mail", Continuation::ReplyAnchors)
        .unwrap();
    plane
}

#[test]
fn a_terminal_task_and_its_claim_are_kept_thirty_days_then_the_identity_is_new_work() {
    let tmp = TempRoot::new("ret-terminal");
    let clock = ManualClock::new(T0);
    let plane = open_with_clock(&tmp.store(), &clock);
    let first = plane
        .accept_in_context("alice", None, user("m-1", "x"), vec![])
        .unwrap();
    let task = first.task_id.clone().unwrap();
    plane.complete(&task, vec![], Some(agent("done"))).unwrap();

    clock.advance(29 * DAY_MS);
    let plane = reopen(plane, &tmp.store(), &clock);
    assert!(plane
        .get_task("alice", &task, None, false)
        .unwrap()
        .is_some());
    let dup = plane
        .accept_in_context("alice", None, user("m-1", "x"), vec![])
        .unwrap();
    assert_eq!(
        dup.disposition,
        Disposition::Duplicate,
        "dedupe lives as long as the Task"
    );

    clock.advance(2 * DAY_MS);
    let plane = reopen(plane, &tmp.store(), &clock);
    assert!(plane.startup_report().tasks >= 1);
    assert!(
        plane
            .get_task("alice", &task, None, false)
            .unwrap()
            .is_none(),
        "pruned after 30 days"
    );
    let again = plane
        .accept_in_context("alice", None, user("m-1", "x"), vec![])
        .unwrap();
    assert_eq!(
        again.disposition,
        Disposition::Created,
        "the same identity is new work once pruned"
    );
    assert_ne!(again.task_id.as_deref(), Some(task.as_str()));
    assert_eq!(
        count_in(&plane, "SELECT COUNT(*) FROM history"),
        1,
        "the pruned Task's history went with it"
    );
}

#[test]
fn a_non_terminal_task_keeps_its_claim_context_anchor_and_evidence_past_the_window() {
    let tmp = TempRoot::new("ret-live");
    let clock = ManualClock::new(T0);
    let plane = open_with_clock(&tmp.store(), &clock);
    plane
        .register_source("mail", Continuation::ReplyAnchors)
        .unwrap();
    let event = native("alice", "mail", "ev-1", Some("thread-1"), "x");
    let task = plane.accept(event.clone()).unwrap().task_id.unwrap();
    plane.start_work(&task).unwrap();
    plane
        .require_input(&task, InterruptKind::InputRequired, agent("which?"), None)
        .unwrap();
    deliver_question(&plane, "alice", "mail", &task, "resp-1");
    plane
        .record_reply_anchor("alice", "mail", "resp-1", &task)
        .unwrap();

    clock.advance(90 * DAY_MS);
    let plane = reopen(plane, &tmp.store(), &clock);
    let dup = plane.accept(event).unwrap();
    assert_eq!(dup.disposition, Disposition::Duplicate);
    assert_eq!(dup.task_id.as_deref(), Some(task.as_str()));
    assert_eq!(
        plane.evidence_for_task(&task).unwrap().len(),
        1,
        "the activation's evidence is kept"
    );
    // The anchor still works: the reply continues the Task in the kept context.
    let continued = plane
        .continue_activation(reply("alice", "mail", "ev-2", "thread-1", "resp-1", "foo"))
        .unwrap();
    assert_eq!(continued.disposition, Disposition::Continued);
    assert_eq!(continued.context_id, dup.context_id);
}

#[test]
fn a_conversation_context_lives_thirty_days_after_its_last_event() {
    let tmp = TempRoot::new("ret-context");
    let clock = ManualClock::new(T0);
    let plane = open_with_clock(&tmp.store(), &clock);
    plane
        .register_source("mail", Continuation::ReplyAnchors)
        .unwrap();
    let first = plane
        .accept(native("alice", "mail", "ev-1", Some("thread-1"), "x"))
        .unwrap();
    plane
        .complete(first.task_id.as_deref().unwrap(), vec![], None)
        .unwrap();
    clock.advance(20 * DAY_MS);
    // A later event in the conversation moves its window on.
    let second = plane
        .accept(native("alice", "mail", "ev-2", Some("thread-1"), "y"))
        .unwrap();
    assert_eq!(second.context_id, first.context_id);
    plane
        .complete(second.task_id.as_deref().unwrap(), vec![], None)
        .unwrap();

    clock.advance(20 * DAY_MS);
    let plane = reopen(plane, &tmp.store(), &clock);
    let third = plane
        .accept(native("alice", "mail", "ev-3", Some("thread-1"), "z"))
        .unwrap();
    assert_eq!(
        third.context_id, first.context_id,
        "40 days after the first event, 20 after the last"
    );
    plane
        .complete(third.task_id.as_deref().unwrap(), vec![], None)
        .unwrap();

    clock.advance(31 * DAY_MS);
    let plane = reopen(plane, &tmp.store(), &clock);
    assert!(plane.startup_report().contexts >= 1);
    let fourth = plane
        .accept(native("alice", "mail", "ev-4", Some("thread-1"), "w"))
        .unwrap();
    assert_ne!(
        fourth.context_id, first.context_id,
        "the mapping expired 30 days after the last event"
    );
}

#[test]
fn a_context_referenced_by_a_non_terminal_task_is_never_pruned() {
    let tmp = TempRoot::new("ret-context-live");
    let clock = ManualClock::new(T0);
    let plane = open_with_clock(&tmp.store(), &clock);
    plane
        .register_source("mail", Continuation::ReplyAnchors)
        .unwrap();
    let first = plane
        .accept(native("alice", "mail", "ev-1", Some("thread-1"), "x"))
        .unwrap();
    clock.advance(365 * DAY_MS);
    let plane = reopen(plane, &tmp.store(), &clock);
    let later = plane
        .accept(native("alice", "mail", "ev-2", Some("thread-1"), "y"))
        .unwrap();
    assert_eq!(later.context_id, first.context_id);
    let state = plane
        .get_task("alice", first.task_id.as_deref().unwrap(), Some(0), false)
        .unwrap()
        .unwrap()
        .state;
    assert_eq!(state, TaskState::Submitted);
}

#[test]
fn deliveries_and_evidence_follow_the_window_and_sending_is_never_pruned() {
    let tmp = TempRoot::new("ret-delivery");
    let clock = ManualClock::new(T0);
    let plane = open_with_clock(&tmp.store(), &clock);
    let request = |id: &str| DeliveryRequest {
        delivery_id: id.into(),
        principal: "alice".into(),
        source: "mail".into(),
        task_id: None,
        operation_id: format!("op-{id}"),
        payload_digest: a2a_task_plane::plane::content_address(id.as_bytes()),
        recovery: Recovery::IdempotencyKey,
    };
    let done = plane
        .deliver(request("d-1"), None, || Ok("resp-1".into()))
        .unwrap();
    assert!(matches!(
        done,
        DeliveryOutcome::Delivered { sent_now: true, .. }
    ));
    let standalone = plane
        .record_evidence(
            "note",
            true,
            None,
            &Default::default(),
            serde_json::json!({"n": 1}),
        )
        .unwrap();
    // A delivery caught mid-send (a crash would leave it so).
    execute_in(
        &plane,
        &format!(
            "INSERT INTO deliveries (delivery_id, principal, source, task_id, operation_id, payload_digest, recovery, state, created_ms, updated_ms) \
             VALUES ('d-2', 'alice', 'mail', NULL, 'op-d-2', 'sha256:00', 'lookup', 'sending', {T0}, {T0})"
        ),
    );

    clock.advance(31 * DAY_MS);
    let plane = reopen(plane, &tmp.store(), &clock);
    assert_eq!(
        plane.delivery_state("d-1").unwrap(),
        None,
        "a delivered delivery past the window is pruned"
    );
    assert_eq!(
        plane.delivery_state("d-2").unwrap().map(|s| s.0).as_deref(),
        Some("sending")
    );
    assert_eq!(
        count_in(
            &plane,
            &format!("SELECT COUNT(*) FROM evidence WHERE evidence_id = '{standalone}'")
        ),
        0
    );
}

#[test]
fn startup_quarantines_a_claim_whose_task_is_missing() {
    let tmp = TempRoot::new("ret-orphan");
    let clock = ManualClock::new(T0);
    let plane = open_with_clock(&tmp.store(), &clock);
    let acc = plane
        .accept_in_context("alice", None, user("m-1", "x"), vec![])
        .unwrap();
    let task = acc.task_id.unwrap();
    execute_in(
        &plane,
        &format!("DELETE FROM tasks WHERE task_id = '{task}'"),
    );
    let plane = reopen(plane, &tmp.store(), &clock);
    assert_eq!(plane.startup_report().quarantined_claims, 1);
    assert_eq!(
        count_in(
            &plane,
            "SELECT COUNT(*) FROM claims WHERE state = 'QUARANTINED'"
        ),
        1
    );
    assert_eq!(
        count_in(
            &plane,
            "SELECT COUNT(*) FROM evidence WHERE NOT healthy AND kind = 'claim_quarantined'"
        ),
        1
    );
    // Recovery is idempotent: the next start finds nothing new.
    let plane = reopen(plane, &tmp.store(), &clock);
    assert_eq!(plane.startup_report().quarantined_claims, 0);
    plane.close();
}

/// Recovery looks only at the claims of Tasks removed since it last ran (the store notes
/// each removal, schema 5); a claim orphaned in a store from before that is found when
/// the store is upgraded.
#[test]
fn an_upgraded_store_quarantines_a_claim_orphaned_before_removals_were_noted() {
    if !on_sqlite("an_upgraded_store_quarantines_a_claim_orphaned_before_removals_were_noted") {
        return;
    }
    let tmp = TempRoot::new("ret-orphan-upgrade");
    let clock = ManualClock::new(T0);
    let plane = open_with_clock(&tmp.store(), &clock);
    let db = plane
        .store()
        .sqlite()
        .expect("a SQLite store")
        .db_path()
        .to_path_buf();
    let acc = plane
        .accept_in_context("alice", None, user("m-2", "x"), vec![])
        .unwrap();
    let task = acc.task_id.unwrap();
    plane.close();
    {
        let conn = rusqlite::Connection::open(&db).unwrap();
        conn.execute_batch("DROP TRIGGER tasks_removed; DROP TABLE removed_tasks;")
            .unwrap();
        conn.execute("DELETE FROM tasks WHERE task_id = ?1", [&task])
            .unwrap();
        conn.execute_batch("PRAGMA user_version = 4;").unwrap();
    }
    let plane = open_with_clock(&tmp.store(), &clock);
    assert_eq!(plane.startup_report().quarantined_claims, 1);
    assert_eq!(
        count(
            &db,
            "SELECT COUNT(*) FROM claims WHERE state = 'QUARANTINED'"
        ),
        1
    );
    let plane = reopen(plane, &tmp.store(), &clock);
    assert_eq!(plane.startup_report().quarantined_claims, 0);
    plane.close();
}

/// Sets a folder's modification time to `ms` (Unix ms).
fn set_mtime(dir: &std::path::Path, ms: i64) {
    let at = std::time::UNIX_EPOCH + std::time::Duration::from_millis(ms as u64);
    std::fs::File::open(dir).unwrap().set_modified(at).unwrap();
}

#[test]
fn a_task_session_folder_goes_with_its_task_and_an_orphan_after_the_window() {
    let tmp = TempRoot::new("ret-sessions");
    let clock = ManualClock::new(T0);
    let plane = open_with_clock(&tmp.store(), &clock);
    let settled = plane
        .accept_in_context("alice", None, user("m-1", "x"), vec![])
        .unwrap()
        .task_id
        .unwrap();
    let live = plane
        .accept_in_context("alice", None, user("m-2", "y"), vec![])
        .unwrap()
        .task_id
        .unwrap();
    let settled_dir = plane.session_dir(&settled).unwrap();
    let live_dir = plane.session_dir(&live).unwrap();
    std::fs::write(settled_dir.join("session.jsonl"), "{}\n").unwrap();
    plane
        .complete(&settled, vec![], Some(agent("done")))
        .unwrap();
    let sessions = tmp.store().join("sessions");
    // Two orphans (no Task): one unchanged since before the window, one recent.
    let old_orphan = sessions.join("orphan-old");
    let new_orphan = sessions.join("orphan-new");
    std::fs::create_dir(&old_orphan).unwrap();
    std::fs::create_dir(&new_orphan).unwrap();
    // Not a Task folder at all: never touched.
    std::fs::write(sessions.join("README.txt"), "mine").unwrap();
    set_mtime(&old_orphan, T0);
    set_mtime(&new_orphan, T0 + 30 * DAY_MS);
    set_mtime(&live_dir, T0 - DAY_MS);

    clock.advance(29 * DAY_MS);
    let plane = reopen(plane, &tmp.store(), &clock);
    assert!(settled_dir.is_dir(), "kept while its Task is kept");
    assert!(old_orphan.is_dir(), "an orphan is kept within the window");

    clock.advance(2 * DAY_MS);
    let plane = reopen(plane, &tmp.store(), &clock);
    assert!(!settled_dir.exists(), "removed with its compacted Task");
    assert!(
        !old_orphan.exists(),
        "an orphan unchanged past the window is removed"
    );
    assert!(new_orphan.is_dir(), "a recent orphan is kept for now");
    assert!(live_dir.is_dir(), "a live Task's folder stays however old");
    assert!(sessions.join("README.txt").is_file());
    assert_eq!(plane.startup_report().sessions, 2);
    plane.close();
}

/// `GET /tasks` reports `totalSize` from counts the store keeps (schema 4): they follow
/// every insert, state change and compaction, and a store migrated from schema 3 gets them
/// from the Tasks it already holds.
#[test]
fn the_kept_task_count_follows_inserts_state_changes_compaction_and_migration() {
    if !on_sqlite("the_kept_task_count_follows_inserts_state_changes_compaction_and_migration") {
        return;
    }
    use a2a_task_plane::plane::{Inspector, ListFilter};
    let tmp = TempRoot::new("ret-counts");
    let clock = ManualClock::new(T0);
    let plane = open_with_clock(&tmp.store(), &clock);
    let total = |plane: &TaskPlane, principal: &str, state: Option<TaskState>| {
        let filter = ListFilter {
            page_size: 1,
            state,
            ..ListFilter::default()
        };
        plane.list_tasks(principal, &filter).unwrap().total
    };
    let mut ids = Vec::new();
    for n in 0..5 {
        let accepted = plane
            .accept_in_context("alice", None, user(&format!("m-{n}"), "x"), vec![])
            .unwrap();
        ids.push(accepted.task_id.unwrap());
    }
    plane
        .accept_in_context("bob", None, user("m-b", "x"), vec![])
        .unwrap();
    plane
        .complete(&ids[0], vec![], Some(agent("done")))
        .unwrap();
    plane.start_work(&ids[1]).unwrap();
    assert_eq!(total(&plane, "alice", None), 5);
    assert_eq!(total(&plane, "alice", Some(TaskState::Completed)), 1);
    assert_eq!(total(&plane, "alice", Some(TaskState::Working)), 1);
    assert_eq!(total(&plane, "alice", Some(TaskState::Submitted)), 3);
    assert_eq!(total(&plane, "bob", None), 1);
    assert_eq!(total(&plane, "carol", None), 0);

    // Compaction deletes the settled Task 30 days on; its count goes with it.
    clock.advance(31 * DAY_MS);
    let plane = reopen(plane, &tmp.store(), &clock);
    assert_eq!(total(&plane, "alice", None), 4);
    assert_eq!(total(&plane, "alice", Some(TaskState::Completed)), 0);
    let db = plane
        .store()
        .sqlite()
        .expect("a SQLite store")
        .db_path()
        .to_path_buf();
    plane.close();
    let inspector = Inspector::open(&tmp.store()).unwrap();
    assert_eq!(inspector.check().unwrap(), Vec::<String>::new());
    drop(inspector);

    // A store from before the counts: they are rebuilt from its Tasks on open.
    {
        let conn = rusqlite::Connection::open(&db).unwrap();
        conn.execute_batch(
            "DROP TRIGGER task_counts_delete; DROP TABLE task_counts; \
             DROP TRIGGER tasks_removed; DROP TABLE removed_tasks; PRAGMA user_version = 3;",
        )
        .unwrap();
    }
    let plane = open_with_clock(&tmp.store(), &clock);
    assert_eq!(total(&plane, "alice", None), 4);
    assert_eq!(total(&plane, "alice", Some(TaskState::Working)), 1);
    assert_eq!(total(&plane, "bob", None), 1);
    // After the migrations the counts still follow a state change and an insert, once
    // each (schema 7 keeps them in the statements, not in triggers).
    plane.start_work(&ids[2]).unwrap();
    plane
        .accept_in_context("alice", None, user("m-after", "x"), vec![])
        .unwrap();
    assert_eq!(total(&plane, "alice", None), 5);
    assert_eq!(total(&plane, "alice", Some(TaskState::Working)), 2);
    assert_eq!(total(&plane, "alice", Some(TaskState::Submitted)), 3);
    plane.close();
    let inspector = Inspector::open(&tmp.store()).unwrap();
    assert_eq!(inspector.check().unwrap(), Vec::<String>::new());
}

/// Evidence is kept in insertion order (schema 6): the same content about the same Task, or
/// about no Task, is still one record, the same content about two Tasks is one record
/// each, and a store from before keeps every record it held.
#[test]
fn evidence_is_one_record_per_content_and_task_before_and_after_the_schema_6_migration() {
    if !on_sqlite(
        "evidence_is_one_record_per_content_and_task_before_and_after_the_schema_6_migration",
    ) {
        return;
    }
    use a2a_task_plane::plane::Inspector;
    let tmp = TempRoot::new("ret-evidence-v6");
    let clock = ManualClock::new(T0);
    let plane = open_with_clock(&tmp.store(), &clock);
    let task = |plane: &TaskPlane, id: &str| {
        plane
            .accept_in_context("alice", None, user(id, "x"), vec![])
            .unwrap()
            .task_id
            .unwrap()
    };
    let (a, b) = (task(&plane, "m-a"), task(&plane, "m-b"));
    let note = |plane: &TaskPlane, task: Option<&str>, n: i64| {
        plane
            .record_evidence(
                "note",
                true,
                task,
                &Default::default(),
                serde_json::json!({ "n": n }),
            )
            .unwrap()
    };
    let notes = |plane: &TaskPlane, task: &str| {
        plane
            .evidence_for_task(task)
            .unwrap()
            .into_iter()
            .filter(|e| e.1 == "note")
            .count()
    };
    let first = note(&plane, Some(&a), 1);
    assert_eq!(note(&plane, Some(&a), 1), first, "same content, same id");
    note(&plane, Some(&b), 1);
    note(&plane, None, 1);
    note(&plane, None, 1);
    assert_eq!((notes(&plane, &a), notes(&plane, &b)), (1, 1));
    let db = plane
        .store()
        .sqlite()
        .expect("a SQLite store")
        .db_path()
        .to_path_buf();
    let standalone = "SELECT COUNT(*) FROM evidence WHERE kind = 'note' AND task_id IS NULL";
    assert_eq!(count(&db, standalone), 1);
    let all = count(&db, "SELECT COUNT(*) FROM evidence");
    plane.close();

    // The schema 5 table, keyed by content address alone, holding what the store held
    // (the same content about two Tasks and about no Task was one record there).
    {
        let conn = rusqlite::Connection::open(&db).unwrap();
        conn.execute_batch(
            "CREATE TABLE evidence_v5 (evidence_id TEXT PRIMARY KEY, kind TEXT NOT NULL, \
               healthy INTEGER NOT NULL, task_id TEXT, activation_id TEXT, locator TEXT NOT NULL, \
               content TEXT NOT NULL, recorded_ms INTEGER NOT NULL) WITHOUT ROWID; \
             INSERT OR IGNORE INTO evidence_v5 SELECT evidence_id, kind, healthy, task_id, \
               activation_id, locator, content, recorded_ms FROM evidence ORDER BY seq; \
             DROP TABLE evidence; ALTER TABLE evidence_v5 RENAME TO evidence; \
             CREATE INDEX evidence_by_task ON evidence(task_id) WHERE task_id IS NOT NULL; \
             CREATE INDEX evidence_by_time ON evidence(recorded_ms); PRAGMA user_version = 5;",
        )
        .unwrap();
    }
    let held = count(&db, "SELECT COUNT(*) FROM evidence");
    assert_eq!(held, all - 2, "schema 5 held the same content once");
    let plane = open_with_clock(&tmp.store(), &clock);
    assert_eq!(
        count(&db, "SELECT COUNT(*) FROM evidence"),
        held,
        "nothing lost"
    );
    assert_eq!(
        count(&db, "PRAGMA user_version"),
        a2a_task_plane::store::SCHEMA_VERSION
    );
    assert_eq!((notes(&plane, &a), notes(&plane, &b)), (1, 0));
    // After the migration the rule holds as before: once per content and Task.
    note(&plane, Some(&a), 1);
    note(&plane, Some(&b), 1);
    note(&plane, Some(&b), 1);
    note(&plane, None, 1);
    assert_eq!((notes(&plane, &a), notes(&plane, &b)), (1, 1));
    assert_eq!(count(&db, standalone), 1);
    plane.close();
    let inspector = Inspector::open(&tmp.store()).unwrap();
    assert_eq!(inspector.check().unwrap(), Vec::<String>::new());
}

/// A Task's next history and artifact positions come from what its history and artifacts
/// hold (schema 8), not from counts on its row: a Task written before the upgrade, whose
/// row counts say anything at all, goes on in order after it.
#[test]
fn history_and_artifacts_go_on_in_order_across_the_schema_8_upgrade() {
    if !on_sqlite("history_and_artifacts_go_on_in_order_across_the_schema_8_upgrade") {
        return;
    }
    use a2a_task_plane::plane::InterruptKind;
    use a2a_task_plane::record::ArtifactRecord;
    let tmp = TempRoot::new("ret-positions-v8");
    let clock = ManualClock::new(T0);
    let plane = open_with_clock(&tmp.store(), &clock);
    let artifact = |id: &str| ArtifactRecord {
        artifact_id: id.into(),
        name: None,
        description: None,
        parts: agent(id).parts,
        metadata: None,
        extensions: vec![],
    };
    let task = plane
        .accept_in_context("alice", None, user("m-1", "first"), vec![])
        .unwrap()
        .task_id
        .unwrap();
    plane.start_work(&task).unwrap();
    plane.record_artifact(&task, artifact("a-1")).unwrap();
    plane
        .require_input(&task, InterruptKind::InputRequired, agent("which?"), None)
        .unwrap();
    let db = plane
        .store()
        .sqlite()
        .expect("a SQLite store")
        .db_path()
        .to_path_buf();
    plane.close();
    {
        let conn = rusqlite::Connection::open(&db).unwrap();
        conn.execute_batch(
            "UPDATE tasks SET history_len = 57, artifact_len = 0; PRAGMA user_version = 7;",
        )
        .unwrap();
    }
    let plane = open_with_clock(&tmp.store(), &clock);
    assert_eq!(
        count(&db, "PRAGMA user_version"),
        a2a_task_plane::store::SCHEMA_VERSION
    );
    plane
        .continue_task("alice", &task, None, user("m-2", "the blue one"), vec![])
        .unwrap();
    plane.start_work(&task).unwrap();
    plane
        .complete(
            &task,
            vec![artifact("a-2"), artifact("a-3")],
            Some(agent("done")),
        )
        .unwrap();
    let done = plane.task(&task, None, true).unwrap().unwrap();
    let texts: Vec<String> = done.history.iter().map(|m| m.text()).collect();
    assert_eq!(texts, ["first", "which?", "the blue one", "done"]);
    let ids: Vec<&str> = done
        .artifacts
        .iter()
        .map(|a| a.artifact_id.as_str())
        .collect();
    assert_eq!(ids, ["a-1", "a-2", "a-3"]);
    assert_eq!(
        count(&db, "SELECT MAX(n) FROM history"),
        3,
        "positions 0..=3, none skipped"
    );
}
