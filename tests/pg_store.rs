//! The PostgreSQL store as a backend of the store handle, against a real server: a write
//! is one transaction committed before its reply, a failed one leaves nothing, writes run
//! on every worker at once, close ends everything, and a database that cannot be reached
//! is named (host, port, database, user) without its password.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use a2a_task_plane::config::{store_backend, PostgresUrl, StoreBackend};
use a2a_task_plane::pg::{PgOptions, PgStore, ATTEMPTS};
use a2a_task_plane::store::{Store, StoreError};
use common::postgres::{TestDatabase, TestPostgres};
use common::TempRoot;

pub fn url(text: &str) -> PostgresUrl {
    let env = |name: &str| (name == "A2A_STORE_URL").then(|| text.to_string());
    match store_backend(&env) {
        Ok(StoreBackend::Postgres(url)) => url,
        other => panic!("{text}: {other:?}"),
    }
}

fn open(db: &TestDatabase, root: &TempRoot) -> Store {
    let pg = PgStore::open(&url(&db.url()), &root.store(), PgOptions::default()).unwrap();
    Store::with_backend(Arc::new(pg), None)
}

#[test]
fn a_write_is_one_transaction_committed_before_its_reply() {
    let (db, root) = (TestDatabase::new(), TempRoot::new("pg"));
    let store = open(&db, &root);
    store
        .write(|tx| {
            tx.insert_fresh_context("c-1", "alice", "a2a", 1)?;
            tx.insert_fresh_context("c-2", "alice", "a2a", 2)
        })
        .unwrap();
    // Another session sees both as soon as the reply came.
    assert_eq!(db.psql("SELECT count(*) FROM contexts"), "2");
    let owner = store.read(|tx| tx.context_owner("c-2")).unwrap();
    assert_eq!(owner.as_deref(), Some("alice"));
    assert!(root.store().is_dir(), "the local root is made");
}

#[test]
fn a_failed_write_leaves_nothing_and_says_what_postgres_refused() {
    let (db, root) = (TestDatabase::new(), TempRoot::new("pg"));
    let store = open(&db, &root);
    let err = store
        .write(|tx| {
            tx.insert_fresh_context("c-1", "alice", "a2a", 1)?;
            tx.insert_fresh_context("c-1", "alice", "a2a", 1)
        })
        .unwrap_err();
    assert!(err.to_string().contains("SQLSTATE 23505"), "{err}");
    assert!(err.to_string().contains("PostgreSQL"), "{err}");
    assert_eq!(db.psql("SELECT count(*) FROM contexts"), "0");
    // A job's own error after a write rolls the write back too.
    let err = store
        .write(|tx| {
            tx.insert_fresh_context("c-2", "alice", "a2a", 1)?;
            Err::<(), _>(StoreError::Corrupt("the rule said no".into()))
        })
        .unwrap_err();
    assert!(err.to_string().contains("the rule said no"), "{err}");
    assert_eq!(db.psql("SELECT count(*) FROM contexts"), "0");
    // The workers and their connections go on serving.
    store
        .write(|tx| tx.insert_fresh_context("c-3", "alice", "a2a", 1))
        .unwrap();
    assert_eq!(db.psql("SELECT count(*) FROM contexts"), "1");
}

#[test]
fn a_write_that_ignores_a_refused_statement_is_rolled_back_not_committed_in_part() {
    let (db, root) = (TestDatabase::new(), TempRoot::new("pg"));
    let store = open(&db, &root);
    db.psql("INSERT INTO contexts VALUES ('taken', 'bob', 'a2a', NULL, 1, 1)");
    let runs = Arc::new(AtomicUsize::new(0));
    let counted = runs.clone();
    let err = store
        .write(move |tx| {
            counted.fetch_add(1, Ordering::SeqCst);
            tx.insert_fresh_context("c-1", "alice", "a2a", 1)?;
            let _ = tx.insert_fresh_context("taken", "alice", "a2a", 1);
            Ok::<_, StoreError>(())
        })
        .unwrap_err();
    assert!(err.to_string().contains("refused"), "{err}");
    assert_eq!(
        db.psql("SELECT count(*) FROM contexts"),
        "1",
        "only `taken`"
    );
    // A unique violation may be a lost race: the job ran again, a bounded number of times.
    assert_eq!(runs.load(Ordering::SeqCst), ATTEMPTS as usize);
}

#[test]
fn a_write_that_panics_is_rolled_back_and_answered_and_its_writer_goes_on() {
    let (db, root) = (TestDatabase::new(), TempRoot::new("pg"));
    let pg = PgStore::open(
        &url(&db.url()),
        &root.store(),
        PgOptions {
            writers: 1,
            ..PgOptions::default()
        },
    )
    .unwrap();
    let store = Store::with_backend(Arc::new(pg), None);
    let err = store
        .write(|tx| {
            tx.insert_fresh_context("c-1", "alice", "a2a", 1)?;
            if tx.context_owner("c-1")?.is_some() {
                panic!("a bug in a job");
            }
            Ok::<_, StoreError>(())
        })
        .unwrap_err();
    assert!(err.to_string().contains("panicked"), "{err}");
    assert_eq!(db.psql("SELECT count(*) FROM contexts"), "0");
    // The one writer still serves.
    store
        .write(|tx| tx.insert_fresh_context("c-2", "alice", "a2a", 1))
        .unwrap();
    assert_eq!(db.psql("SELECT context_id FROM contexts"), "c-2");
}

#[test]
fn a_write_whose_connection_the_server_ended_runs_again_on_a_new_one() {
    let (db, root) = (TestDatabase::new(), TempRoot::new("pg"));
    let store = open(&db, &root);
    store
        .write(|tx| tx.insert_fresh_context("c-1", "alice", "a2a", 1))
        .unwrap();
    // What a database restart does to a node: every connection it holds is ended.
    let ended = db.psql(&format!(
        "SELECT count(*) FROM (SELECT pg_terminate_backend(pid) FROM pg_stat_activity          WHERE datname = '{}' AND application_name = 'a2a-task-plane') t",
        db.name
    ));
    let writers = PgOptions::default().writers;
    assert!(ended.parse::<u32>().unwrap() >= writers, "{ended} ended");
    let runs = Arc::new(AtomicUsize::new(0));
    let counted = runs.clone();
    store
        .write(move |tx| {
            counted.fetch_add(1, Ordering::SeqCst);
            tx.insert_fresh_context("c-2", "alice", "a2a", 2)
        })
        .unwrap();
    // The ended connections fail at BEGIN (before the job runs) or at its first
    // statement; either way the write is made once, on a new connection.
    assert!(runs.load(Ordering::SeqCst) >= 1);
    assert_eq!(
        db.psql("SELECT string_agg(context_id, ',' ORDER BY context_id) FROM contexts"),
        "c-1,c-2"
    );
}

#[test]
fn writes_run_on_every_worker_at_once() {
    // Several writers (for independent writes only: one caller's queued writes keep their
    // order with the default one, see `writes_queued_one_after_another_…`).
    let (db, root) = (TestDatabase::new(), TempRoot::new("pg"));
    let options = PgOptions {
        writers: 4,
        ..PgOptions::default()
    };
    let pg = PgStore::open(&url(&db.url()), &root.store(), options).unwrap();
    let store = Store::with_backend(Arc::new(pg), None);
    // Four writes that each wait (up to 10 s) for all four to have started: they all see
    // four only if the four workers run them at the same time.
    let started = Arc::new(AtomicUsize::new(0));
    let (sender, replies) = mpsc::channel();
    for n in 0..4 {
        let (started, sender) = (started.clone(), sender.clone());
        let blocked = store.submit(
            move |tx| {
                started.fetch_add(1, Ordering::SeqCst);
                let deadline = Instant::now() + Duration::from_secs(10);
                while started.load(Ordering::SeqCst) < 4 && Instant::now() < deadline {
                    std::thread::sleep(Duration::from_millis(5));
                }
                tx.insert_fresh_context(&format!("c-{n}"), "alice", "a2a", 1)?;
                Ok::<_, StoreError>(started.load(Ordering::SeqCst))
            },
            None,
            Box::new(move |seen| sender.send(seen).unwrap()),
        );
        assert!(blocked.is_none());
    }
    let seen: Vec<usize> = (0..4)
        .map(|_| {
            replies
                .recv_timeout(Duration::from_secs(30))
                .unwrap()
                .unwrap()
        })
        .collect();
    assert_eq!(seen, vec![4; 4]);
    assert_eq!(db.psql("SELECT count(*) FROM contexts"), "4");
}

#[test]
fn a_closed_store_refuses_work_and_closes_its_connections() {
    let (db, root) = (TestDatabase::new(), TempRoot::new("pg"));
    let store = open(&db, &root);
    let count = || {
        db.psql(&format!(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = '{}' AND application_name = 'a2a-task-plane'",
            db.name
        ))
    };
    assert_eq!(
        count(),
        PgOptions::default().writers.to_string(),
        "one connection per writer, readers on demand"
    );
    store.close();
    assert!(store.is_closed());
    let write = store.write(|tx| tx.insert_fresh_context("c-1", "alice", "a2a", 1));
    assert!(matches!(write, Err(StoreError::Closed)), "{write:?}");
    let read = store.read(|tx| tx.context_owner("c-1"));
    assert!(matches!(read, Err(StoreError::Closed)), "{read:?}");
    drop(store);
    let start = Instant::now();
    while count() != "0" && start.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(count(), "0", "every connection is closed");
}

#[test]
fn an_unreachable_database_is_named_by_host_and_name_without_the_password() {
    let root = TempRoot::new("pg");
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let err = PgStore::open(
        &url(&format!("postgres://a2a:s3cret@127.0.0.1:{port}/fleet")),
        &root.store(),
        PgOptions::default(),
    )
    .err()
    .unwrap();
    let text = err.to_string();
    assert!(text.contains(&format!("127.0.0.1:{port}")), "{text}");
    assert!(text.contains("`fleet`"), "{text}");
    assert!(text.contains("A2A_STORE_URL"), "{text}");
    assert!(!text.contains("s3cret"), "{text}");
}

#[test]
fn a_refused_password_is_named_by_database_and_user_without_the_password() {
    let root = TempRoot::new("pg");
    let cluster = TestPostgres::shared();
    let wrong = format!(
        "postgres://a2a:wrong-s3cret@127.0.0.1:{}/postgres",
        cluster.port()
    );
    let err = PgStore::open(&url(&wrong), &root.store(), PgOptions::default())
        .err()
        .unwrap();
    let text = err.to_string();
    assert!(
        text.contains("`postgres`") && text.contains("`a2a`"),
        "{text}"
    );
    assert!(text.contains("password authentication failed"), "{text}");
    assert!(!text.contains("wrong-s3cret"), "{text}");
}

/// A caller's writes, queued one after another without waiting for each, are applied in
/// the order they were queued, as the SQLite store's one writer applies them: an agent
/// may issue `startWork` then `complete` back to back (the addon does, through
/// `store::InOrder`), and `complete` must not land first.
#[test]
fn writes_queued_one_after_another_are_applied_in_that_order() {
    use a2a_task_plane::record::{Continuation, MessageRecord, TaskState};
    use a2a_task_plane::store::tasks::NewTask;
    let (db, root) = (TestDatabase::new(), TempRoot::new("pg"));
    let store = open(&db, &root);
    store
        .write(|tx| {
            tx.insert_fresh_context("c-1", "alice", "a2a", 1)?;
            let seq = tx.insert_task(&NewTask {
                task_id: "t-1",
                principal: "alice",
                context_id: "c-1",
                source: "a2a",
                continuation: Continuation::ExplicitTaskId,
                state: TaskState::Submitted,
                extensions: &[],
                now_ms: 1,
            })?;
            tx.insert_first_message(seq, &MessageRecord::user_text("m-0", "first"))
        })
        .unwrap();
    let n = 200;
    let (done, replies) = mpsc::channel();
    for i in 1..=n {
        let done = done.clone();
        let message = MessageRecord::user_text(format!("m-{i}"), "next");
        let blocked = store.submit(
            move |tx| {
                let task = tx.task_by_id("t-1")?.expect("the Task");
                tx.append_history(&task, &message)
            },
            None,
            Box::new(move |result: Result<(), StoreError>| {
                let _ = done.send(result);
            }),
        );
        assert!(blocked.is_none(), "the queue has room for {n} writes");
    }
    for _ in 1..=n {
        replies
            .recv_timeout(Duration::from_secs(30))
            .unwrap()
            .unwrap();
    }
    let ids: Vec<String> = store
        .read(|tx| {
            let task = tx.task_by_id("t-1")?.expect("the Task");
            tx.task_history(task.seq, None)
        })
        .unwrap()
        .into_iter()
        .map(|m| m.message_id)
        .collect();
    let expected: Vec<String> = (0..=n).map(|i| format!("m-{i}")).collect();
    assert_eq!(
        ids, expected,
        "the history is in the order the writes were queued"
    );
}
