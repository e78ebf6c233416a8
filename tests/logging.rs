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

#[test]
fn log_lines_go_to_the_rotating_file_filtered_by_a2a_log_with_secrets_redacted() {
    let tmp = TempRoot::new("logging");
    let dir = tmp.path().join("logs");
    let path = log::configure(&LogTarget {
        directory: Some(dir.clone()),
        stderr: false,
        filter: None,
    })
    .unwrap()
    .unwrap();
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

    // A2A_LOG=warn keeps warnings only; a bad filter is refused naming the variable and
    // changes nothing.
    log::configure(&LogTarget {
        directory: Some(dir.clone()),
        stderr: false,
        filter: Some("warn".into()),
    })
    .unwrap();
    log::event("a2a_test_info_dropped", json!({}));
    log::warn("a2a_test_warning", json!({}));
    let err = log::configure(&LogTarget {
        directory: Some(dir.clone()),
        stderr: false,
        filter: Some("a2a=[".into()),
    })
    .unwrap_err();
    assert!(err.contains("A2A_LOG"), "{err}");
    let events: Vec<String> = lines(&path)
        .iter()
        .map(|l| l["event"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(events, ["a2a_test_event", "a2a_test_warning"]);
}
