//! Helpers shared by the integration tests: temporary store roots and plane builders.
#![allow(dead_code)]

pub mod contract;
pub mod http;
pub mod postgres;
pub mod server;
pub mod wake;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use a2a_task_plane::clock::ManualClock;
use a2a_task_plane::events::Activity;
use a2a_task_plane::plane::{Activation, PlaneOptions, TaskPlane};
use a2a_task_plane::record::{ArtifactRecord, MessageRecord, PartRecord, Role};

/// A temporary directory removed on drop.
pub struct TempRoot(PathBuf);

impl TempRoot {
    pub fn new(tag: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("tp-{tag}-{}-{}", std::process::id(), uuid()));
        std::fs::create_dir_all(&dir).unwrap();
        TempRoot(dir)
    }

    pub fn path(&self) -> &Path {
        &self.0
    }

    /// The store root inside the temporary directory (created by the store itself).
    pub fn store(&self) -> PathBuf {
        self.0.join("store")
    }
}

impl Drop for TempRoot {
    fn drop(&mut self) {
        postgres::forget_databases_under(&self.0);
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// `options` for a plane on the store `root`: as given on SQLite; with
/// `A2A_TEST_STORE=postgres`, on a database of the root's own (the same one each time the
/// root is opened), so the suites run unchanged against both backends.
pub fn on_test_store(root: &Path, options: PlaneOptions) -> PlaneOptions {
    if !postgres::suites_on_postgres() {
        return options;
    }
    // A child process of a test is handed its parent's database for the root.
    let url =
        std::env::var("A2A_TEST_STORE_URL").unwrap_or_else(|_| postgres::database_of(root).url());
    let env = |name: &str| (name == "A2A_STORE_URL").then(|| url.clone());
    PlaneOptions {
        store: a2a_task_plane::config::store_backend(&env).unwrap(),
        ..options
    }
}

/// Whether the plane's suites run on SQLite in this run (a test of SQLite's own files,
/// fsyncs or locks returns early on PostgreSQL, saying so).
pub fn on_sqlite(test: &str) -> bool {
    let sqlite = !postgres::suites_on_postgres();
    if !sqlite {
        eprintln!("{test}: a test of the SQLite store's own files; not run on PostgreSQL");
    }
    sqlite
}

fn uuid() -> String {
    a2a_task_plane::ids::mint()
}

pub const T0: i64 = 1_800_000_000_000;

pub fn open_with_clock(root: &Path, clock: &ManualClock) -> TaskPlane {
    let options = PlaneOptions {
        clock: Arc::new(clock.clone()),
        ..PlaneOptions::default()
    };
    TaskPlane::open(root, on_test_store(root, options)).unwrap()
}

/// A plane whose store injects failures (and traces steps and syncs) through `faults`.
pub fn open_with_faults(root: &Path, faults: &Arc<a2a_task_plane::store::Faults>) -> TaskPlane {
    let options = PlaneOptions {
        faults: Some(faults.clone()),
        ..PlaneOptions::default()
    };
    TaskPlane::open(root, on_test_store(root, options)).unwrap()
}

pub fn open(root: &Path) -> TaskPlane {
    TaskPlane::open(root, on_test_store(root, PlaneOptions::default())).unwrap()
}

pub fn user(message_id: &str, text: &str) -> MessageRecord {
    MessageRecord::user_text(message_id, text)
}

pub fn agent(text: &str) -> MessageRecord {
    MessageRecord::agent(vec![PartRecord::text(text)])
}

pub fn native(
    principal: &str,
    source: &str,
    event_id: &str,
    conversation: Option<&str>,
    text: &str,
) -> Activation {
    Activation {
        principal: principal.into(),
        source: source.into(),
        event_id: event_id.into(),
        conversation_key: conversation.map(str::to_string),
        reply_to: None,
        locator: BTreeMap::from([("event".to_string(), format!("raw/{event_id}"))]),
        message: MessageRecord {
            message_id: format!("{source}-{event_id}"),
            role: Role::User,
            parts: vec![PartRecord::text(text)],
            metadata: None,
            extensions: Vec::new(),
            reference_task_ids: Vec::new(),
        },
    }
}

pub fn reply(
    principal: &str,
    source: &str,
    event_id: &str,
    conversation: &str,
    reply_to: &str,
    text: &str,
) -> Activation {
    Activation {
        reply_to: Some(reply_to.to_string()),
        ..native(principal, source, event_id, Some(conversation), text)
    }
}

/// A single-threaded tokio runtime with timers and I/O, for a test that awaits the
/// plane's async calls or subscriptions.
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// The single number `sql` (a `SELECT COUNT(*) …` in SQL both backends read alike)
/// answers on `plane`'s store, read outside the plane: from the SQLite file, or with psql
/// from the root's PostgreSQL database.
pub fn count_in(plane: &TaskPlane, sql: &str) -> i64 {
    count_at(plane.root(), sql)
}

/// Runs `sql` (one statement, its values written in it) on `plane`'s store as if from
/// outside the plane's rules: in the writer's transaction on SQLite (so its kept rows
/// follow), with psql on PostgreSQL. For tests that leave a store as a crash would.
pub fn execute_in(plane: &TaskPlane, sql: &str) {
    if plane.store().sqlite().is_none() {
        postgres::database_of(plane.root()).psql(sql);
        return;
    }
    let sql = sql.to_string();
    plane
        .store()
        .write(move |tx| {
            tx.sqlite()
                .expect("a SQLite store")
                .conn()
                .execute_batch(&sql)?;
            Ok::<_, a2a_task_plane::store::StoreError>(())
        })
        .unwrap();
}

/// The rows `sql` (one text column, its values written in it) answers on `plane`'s
/// store, read outside the plane (the SQLite file, or psql on PostgreSQL).
pub fn text_rows_in(plane: &TaskPlane, sql: &str) -> Vec<String> {
    if postgres::suites_on_postgres() {
        let out = postgres::database_of(plane.root()).psql(sql);
        return out.lines().map(str::to_string).collect();
    }
    let db = plane.root().join(a2a_task_plane::store::DB_FILE);
    let conn =
        rusqlite::Connection::open_with_flags(db, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
            .unwrap();
    let mut statement = conn.prepare(sql).unwrap();
    statement
        .query_map([], |r| r.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

/// [`count_in`] for the store at `root`, open or not.
pub fn count_at(root: &Path, sql: &str) -> i64 {
    if postgres::suites_on_postgres() {
        postgres::database_of(root).psql(sql).parse().unwrap()
    } else {
        count(&root.join(a2a_task_plane::store::DB_FILE), sql)
    }
}

/// The environment a child process of a test needs to open the store at `root` as its
/// parent does (on PostgreSQL: the root's database).
pub fn child_store_env(root: &Path) -> Vec<(&'static str, String)> {
    if postgres::suites_on_postgres() {
        vec![("A2A_TEST_STORE_URL", postgres::database_of(root).url())]
    } else {
        Vec::new()
    }
}

/// Rows in a table (through a fresh read-only connection, outside the plane).
pub fn count(db: &Path, sql: &str) -> i64 {
    let conn =
        rusqlite::Connection::open_with_flags(db, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
            .unwrap();
    conn.query_row(sql, [], |r| r.get(0)).unwrap()
}

/// Delivers the agent's question for `task` on `source` as provider response `response_id`
/// (what a source adapter does before it records the reply anchor).
pub fn deliver_question(
    plane: &TaskPlane,
    principal: &str,
    source: &str,
    task: &str,
    response_id: &str,
) {
    let request = a2a_task_plane::plane::DeliveryRequest {
        delivery_id: format!("q-{response_id}"),
        principal: principal.into(),
        source: source.into(),
        task_id: Some(task.into()),
        operation_id: format!("op-{response_id}"),
        payload_digest: a2a_task_plane::plane::content_address(response_id.as_bytes()),
        recovery: a2a_task_plane::plane::Recovery::IdempotencyKey,
    };
    let response = response_id.to_string();
    plane.deliver(request, None, move || Ok(response)).unwrap();
}

/// How long a test waits for an event (or a condition) before it fails.
pub const WAIT_LIMIT: Duration = Duration::from_secs(20);

/// The next activity on `activity` (the plane's report of every Task's arrivals and status
/// changes, from [`a2a_task_plane::events::EventBus::watch_activity`]) that `matches`,
/// waiting for it as it happens; fails the test naming `what` after [`WAIT_LIMIT`].
pub fn wait_for_activity(
    activity: &mpsc::Receiver<Activity>,
    what: &str,
    mut matches: impl FnMut(&Activity) -> bool,
) -> Activity {
    let deadline = Instant::now() + WAIT_LIMIT;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match activity.recv_timeout(left) {
            Ok(a) if matches(&a) => return a,
            Ok(_) => {}
            Err(e) => panic!("no activity showed {what} within {WAIT_LIMIT:?} ({e})"),
        }
    }
}

/// Polls `condition` until it holds; fails the test naming `what` after [`WAIT_LIMIT`].
/// Only for a condition no event announces (say which at the call site): everything else
/// waits on its event.
pub fn wait_until(what: &str, mut condition: impl FnMut() -> bool) {
    let deadline = Instant::now() + WAIT_LIMIT;
    while !condition() {
        assert!(
            Instant::now() < deadline,
            "{what} did not happen within {WAIT_LIMIT:?}"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// A 256-KiB artifact, the `n`th: far more than any buffer holds for a reader that reads
/// nothing, in a few hundred of them.
pub fn big_artifact(n: usize) -> ArtifactRecord {
    ArtifactRecord {
        artifact_id: format!("chunk-{n}"),
        name: Some(format!("chunk {n}")),
        description: None,
        parts: vec![PartRecord::text("x".repeat(256 * 1024))],
        metadata: None,
        extensions: vec![],
    }
}
