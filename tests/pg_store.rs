//! The PostgreSQL store as a backend of the store handle, against a real server: a write
//! is one transaction committed before its reply, a failed one leaves nothing, writes run
//! on every worker at once, writes queued together are one batch (one commit, a failing
//! one rolled back alone, order kept), close ends everything, and a database that cannot
//! be reached is named (host, port, database, user) without its password.

mod common;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use a2a_task_plane::config::{store_backend, PostgresUrl, StoreBackend};
use a2a_task_plane::pg::{PgOptions, PgStore, ATTEMPTS, MAX_BATCH};
use a2a_task_plane::record::{Continuation, MessageRecord, TaskState};
use a2a_task_plane::store::tasks::{InputRequest, NewTask};
use a2a_task_plane::store::{FaultAction, Faults, Store, StoreError, WriteTx};
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

/// A write for [`in_one_batch`].
type Write = Box<dyn FnMut(&dyn WriteTx) -> Result<(), StoreError> + Send>;

/// Queues `writes` while the writer is busy with another write, so that they reach it
/// together and it takes them as one batch; their replies, in queue order.
fn in_one_batch(store: &Store, writes: Vec<Write>) -> Vec<Result<(), StoreError>> {
    assert!(writes.len() <= MAX_BATCH);
    let started = Arc::new(AtomicBool::new(false));
    let release = Arc::new(AtomicBool::new(false));
    let (flags, (done, replies)) = ((started.clone(), release.clone()), mpsc::channel());
    let blocker_done = done.clone();
    let blocked = store.submit(
        move |_tx| {
            flags.0.store(true, Ordering::SeqCst);
            let deadline = Instant::now() + Duration::from_secs(10);
            while !flags.1.load(Ordering::SeqCst) && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(2));
            }
            Ok::<_, StoreError>(())
        },
        None,
        Box::new(move |result| blocker_done.send((usize::MAX, result)).unwrap()),
    );
    assert!(blocked.is_none());
    let deadline = Instant::now() + Duration::from_secs(10);
    while !started.load(Ordering::SeqCst) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(2));
    }
    assert!(
        started.load(Ordering::SeqCst),
        "the writer took the first write"
    );
    let n = writes.len();
    for (at, write) in writes.into_iter().enumerate() {
        let done = done.clone();
        let blocked = store.submit(
            write,
            None,
            Box::new(move |result| done.send((at, result)).unwrap()),
        );
        assert!(blocked.is_none());
    }
    release.store(true, Ordering::SeqCst);
    let mut answers: Vec<Option<Result<(), StoreError>>> = (0..n).map(|_| None).collect();
    for _ in 0..=n {
        let (at, result) = replies.recv_timeout(Duration::from_secs(30)).unwrap();
        match at {
            usize::MAX => result.unwrap(),
            at => answers[at] = Some(result),
        }
    }
    answers.into_iter().map(Option::unwrap).collect()
}

/// A store with one writer whose steps `faults` sees (and may fail).
fn open_with_faults(db: &TestDatabase, root: &TempRoot, faults: &Arc<Faults>) -> Store {
    let options = PgOptions {
        faults: Some(faults.clone()),
        ..PgOptions::default()
    };
    let pg = PgStore::open(&url(&db.url()), &root.store(), options).unwrap();
    Store::with_backend(Arc::new(pg), None)
}

/// A store on a fresh database with fault injection (its trace not started). Dropped in
/// field order: the store closes before its database goes.
struct FaultyStore {
    store: Store,
    faults: Arc<Faults>,
    db: TestDatabase,
    _root: TempRoot,
}

fn faulty_store() -> FaultyStore {
    let (db, root, faults) = (
        TestDatabase::new(),
        TempRoot::new("pg"),
        Arc::new(Faults::new()),
    );
    FaultyStore {
        store: open_with_faults(&db, &root, &faults),
        faults,
        db,
        _root: root,
    }
}

fn commits(faults: &Faults) -> usize {
    faults
        .trace()
        .iter()
        .filter(|step| *step == "step commit")
        .count()
}

fn new_task<'a>(task_id: &'a str, context_id: &'a str) -> NewTask<'a> {
    NewTask {
        task_id,
        principal: "alice",
        context_id,
        source: "a2a",
        continuation: Continuation::ExplicitTaskId,
        state: TaskState::Submitted,
        extensions: &[],
        now_ms: 1,
    }
}

/// A write that makes context `c` and a Task `t-<c>` in it.
fn context_and_task(c: &'static str) -> Write {
    Box::new(move |tx| {
        tx.insert_fresh_context(c, "alice", "a2a", 1)?;
        tx.insert_task(&new_task(&format!("t-{c}"), c))?;
        Ok(())
    })
}

fn contexts(db: &TestDatabase) -> String {
    db.psql("SELECT string_agg(context_id, ',' ORDER BY context_id) FROM contexts")
}

fn submitted_count(db: &TestDatabase) -> String {
    db.psql("SELECT COALESCE(SUM(n), 0) FROM task_counts WHERE principal = 'alice' AND state = 'submitted'")
}

#[test]
fn writes_queued_together_are_committed_in_one_transaction_and_all_answered_after_it() {
    let f = faulty_store();
    let (db, faults, store) = (&f.db, &f.faults, &f.store);
    faults.start_trace();
    let writes: Vec<Write> = ["c-1", "c-2", "c-3", "c-4", "c-5"]
        .into_iter()
        .map(context_and_task)
        .collect();
    let answers = in_one_batch(store, writes);
    assert!(answers.iter().all(Result::is_ok), "{answers:?}");
    assert_eq!(
        commits(faults),
        2,
        "one commit for the write that kept the writer busy, one for the five queued behind it"
    );
    // Durable and visible to another session once answered, counts included.
    assert_eq!(contexts(db), "c-1,c-2,c-3,c-4,c-5");
    assert_eq!(submitted_count(db), "5");
}

#[test]
fn a_failing_write_in_a_batch_is_rolled_back_alone_with_its_task_counts_and_the_others_commit() {
    let f = faulty_store();
    let (db, faults, store) = (&f.db, &f.faults, &f.store);
    faults.start_trace();
    let writes: Vec<Write> = vec![
        context_and_task("c-1"),
        // Its own error after writing a context and a Task (counted).
        Box::new(|tx| {
            tx.insert_fresh_context("c-2", "alice", "a2a", 1)?;
            tx.insert_task(&new_task("t-c-2", "c-2"))?;
            Err(StoreError::Corrupt("the rule said no".into()))
        }),
        // A statement PostgreSQL refused (text with a NUL byte), ignored.
        Box::new(|tx| {
            tx.insert_fresh_context("c-3", "alice", "a2a", 1)?;
            let _ = tx.insert_fresh_context("c-\0", "alice", "a2a", 1);
            Ok(())
        }),
        context_and_task("c-4"),
    ];
    let answers = in_one_batch(store, writes);
    assert!(answers[0].is_ok() && answers[3].is_ok(), "{answers:?}");
    let own = answers[1].as_ref().unwrap_err().to_string();
    assert!(own.contains("the rule said no"), "{own}");
    let refused = answers[2].as_ref().unwrap_err().to_string();
    assert!(refused.contains("refused"), "{refused}");
    assert_eq!(commits(faults), 2, "the four were one batch");
    assert_eq!(contexts(db), "c-1,c-4");
    assert_eq!(
        submitted_count(db),
        "2",
        "the failed write's count went with it"
    );
    assert_eq!(db.psql("SELECT count(*) FROM tasks"), "2");
}

#[test]
fn a_write_rolled_back_in_a_batch_leaves_no_task_version_or_change_behind() {
    let f = faulty_store();
    let (db, faults, store) = (&f.db, &f.faults, &f.store);
    store
        .write(|tx| {
            tx.insert_fresh_context("c-1", "alice", "a2a", 1)?;
            tx.insert_task(&new_task("t-c-1", "c-1"))?;
            Ok::<_, StoreError>(())
        })
        .unwrap();
    let before: i64 = db
        .psql("SELECT version FROM tasks WHERE task_id = 't-c-1'")
        .parse()
        .unwrap();
    faults.start_trace();
    let working = |fail: bool| -> Write {
        Box::new(move |tx| {
            let task = tx.task_by_id("t-c-1")?.expect("the task");
            tx.set_task_status(&task, TaskState::Working, None, 2, InputRequest::Unchanged)?;
            if fail {
                return Err(StoreError::Corrupt("the rule said no".into()));
            }
            Ok(())
        })
    };
    // The first change is rolled back to its savepoint; the second is the Task's only
    // change in the batch: it moves the Task on one version, and that version is its own.
    let answers = in_one_batch(store, vec![working(true), working(false)]);
    assert!(answers[0].is_err() && answers[1].is_ok(), "{answers:?}");
    assert_eq!(commits(faults), 2, "the two were one batch");
    assert_eq!(
        db.psql("SELECT version FROM tasks WHERE task_id = 't-c-1'"),
        (before + 1).to_string()
    );
    assert_eq!(
        db.psql(
            "SELECT string_agg(version || ':' || step || ':' || state, ',') FROM task_statuses \
             WHERE task_seq = (SELECT seq FROM tasks WHERE task_id = 't-c-1') AND version > 0"
        ),
        format!("{}:0:{}", before + 1, TaskState::Working.as_str())
    );
}

#[test]
fn a_write_that_panics_in_a_batch_is_rolled_back_alone_and_answered() {
    let f = faulty_store();
    let (db, faults, store) = (&f.db, &f.faults, &f.store);
    faults.start_trace();
    let writes: Vec<Write> = vec![
        context_and_task("c-1"),
        Box::new(|tx| {
            tx.insert_fresh_context("c-2", "alice", "a2a", 1)?;
            tx.insert_task(&new_task("t-c-2", "c-2"))?;
            panic!("a bug in a job");
        }),
        context_and_task("c-3"),
    ];
    let answers = in_one_batch(store, writes);
    assert!(answers[0].is_ok() && answers[2].is_ok(), "{answers:?}");
    let panicked = answers[1].as_ref().unwrap_err().to_string();
    assert!(panicked.contains("panicked"), "{panicked}");
    assert_eq!(commits(faults), 2, "the three were one batch");
    assert_eq!(contexts(db), "c-1,c-3");
    assert_eq!(submitted_count(db), "2");
    // The writer goes on.
    store
        .write(|tx| tx.insert_fresh_context("c-4", "alice", "a2a", 1))
        .unwrap();
    assert_eq!(contexts(db), "c-1,c-3,c-4");
}

#[test]
fn writes_in_one_batch_are_applied_in_the_order_they_were_queued() {
    let f = faulty_store();
    let (faults, store) = (&f.faults, &f.store);
    store
        .write(|tx| {
            tx.insert_fresh_context("c-1", "alice", "a2a", 1)?;
            let seq = tx.insert_task(&new_task("t-1", "c-1"))?;
            tx.insert_first_message(seq, &MessageRecord::user_text("m-0", "first"))
        })
        .unwrap();
    faults.start_trace();
    let n = MAX_BATCH;
    let writes: Vec<Write> = (1..=n)
        .map(|i| -> Write {
            Box::new(move |tx| {
                let task = tx.task_by_id("t-1")?.expect("the Task");
                tx.append_history(&task, &MessageRecord::user_text(format!("m-{i}"), "next"))
            })
        })
        .collect();
    let answers = in_one_batch(store, writes);
    assert!(answers.iter().all(Result::is_ok), "{answers:?}");
    assert_eq!(commits(faults), 2, "the {n} were one batch");
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
    assert_eq!(ids, expected);
}

#[test]
fn a_failed_commit_fails_every_write_of_its_batch_and_none_is_applied_or_run_again() {
    let f = faulty_store();
    let (db, faults, store) = (&f.db, &f.faults, &f.store);
    // The write that keeps the writer busy commits; the batch behind it does not.
    faults.arm_after("commit", FaultAction::Fail, 1);
    let runs = Arc::new(AtomicUsize::new(0));
    let writes: Vec<Write> = ["c-1", "c-2", "c-3"]
        .into_iter()
        .map(|c| -> Write {
            let runs = runs.clone();
            let mut write = context_and_task(c);
            Box::new(move |tx| {
                runs.fetch_add(1, Ordering::SeqCst);
                write(tx)
            })
        })
        .collect();
    let answers = in_one_batch(store, writes);
    for answer in &answers {
        let err = answer.as_ref().unwrap_err();
        assert!(
            matches!(err, StoreError::Injected(step) if step == "commit"),
            "{err:?}"
        );
    }
    assert_eq!(runs.load(Ordering::SeqCst), 3, "each ran once");
    assert_eq!(db.psql("SELECT count(*) FROM contexts"), "0");
    assert_eq!(submitted_count(db), "0");
    store
        .write(|tx| tx.insert_fresh_context("c-4", "alice", "a2a", 1))
        .unwrap();
    assert_eq!(contexts(db), "c-4");
}

#[test]
fn a_lost_race_in_a_batch_runs_its_writes_again_alone_and_fails_no_other() {
    let (db, root) = (TestDatabase::new(), TempRoot::new("pg"));
    let store = open(&db, &root);
    // Another node's committed context: inserting it again is a unique violation, which
    // a lost race looks like.
    db.psql("INSERT INTO contexts VALUES ('taken', 'bob', 'a2a', NULL, 1, 1)");
    let runs = Arc::new(AtomicUsize::new(0));
    let counted = runs.clone();
    let writes: Vec<Write> = vec![
        context_and_task("c-1"),
        Box::new(move |tx| {
            counted.fetch_add(1, Ordering::SeqCst);
            tx.insert_fresh_context("taken", "alice", "a2a", 1)
        }),
        context_and_task("c-3"),
    ];
    let answers = in_one_batch(&store, writes);
    assert!(answers[0].is_ok() && answers[2].is_ok(), "{answers:?}");
    let raced = answers[1].as_ref().unwrap_err().to_string();
    assert!(raced.contains("SQLSTATE 23505"), "{raced}");
    assert_eq!(
        runs.load(Ordering::SeqCst),
        ATTEMPTS as usize,
        "once in the batch, then alone until its attempts ran out"
    );
    assert_eq!(contexts(&db), "c-1,c-3,taken");
    assert_eq!(submitted_count(&db), "2");
}
