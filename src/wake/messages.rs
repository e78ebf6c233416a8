//! The status messages the wake queue writes for callers (a Task's status message, its
//! state unchanged, or the message of a Task it fails): why the Task does not progress and
//! what happens next, with the agent's error cut to what a caller should read.

use std::time::Duration;

use super::{TurnError, MAX_WAITING, TURN_RETRIES};

/// Human-readable seconds for a status message (`5 s`, `2 min`).
fn spoken(delay: Duration) -> String {
    let secs = delay.as_secs();
    if secs >= 120 && secs.is_multiple_of(60) {
        format!("{} min", secs / 60)
    } else if secs >= 1 {
        format!("{secs} s")
    } else {
        format!("{} ms", delay.as_millis())
    }
}

/// At most this much of an error reaches a caller (the whole of it is in the log).
const BRIEF_CHARS: usize = 240;

/// An error as a caller reads it: its first line, at most [`BRIEF_CHARS`] characters (a
/// provider's error body can be long, and is the operator's business).
pub fn brief(reason: &str) -> String {
    let line = reason.lines().next().unwrap_or("").trim();
    let line = line.strip_suffix('.').unwrap_or(line);
    if line.chars().count() > BRIEF_CHARS {
        let cut: String = line.chars().take(BRIEF_CHARS - 1).collect();
        format!("{cut}…")
    } else {
        line.to_string()
    }
}

/// What the caller reads when a Task's turn failed and will be retried.
pub fn turn_retry_message(reason: &str, retry: u32, delay: Duration) -> String {
    format!(
        "The resident agent's turn on this task failed: {}. It tries again in {} (retry {retry} of {TURN_RETRIES}); the task stays working meanwhile.",
        brief(reason),
        spoken(delay)
    )
}

/// What the caller reads when a Task's turns failed too often in a row.
pub fn turns_exhausted_message(reason: &str, failures: u32) -> String {
    format!(
        "The resident agent's turns on this task failed {failures} times in a row (last: {}). The task stays working and is offered again when the resident restarts; cancel it to stop waiting.",
        brief(reason)
    )
}

/// What the caller reads when the Task failed because its turns ended unsettled.
pub fn unsettled_failure_message(deliveries: i64, last_error: Option<&TurnError>) -> String {
    match last_error {
        Some(TurnError { text, configuration: true }) => format!(
            "The resident agent could not settle this task: {}. This is a problem in the resident's configuration, and its operator has been told; sending the task again fails the same way until it is fixed.",
            brief(text)
        ),
        Some(TurnError { text, configuration: false }) => format!(
            "The resident agent ended {deliveries} turns in a row without settling this task; the last error it met: {}. Send it again as a new message to retry.",
            brief(text)
        ),
        None => format!(
            "The resident agent ended {deliveries} turns in a row without settling this task (it neither completed, rejected nor asked about it). Send it again as a new message to retry."
        ),
    }
}

/// What the caller reads when its wake could not be admitted.
pub fn overflow_message() -> String {
    format!(
        "The resident agent could not take this task: {MAX_WAITING} tasks were already waiting for it. Send it again as a new message later."
    )
}
