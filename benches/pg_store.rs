//! Store-level intake on PostgreSQL beside SQLite: acceptances per second (each one the
//! writes of one acceptance in one durable transaction: dedupe lookup, context, Task,
//! first message, claim, ACCEPTED) with 1 and 16 concurrent callers, on the embedded
//! SQLite store and on a throwaway local PostgreSQL 15 (fsync and synchronous_commit on),
//! one node and two nodes (two stores on one database). Bounded: 3 s per case.
//! Run: `cargo bench --bench pg_store`.

#[path = "../tests/common/postgres.rs"]
#[allow(dead_code)]
mod postgres;

use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use a2a_task_plane::config::{store_backend, StoreBackend};
use a2a_task_plane::pg::{PgOptions, PgStore};
use a2a_task_plane::record::{ClaimRoute, Continuation, MessageRecord, TaskState};
use a2a_task_plane::store::claims::NewClaim;
use a2a_task_plane::store::tasks::NewTask;
use a2a_task_plane::store::{Store, StoreError, StoreOptions};

const PER_CASE: Duration = Duration::from_secs(3);

fn accept(store: &Store, message_id: String) -> Result<(), StoreError> {
    store.write(move |tx| {
        if tx.claim_by_dedupe_key("bench", &message_id)?.is_some() {
            return Ok(());
        }
        let context_id = format!("ctx-{message_id}");
        let task_id = format!("task-{message_id}");
        let activation_id = format!("act-{message_id}");
        tx.insert_fresh_context(&context_id, "bench", "a2a", 1)?;
        let seq = tx.insert_task(&NewTask {
            task_id: &task_id,
            principal: "bench",
            context_id: &context_id,
            source: "a2a",
            continuation: Continuation::ExplicitTaskId,
            state: TaskState::Submitted,
            extensions: &[],
            now_ms: 1,
        })?;
        tx.insert_first_message(
            seq,
            &MessageRecord::user_text(&message_id, "please summarise the attached report"),
        )?;
        tx.insert_claim(&NewClaim {
            activation_id: &activation_id,
            principal: "bench",
            dedupe_key: &message_id,
            source: "a2a",
            route: ClaimRoute::Created,
            task_id: Some(&task_id),
            context_id: &context_id,
            digest: "sha256:00",
            requested_context_id: None,
            requested_task_id: None,
            direct_reply: None,
            now_ms: 1,
        })?;
        tx.record_claim_accepted(&activation_id, 1)
    })
}

/// `callers` threads, spread over `stores` (nodes), accept for [`PER_CASE`].
fn run(stores: &[Store], tag: &str, callers: usize) -> (f64, Duration) {
    let barrier = Arc::new(Barrier::new(callers));
    let handles: Vec<_> = (0..callers)
        .map(|c| {
            let store = stores[c % stores.len()].clone();
            let (barrier, tag) = (barrier.clone(), tag.to_string());
            std::thread::spawn(move || {
                barrier.wait();
                let start = Instant::now();
                let mut latencies = Vec::new();
                let mut i = 0;
                while start.elapsed() < PER_CASE {
                    let t = Instant::now();
                    accept(&store, format!("{tag}-{c}-{i}")).expect("accept");
                    latencies.push(t.elapsed());
                    i += 1;
                }
                (latencies, start.elapsed())
            })
        })
        .collect();
    let mut latencies = Vec::new();
    let mut elapsed = Duration::ZERO;
    for h in handles {
        let (l, e) = h.join().unwrap();
        latencies.extend(l);
        elapsed = elapsed.max(e);
    }
    latencies.sort();
    let p50 = latencies[latencies.len() / 2];
    (latencies.len() as f64 / elapsed.as_secs_f64(), p50)
}

fn pg(db: &postgres::TestDatabase, root: &std::path::Path) -> Store {
    let text = db.url();
    let env = |name: &str| (name == "A2A_STORE_URL").then(|| text.clone());
    let Ok(StoreBackend::Postgres(url)) = store_backend(&env) else {
        panic!("a PostgreSQL URL");
    };
    Store::with_backend(
        Arc::new(PgStore::open(&url, root, PgOptions::default()).unwrap()),
        None,
    )
}

fn main() {
    let tmp = std::env::temp_dir().join(format!("tp-bench-pg-{}", std::process::id()));
    let report = |name: &str, (rate, p50): (f64, Duration)| {
        println!(
            "{name:<40} {rate:>8.0} accepts/s   p50 {:>6.2} ms",
            p50.as_secs_f64() * 1e3
        );
    };
    for callers in [1, 16] {
        let sqlite = Store::open(
            &tmp.join(format!("sqlite-{callers}")),
            StoreOptions::default(),
        )
        .unwrap();
        report(
            &format!("SQLite, {callers} callers"),
            run(std::slice::from_ref(&sqlite), "s", callers),
        );
        sqlite.close();

        let db = postgres::TestDatabase::new();
        let one = pg(&db, &tmp.join(format!("pg1-{callers}")));
        report(
            &format!("PostgreSQL, 1 node, {callers} callers"),
            run(std::slice::from_ref(&one), "p", callers),
        );
        one.close();

        let db2 = postgres::TestDatabase::new();
        let (a, b) = (pg(&db2, &tmp.join("pg-a")), pg(&db2, &tmp.join("pg-b")));
        let callers = callers.max(2);
        report(
            &format!("PostgreSQL, 2 nodes, {callers} callers"),
            run(&[a.clone(), b.clone()], "q", callers),
        );
        a.close();
        b.close();
    }
    let _ = std::fs::remove_dir_all(&tmp);
}
