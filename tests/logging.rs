//! The log sink: JSON lines with stable event names to a rotating file under the chosen
//! directory, stderr off for Pi's interactive screen, `A2A_LOG` filtering, secrets
//! redacted. Its own test binary: the sink is the process's one `tracing` subscriber.

mod common;

use a2a_task_plane::log::{self, LogTarget, LOG_FILE_NAME};
use common::TempRoot;
use serde_json::{json, Value};

fn lines(path: &std::path::Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// The sink is the process's one: tests that point it at their own file take turns.
static SINK: std::sync::Mutex<()> = std::sync::Mutex::new(());

#[test]
fn log_lines_go_to_the_rotating_file_filtered_by_a2a_log_with_secrets_redacted() {
    let _sink = SINK.lock().unwrap_or_else(|p| p.into_inner());
    let tmp = TempRoot::new("logging");
    let dir = tmp.path().join("logs");
    let configured = log::configure(&LogTarget {
        directory: Some(dir.clone()),
        stderr: false,
        filter: None,
    });
    assert!(configured.problems.is_empty(), "{configured:?}");
    let path = configured.file.unwrap();
    assert_eq!(path, dir.join(LOG_FILE_NAME));
    log::event(
        "a2a_test_event",
        json!({ "taskId": "t-1", "token": "secret-token-value", "headers": {"Authorization": "Bearer x"} }),
    );
    log::event_at(tracing::Level::DEBUG, "a2a_test_debug", json!({}));
    let written = lines(&path);
    assert_eq!(
        written.len(),
        1,
        "debug is below the default info: {written:?}"
    );
    let line = &written[0];
    assert_eq!(line["event"], "a2a_test_event");
    assert_eq!(line["level"], "info");
    assert!(line["ts"].is_i64());
    assert_eq!(line["taskId"], "t-1");
    assert_eq!(line["token"], "[redacted]");
    assert_eq!(line["headers"]["Authorization"], "[redacted]");
    assert!(!std::fs::read_to_string(&path)
        .unwrap()
        .contains("secret-token-value"));

    // A2A_LOG=warn keeps warnings only.
    let configured = log::configure(&LogTarget {
        directory: Some(dir.clone()),
        stderr: false,
        filter: Some("warn".into()),
    });
    assert!(configured.problems.is_empty(), "{configured:?}");
    log::event("a2a_test_info_dropped", json!({}));
    log::warn("a2a_test_warning", json!({}));
    // A bad filter is reported naming the variable, and the default (info) is kept with
    // the file.
    let configured = log::configure(&LogTarget {
        directory: Some(dir.clone()),
        stderr: false,
        filter: Some("a2a=[".into()),
    });
    assert_eq!(configured.file.as_deref(), Some(path.as_path()));
    assert!(configured.problems[0].contains("A2A_LOG"), "{configured:?}");
    log::event("a2a_test_info_again", json!({}));
    // A directory that cannot hold the file: no file, reported; stderr stays off.
    let blocker = tmp.path().join("not-a-dir");
    std::fs::write(&blocker, "").unwrap();
    let configured = log::configure(&LogTarget {
        directory: Some(blocker.join("logs")),
        stderr: false,
        filter: None,
    });
    assert_eq!(configured.file, None);
    assert!(
        configured.problems[0].contains("not-a-dir"),
        "{configured:?}"
    );
    let events: Vec<String> = lines(&path)
        .iter()
        .map(|l| l["event"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(
        events,
        ["a2a_test_event", "a2a_test_warning", "a2a_test_info_again"]
    );
}

/// Run as a child (`TP_LOG_CHILD` set): configure with stderr off, log, exit.
#[test]
#[ignore = "runs only as the child of the stderr test"]
fn child_logs_with_stderr_off() {
    let Ok(dir) = std::env::var("TP_LOG_CHILD") else {
        return;
    };
    log::configure(&LogTarget {
        directory: Some(dir.into()),
        stderr: false,
        filter: Some("bad[filter".into()),
    });
    log::warn("a2a_child_event", json!({ "n": 1 }));
}

#[test]
fn with_stderr_off_nothing_reaches_stderr_even_when_the_filter_is_bad() {
    let tmp = TempRoot::new("logging-stderr");
    let dir = tmp.path().join("logs");
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "child_logs_with_stderr_off",
            "--include-ignored",
            "--test-threads=1",
        ])
        .env("TP_LOG_CHILD", &dir)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("a2a_child_event"), "stderr: {stderr}");
    let written = std::fs::read_to_string(dir.join(LOG_FILE_NAME)).unwrap();
    assert!(written.contains("a2a_child_event"), "{written}");
}

#[test]
fn an_executor_that_times_out_or_fails_is_logged_and_the_message_becomes_a_task() {
    use common::server::{Misbehaving, Server, ALICE};
    use std::sync::Arc;

    let _sink = SINK.lock().unwrap_or_else(|p| p.into_inner());
    let tmp = TempRoot::new("executor-log");
    let configured = log::configure(&LogTarget {
        directory: Some(tmp.path().join("logs")),
        stderr: false,
        filter: None,
    });
    let path = configured.file.unwrap();
    for (executor, event) in [
        (Misbehaving::Silent, "a2a_executor_timed_out"),
        (Misbehaving::Failing, "a2a_executor_failed"),
    ] {
        let server = Server::start_with(Arc::new(executor), |c| c.executor_timeout_ms = 100);
        let reply = server.send(ALICE, "m-1", "hello", json!({}));
        assert_eq!(
            reply.json()["task"]["status"]["state"],
            "TASK_STATE_COMPLETED",
            "{event}: the message became a Task"
        );
        let logged = lines(&path);
        let line = logged
            .iter()
            .find(|l| l["event"] == event)
            .unwrap_or_else(|| panic!("no {event} line in {logged:?}"));
        assert_eq!(line["level"], "warn");
        assert_eq!(line["messageId"], "m-1");
        assert_eq!(line["principal"], "alice");
    }
}
