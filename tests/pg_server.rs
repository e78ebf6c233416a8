//! The throwaway PostgreSQL the PostgreSQL store's tests run against: it starts by itself,
//! answers on 127.0.0.1 only with durable commits, and leaves nothing behind.

mod common;

use std::time::Duration;

use common::postgres::{process_exists, wait_gone, TestDatabase, TestPostgres};

#[test]
fn the_test_server_starts_answers_durably_on_loopback_and_is_gone_after_drop() {
    let cluster = TestPostgres::start();
    let (pid, dir) = (cluster.pid(), cluster.dir().to_path_buf());
    assert!(process_exists(pid), "the postmaster {pid} runs");
    assert_eq!(cluster.psql("postgres", "SELECT 1 + 1"), "2");
    assert_eq!(
        cluster.psql("postgres", "SHOW listen_addresses"),
        "127.0.0.1"
    );
    assert_eq!(cluster.psql("postgres", "SHOW fsync"), "on");
    assert_eq!(cluster.psql("postgres", "SHOW synchronous_commit"), "on");
    assert!(cluster.url("postgres").starts_with("postgres://a2a:"));
    drop(cluster);
    assert!(
        wait_gone(pid, Duration::from_secs(10)),
        "the postmaster {pid} has exited"
    );
    assert!(!dir.exists(), "{} is removed", dir.display());
}

#[test]
fn each_test_database_is_fresh_and_dropped_with_it() {
    let a = TestDatabase::new();
    let b = TestDatabase::new();
    assert_ne!(a.name, b.name);
    a.psql("CREATE TABLE only_in_a (x INT)");
    assert_eq!(
        b.psql("SELECT count(*) FROM pg_tables WHERE tablename = 'only_in_a'"),
        "0"
    );
    let (cluster, name) = (a.cluster.clone(), a.name.clone());
    drop(a);
    assert_eq!(
        cluster.psql(
            "postgres",
            &format!("SELECT count(*) FROM pg_database WHERE datname = '{name}'")
        ),
        "0"
    );
}
