//! The writer's batches: many callers' writes share one transaction and one fsync (group
//! commit), yet a failed write undoes none of the others, a transaction SQLite loses
//! under a job leaves no write half done, the kept Task counts leave a failed write out,
//! and one caller's writes apply in call order even when the write queue is full.

mod common;

use std::sync::Arc;
use std::time::Duration;

use a2a_task_plane::plane::{PlaneError, TaskPlane};
use a2a_task_plane::store::{FaultAction, Faults, StoreError};
use common::*;

/// 64 new messages from as many threads at once (so they share commits), in order.
fn accept_at_once(
    plane: &TaskPlane,
    prefix: &str,
) -> Vec<Result<a2a_task_plane::plane::Acceptance, PlaneError>> {
    let handles: Vec<_> = (0..64)
        .map(|i| {
            let plane = plane.clone();
            let id = format!("{prefix}-{i}");
            std::thread::spawn(move || {
                plane.accept_in_context("alice", None, user(&id, "x"), vec![])
            })
        })
        .collect();
    handles.into_iter().map(|h| h.join().unwrap()).collect()
}

#[test]
fn a_failed_job_does_not_undo_the_jobs_that_share_its_commit() {
    let tmp = TempRoot::new("group");
    let faults = Arc::new(Faults::new());
    let plane = open_with_faults(&tmp.store(), &faults);
    // 64 concurrent callers, one of which fails at its task step: the others all commit.
    faults.arm_after("task", FaultAction::Fail, 20);
    let results = accept_at_once(&plane, "g");
    let failed = results.iter().filter(|r| r.is_err()).count();
    assert_eq!(failed, 1, "exactly the injected failure");
    let db = plane
        .store()
        .sqlite()
        .expect("a SQLite store")
        .db_path()
        .to_path_buf();
    assert_eq!(count(&db, "SELECT COUNT(*) FROM tasks"), 63);
    assert_eq!(count(&db, "SELECT COUNT(*) FROM claims"), 63);
    assert_eq!(count(&db, "SELECT COUNT(*) FROM history"), 63);
}

/// SQLite rolls a transaction back by itself on some I/O and memory errors, even during a
/// read the job goes on without. The jobs after it in the batch must not then commit
/// statement by statement: the batch runs again in a new transaction (or fails as a
/// whole), so a caller told its write failed never finds it in the store.
#[test]
fn a_transaction_lost_under_a_job_that_went_on_leaves_no_write_of_its_batch_half_done() {
    use a2a_task_plane::store::Store;
    use std::sync::mpsc;
    use std::sync::Mutex;

    let tmp = TempRoot::new("lost-tx");
    let plane = open(&tmp.store());
    let store: Store = plane.store().clone();
    // Hold the writer inside one job, so the next two are taken into one batch.
    let (held, writer_held) = mpsc::channel::<()>();
    let (release, released) = mpsc::channel::<()>();
    let released = Mutex::new(released);
    assert!(store
        .submit(
            move |_| {
                let _ = held.send(());
                let _ = released.lock().unwrap().recv();
                Ok::<(), StoreError>(())
            },
            None,
            Box::new(|_| {}),
        )
        .is_none());
    writer_held.recv().unwrap();
    // A: its transaction is rolled back under it (as SQLite does on an I/O error), and it
    // reports success. B: an ordinary write after it in the same batch.
    let (a_done, a_outcome) = mpsc::channel();
    let (b_done, b_outcome) = mpsc::channel();
    assert!(store
        .submit(
            |tx| Ok::<(), StoreError>(
                tx.sqlite()
                    .expect("a SQLite store")
                    .conn()
                    .execute_batch("ROLLBACK")?
            ),
            None,
            Box::new(move |r| {
                let _ = a_done.send(r);
            }),
        )
        .is_none());
    assert!(store
        .submit(
            |tx| {
                Ok::<(), StoreError>(
                    tx.sqlite()
                        .expect("a SQLite store")
                        .conn()
                        .execute_batch("CREATE TABLE probe (x); INSERT INTO probe VALUES (1)")?,
                )
            },
            None,
            Box::new(move |r| {
                let _ = b_done.send(r);
            }),
        )
        .is_none());
    release.send(()).unwrap();
    let a = a_outcome.recv().unwrap();
    let b = b_outcome.recv().unwrap();
    let db = plane
        .store()
        .sqlite()
        .expect("a SQLite store")
        .db_path()
        .to_path_buf();
    let probe = count(
        &db,
        "SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = 'probe'",
    );
    assert_eq!(
        probe,
        i64::from(b.is_ok()),
        "B was answered {b:?} but its table is {} the store",
        if probe == 1 { "in" } else { "not in" }
    );
    assert!(
        a.is_err(),
        "A's transaction was lost, yet it was answered Ok"
    );
    // The store goes on.
    plane
        .accept_in_context("alice", None, user("after", "x"), vec![])
        .unwrap();
}

/// One caller's writes through `InOrder` are applied in the order it made them, also when
/// the write queue is full: the first write that finds no room is sent from a thread of
/// its own, and the writes made after it wait behind it instead of taking the room that
/// frees first. (An agent issues `startWork` then `complete` without awaiting the first.)
#[test]
fn one_callers_writes_apply_in_call_order_when_the_write_queue_is_full() {
    use a2a_task_plane::store::{InOrder, Reply, Store, WriteTx};
    use std::sync::mpsc;
    use std::sync::Mutex;

    let tmp = TempRoot::new("in-order");
    let plane = open(&tmp.store());
    let store: Store = plane.store().clone();
    let noop = |_: &dyn WriteTx| Ok::<(), StoreError>(());
    let ignore = || -> Reply<(), StoreError> { Box::new(|_| {}) };

    // The writer is held inside a job until released, so the queue behind it only fills.
    let (running, is_running) = mpsc::channel::<()>();
    let (release, released) = mpsc::channel::<()>();
    let released = Mutex::new(released);
    let mut hold = Some((running, released));
    let _ = store.submit(
        move |_: &dyn WriteTx| {
            if let Some((running, released)) = hold.take() {
                running.send(()).unwrap();
                let _ = released.lock().unwrap().recv();
            }
            Ok::<(), StoreError>(())
        },
        None,
        ignore(),
    );
    is_running.recv().unwrap();
    // Fill the queue: the first write that comes back Blocked shows it is full (it is
    // sent later, so nothing is lost).
    let overflow = loop {
        if let Some(blocked) = store.submit(noop, None, ignore()) {
            break blocked;
        }
    };

    // Three writes of one caller, each recording its name when the writer runs it, and
    // each answering once committed.
    let applied = Arc::new(Mutex::new(Vec::<&'static str>::new()));
    let (answered, answers) = mpsc::channel::<(&'static str, Result<(), StoreError>)>();
    let order = Arc::new(InOrder::default());
    for name in ["startWork", "artifact", "complete"] {
        let (store, applied, answered) = (store.clone(), applied.clone(), answered.clone());
        order.submit(move || {
            store.submit(
                move |_: &dyn WriteTx| {
                    applied.lock().unwrap().push(name);
                    Ok::<(), StoreError>(())
                },
                None,
                Box::new(move |result| answered.send((name, result)).unwrap()),
            )
        });
    }
    // None of them found room, and none is applied yet.
    assert!(applied.lock().unwrap().is_empty());

    // Room frees one job at a time from here on; the overflow write goes in too.
    release.send(()).unwrap();
    std::thread::spawn(move || overflow.send());
    for _ in 0..3 {
        let (name, result) = answers.recv_timeout(Duration::from_secs(30)).unwrap();
        assert!(result.is_ok(), "{name} failed: {result:?}");
    }
    assert_eq!(
        *applied.lock().unwrap(),
        ["startWork", "artifact", "complete"],
        "applied in the order the caller made them"
    );
    plane.close();
}

/// The kept Task counts are summed in memory and written once per commit: a job that
/// fails after counting its Task (here at its history step, after the Task row) leaves
/// nothing counted, and the jobs that shared its commit are each counted once.
#[test]
fn the_kept_task_counts_leave_out_a_failed_job_that_shares_their_commit() {
    use a2a_task_plane::plane::{Inspector, ListFilter};
    let tmp = TempRoot::new("group-counts");
    let faults = Arc::new(Faults::new());
    let plane = open_with_faults(&tmp.store(), &faults);
    faults.arm_after("history", FaultAction::Fail, 20);
    let results = accept_at_once(&plane, "c");
    assert_eq!(results.iter().filter(|r| r.is_err()).count(), 1);
    let first = results.iter().flatten().next().unwrap();
    plane.start_work(first.task_id.as_deref().unwrap()).unwrap();
    let total = |state| {
        let filter = ListFilter {
            page_size: 1,
            state,
            ..ListFilter::default()
        };
        plane.list_tasks("alice", &filter).unwrap().total
    };
    assert_eq!(total(None), 63);
    assert_eq!(
        total(Some(a2a_task_plane::record::TaskState::Submitted)),
        62
    );
    assert_eq!(total(Some(a2a_task_plane::record::TaskState::Working)), 1);
    plane.close();
    let inspector = Inspector::open(&tmp.store()).unwrap();
    assert_eq!(inspector.check().unwrap(), Vec::<String>::new());
}
