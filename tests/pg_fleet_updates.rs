//! Updates across nodes on one PostgreSQL database (docs/fleet.md, "Updates across
//! nodes"): two planes in one test process are two nodes. A change one node writes to a
//! Task reaches the subscribers and waiters of another by `NOTIFY a2a_task`: in order,
//! once, and also when the notification was lost while the other node's LISTEN
//! connection was down; a Task nobody listens to on a node costs that node no read.

mod common;

use std::sync::Arc;
use std::time::Duration;

use a2a_task_plane::config::{store_backend, StoreBackend};
use a2a_task_plane::events::{TaskEvent, TaskSubscription};
use a2a_task_plane::plane::{AlwaysTask, Inbound, PlaneOptions, TaskPlane, Watch};
use a2a_task_plane::record::{ArtifactRecord, PartRecord, TaskState};
use common::postgres::TestDatabase;
use common::{agent, user, TempRoot};

/// How long a test waits for an update that must come.
const LONG: Duration = Duration::from_secs(10);
/// How long a test waits for an update that must not come.
const QUIET: Duration = Duration::from_millis(400);

fn node_at(url: &str, root: &TempRoot) -> TaskPlane {
    let env = |name: &str| (name == "A2A_STORE_URL").then(|| url.to_string());
    let store = store_backend(&env).unwrap();
    assert!(matches!(store, StoreBackend::Postgres(_)));
    let options = PlaneOptions {
        store,
        ..PlaneOptions::default()
    };
    TaskPlane::open(&root.store(), options).unwrap()
}

/// Nodes A and B on the database at `url`, each with a local root of its own (kept with
/// them).
fn two_nodes(url: &str) -> (TaskPlane, TaskPlane, (TempRoot, TempRoot)) {
    let roots = (TempRoot::new("fleet-a"), TempRoot::new("fleet-b"));
    (node_at(url, &roots.0), node_at(url, &roots.1), roots)
}

/// A multi-thread runtime (a PostgreSQL store refuses a current-thread one).
fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

fn artifact(id: &str, text: &str) -> ArtifactRecord {
    ArtifactRecord {
        artifact_id: id.into(),
        name: None,
        description: None,
        parts: vec![PartRecord::text(text)],
        metadata: None,
        extensions: vec![],
    }
}

/// An update as a short word: `WORKING`, `artifact a1`, …
fn word(event: &TaskEvent) -> String {
    match event {
        TaskEvent::Status { state, .. } => state.as_str().to_uppercase(),
        TaskEvent::Artifact { artifact, .. } => format!("artifact {}", artifact.artifact_id),
    }
}

/// The next update of `updates`, waiting up to `wait`.
fn next(
    rt: &tokio::runtime::Runtime,
    updates: &mut TaskSubscription,
    wait: Duration,
) -> Option<Arc<TaskEvent>> {
    rt.block_on(async {
        tokio::time::timeout(wait, updates.recv())
            .await
            .ok()
            .map(|update| update.expect("not lagged"))
    })
}

/// The next `n` updates of `updates` as words, then checks that no other comes.
fn exactly(rt: &tokio::runtime::Runtime, updates: &mut TaskSubscription, n: usize) -> Vec<String> {
    let mut words = Vec::new();
    for _ in 0..n {
        match next(rt, updates, LONG) {
            Some(event) => words.push(word(&event)),
            None => panic!("only {words:?} came"),
        }
    }
    if let Some(extra) = next(rt, updates, QUIET) {
        panic!("after {words:?}, one more: {}", word(&extra));
    }
    words
}

fn new_task(on: &TaskPlane, message_id: &str) -> String {
    on.accept_in_context("alice", None, user(message_id, "do it"), vec![])
        .unwrap()
        .task_id
        .unwrap()
}

#[test]
fn a_subscriber_on_one_node_sees_another_nodes_changes_in_order_and_exactly_once() {
    let db = TestDatabase::new();
    let (a, b, _roots) = two_nodes(&db.url());
    let rt = runtime();
    let task = new_task(&a, "m-1");
    let mut updates = b.events().subscribe(&task);
    // Written one after another, without waiting for B: B may read several at once.
    a.start_work(&task).unwrap();
    a.record_artifact(&task, artifact("a1", "first")).unwrap();
    a.record_artifact(&task, artifact("a2", "second")).unwrap();
    a.complete(&task, vec![artifact("a3", "third")], Some(agent("done")))
        .unwrap();
    assert_eq!(
        exactly(&rt, &mut updates, 5),
        [
            "WORKING",
            "artifact a1",
            "artifact a2",
            "artifact a3",
            "COMPLETED"
        ]
    );
    a.close();
    b.close();
}

#[test]
fn another_nodes_status_update_carries_its_message_and_time() {
    let db = TestDatabase::new();
    let (a, b, _roots) = two_nodes(&db.url());
    let rt = runtime();
    let task = new_task(&a, "m-1");
    let mut on_a = a.events().subscribe(&task);
    let mut on_b = b.events().subscribe(&task);
    a.start_work(&task).unwrap();
    a.note_status(&task, "halfway there").unwrap();
    for _ in 0..2 {
        let (here, there) = (
            next(&rt, &mut on_a, LONG).unwrap(),
            next(&rt, &mut on_b, LONG).unwrap(),
        );
        assert_eq!(here, there, "the same update on both nodes");
    }
    a.close();
    b.close();
}

#[test]
fn a_blocking_send_on_one_node_answers_when_another_nodes_agent_settles_the_task() {
    let db = TestDatabase::new();
    let (a, b, _roots) = two_nodes(&db.url());
    let rt = runtime();
    let inbound = Inbound {
        principal: "alice".into(),
        context_id: None,
        task_id: None,
        message: user("m-1", "do it"),
        extensions: vec![],
    };
    let (acceptance, waiting) = rt
        .block_on(b.intake_watching(
            inbound,
            Arc::new(AlwaysTask),
            Duration::from_secs(1),
            Watch::UntilSettled,
        ))
        .unwrap();
    let mut waiting = waiting.expect("a new Task is watched");
    let task = acceptance.task_id.unwrap();
    // A's agent works the Task: the waiter on B is answered only when it settles.
    a.start_work(&task).unwrap();
    a.record_artifact(&task, artifact("a1", "the output"))
        .unwrap();
    assert!(next(&rt, &mut waiting, QUIET).is_none(), "not settled yet");
    a.complete(&task, vec![], Some(agent("done"))).unwrap();
    let answer = next(&rt, &mut waiting, LONG).expect("the settling update");
    let TaskEvent::Status { state, settled, .. } = &*answer else {
        panic!("a status update: {answer:?}");
    };
    assert_eq!(*state, TaskState::Completed);
    let settled = settled.as_ref().expect("the settled Task for the waiter");
    assert_eq!(settled.state, TaskState::Completed);
    assert_eq!(settled.artifacts.len(), 1);
    assert_eq!(settled.history.len(), 2, "the question and the answer");
    a.close();
    b.close();
}

#[test]
fn a_nodes_own_writes_are_published_to_its_subscribers_once_and_read_by_nobody() {
    let db = TestDatabase::new();
    let (a, b, _roots) = two_nodes(&db.url());
    let rt = runtime();
    let task = new_task(&b, "m-1");
    let mut on_b = b.events().subscribe(&task);
    let mut on_a = a.events().subscribe(&task);
    b.start_work(&task).unwrap();
    b.complete(&task, vec![artifact("a1", "out")], None)
        .unwrap();
    let expected = ["WORKING", "artifact a1", "COMPLETED"];
    assert_eq!(exactly(&rt, &mut on_a, 3), expected, "A follows B");
    assert_eq!(exactly(&rt, &mut on_b, 3), expected, "B's own, once");
    assert_eq!(b.metrics().fleet_update_reads(), 0, "B read nothing back");
    a.close();
    b.close();
}

#[test]
fn a_task_nobody_listens_to_on_a_node_costs_that_node_no_read() {
    let db = TestDatabase::new();
    let (a, b, _roots) = two_nodes(&db.url());
    let rt = runtime();
    let unwatched = new_task(&a, "m-1");
    let watched = new_task(&a, "m-2");
    let mut updates = b.events().subscribe(&watched);
    a.start_work(&unwatched).unwrap();
    a.complete(&unwatched, vec![artifact("a1", "out")], None)
        .unwrap();
    // Notifications come in commit order: once B has the watched Task's update, it has
    // heard every notification of the unwatched one.
    a.start_work(&watched).unwrap();
    assert_eq!(exactly(&rt, &mut updates, 1), ["WORKING"]);
    assert_eq!(
        b.metrics().fleet_update_reads(),
        1,
        "the watched Task's only"
    );
    a.close();
    b.close();
}

/// A role of its own, which owns `db`, for nodes whose new connections a test can refuse
/// (the test cluster's superuser is never refused). Dropped with the database.
struct Role<'d> {
    db: &'d TestDatabase,
    name: String,
    url: String,
}

impl<'d> Role<'d> {
    fn owning(db: &'d TestDatabase) -> Role<'d> {
        let name = format!("{}_owner", db.name);
        let password = "fleet-updates";
        db.cluster.psql(
            "postgres",
            &format!(
                "CREATE ROLE {name} LOGIN PASSWORD '{password}'; ALTER DATABASE {} OWNER TO {name}",
                db.name
            ),
        );
        let url = format!("postgres://{name}:{password}@{}", after_at(&db.url()));
        Role { db, name, url }
    }

    fn refuse_new_connections(&self, refuse: bool) {
        let login = if refuse { "NOLOGIN" } else { "LOGIN" };
        self.db
            .cluster
            .psql("postgres", &format!("ALTER ROLE {} {login}", self.name));
    }
}

impl Drop for Role<'_> {
    fn drop(&mut self) {
        // psql panics when it fails: not again while a failed test unwinds.
        for sql in [
            format!("DROP DATABASE IF EXISTS {} WITH (FORCE)", self.db.name),
            format!("DROP ROLE IF EXISTS {}", self.name),
        ] {
            let cluster = &self.db.cluster;
            let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                cluster.psql("postgres", &sql)
            }));
        }
    }
}

/// What follows the credentials in a `postgres://user:password@host:port/db` URL.
fn after_at(url: &str) -> &str {
    url.rsplit_once('@').map_or(url, |(_, rest)| rest)
}

#[test]
fn a_change_made_while_the_listen_connection_was_down_is_delivered_after_it_reconnects() {
    let db = TestDatabase::new();
    let role = Role::owning(&db);
    let (a, b, _roots) = two_nodes(&role.url);
    let rt = runtime();
    let task = new_task(&a, "m-1");
    let mut updates = b.events().subscribe(&task);
    a.start_work(&task).unwrap();
    assert_eq!(exactly(&rt, &mut updates, 1), ["WORKING"]);
    // The LISTEN connections are ended and cannot come back while A writes: the
    // notification of A's change reaches no node (A's writer keeps its connection).
    role.refuse_new_connections(true);
    let ended = db.psql(
        "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity \
         WHERE datname = current_database() AND query LIKE 'LISTEN%'",
    );
    assert_eq!(ended, "2", "A's and B's LISTEN connections");
    a.complete(&task, vec![artifact("a1", "out")], Some(agent("done")))
        .unwrap();
    assert!(
        next(&rt, &mut updates, QUIET).is_none(),
        "B is not listening"
    );
    role.refuse_new_connections(false);
    assert_eq!(
        exactly(&rt, &mut updates, 2),
        ["artifact a1", "COMPLETED"],
        "read again on reconnecting"
    );
    a.close();
    b.close();
}

#[test]
fn a_task_first_listened_to_while_the_listen_connection_was_down_is_told_the_state_it_settled_in_meanwhile(
) {
    let db = TestDatabase::new();
    let role = Role::owning(&db);
    let (a, b, _roots) = two_nodes(&role.url);
    let rt = runtime();
    let task = new_task(&a, "m-1");
    a.start_work(&task).unwrap();
    role.refuse_new_connections(true);
    let ended = db.psql(
        "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity \
         WHERE datname = current_database() AND query LIKE 'LISTEN%'",
    );
    assert_eq!(ended, "2", "A's and B's LISTEN connections");
    // B's listener begins while B hears nothing; A settles the Task meanwhile.
    let mut updates = b.events().subscribe(&task);
    a.complete(&task, vec![artifact("a1", "out")], Some(agent("done")))
        .unwrap();
    assert!(
        next(&rt, &mut updates, QUIET).is_none(),
        "B is not listening"
    );
    role.refuse_new_connections(false);
    assert_eq!(
        exactly(&rt, &mut updates, 1),
        ["COMPLETED"],
        "told on reconnecting"
    );
    a.close();
    b.close();
}

#[test]
fn closing_a_plane_ends_its_listen_connection_even_with_its_wake_queue_left_open() {
    let db = TestDatabase::new();
    let root = TempRoot::new("fleet-a");
    let a = node_at(&db.url(), &root);
    let queue = a2a_task_plane::wake::WakeQueue::start(a.clone()).unwrap();
    let listening = || {
        db.psql(
            "SELECT count(*) FROM pg_stat_activity \
             WHERE datname = current_database() AND query LIKE 'LISTEN%'",
        )
    };
    assert_eq!(
        listening(),
        "1",
        "one LISTEN connection for the plane and its queue"
    );
    a.close();
    let until = std::time::Instant::now() + LONG;
    while listening() != "0" && std::time::Instant::now() < until {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(listening(), "0", "closed with the plane");
    drop(queue);
}
