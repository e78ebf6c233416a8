//! The PostgreSQL store's connection and jobs, against a real server: a job is one
//! transaction committed before its reply, a failed job leaves nothing, and a database
//! that cannot be reached is named (host, port, database) without its password.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use a2a_task_plane::config::{store_backend, PostgresUrl, StoreBackend};
use a2a_task_plane::pg::{PgError, PgOptions, PgStore};
use common::postgres::{TestDatabase, TestPostgres};

fn url(text: &str) -> PostgresUrl {
    let env = |name: &str| (name == "A2A_STORE_URL").then(|| text.to_string());
    match store_backend(&env) {
        Ok(StoreBackend::Postgres(url)) => url,
        other => panic!("{text}: {other:?}"),
    }
}

fn open(db: &TestDatabase) -> PgStore {
    PgStore::open(&url(&db.url()), PgOptions::default()).unwrap()
}

#[test]
fn a_job_is_one_transaction_committed_before_its_reply() {
    let db = TestDatabase::new();
    let store = open(&db);
    store
        .call(|tx| {
            tx.batch_execute("CREATE TABLE t (x INT)")?;
            tx.execute("INSERT INTO t VALUES (1), (2)", &[])?;
            Ok(())
        })
        .unwrap();
    // Another session (psql) sees the rows as soon as the reply came.
    assert_eq!(db.psql("SELECT sum(x) FROM t"), "3");
}

#[test]
fn a_failed_job_leaves_nothing_and_says_what_postgres_refused() {
    let db = TestDatabase::new();
    let store = open(&db);
    db.psql("CREATE TABLE t (x INT PRIMARY KEY)");
    let err = store
        .call(|tx| {
            tx.execute("INSERT INTO t VALUES (1)", &[])?;
            tx.execute("INSERT INTO t VALUES (1)", &[])?;
            Ok(())
        })
        .unwrap_err();
    match &err {
        PgError::Sql(message) => assert!(message.contains("23505"), "{message}"),
        other => panic!("{other:?}"),
    }
    assert_eq!(db.psql("SELECT count(*) FROM t"), "0");
    // The worker and its connection go on serving.
    store
        .call(|tx| Ok(tx.execute("INSERT INTO t VALUES (1)", &[])?))
        .unwrap();
    assert_eq!(db.psql("SELECT count(*) FROM t"), "1");
}

#[test]
fn jobs_run_on_every_worker_at_once() {
    let db = TestDatabase::new();
    let store = open(&db);
    // Four jobs that each wait (up to 10 s) for all four to have started: they all see
    // four only if four workers run them at the same time, each on its own connection.
    let started = Arc::new(AtomicUsize::new(0));
    let replies: Vec<_> = (0..4)
        .map(|_| {
            let started = started.clone();
            store.submit(move |tx| {
                started.fetch_add(1, Ordering::SeqCst);
                let deadline = Instant::now() + Duration::from_secs(10);
                while started.load(Ordering::SeqCst) < 4 && Instant::now() < deadline {
                    std::thread::sleep(Duration::from_millis(5));
                }
                let pid: i32 = tx.query_one("SELECT pg_backend_pid()", &[])?.get(0);
                Ok((started.load(Ordering::SeqCst), pid))
            })
        })
        .collect();
    let seen: Vec<(usize, i32)> = replies.into_iter().map(|r| r.wait().unwrap()).collect();
    assert!(seen.iter().all(|(n, _)| *n == 4), "{seen:?}");
    let pids: std::collections::BTreeSet<i32> = seen.iter().map(|(_, pid)| *pid).collect();
    assert_eq!(pids.len(), 4, "{seen:?}");
}

#[test]
fn a_closed_store_refuses_jobs_and_closes_its_connections() {
    let db = TestDatabase::new();
    let store = open(&db);
    let count = || {
        db.psql(&format!(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = '{}' AND application_name = 'a2a-task-plane'",
            db.name
        ))
    };
    assert_eq!(count(), "4", "one connection per worker");
    store.close();
    assert_eq!(store.call(|_| Ok(())).unwrap_err(), PgError::Closed);
    let start = Instant::now();
    while count() != "0" && start.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(count(), "0", "every connection is closed");
}

#[test]
fn an_unreachable_database_is_named_by_host_and_name_without_the_password() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let err = PgStore::open(
        &url(&format!("postgres://a2a:s3cret@127.0.0.1:{port}/fleet")),
        PgOptions::default(),
    )
    .err()
    .unwrap();
    let text = err.to_string();
    assert!(matches!(err, PgError::Connect { .. }), "{err:?}");
    assert!(text.contains(&format!("127.0.0.1:{port}")), "{text}");
    assert!(text.contains("`fleet`"), "{text}");
    assert!(text.contains("A2A_STORE_URL"), "{text}");
    assert!(!text.contains("s3cret"), "{text}");
}

#[test]
fn a_refused_password_is_named_by_database_and_user_without_the_password() {
    let cluster = TestPostgres::shared();
    let wrong = format!(
        "postgres://a2a:wrong-s3cret@127.0.0.1:{}/postgres",
        cluster.port()
    );
    let err = PgStore::open(&url(&wrong), PgOptions::default())
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
