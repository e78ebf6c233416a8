//! Durability of acceptance, in the manner of SQLite's own tests: crash (abort) or fail
//! the process at every step of an acceptance and check the store on reopen; kill -9 a
//! child in the middle of a stream of intakes and check every acknowledged item; fill the
//! disk; lock the root from two openers.
//! (The writer's batches, group commit and write order: `tests/writer_batches.rs`.)
//!
//! Crashing children are this test binary itself, re-run with `TP_CHILD` set, entering at
//! `child_process_entry`.

mod common;

use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use a2a_task_plane::plane::{Disposition, PlaneError, PlaneOptions, TaskPlane};
use a2a_task_plane::store::{FaultAction, Faults, StoreError, ACCEPTANCE_STEPS};
use common::*;

/// A child process that holds `root`'s lock until its stdin closes.
fn child_holding_the_lock(root: &Path) -> Child {
    let mut child = spawn_child("hold-lock", root);
    // The test harness prints its own text first (`test child_process_entry ... `).
    let locked = BufReader::new(child.stdout.as_mut().unwrap())
        .lines()
        .map_while(Result::ok)
        .any(|line| line.ends_with("LOCKED"));
    assert!(locked, "the child did not report holding the lock");
    child
}

fn spawn_child(mode: &str, root: &Path) -> Child {
    Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "child_process_entry",
            "--include-ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("TP_CHILD", mode)
        .env("TP_ROOT", root)
        .envs(child_store_env(root))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

/// Entry point of the child processes of these tests (`TP_CHILD` says what to do).
#[test]
#[ignore = "entry point for the crash tests' child processes; runs only with TP_CHILD set"]
fn child_process_entry() {
    let Ok(mode) = std::env::var("TP_CHILD") else {
        return;
    };
    let root = std::path::PathBuf::from(std::env::var("TP_ROOT").unwrap());
    let faults = Arc::new(Faults::new());
    let plane = open_with_faults(&root, &faults);
    let mut out = std::io::stdout();
    if let Some(step) = mode.strip_prefix("crash-at:") {
        faults.arm(step, FaultAction::Crash);
        let result = plane.accept_in_context("alice", None, user("crash-1", "never half"), vec![]);
        // Reaching this line means the step was never reached: the parent fails the test.
        writeln!(out, "NOT-REACHED {result:?}").unwrap();
    } else if mode == "hold-lock" {
        writeln!(out, "LOCKED").unwrap();
        out.flush().unwrap();
        let mut line = String::new();
        let _ = std::io::stdin().read_line(&mut line); // until the parent closes stdin
    } else if let Some(round) = mode.strip_prefix("intake-loop:") {
        let deadline = Instant::now() + Duration::from_secs(20);
        let threads: Vec<_> = (0..4)
            .map(|t| {
                let (plane, round) = (plane.clone(), round.to_string());
                std::thread::spawn(move || {
                    for i in 0.. {
                        if Instant::now() > deadline {
                            break;
                        }
                        let id = format!("r{round}-t{t}-{i}");
                        let acc = plane
                            .accept_in_context("alice", None, user(&id, "payload"), vec![])
                            .unwrap();
                        // Acknowledged only now, after commit.
                        let line = format!("ACK {id} {}\n", acc.task_id.unwrap());
                        let mut out = std::io::stdout().lock();
                        out.write_all(line.as_bytes()).unwrap();
                        out.flush().unwrap();
                    }
                })
            })
            .collect();
        for t in threads {
            let _ = t.join();
        }
    }
    out.flush().unwrap();
}

fn table_counts(root: &Path) -> Vec<(String, i64)> {
    [
        "contexts",
        "tasks",
        "history",
        "claims",
        "claim_states",
        "evidence",
    ]
    .iter()
    .map(|t| {
        (
            t.to_string(),
            count_at(root, &format!("SELECT COUNT(*) FROM {t}")),
        )
    })
    .collect()
}

#[test]
fn crash_at_every_acceptance_step_leaves_it_fully_accepted_or_absent() {
    for step in ACCEPTANCE_STEPS {
        let tmp = TempRoot::new("crash");
        let root = tmp.store();
        let before = {
            let plane = open(&root);
            let acc = plane
                .accept_in_context("alice", None, user("before-1", "committed first"), vec![])
                .unwrap();
            plane.close();
            acc
        };
        let counts_before = table_counts(&root);

        let child = spawn_child(&format!("crash-at:{step}"), &root);
        let output = child.wait_with_output().unwrap();
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(
            !stdout.contains("NOT-REACHED"),
            "step {step} was never reached: {stdout}"
        );
        assert!(
            !output.status.success(),
            "the child should have crashed at {step}"
        );

        let plane = open(&root);
        assert_eq!(
            table_counts(&root),
            counts_before,
            "crash at {step} left part of an acceptance behind"
        );
        assert!(plane
            .get_task("alice", before.task_id.as_deref().unwrap(), None, false)
            .unwrap()
            .is_some());
        assert!(plane
            .prior_outcome("alice", None, None, &user("crash-1", "never half"))
            .unwrap()
            .is_none());
        // The caller never heard "accepted", retries, and gets a whole new acceptance.
        let retry = plane
            .accept_in_context("alice", None, user("crash-1", "never half"), vec![])
            .unwrap();
        assert_eq!(
            retry.disposition,
            Disposition::Created,
            "after a crash at {step}"
        );
        let task = plane
            .get_task("alice", retry.task_id.as_deref().unwrap(), None, false)
            .unwrap()
            .unwrap();
        assert_eq!(task.history.len(), 1);
        plane.close();
    }
}

#[test]
fn a_failure_at_any_acceptance_step_returns_an_error_and_records_nothing() {
    let tmp = TempRoot::new("fail-steps");
    let faults = Arc::new(Faults::new());
    let plane = open_with_faults(&tmp.store(), &faults);
    plane
        .accept_in_context("alice", None, user("before-1", "x"), vec![])
        .unwrap();
    let root = tmp.store();
    for step in ACCEPTANCE_STEPS {
        let counts = table_counts(&root);
        faults.arm(step, FaultAction::Fail);
        let err = plane
            .accept_in_context("alice", None, user("m-1", "y"), vec![])
            .unwrap_err();
        assert!(
            matches!(err, PlaneError::Store(StoreError::Injected(ref s)) if s == step),
            "{step}: {err}"
        );
        assert_eq!(
            table_counts(&root),
            counts,
            "failure at {step} recorded something"
        );
    }
    // Once the cause is gone the store is usable, and the message is new work.
    let ok = plane
        .accept_in_context("alice", None, user("m-1", "y"), vec![])
        .unwrap();
    assert_eq!(ok.disposition, Disposition::Created);
}

#[test]
fn kill_9_mid_intake_keeps_every_acknowledged_item() {
    let tmp = TempRoot::new("kill9");
    let root = tmp.store();
    let mut acknowledged: Vec<(String, String)> = Vec::new();
    for round in 0..3 {
        let mut child = spawn_child(&format!("intake-loop:{round}"), &root);
        let stdout = BufReader::new(child.stdout.take().unwrap());
        let started = Instant::now();
        let mut this_round = 0;
        for line in stdout.lines() {
            let Ok(line) = line else { break };
            // The harness may put its own text before the first line.
            if let Some(rest) = line.find("ACK ").map(|at| &line[at + 4..]) {
                let (id, task) = rest.split_once(' ').unwrap();
                acknowledged.push((id.to_string(), task.to_string()));
                this_round += 1;
            }
            if this_round >= 150 || started.elapsed() > Duration::from_secs(10) {
                break;
            }
        }
        child.kill().unwrap(); // SIGKILL, mid-stream
        child.wait().unwrap();
        assert!(this_round > 0, "round {round} acknowledged nothing");

        let plane = open(&root);
        for (id, task) in &acknowledged {
            let prior = plane
                .prior_outcome("alice", None, None, &user(id, "payload"))
                .unwrap();
            let prior =
                prior.unwrap_or_else(|| panic!("acknowledged {id} is missing after kill -9"));
            assert_eq!(prior.task_id.as_deref(), Some(task.as_str()));
            let record = plane.get_task("alice", task, None, false).unwrap().unwrap();
            assert_eq!(record.history.len(), 1, "{id} is half there");
        }
        assert_eq!(
            count_at(&root, "SELECT COUNT(*) FROM claims"),
            count_at(&root, "SELECT COUNT(*) FROM tasks"),
            "every claim has its Task and no Task lacks its claim"
        );
        plane.close();
    }
}

#[test]
fn second_open_of_a_locked_root_fails_clearly() {
    let tmp = TempRoot::new("lock");
    let root = tmp.store();
    let first = open(&root);
    let err = match TaskPlane::open(&root, PlaneOptions::default()) {
        Err(err) => err,
        Ok(_) => panic!("a second open of a locked root succeeded"),
    };
    let text = err.to_string();
    assert!(text.contains(&root.display().to_string()), "{text}");
    assert!(
        text.contains(&format!("pid {}", std::process::id())),
        "{text}"
    );
    assert!(text.contains("CHANNELS_TASK_STORE_PATH"), "{text}");
    // close() releases it; a new open() in the same process works.
    first.close();
    let second = open(&root);
    second
        .accept_in_context("alice", None, user("m-1", "x"), vec![])
        .unwrap();
    second.close();

    // A holder letting go (a process forked at the moment of close, until it execs, or
    // one that exits) is waited for briefly: the open succeeds instead of being refused.
    let mut child = child_holding_the_lock(&root);
    let stdin = child.stdin.take();
    let letting_go = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(20));
        drop(stdin); // the child exits
    });
    let reopened = open(&root);
    letting_go.join().unwrap();
    child.wait().unwrap();
    reopened.close();

    // Another process holding the root is refused too, and released when it dies.
    let mut child = child_holding_the_lock(&root);
    let err = TaskPlane::open(&root, PlaneOptions::default())
        .err()
        .expect("locked by the child");
    assert!(
        err.to_string().contains(&format!("pid {}", child.id())),
        "{err}"
    );
    child.kill().unwrap();
    child.wait().unwrap();
    open(&root).close();
}

#[test]
fn a_full_disk_returns_an_error_records_nothing_and_the_store_recovers() {
    // PostgreSQL's own full disk is its server's (a refused write is a failed job there,
    // which `a_failure_at_any_acceptance_step_…` covers for both backends).
    if !on_sqlite("a_full_disk_returns_an_error_records_nothing_and_the_store_recovers") {
        return;
    }
    let tmp = TempRoot::new("disk-full");
    let plane = open(&tmp.store());
    plane
        .accept_in_context("alice", None, user("small-1", "x"), vec![])
        .unwrap();
    // Cap the database at its current size: SQLite now fails growth with SQLITE_FULL,
    // exactly as on a full disk.
    plane
        .store()
        .write(|tx| {
            let pages: i64 = tx.sqlite().expect("a SQLite store").conn().query_row(
                "PRAGMA page_count",
                [],
                |r| r.get(0),
            )?;
            tx.sqlite().expect("a SQLite store").conn().pragma_update(
                None,
                "max_page_count",
                pages,
            )?;
            Ok::<_, StoreError>(())
        })
        .unwrap();
    let counts = table_counts(&tmp.store());
    let big = "x".repeat(256 * 1024);
    let err = plane
        .accept_in_context("alice", None, user("big-1", &big), vec![])
        .unwrap_err();
    assert!(err.to_string().to_lowercase().contains("full"), "{err}");
    assert!(
        matches!(err, PlaneError::Store(StoreError::Full(_))),
        "a full disk is its own, retryable error: {err:?}"
    );
    assert_eq!(
        a2a_task_plane::handler::ApiError::from(err).status,
        hyper::StatusCode::SERVICE_UNAVAILABLE,
        "over HTTP a retryable 503"
    );
    assert_eq!(
        table_counts(&tmp.store()),
        counts,
        "a failed acceptance recorded something"
    );
    assert!(plane
        .prior_outcome("alice", None, None, &user("big-1", &big))
        .unwrap()
        .is_none());
    // The cause goes away: the same message is accepted as new work.
    plane
        .store()
        .write(|tx| {
            tx.sqlite().expect("a SQLite store").conn().pragma_update(
                None,
                "max_page_count",
                1_073_741_823_i64,
            )?;
            Ok::<_, StoreError>(())
        })
        .unwrap();
    let ok = plane
        .accept_in_context("alice", None, user("big-1", &big), vec![])
        .unwrap();
    assert_eq!(ok.disposition, Disposition::Created);
}

#[test]
fn the_store_root_is_private() {
    if !on_sqlite("the_store_root_is_private") {
        return;
    }
    let tmp = TempRoot::new("perms");
    let root = tmp.store().join("nested/deeper");
    let plane = open(&root);
    plane
        .accept_in_context("alice", None, user("m-1", "x"), vec![])
        .unwrap();
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&root), 0o700);
    for name in [
        "task-plane.sqlite3",
        "task-plane.sqlite3-wal",
        "task-plane.sqlite3-shm",
        "lock",
    ] {
        let path = root.join(name);
        assert!(path.exists(), "{name} missing");
        assert_eq!(mode(&path), 0o600, "{name}");
    }
    plane.close();
    // A file where the root should be is a clear error.
    let file = tmp.path().join("not-a-dir");
    std::fs::write(&file, b"x").unwrap();
    let err = TaskPlane::open(&file, PlaneOptions::default())
        .err()
        .unwrap();
    assert!(err.to_string().contains("not-a-dir"), "{err}");
}

#[test]
fn a_closed_plane_refuses_work_clearly() {
    let tmp = TempRoot::new("closed");
    let plane = open(&tmp.store());
    plane.close();
    plane.close(); // idempotent
    let err = plane
        .accept_in_context("alice", None, user("m-1", "x"), vec![])
        .unwrap_err();
    assert!(err.to_string().contains("closed"), "{err}");
    assert!(plane.get_task("alice", "t", None, false).is_err());
}

/// The index of the first trace entry matching `what`, or a panic showing the trace.
fn position(trace: &[String], what: &str) -> usize {
    trace
        .iter()
        .position(|t| t == what)
        .unwrap_or_else(|| panic!("`{what}` is not in the trace: {trace:#?}"))
}

#[test]
fn a_new_store_root_and_its_parents_are_fsynced_into_their_parents_before_the_first_acceptance_returns(
) {
    if !on_sqlite("a_new_store_root_and_its_parents_are_fsynced_…") {
        return;
    }
    let tmp = TempRoot::new("dirsync");
    let top = tmp.path().to_path_buf();
    let root = top.join("a").join("b").join("task-plane");
    let faults = Arc::new(Faults::new());
    faults.start_trace();
    let plane = open_with_faults(&root, &faults);
    plane
        .accept_in_context("alice", None, user("m-1", "first"), vec![])
        .unwrap();
    let trace = faults.trace();
    let commit = position(&trace, "step commit");
    // Each created directory's parent, top down, then the root itself (its lock and
    // database file entries), and the lock file's content: all before the commit.
    let a = position(&trace, &format!("dirsync {}", top.display()));
    let b = position(&trace, &format!("dirsync {}", top.join("a").display()));
    let r = position(&trace, &format!("dirsync {}", top.join("a/b").display()));
    let lock = position(&trace, &format!("filesync {}", root.join("lock").display()));
    let entries = position(&trace, &format!("dirsync {}", root.display()));
    assert!(
        a < b && b < r && r < lock && lock < entries && entries < commit,
        "{trace:#?}"
    );
    // The lock file says who holds it, and that survives a crash (it was fsynced).
    assert_eq!(
        std::fs::read_to_string(root.join("lock")).unwrap(),
        std::process::id().to_string()
    );

    // A Task's session folder: `sessions/` and `sessions/<taskId>/` are fsynced into their
    // parents before the folder is handed out.
    let task = plane
        .accept_in_context("alice", None, user("m-2", "second"), vec![])
        .unwrap()
        .task_id
        .unwrap();
    faults.start_trace();
    let dir = plane.session_dir(&task).unwrap();
    assert_eq!(dir, root.join("sessions").join(&task));
    assert!(dir.is_dir());
    let trace = faults.trace();
    assert!(
        position(&trace, &format!("dirsync {}", root.display()))
            < position(
                &trace,
                &format!("dirsync {}", root.join("sessions").display())
            )
    );
    // Again: nothing to create, nothing to sync.
    faults.start_trace();
    plane.session_dir(&task).unwrap();
    assert!(faults.trace().is_empty(), "{:?}", faults.trace());
    // Only for a Task that exists.
    assert!(matches!(
        plane.session_dir("no-such-task"),
        Err(PlaneError::TaskNotFound(_))
    ));
    plane.close();
}
