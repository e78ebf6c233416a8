//! Wakes across nodes on one PostgreSQL database (docs/fleet.md, "Wakes across
//! residents"): two planes in one test process are two nodes. A wake accepted on one node
//! reaches another's queue by `NOTIFY a2a_wake`; a wake is delivered by one node at a time
//! (its lease, taken in the delivery's transaction); a running turn keeps its lease by
//! renewing it; a dead node's lease expires and another node takes the Task, the delivery
//! count continuing.

mod common;

use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use a2a_task_plane::config::{store_backend, StoreBackend};
use a2a_task_plane::plane::{Delivery, PlaneOptions, TaskPlane};
use a2a_task_plane::tools::Outcome;
use a2a_task_plane::wake::{TurnOutcome, WakeQueue};
use common::postgres::TestDatabase;
use common::wake::tools;
use common::{user, TempRoot};

/// The shortest lease `A2A_WAKE_LEASE_MS` allows: renewals every second.
const LEASE_MS: i64 = 3_000;
/// How long a test waits for a wake that must come.
const LONG: Duration = Duration::from_secs(10);

fn node(db: &TestDatabase, root: &TempRoot, wake_lease_ms: i64) -> TaskPlane {
    let url = db.url();
    let env = |name: &str| (name == "A2A_STORE_URL").then(|| url.clone());
    let store = store_backend(&env).unwrap();
    assert!(matches!(store, StoreBackend::Postgres(_)));
    let options = PlaneOptions {
        store,
        wake_lease_ms,
        ..PlaneOptions::default()
    };
    TaskPlane::open(&root.store(), options).unwrap()
}

/// Two nodes, A and B, on one fresh database, each with a local root of its own.
struct Fleet {
    db: TestDatabase,
    a: TaskPlane,
    b: TaskPlane,
    _roots: (TempRoot, TempRoot),
}

fn fleet(wake_lease_ms: i64) -> Fleet {
    let db = TestDatabase::new();
    let roots = (TempRoot::new("fleet-a"), TempRoot::new("fleet-b"));
    let a = node(&db, &roots.0, wake_lease_ms);
    let b = node(&db, &roots.1, wake_lease_ms);
    Fleet {
        db,
        a,
        b,
        _roots: roots,
    }
}

/// `node`'s queue with the turn of a new Task (its message `text`) running:
/// (the queue, the activation, the Task's id).
fn working(node: &TaskPlane, text: &str) -> (WakeQueue, String, String) {
    let queue = WakeQueue::start(node.clone()).unwrap();
    let acc = node
        .accept_in_context("alice", None, user("m-1", text), vec![])
        .unwrap();
    assert_eq!(queue.next_wake(LONG).unwrap().delivery, 1);
    (queue, acc.activation_id, acc.task_id.unwrap())
}

fn lease_owner(db: &TestDatabase, activation: &str) -> String {
    db.psql(&format!(
        "SELECT COALESCE(lease_owner, '-') FROM claims WHERE activation_id = '{activation}'"
    ))
}

fn deliveries(db: &TestDatabase, activation: &str) -> String {
    db.psql(&format!(
        "SELECT string_agg(kind || COALESCE(' ' || count, ''), ',' ORDER BY n) FROM claim_states WHERE activation_id = '{activation}'"
    ))
}

#[test]
fn a_wake_accepted_on_one_node_is_delivered_on_another_nodes_queue() {
    let f = fleet(LEASE_MS);
    let (db, a, b) = (&f.db, &f.a, &f.b);
    assert_ne!(a.node_id(), b.node_id());
    let queue_b = WakeQueue::start(b.clone()).unwrap();
    let started = Instant::now();
    let acc = a
        .accept_in_context("alice", None, user("m-1", "do it"), vec![])
        .unwrap();
    let task = acc.task_id.unwrap();
    let wake = queue_b
        .next_wake(LONG)
        .expect("B's queue is told of A's acceptance");
    eprintln!("accepted on A → delivered on B in {:?}", started.elapsed());
    assert_eq!((wake.task_id.as_str(), wake.delivery), (task.as_str(), 1));
    assert_eq!(lease_owner(db, &acc.activation_id), b.node_id());
    tools(&queue_b)
        .complete_task(&task, Outcome::Completed, "done", vec![])
        .unwrap();
    queue_b.turn_ended(&task, TurnOutcome::Ended, None).unwrap();
    assert_eq!(
        lease_owner(db, &acc.activation_id),
        "-",
        "the turn's end releases the lease"
    );
    queue_b.close();
    a.close();
    b.close();
}

#[test]
fn a_delivery_is_skipped_while_another_node_holds_the_lease() {
    let f = fleet(LEASE_MS);
    let (db, a, b) = (&f.db, &f.a, &f.b);
    let acc = a
        .accept_in_context("alice", None, user("m-1", "do it"), vec![])
        .unwrap();
    let task = acc.task_id.unwrap();
    assert_eq!(
        a.deliver_wake(&acc.activation_id, &task).unwrap(),
        Delivery::Delivered { delivery: 1 }
    );
    match b.deliver_wake(&acc.activation_id, &task).unwrap() {
        Delivery::Skipped(why) => {
            assert!(why.contains(a.node_id()), "{why}");
            assert!(why.contains("being worked by node"), "{why}");
        }
        other => panic!("B delivered a wake A holds: {other:?}"),
    }
    // A's own lease does not stop A (a re-offer of its Task).
    assert_eq!(
        a.deliver_wake(&acc.activation_id, &task).unwrap(),
        Delivery::Delivered { delivery: 2 }
    );
    assert_eq!(
        deliveries(db, &acc.activation_id),
        "ACCEPTED,WOKEN,WAKE_DELIVERED 1,WAKE_DELIVERED 2"
    );
    // Released, B may deliver it, and the count goes on.
    assert!(a.release_wake_lease(&acc.activation_id).unwrap());
    assert_eq!(
        b.deliver_wake(&acc.activation_id, &task).unwrap(),
        Delivery::Delivered { delivery: 3 }
    );
    a.close();
    b.close();
}

#[test]
fn two_queues_racing_for_one_wake_deliver_it_exactly_once() {
    let f = fleet(LEASE_MS);
    let (db, a, b) = (&f.db, &f.a, &f.b);
    for round in 0..5 {
        let queues = [
            WakeQueue::start(a.clone()).unwrap(),
            WakeQueue::start(b.clone()).unwrap(),
        ];
        let barrier = Arc::new(Barrier::new(3));
        let waiters: Vec<_> = queues
            .iter()
            .map(|q| {
                let (q, barrier) = (q.clone(), barrier.clone());
                std::thread::spawn(move || {
                    barrier.wait();
                    q.next_wake(Duration::from_secs(3))
                })
            })
            .collect();
        barrier.wait();
        let acc = a
            .accept_in_context("alice", None, user(&format!("m-{round}"), "go"), vec![])
            .unwrap();
        let task = acc.task_id.clone().unwrap();
        let wakes: Vec<_> = waiters.into_iter().map(|w| w.join().unwrap()).collect();
        let delivered: Vec<usize> = (0..2).filter(|&i| wakes[i].is_some()).collect();
        assert_eq!(delivered.len(), 1, "round {round}: {wakes:?}");
        assert_eq!(
            deliveries(db, &acc.activation_id),
            "ACCEPTED,WOKEN,WAKE_DELIVERED 1",
            "round {round}"
        );
        let winner = &queues[delivered[0]];
        tools(winner)
            .complete_task(&task, Outcome::Completed, "done", vec![])
            .unwrap();
        winner.turn_ended(&task, TurnOutcome::Ended, None).unwrap();
        for q in &queues {
            q.close();
        }
    }
    a.close();
    b.close();
}

#[test]
fn a_running_turn_renews_its_lease_so_no_other_node_takes_the_task() {
    let f = fleet(LEASE_MS);
    let (db, a, b) = (&f.db, &f.a, &f.b);
    let (queue_a, activation, task) = working(a, "long turn");
    let queue_b = WakeQueue::start(b.clone()).unwrap();
    // Two lease lengths: without renewals B would take the Task.
    assert!(
        queue_b
            .next_wake(Duration::from_millis(2 * LEASE_MS as u64))
            .is_none(),
        "B took a Task whose turn still runs on A"
    );
    assert_eq!(lease_owner(db, &activation), a.node_id());
    queue_a
        .turn_ended(&task, TurnOutcome::Failed, Some("model error"))
        .unwrap();
    queue_a.close();
    queue_b.close();
    a.close();
    b.close();
}

#[test]
fn a_dead_nodes_lease_expires_and_another_node_takes_the_task_with_the_count_continued() {
    let f = fleet(LEASE_MS);
    let (db, a, b) = (&f.db, &f.a, &f.b);
    let (queue_a, activation, task) = working(a, "work");
    // A "dies" mid-turn: no turn end, no more renewals (its plane is left open: a plane
    // that closes frees its leases, see the next test).
    queue_a.close();
    let died = Instant::now();
    let queue_b = WakeQueue::start(b.clone()).unwrap();
    let wake = queue_b
        .next_wake(Duration::from_millis(3 * LEASE_MS as u64))
        .expect("B takes the Task once A's lease expired");
    let waited = died.elapsed();
    eprintln!("A died → B delivered after {waited:?} (lease {LEASE_MS} ms)");
    assert!(
        waited >= Duration::from_millis(LEASE_MS as u64 / 2),
        "B took the Task before A's lease could expire: {waited:?}"
    );
    assert_eq!((wake.task_id.as_str(), wake.delivery), (task.as_str(), 2));
    assert_eq!(lease_owner(db, &activation), b.node_id());
    assert_eq!(
        deliveries(db, &activation),
        "ACCEPTED,WOKEN,WAKE_DELIVERED 1,WAKE_DELIVERED 2"
    );
    queue_b.close();
    b.close();
    a.close();
}

#[test]
fn a_node_that_stops_frees_the_tasks_it_was_working_for_the_others_at_once() {
    // A lease far longer than the waits below: only the release lets B take the Task.
    let f = fleet(600_000);
    let (db, a, b) = (&f.db, &f.a, &f.b);
    let (queue_a, activation, task) = working(a, "work");
    let queue_b = WakeQueue::start(b.clone()).unwrap();
    assert_eq!(
        queue_b.next_wake(Duration::from_millis(300)),
        None,
        "A holds the lease while it works the Task"
    );
    // A stops mid-turn (SIGTERM): its plane closes.
    queue_a.close();
    a.close();
    assert_eq!(lease_owner(db, &activation), "-");
    let wake = queue_b
        .next_wake(Duration::from_secs(60))
        .expect("B takes the Task A freed as it stopped");
    assert_eq!((wake.task_id.as_str(), wake.delivery), (task.as_str(), 2));
    assert_eq!(lease_owner(db, &activation), b.node_id());
    queue_b.close();
    b.close();
}

#[test]
fn a_newer_message_to_a_task_another_node_works_waits_for_that_turn() {
    let f = fleet(LEASE_MS);
    let (a, b) = (&f.a, &f.b);
    let queue_a = WakeQueue::start(a.clone()).unwrap();
    let first = a
        .accept_in_context("alice", None, user("m-1", "x"), vec![])
        .unwrap();
    let task = first.task_id.clone().unwrap();
    assert!(queue_a.next_wake(LONG).is_some());
    tools(&queue_a)
        .require_input(&task, "which?", None)
        .unwrap();
    // The caller answers while A's turn still runs: a claim of its own.
    let second = b
        .continue_task("alice", &task, None, user("m-2", "that one"), vec![])
        .unwrap();
    match b.deliver_wake(&second.activation_id, &task).unwrap() {
        Delivery::Skipped(why) => assert!(why.contains(a.node_id()), "{why}"),
        other => panic!("B worked a Task whose turn runs on A: {other:?}"),
    }
    let (offered_b, expiry_b) = b.wakes_for_this_node().unwrap();
    assert!(offered_b.is_empty(), "B is offered A's Task: {offered_b:?}");
    assert!(
        expiry_b.is_some_and(|ms| ms > 0 && ms <= LEASE_MS),
        "{expiry_b:?}"
    );
    assert_eq!(a.wakes_for_this_node().unwrap().0.len(), 1);
    // A's turn ends: the Task is B's to take (or A's: whoever comes first).
    queue_a.close();
    assert!(a.release_wake_lease(&first.activation_id).unwrap());
    assert_eq!(
        b.deliver_wake(&second.activation_id, &task).unwrap(),
        Delivery::Delivered { delivery: 1 }
    );
    a.close();
    b.close();
}
