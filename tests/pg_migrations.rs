//! The PostgreSQL schema's versioned migrations, against a real server: a fresh database
//! gets the whole schema once, nodes starting together migrate once, and a database a
//! newer build migrated is refused.

mod common;

use a2a_task_plane::config::{store_backend, PostgresUrl, StoreBackend};
use a2a_task_plane::pg::{PgOptions, PgStore, SCHEMA_VERSION};
use a2a_task_plane::store::{Backend, StoreError};
use common::postgres::TestDatabase;
use common::TempRoot;

fn open(db: &TestDatabase) -> Result<PgStore, StoreError> {
    let root = TempRoot::new("pg");
    PgStore::open(&url(db), &root.store(), PgOptions::default())
}

fn url(db: &TestDatabase) -> PostgresUrl {
    let text = db.url();
    let env = |name: &str| (name == "A2A_STORE_URL").then(|| text.clone());
    match store_backend(&env) {
        Ok(StoreBackend::Postgres(url)) => url,
        other => panic!("{other:?}"),
    }
}

const TABLES: &str = "artifacts,checkpoints,claim_states,claims,contexts,deliveries,evidence,\
history,removed_tasks,reply_anchors,schema_migrations,secrets,task_counts,task_sessions,task_statuses,\
tasks";

fn tables(db: &TestDatabase) -> String {
    db.psql(
        "SELECT string_agg(tablename, ',' ORDER BY tablename) FROM pg_tables WHERE schemaname = 'public'",
    )
}

#[test]
fn a_fresh_database_is_migrated_to_the_whole_schema_once() {
    let db = TestDatabase::new();
    let store = open(&db).unwrap();
    assert_eq!(tables(&db), TABLES);
    assert_eq!(
        db.psql("SELECT string_agg(version::text, ',' ORDER BY version) FROM schema_migrations"),
        (1..=SCHEMA_VERSION)
            .map(|v| v.to_string())
            .collect::<Vec<_>>()
            .join(",")
    );
    assert_eq!(
        db.psql("SELECT length(value) FROM secrets WHERE name = 'page_tokens'"),
        "32"
    );
    // The wake lease columns are there, and half a lease is refused.
    assert_eq!(
        db.psql(
            "SELECT string_agg(column_name, ',' ORDER BY column_name) FROM information_schema.columns \
             WHERE table_name = 'claims' AND column_name LIKE 'lease%'"
        ),
        "lease_owner,lease_until"
    );
    let half_lease = store
        .with_transaction(|tx| {
            tx.execute(
                "INSERT INTO claims (activation_id, principal, dedupe_key, source, route, context_id, \
                 digest, state, claimed_ms, lease_owner) \
                 VALUES ('a1', 'alice', 'm1', 'a2a', 'new', 'c1', 'sha256:0', 'ACCEPTED', 1, 'node-a')",
                &[],
            )
        })
        .unwrap_err();
    assert!(half_lease.to_string().contains("23514"), "{half_lease}");
    store.close();
    // Opening again applies nothing and keeps the secret.
    let secret = db.psql("SELECT encode(value, 'hex') FROM secrets");
    let again = open(&db).unwrap();
    assert_eq!(
        db.psql("SELECT count(*) FROM schema_migrations"),
        SCHEMA_VERSION.to_string()
    );
    assert_eq!(db.psql("SELECT encode(value, 'hex') FROM secrets"), secret);
    again.close();
}

#[test]
fn a_deleted_task_leaves_its_count_and_a_removal_note_by_trigger() {
    let db = TestDatabase::new();
    let _store = open(&db).unwrap();
    db.psql(
        "INSERT INTO tasks (task_id, principal, context_id, source, continuation, state, status_ms, created_ms) \
         VALUES ('t1', 'alice', 'c1', 'a2a', 'open', 'TASK_STATE_COMPLETED', 1, 1); \
         INSERT INTO task_counts VALUES ('alice', 'TASK_STATE_COMPLETED', 1); \
         DELETE FROM tasks WHERE task_id = 't1'",
    );
    assert_eq!(db.psql("SELECT n FROM task_counts"), "0");
    assert_eq!(db.psql("SELECT task_id FROM removed_tasks"), "t1");
}

#[test]
fn a_version_2_database_gains_versioned_task_changes_and_keeps_its_tasks() {
    let db = TestDatabase::new();
    open(&db).unwrap().close();
    // Back to version 2's shape, with a Task and an artifact written by a version 2 build.
    db.psql(
        "DROP TABLE task_statuses; DROP INDEX artifacts_by_version; \
         ALTER TABLE tasks DROP COLUMN version; \
         ALTER TABLE artifacts DROP COLUMN version, DROP COLUMN step, DROP COLUMN writer; \
         DELETE FROM schema_migrations WHERE version = 3; \
         INSERT INTO tasks (task_id, principal, context_id, source, continuation, state, status_ms, created_ms) \
         VALUES ('t1', 'alice', 'c1', 'a2a', 'open', 'TASK_STATE_WORKING', 1, 1); \
         INSERT INTO artifacts (task_seq, n, artifact_id, body) \
         SELECT seq, 0, 'a1', '{}' FROM tasks WHERE task_id = 't1'",
    );
    let store = open(&db).unwrap();
    assert_eq!(
        db.psql("SELECT string_agg(version::text, ',' ORDER BY version) FROM schema_migrations"),
        "1,2,3"
    );
    assert_eq!(tables(&db), TABLES);
    // The Task and its artifact are kept, at version 0: older than any change a node follows.
    assert_eq!(
        db.psql("SELECT task_id || ' ' || version FROM tasks"),
        "t1 0"
    );
    assert_eq!(
        db.psql("SELECT artifact_id || ' ' || version || ' ' || step || ' [' || writer || ']' FROM artifacts"),
        "a1 0 0 []"
    );
    // A Task's status changes go with it.
    db.psql(
        "INSERT INTO task_statuses (task_seq, version, step, writer, state, at_ms) \
         SELECT seq, 1, 0, 'node-a', 'TASK_STATE_COMPLETED', 2 FROM tasks; \
         DELETE FROM tasks",
    );
    assert_eq!(db.psql("SELECT count(*) FROM task_statuses"), "0");
    store.close();
}

#[test]
fn nodes_starting_together_migrate_once() {
    let db = TestDatabase::new();
    let url = url(&db);
    let barrier = std::sync::Barrier::new(4);
    let roots: Vec<TempRoot> = (0..4).map(|_| TempRoot::new("pg")).collect();
    let opened: Vec<Result<PgStore, StoreError>> = std::thread::scope(|s| {
        let handles: Vec<_> = roots
            .iter()
            .map(|root| {
                s.spawn(|| {
                    barrier.wait();
                    PgStore::open(
                        &url,
                        &root.store(),
                        PgOptions {
                            writers: 1,
                            readers: 0,
                            ..PgOptions::default()
                        },
                    )
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for store in &opened {
        assert!(store.is_ok(), "{:?}", store.as_ref().err());
    }
    assert_eq!(
        db.psql("SELECT count(*) FROM schema_migrations"),
        SCHEMA_VERSION.to_string()
    );
    assert_eq!(db.psql("SELECT count(*) FROM secrets"), "1");
    assert_eq!(tables(&db), TABLES);
}

#[test]
fn a_database_a_newer_build_migrated_is_refused() {
    let db = TestDatabase::new();
    open(&db).unwrap().close();
    let newer = SCHEMA_VERSION + 1;
    db.psql(&format!(
        "INSERT INTO schema_migrations (version) VALUES ({newer})"
    ));
    let err = open(&db).err().unwrap();
    let text = err.to_string();
    assert!(matches!(err, StoreError::Schema(_)), "{err:?}");
    assert!(text.contains(&format!("schema version {newer}")), "{text}");
    assert!(text.contains(&format!("`{}`", db.name)), "{text}");
    assert!(text.contains("upgrade"), "{text}");
    assert!(!text.contains("a2a:"), "no credentials: {text}");
}
