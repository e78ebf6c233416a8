//! The durable wake queue and turn authority.
//!
//! The claims in the store are the durable queue; this is its admission and the single
//! active turn. At most [`MAX_WAITING`] wakes wait behind the offered or active turn;
//! overflow is logged (`a2a_wake_overflow`) and recorded as WAKE_FAILED with unhealthy
//! evidence. Delivering a wake makes the Task WORKING and records WOKEN / WAKE_DELIVERED n
//! (one transaction) immediately before the driver prompts that Task's session; from then
//! until `turn_ended` that Task is the sole authority of the agent's tools. A delivered
//! Task still unsettled after its turn is re-offered, at most [`MAX_DELIVERIES`]
//! consecutive deliveries in all, then WAKE_FAILED. A failed turn is retried
//! [`TURN_RETRIES`] times, then unhealthy evidence is recorded and the activation is left
//! for the next start. Store failures while pumping back off exponentially (capped).
//!
//! Threads: the driver calls `next_wake` (blocking) and `turn_ended`; a feeder thread
//! admits acceptances from the plane's event bus; tools check `authority`.

use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use serde_json::json;

use crate::events::Accepted;
use crate::plane::{Delivery, PlaneError, TaskPlane};
use crate::store::StoreError;

/// Wakes that may wait behind the offered or active turn.
pub const MAX_WAITING: usize = 128;
/// Consecutive deliveries of one activation before it is given up (WAKE_FAILED).
pub const MAX_DELIVERIES: i64 = 5;
/// Retries of a failed turn before unhealthy evidence is recorded.
pub const TURN_RETRIES: u32 = 3;
/// Backoff bounds for store failures while pumping.
const BACKOFF_START: Duration = Duration::from_millis(10);
const BACKOFF_MAX: Duration = Duration::from_secs(2);

/// A wake handed to the driver: prompt this Task's session now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Wake {
    pub activation_id: String,
    pub task_id: String,
    pub context_id: String,
    /// Which consecutive delivery of this activation this is (1-based).
    pub delivery: i64,
}

/// How a turn ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TurnOutcome {
    /// The session's turn ran to its end (the Task may or may not have been settled).
    Ended,
    /// The turn failed (model or session error).
    Failed,
}

#[derive(Debug, Clone)]
struct Pending {
    accepted: Accepted,
    failures: u32,
}

#[derive(Debug)]
struct Active {
    pending: Pending,
    delivery: i64,
}

#[derive(Default)]
struct State {
    waiting: VecDeque<Pending>,
    active: Option<Active>,
    closed: bool,
}

struct Inner {
    plane: TaskPlane,
    state: Mutex<State>,
    changed: Condvar,
}

/// The wake queue of one open plane. Cheap to clone; `close()` stops it for every clone.
#[derive(Clone)]
pub struct WakeQueue {
    inner: Arc<Inner>,
}

impl WakeQueue {
    /// Starts the queue: replays the eligible activations from the store, then admits new
    /// acceptances as they are committed.
    pub fn start(plane: TaskPlane) -> Result<WakeQueue, PlaneError> {
        let mut accepted = plane.events().subscribe_accepted();
        let queue = WakeQueue {
            inner: Arc::new(Inner {
                plane: plane.clone(),
                state: Mutex::new(State::default()),
                changed: Condvar::new(),
            }),
        };
        for wake in plane.wakes_to_replay()? {
            queue.admit(wake);
        }
        let feeder = queue.clone();
        std::thread::Builder::new()
            .name("task-plane-wakes".into())
            .spawn(move || {
                // Polls so that close() is noticed promptly without a wake-up channel.
                while !feeder.is_closed() {
                    match accepted.try_recv() {
                        Ok(a) => feeder.admit(a),
                        Err(tokio::sync::broadcast::error::TryRecvError::Lagged(n)) => {
                            // Acceptances were missed: the store still has them, so admit
                            // again from it (admission is idempotent per Task).
                            crate::log::event("a2a_wake_lagged", json!({ "missed": n }));
                            feeder.resync();
                        }
                        Err(tokio::sync::broadcast::error::TryRecvError::Closed) => return,
                        Err(tokio::sync::broadcast::error::TryRecvError::Empty) => {
                            std::thread::sleep(Duration::from_millis(2))
                        }
                    }
                }
            })
            .map_err(|e| {
                PlaneError::FailedPrecondition(format!("cannot start the wake thread: {e}"))
            })?;
        Ok(queue)
    }

    /// Re-admits every eligible activation from the store except the active turn's own.
    fn resync(&self) {
        let Ok(wakes) = self.inner.plane.wakes_to_replay() else {
            return;
        };
        let active = self
            .lock()
            .active
            .as_ref()
            .map(|a| a.pending.accepted.activation_id.clone());
        for wake in wakes {
            if active.as_deref() != Some(wake.activation_id.as_str()) {
                self.admit(wake);
            }
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.inner.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn is_closed(&self) -> bool {
        self.lock().closed
    }

    /// Stops the queue: `next_wake` returns `None`, authority ends. Idempotent.
    pub fn close(&self) {
        let mut state = self.lock();
        state.closed = true;
        state.active = None;
        state.waiting.clear();
        self.inner.changed.notify_all();
    }

    /// Admits an accepted activation. A newer activation of a Task already waiting replaces
    /// it (one wake per Task); beyond [`MAX_WAITING`] the activation is given up loudly.
    fn admit(&self, accepted: Accepted) {
        let overflow = {
            let mut state = self.lock();
            if state.closed {
                return;
            }
            if let Some(waiting) = state
                .waiting
                .iter_mut()
                .find(|p| p.accepted.task_id == accepted.task_id)
            {
                waiting.accepted = accepted;
                waiting.failures = 0;
                None
            } else if state.waiting.len() >= MAX_WAITING {
                Some(accepted)
            } else {
                state.waiting.push_back(Pending {
                    accepted,
                    failures: 0,
                });
                self.inner.changed.notify_all();
                None
            }
        };
        if let Some(accepted) = overflow {
            crate::log::event(
                "a2a_wake_overflow",
                json!({ "taskId": accepted.task_id, "activationId": accepted.activation_id, "waiting": MAX_WAITING }),
            );
            let reason = format!(
                "{MAX_WAITING} wakes were already waiting; this activation was not admitted"
            );
            let _ = self.inner.plane.fail_wake(
                &accepted.activation_id,
                &accepted.task_id,
                "wake_overflow",
                &reason,
            );
        }
    }

    /// How many wakes wait behind the active turn.
    pub fn waiting(&self) -> usize {
        self.lock().waiting.len()
    }

    /// The Task whose turn is active: the only one the agent's tools may act on.
    pub fn authority(&self) -> Option<String> {
        self.lock()
            .active
            .as_ref()
            .map(|a| a.pending.accepted.task_id.clone())
    }

    /// Blocks until a wake can be delivered (no turn active, one waiting) or `timeout`
    /// passes (`Ok(None)`), or the queue closes (`Ok(None)`). The delivery is durable
    /// before this returns, and the Task is then the turn's authority.
    pub fn next_wake(&self, timeout: Duration) -> Option<Wake> {
        let deadline = std::time::Instant::now() + timeout;
        let mut backoff = BACKOFF_START;
        loop {
            let pending = {
                let mut state = self.lock();
                loop {
                    if state.closed {
                        return None;
                    }
                    if state.active.is_none() {
                        if let Some(p) = state.waiting.pop_front() {
                            break p;
                        }
                    }
                    let now = std::time::Instant::now();
                    if now >= deadline {
                        return None;
                    }
                    state = self
                        .inner
                        .changed
                        .wait_timeout(state, deadline - now)
                        .unwrap_or_else(|p| p.into_inner())
                        .0;
                }
            };
            let accepted = &pending.accepted;
            match self
                .inner
                .plane
                .deliver_wake(&accepted.activation_id, &accepted.task_id)
            {
                Ok(Delivery::Delivered { delivery }) => {
                    let mut state = self.lock();
                    if state.closed {
                        return None;
                    }
                    let wake = Wake {
                        activation_id: accepted.activation_id.clone(),
                        task_id: accepted.task_id.clone(),
                        context_id: accepted.context_id.clone(),
                        delivery,
                    };
                    state.active = Some(Active { pending, delivery });
                    return Some(wake);
                }
                Ok(Delivery::Skipped(_)) => continue,
                Err(PlaneError::Store(StoreError::Closed)) => return None,
                Err(PlaneError::Store(err)) => {
                    // Transient: put it back and retry after a capped exponential backoff.
                    crate::log::event(
                        "a2a_wake_retry",
                        json!({ "taskId": accepted.task_id, "error": err.to_string(), "backoffMs": backoff.as_millis() as u64 }),
                    );
                    self.lock().waiting.push_front(pending);
                    std::thread::sleep(backoff);
                    backoff = (backoff * 2).min(BACKOFF_MAX);
                }
                Err(_) => continue,
            }
        }
    }

    /// Ends the active turn of `task_id`: authority is cleared before anything else is
    /// offered. An unsettled Task is re-offered (up to the delivery cap); a failed turn is
    /// retried (up to [`TURN_RETRIES`]).
    pub fn turn_ended(&self, task_id: &str, outcome: TurnOutcome) -> Result<(), PlaneError> {
        let active = {
            let mut state = self.lock();
            match &state.active {
                Some(a) if a.pending.accepted.task_id == task_id => state.active.take(),
                _ => {
                    return Err(PlaneError::FailedPrecondition(format!(
                        "task {task_id} has no active turn; turnEnded is for the Task of the wake just delivered"
                    )))
                }
            }
        };
        let Some(Active {
            mut pending,
            delivery,
        }) = active
        else {
            return Ok(());
        };
        let plane = &self.inner.plane;
        let (activation_id, task) = (pending.accepted.activation_id.clone(), task_id.to_string());
        let requeue = match outcome {
            TurnOutcome::Failed => {
                pending.failures += 1;
                if pending.failures > TURN_RETRIES {
                    let reason = format!("the task's session failed {} turns in a row; it is offered again after a restart", pending.failures);
                    crate::log::event(
                        "a2a_turn_failed",
                        json!({ "taskId": task, "activationId": activation_id, "failures": pending.failures }),
                    );
                    plane.record_unhealthy(&activation_id, &task, "turn_failed", &reason)?;
                    false
                } else {
                    true
                }
            }
            TurnOutcome::Ended => {
                let settled = plane
                    .task(&task, Some(0), false)?
                    .is_none_or(|t| t.state.is_terminal() || t.state.is_interrupted());
                if settled {
                    false
                } else if delivery >= MAX_DELIVERIES {
                    let reason =
                        format!("the task was still unsettled after {delivery} consecutive turns");
                    crate::log::event(
                        "a2a_wake_failed",
                        json!({ "taskId": task, "activationId": activation_id, "deliveries": delivery }),
                    );
                    plane.fail_wake(&activation_id, &task, "wake_failed", &reason)?;
                    false
                } else {
                    true
                }
            }
        };
        let mut state = self.lock();
        if requeue && !state.closed {
            requeue_front(&mut state, pending);
        }
        self.inner.changed.notify_all();
        Ok(())
    }

    /// Checks that `task_id` is the active turn's Task: every agent tool calls this first.
    pub fn require_authority(&self, task_id: &str) -> Result<(), PlaneError> {
        match self.authority() {
            Some(active) if active == task_id => Ok(()),
            Some(active) => Err(PlaneError::FailedPrecondition(format!(
                "task {task_id} is not the task of this turn ({active}); the a2a tools act only on the task the agent was woken for"
            ))),
            None => Err(PlaneError::FailedPrecondition(format!(
                "no task turn is active, so task {task_id} cannot be changed; the a2a tools work only during a woken task's turn"
            ))),
        }
    }

    pub fn plane(&self) -> &TaskPlane {
        &self.inner.plane
    }
}

/// Puts a wake back at the front, unless a newer activation of the same Task is waiting
/// already (it supersedes this one: one wake per Task).
fn requeue_front(state: &mut State, pending: Pending) {
    if !state
        .waiting
        .iter()
        .any(|p| p.accepted.task_id == pending.accepted.task_id)
    {
        state.waiting.push_front(pending);
    }
}
