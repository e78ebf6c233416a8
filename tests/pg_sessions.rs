//! A Task's Pi session follows it across a fleet's nodes (docs/fleet.md): the session files
//! a turn leaves on one node are kept in PostgreSQL and restored on the node that works
//! the Task next; on SQLite nothing is kept (the root is local).

mod common;

use a2a_task_plane::config::store_backend;
use a2a_task_plane::plane::{local_session_files, PlaneOptions, TaskPlane};
use a2a_task_plane::record::Continuation;
use common::postgres::TestDatabase;
use common::{native, TempRoot};

fn node(db: &TestDatabase, root: &TempRoot) -> TaskPlane {
    let url = db.url();
    let env = |name: &str| (name == "A2A_STORE_URL").then(|| url.clone());
    let options = PlaneOptions {
        store: store_backend(&env).unwrap(),
        ..PlaneOptions::default()
    };
    let plane = TaskPlane::open(&root.store(), options).unwrap();
    plane.register_source("slack", Continuation::None).unwrap();
    plane
}

#[test]
fn a_tasks_session_kept_on_one_node_is_restored_on_another() {
    let db = TestDatabase::new();
    let (root_a, root_b) = (TempRoot::new("node-a"), TempRoot::new("node-b"));
    let (a, b) = (node(&db, &root_a), node(&db, &root_b));
    let task = a
        .accept(native("team", "slack", "ev-1", Some("C1"), "hello"))
        .unwrap()
        .task_id
        .unwrap();

    // Node A's turn: a session file, kept when the turn ends.
    let dir_a = a.session_dir(&task).unwrap();
    std::fs::write(dir_a.join("s1_task.jsonl"), "{\"turn\":1}\n").unwrap();
    assert!(a.keep_session(&task).unwrap());
    assert_eq!(
        db.psql(&format!(
            "SELECT count(*) FROM task_sessions WHERE task_id = '{task}'"
        )),
        "1"
    );

    // Node B works the Task next: its folder gets the session before the turn.
    let dir_b = b.session_dir(&task).unwrap();
    assert_eq!(
        std::fs::read_to_string(dir_b.join("s1_task.jsonl")).unwrap(),
        "{\"turn\":1}\n"
    );
    // A node whose copy equals the kept one is sent no body.
    let local = local_session_files(&dir_b).unwrap();
    let kept = b
        .store()
        .read(|tx| tx.task_session_files(&task, &local))
        .unwrap();
    assert_eq!(kept.len(), 1);
    assert_eq!(kept[0].name, "s1_task.jsonl");
    assert_eq!(kept[0].body, None);
    let kept = b
        .store()
        .read(|tx| tx.task_session_files(&task, &[]))
        .unwrap();
    assert_eq!(kept[0].body.as_deref(), Some(&b"{\"turn\":1}\n"[..]));
    // B's turn appends; kept again, and A (whose copy is older now) gets B's.
    std::fs::write(dir_b.join("s1_task.jsonl"), "{\"turn\":1}\n{\"turn\":2}\n").unwrap();
    assert!(b.keep_session(&task).unwrap());
    a.session_dir(&task).unwrap();
    assert_eq!(
        std::fs::read_to_string(dir_a.join("s1_task.jsonl")).unwrap(),
        "{\"turn\":1}\n{\"turn\":2}\n"
    );
    a.close();
    b.close();
}

#[test]
fn a_kept_session_goes_with_its_task() {
    let db = TestDatabase::new();
    let root = TempRoot::new("node");
    let plane = node(&db, &root);
    let task = plane
        .accept(native("team", "slack", "ev-1", Some("C1"), "hello"))
        .unwrap()
        .task_id
        .unwrap();
    let dir = plane.session_dir(&task).unwrap();
    std::fs::write(dir.join("s.jsonl"), "{}\n").unwrap();
    assert!(plane.keep_session(&task).unwrap());
    db.psql(&format!("DELETE FROM tasks WHERE task_id = '{task}'"));
    assert_eq!(db.psql("SELECT count(*) FROM task_sessions"), "0");
    plane.close();
}

#[test]
fn sqlite_keeps_no_session_in_the_database() {
    let root = TempRoot::new("sqlite");
    let plane = TaskPlane::open(&root.store(), PlaneOptions::default()).unwrap();
    plane.register_source("slack", Continuation::None).unwrap();
    let task = plane
        .accept(native("team", "slack", "ev-1", Some("C1"), "hello"))
        .unwrap()
        .task_id
        .unwrap();
    let dir = plane.session_dir(&task).unwrap();
    std::fs::write(dir.join("s.jsonl"), "{}\n").unwrap();
    assert!(!plane.keep_session(&task).unwrap());
    assert!(dir.join("s.jsonl").exists());
    plane.close();
}

#[test]
fn a_session_over_the_limit_is_not_kept_and_the_error_names_the_task_and_the_limit() {
    let db = TestDatabase::new();
    let root = TempRoot::new("node");
    let plane = node(&db, &root);
    let task = plane
        .accept(native("team", "slack", "ev-1", Some("C1"), "hello"))
        .unwrap()
        .task_id
        .unwrap();
    let dir = plane.session_dir(&task).unwrap();
    // Sparse: no 32 MiB written, and the size is refused before any byte is read.
    std::fs::File::create(dir.join("s.jsonl"))
        .unwrap()
        .set_len(a2a_task_plane::plane::MAX_KEPT_SESSION_BYTES + 1)
        .unwrap();
    let err = plane.keep_session(&task).unwrap_err().to_string();
    assert!(err.contains(&format!("task {task}")), "{err}");
    assert!(err.contains("32 MiB"), "{err}");
    assert_eq!(db.psql("SELECT count(*) FROM task_sessions"), "0");
    plane.close();
}
