//! Failure injection for durability tests, in the manner of SQLite's own test harness:
//! a test names a step of a write and what happens there. Inert unless a test passes
//! `Faults` to `Store::open`.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use super::StoreError;

/// What happens when a write reaches the named step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FaultAction {
    /// `abort()` the process on the spot, as a power cut or `kill -9` would.
    Crash,
    /// Fail the write with an I/O-like error; nothing of it is committed.
    Fail,
}

/// Steps a write passes through, in order, for an acceptance.
pub const ACCEPTANCE_STEPS: [&str; 7] = [
    "context", "task", "history", "claim", "evidence", "wake", "commit",
];

/// One armed fault: at the `skip + 1`-th time `step` is reached, do `action`.
#[derive(Debug, Default)]
pub struct Faults {
    armed: Mutex<Option<(String, FaultAction)>>,
    skip: AtomicUsize,
    /// What happened, in order, once tracing is on: each step reached (`step commit`) and
    /// each fsync of a directory or a file the store created (`dirsync <path>`).
    trace: Mutex<Option<Vec<String>>>,
}

impl Faults {
    pub fn new() -> Self {
        Self::default()
    }

    /// Arms `action` at the next time `step` is reached.
    pub fn arm(&self, step: &str, action: FaultAction) {
        *self.armed.lock().unwrap_or_else(|p| p.into_inner()) = Some((step.to_string(), action));
        self.skip.store(0, Ordering::SeqCst);
    }

    /// Arms `action` at `step`, after letting it pass `skip` times.
    pub fn arm_after(&self, step: &str, action: FaultAction, skip: usize) {
        self.arm(step, action);
        self.skip.store(skip, Ordering::SeqCst);
    }

    /// Starts recording steps and syncs (see [`Faults::trace`]).
    pub fn start_trace(&self) {
        *self.trace.lock().unwrap_or_else(|p| p.into_inner()) = Some(Vec::new());
    }

    /// What was recorded since [`Faults::start_trace`].
    pub fn trace(&self) -> Vec<String> {
        self.trace
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
            .unwrap_or_default()
    }

    pub(super) fn record(&self, what: String) {
        if let Some(trace) = self
            .trace
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_mut()
        {
            trace.push(what);
        }
    }

    pub fn disarm(&self) {
        *self.armed.lock().unwrap_or_else(|p| p.into_inner()) = None;
    }

    /// A write reached `step` (every backend's [`super::WriteTx::step`] calls this): the
    /// armed action happens here, if it is this step's turn.
    pub fn at(&self, step: &str) -> Result<(), StoreError> {
        self.record(format!("step {step}"));
        let mut armed = self.armed.lock().unwrap_or_else(|p| p.into_inner());
        let Some((name, action)) = armed.as_ref() else {
            return Ok(());
        };
        if name != step {
            return Ok(());
        }
        if self.skip.load(Ordering::SeqCst) > 0 {
            self.skip.fetch_sub(1, Ordering::SeqCst);
            return Ok(());
        }
        match *action {
            FaultAction::Crash => std::process::abort(),
            FaultAction::Fail => {
                *armed = None;
                Err(StoreError::Injected(step.to_string()))
            }
        }
    }
}
