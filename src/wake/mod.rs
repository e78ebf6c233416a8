//! The durable wake queue and turn authority.
//!
//! The claims in the store are the durable queue; this is its admission and the single
//! active turn. What the queue records as it goes (a delivery, giving an activation up,
//! unhealthy evidence, what to replay at startup) are plane rules, in `plane::wakes`; the
//! queue calls them and holds no durable state of its own. At most [`MAX_WAITING`] wakes wait behind the offered or active turn;
//! overflow is logged (`a2a_wake_overflow`) and recorded as WAKE_FAILED with unhealthy
//! evidence. Delivering a wake makes the Task WORKING and records WOKEN / WAKE_DELIVERED n
//! (one transaction) immediately before the driver prompts that Task's session; from then
//! until `turn_ended` that Task is the sole authority of the agent's tools. A delivered
//! Task still unsettled after its turn is re-offered, at most [`MAX_DELIVERIES`]
//! consecutive deliveries in all, then WAKE_FAILED, the Task FAILED with a message that
//! names the last error the agent met and gives advice that is true for it. A failed turn
//! is retried [`TURN_RETRIES`] times after growing delays ([`QueueOptions::retry_delays`],
//! other Tasks go first meanwhile), then unhealthy evidence is recorded and the activation
//! is left for the next start. Store failures while pumping back off exponentially.
//!
//! Callers learn why their Task does not progress: while its turns fail, and while the
//! driver holds the queue ([`WakeQueue::hold`], e.g. no usable model), each affected
//! Task's status message (state unchanged) says what is wrong and what happens next.
//!
//! Threads: the driver calls `next_wake` (blocking) and `turn_ended`; a feeder thread
//! admits acceptances from the plane's event bus; tools check `authority`.
//!
//! Files: this one (the queue: admission, hold, delivery, the end of a turn), `state.rs`
//! (what it holds under its lock, and which wake goes next) and `messages.rs` (what the
//! callers read in their Task's status message).

mod messages;
mod state;

use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use serde_json::json;

use crate::events::Accepted;
use crate::plane::{Delivery, PlaneError, TaskPlane};
use crate::record::EvidenceKind;
pub use messages::{
    brief, overflow_message, turn_retry_message, turns_exhausted_message, unsettled_failure_message,
};
use state::{requeue_front, Active, After, Pending, State, Take};

/// Wakes that may wait behind the offered or active turn.
pub const MAX_WAITING: usize = 128;
/// Consecutive deliveries of one activation before it is given up (WAKE_FAILED).
pub const MAX_DELIVERIES: i64 = 5;
/// Retries of a failed turn before unhealthy evidence is recorded.
pub const TURN_RETRIES: u32 = 3;
/// Backoff bounds for store failures while pumping.
const BACKOFF_START: Duration = Duration::from_millis(10);
const BACKOFF_MAX: Duration = Duration::from_secs(2);

/// How the queue paces retries.
#[derive(Debug, Clone)]
pub struct QueueOptions {
    /// The delay before retry n (1-based) of a failed turn; the last one repeats. A failed
    /// turn is retried only after its delay, so a broken model does not burn the retries
    /// in milliseconds; other Tasks are offered meanwhile.
    pub retry_delays: Vec<Duration>,
}

impl Default for QueueOptions {
    fn default() -> Self {
        QueueOptions {
            retry_delays: vec![
                Duration::from_secs(5),
                Duration::from_secs(30),
                Duration::from_secs(120),
            ],
        }
    }
}

/// An error the agent met while working a Task (a failed tool call), kept for the message
/// that tells the caller why the Task failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TurnError {
    pub text: String,
    /// The error is in the resident's configuration (e.g. a workflow manifest that did not
    /// load): sending the Task again cannot help until the operator fixes it.
    pub configuration: bool,
}

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
    /// The turn could not run because the agent cannot work Tasks now (its model's
    /// provider refused the credentials): the driver holds the queue, and the Task waits
    /// at the front, no retry spent, with the hold's note.
    Held,
}

struct Inner {
    plane: TaskPlane,
    /// The acceptance watch that feeds this queue (ended by `close`).
    watch: u64,
    options: QueueOptions,
    state: Mutex<State>,
    /// Blocking waiters ([`WakeQueue::next_wake`]) wait on this...
    changed: Condvar,
    /// ...and async ones ([`WakeQueue::next_wake_async`]) on this; `notify` signals both.
    woke: tokio::sync::Notify,
    /// On a store other nodes share: the id of this queue's ears on the plane's LISTEN
    /// connection (taken back by `close`).
    ears: Mutex<Option<u64>>,
}

/// The wake queue of one open plane. Cheap to clone; `close()` stops it for every clone.
#[derive(Clone)]
pub struct WakeQueue {
    inner: Arc<Inner>,
}

impl crate::metrics::QueueView for Inner {
    fn queue_state(&self) -> Option<crate::metrics::QueueState> {
        let state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        (!state.closed).then(|| crate::metrics::QueueState {
            waiting: state.waiting.len(),
            working: state.active.is_some(),
            held: state.hold.clone(),
        })
    }
}

impl WakeQueue {
    /// Starts the queue: replays the eligible activations from the store, then admits new
    /// acceptances as they are committed.
    pub fn start(plane: TaskPlane) -> Result<WakeQueue, PlaneError> {
        Self::start_with(plane, QueueOptions::default())
    }

    /// [`WakeQueue::start`] with explicit pacing.
    pub fn start_with(plane: TaskPlane, options: QueueOptions) -> Result<WakeQueue, PlaneError> {
        // Watch before replaying, so nothing accepted in between is missed (admission is
        // idempotent per Task).
        let (watch, accepted) = plane.events().watch_accepted();
        let queue = WakeQueue {
            inner: Arc::new(Inner {
                plane: plane.clone(),
                watch,
                options,
                state: Mutex::new(State::default()),
                changed: Condvar::new(),
                woke: tokio::sync::Notify::new(),
                ears: Mutex::new(None),
            }),
        };
        let view: std::sync::Weak<Inner> = Arc::downgrade(&queue.inner);
        plane.metrics().set_queue(view);
        for wake in plane.wakes_to_replay()? {
            queue.admit(wake);
        }
        let feeder = queue.clone();
        std::thread::Builder::new()
            .name("task-plane-wakes".into())
            .spawn(move || {
                // Blocks until an acceptance arrives; close() ends the watch, which ends
                // this loop. Nothing polls while the resident idles.
                while let Ok(a) = accepted.recv() {
                    feeder.admit(a);
                }
            })
            .map_err(|e| {
                PlaneError::FailedPrecondition(format!("cannot start the wake thread: {e}"))
            })?;
        if plane.shares_store() {
            queue.start_lease_renewal()?;
            // The plane's LISTEN connection (it serves the node's subscribers too) tells
            // this queue of wakes accepted or released elsewhere, until `close`.
            let ears = plane.hear_wakes(queue.fleet_listener());
            *queue.inner.ears.lock().unwrap_or_else(|p| p.into_inner()) = Some(ears);
        }
        Ok(queue)
    }

    /// What this queue does with what the plane's LISTEN connection hears: on (re)connecting and on
    /// each `a2a_wake`, it reads the wakes this node may take and admits the new ones; a
    /// timer set to the earliest expiry of another node's lease does the same (that wake
    /// may be left by a node that died). Nothing else reads while the resident idles.
    fn fleet_listener(&self) -> Box<dyn FnMut(crate::pg::listen::Heard) + Send> {
        use crate::pg::listen::Heard;
        let queue = Arc::downgrade(&self.inner);
        let mut expiry: Option<Instant> = None;
        Box::new(move |heard| {
            let Some(inner) = queue.upgrade() else { return };
            let queue = WakeQueue { inner };
            let due = match heard {
                Heard::Connected | Heard::Notification { .. } => true,
                Heard::Tick => expiry.is_some_and(|at| Instant::now() >= at),
            };
            if !due || queue.is_closed() {
                return;
            }
            queue.lock().begin_reread();
            let read = queue.inner.plane.wakes_for_this_node();
            let left = queue.lock().end_reread();
            match read {
                Ok((wakes, foreign_ms)) => {
                    // A little after the expiry, so the database's clock has passed it too.
                    expiry = foreign_ms
                        .map(|ms| Instant::now() + Duration::from_millis(ms.max(0) as u64 + 20));
                    // Those this queue holds already are skipped (see `admit`); so are
                    // those it let go of while the store was read: the read may predate
                    // what let them go (a wake given up, a turn that settled its Task).
                    // Whatever may make such a wake deliverable again (a lease released
                    // or expiring elsewhere) is heard later and read again.
                    for wake in wakes {
                        if !left.contains(&wake.activation_id) {
                            queue.admit(wake);
                        }
                    }
                }
                Err(err) => {
                    if !err.is_closed() {
                        crate::log::warn(
                            "a2a_wake_reread_failed",
                            json!({ "error": err.to_string(), "retryInMs": 1000 }),
                        );
                        expiry = Some(Instant::now() + Duration::from_secs(1));
                    }
                }
            }
        })
    }

    /// While a turn is active, renews this node's wake leases every third of the lease
    /// (a thread that sleeps while no turn runs, and ends on `close`).
    fn start_lease_renewal(&self) -> Result<(), PlaneError> {
        let queue = Arc::downgrade(&self.inner);
        let every = Duration::from_millis((self.inner.plane.wake_lease_ms() / 3).max(1) as u64);
        std::thread::Builder::new()
            .name("task-plane-wake-leases".into())
            .spawn(move || loop {
                let Some(inner) = queue.upgrade() else { return };
                {
                    let state = inner.state.lock().unwrap_or_else(|p| p.into_inner());
                    if state.closed {
                        return;
                    }
                    if state.active.is_none() {
                        // Woken by any change (a delivery, close); bounded so a dropped
                        // queue ends this thread too.
                        let _ = inner.changed.wait_timeout(state, Duration::from_secs(1));
                        continue;
                    }
                    let (state, _) = inner
                        .changed
                        .wait_timeout_while(state, every, |s| !s.closed && s.active.is_some())
                        .unwrap_or_else(|p| p.into_inner());
                    if state.closed || state.active.is_none() {
                        continue;
                    }
                }
                if let Err(err) = inner.plane.renew_wake_leases() {
                    if !err.is_closed() {
                        crate::log::warn(
                            "a2a_wake_lease_renewal_failed",
                            json!({ "nodeId": inner.plane.node_id(), "error": err.to_string() }),
                        );
                    }
                }
            })
            .map(|_| ())
            .map_err(|e| {
                PlaneError::FailedPrecondition(format!(
                    "cannot start the wake lease renewal thread: {e}"
                ))
            })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.inner.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn is_closed(&self) -> bool {
        self.lock().closed
    }

    /// Stops the queue: `next_wake` returns `None`, authority ends. Idempotent.
    pub fn close(&self) {
        self.inner.plane.events().unwatch(self.inner.watch);
        let ears = self
            .inner
            .ears
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        if let Some(ears) = ears {
            self.inner.plane.stop_hearing_wakes(ears);
        }
        let mut state = self.lock();
        state.closed = true;
        self.inner.plane.set_queue_hold(None);
        state.active = None;
        state.waiting.clear();
        state.holds.clear();
        self.notify();
    }

    /// Admits an accepted activation, unless this queue holds it already (admission is
    /// idempotent per activation: the replay at start, the acceptance feed and a fleet's
    /// re-reads of the store may all name it). A newer activation of a Task already waiting
    /// replaces it (one wake per Task); beyond [`MAX_WAITING`] the activation is given up
    /// loudly.
    fn admit(&self, accepted: Accepted) {
        let (overflow, note) = {
            let mut state = self.lock();
            if state.closed || !state.holds.insert(accepted.activation_id.clone()) {
                return;
            }
            let task_id = accepted.task_id.clone();
            let overflow = if let Some(waiting) = state
                .waiting
                .iter_mut()
                .find(|p| p.accepted.task_id == accepted.task_id)
            {
                let replaced = std::mem::replace(waiting, Pending::new(accepted));
                state.forget(&replaced.accepted.activation_id);
                None
            } else if state.waiting.len() >= MAX_WAITING {
                Some(accepted)
            } else {
                state.waiting.push_back(Pending::new(accepted));
                self.notify();
                None
            };
            // While held, each admitted Task (a new one, or one whose new message reset its
            // status) is told why it waits.
            let note = match (&overflow, state.hold.clone()) {
                (None, Some(reason)) => Some((task_id, reason)),
                _ => None,
            };
            (overflow, note)
        };
        if let Some((task_id, reason)) = note {
            // The hold may have ended meanwhile (and the Task been delivered): then the
            // note would be stale.
            if self.held().as_deref() == Some(reason.as_str()) {
                self.note(&task_id, &reason);
            }
        }
        if let Some(accepted) = overflow {
            self.inner.plane.metrics().wake_overflow();
            crate::log::warn(
                "a2a_wake_overflow",
                json!({ "taskId": accepted.task_id, "activationId": accepted.activation_id, "waiting": MAX_WAITING }),
            );
            let reason = format!(
                "{MAX_WAITING} wakes were already waiting; this activation was not admitted"
            );
            if let Err(err) = self.inner.plane.fail_wake(
                &accepted.activation_id,
                &accepted.task_id,
                EvidenceKind::WakeOverflow,
                &reason,
                &overflow_message(),
            ) {
                // Not recorded: the activation stays ACCEPTED and the next start offers it.
                crate::log::warn(
                    "a2a_wake_overflow_unrecorded",
                    json!({ "taskId": accepted.task_id, "activationId": accepted.activation_id, "error": err.to_string() }),
                );
            }
            // Held until the outcome is written, so a re-read meanwhile does not give it up
            // twice; after that the store no longer offers it (or, unrecorded, may again).
            self.lock().forget(&accepted.activation_id);
        }
    }

    /// Writes `text` as the Task's status message (state unchanged); a failure to do so
    /// is logged, never fatal: the note only explains.
    fn note(&self, task_id: &str, text: &str) {
        if let Err(err) = self.inner.plane.note_status(task_id, text) {
            if !err.is_closed() {
                crate::log::warn(
                    "a2a_status_note_failed",
                    json!({ "taskId": task_id, "error": err.to_string() }),
                );
            }
        }
    }

    /// Holds the queue while the driver cannot work Tasks (`Some(why)`, e.g. the resident
    /// has no usable model; `why` is told to callers), or releases it (`None`). While held
    /// nothing is delivered, and every waiting Task's status message says `why` (and each
    /// one admitted meanwhile); nothing is given up and no retry is spent.
    pub fn hold(&self, reason: Option<String>) {
        let to_note: Vec<String> = {
            let mut state = self.lock();
            if state.closed || state.hold == reason {
                return;
            }
            state.hold = reason.clone();
            self.inner.plane.set_queue_hold(reason.clone());
            self.notify();
            match &reason {
                None => vec![],
                Some(_) => state
                    .waiting
                    .iter()
                    .map(|p| p.accepted.task_id.clone())
                    .collect(),
            }
        };
        match &reason {
            Some(why) => {
                self.inner.plane.metrics().turn("held");
                crate::log::warn(
                    "a2a_queue_held",
                    json!({ "reason": why, "waiting": to_note.len() }),
                );
                for task_id in to_note {
                    self.note(&task_id, why);
                }
            }
            None => crate::log::event("a2a_queue_released", json!({})),
        }
    }

    /// Why the queue is held, if it is.
    pub fn held(&self) -> Option<String> {
        self.lock().hold.clone()
    }

    /// Remembers an error the agent met on the active turn's Task (a failed tool call), so
    /// that a Task failed for being left unsettled says why.
    pub fn note_turn_error(&self, task_id: &str, error: TurnError) {
        let mut state = self.lock();
        if let Some(active) = state.active.as_mut() {
            if active.pending.accepted.task_id == task_id {
                active.pending.last_error = Some(error);
            }
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

    /// After a delivery attempt of `pending`: the wake (now the active turn), or what to do
    /// next.
    fn delivered(
        &self,
        pending: Pending,
        result: Result<Delivery, PlaneError>,
        backoff: &mut Duration,
    ) -> After {
        let mut state = self.lock();
        state.delivering = false;
        self.notify();
        let accepted = &pending.accepted;
        match result {
            Ok(Delivery::Delivered { delivery }) => {
                if state.closed {
                    return After::Done(None);
                }
                let wake = Wake {
                    activation_id: accepted.activation_id.clone(),
                    task_id: accepted.task_id.clone(),
                    context_id: accepted.context_id.clone(),
                    delivery,
                };
                state.active = Some(Active { pending, delivery });
                self.inner.plane.metrics().turn("started");
                After::Done(Some(wake))
            }
            Ok(Delivery::Skipped(_)) => {
                // Nothing to work here now (e.g. another node holds its lease): a re-read
                // of the store may admit it again once it is free.
                state.forget(&accepted.activation_id);
                After::Again
            }
            Err(err) if err.is_closed() => After::Done(None),
            Err(PlaneError::Store(err)) => {
                // Transient: put it back and retry after a capped exponential backoff.
                crate::log::warn(
                    "a2a_wake_retry",
                    json!({ "taskId": accepted.task_id, "error": err.to_string(), "backoffMs": backoff.as_millis() as u64 }),
                );
                state.waiting.push_front(pending);
                let wait = *backoff;
                *backoff = (*backoff * 2).min(BACKOFF_MAX);
                After::Backoff(wait)
            }
            Err(err) => {
                // Not the store: this activation cannot be delivered; say so and go on.
                crate::log::warn(
                    "a2a_wake_skipped",
                    json!({ "taskId": accepted.task_id, "activationId": accepted.activation_id, "error": err.to_string() }),
                );
                state.forget(&accepted.activation_id);
                After::Again
            }
        }
    }

    /// Wakes every waiter (blocking and async) to look at the state again.
    fn notify(&self) {
        self.inner.changed.notify_all();
        self.inner.woke.notify_waiters();
    }

    /// Blocks until a wake can be delivered (no turn active, one waiting) or `timeout`
    /// passes (`Ok(None)`), or the queue closes (`Ok(None)`). The delivery is durable
    /// before this returns, and the Task is then the turn's authority. For Rust callers;
    /// the addon awaits [`WakeQueue::next_wake_async`], which holds no thread.
    pub fn next_wake(&self, timeout: Duration) -> Option<Wake> {
        let deadline = Instant::now() + timeout;
        let mut backoff = BACKOFF_START;
        loop {
            let pending = {
                let mut state = self.lock();
                loop {
                    match state.take(Instant::now(), deadline) {
                        Take::Closed | Take::TimedOut => return None,
                        Take::Ready(pending) => break pending,
                        Take::Wait(until) => {
                            let wait = until.saturating_duration_since(Instant::now());
                            state = self
                                .inner
                                .changed
                                .wait_timeout(state, wait)
                                .unwrap_or_else(|p| p.into_inner())
                                .0;
                        }
                    }
                }
            };
            let accepted = pending.accepted.clone();
            let result = self
                .inner
                .plane
                .deliver_wake(&accepted.activation_id, &accepted.task_id);
            match self.delivered(pending, result, &mut backoff) {
                After::Done(wake) => return wake,
                After::Again => {}
                After::Backoff(wait) => std::thread::sleep(wait),
            }
        }
    }

    /// [`WakeQueue::next_wake`] for async callers: it waits on a notification, not on a
    /// thread, and runs the delivery (one store write) on the runtime's blocking pool.
    pub async fn next_wake_async(&self, timeout: Duration) -> Option<Wake> {
        let deadline = Instant::now() + timeout;
        let mut backoff = BACKOFF_START;
        loop {
            let notified = self.inner.woke.notified();
            tokio::pin!(notified);
            // Registered before the state is read, so no change in between is missed.
            notified.as_mut().enable();
            let taken = {
                let mut state = self.lock();
                state.take(Instant::now(), deadline)
            };
            match taken {
                Take::Closed | Take::TimedOut => return None,
                Take::Wait(until) => {
                    tokio::select! {
                        _ = &mut notified => {}
                        _ = tokio::time::sleep_until(until.into()) => {}
                    }
                }
                Take::Ready(pending) => {
                    let queue = self.clone();
                    let accepted = pending.accepted.clone();
                    let result = tokio::task::spawn_blocking(move || {
                        queue
                            .inner
                            .plane
                            .deliver_wake(&accepted.activation_id, &accepted.task_id)
                    })
                    .await
                    .unwrap_or_else(|e| {
                        Err(PlaneError::FailedPrecondition(format!(
                            "the delivery of a wake failed: {e}"
                        )))
                    });
                    match self.delivered(pending, result, &mut backoff) {
                        After::Done(wake) => return wake,
                        After::Again => {}
                        After::Backoff(wait) => tokio::time::sleep(wait).await,
                    }
                }
            }
        }
    }

    /// Ends the active turn of `task_id`: authority is cleared before anything else is
    /// offered. An unsettled Task is re-offered (up to the delivery cap); a failed turn is
    /// retried after its delay (up to [`TURN_RETRIES`]), and `reason` (why it failed) is
    /// logged and told to the caller in the Task's status message.
    pub fn turn_ended(
        &self,
        task_id: &str,
        outcome: TurnOutcome,
        reason: Option<&str>,
    ) -> Result<(), PlaneError> {
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
        // Authority is gone: let a waiting driver see the change before the store work.
        self.notify();
        let plane = &self.inner.plane;
        let (activation_id, task) = (pending.accepted.activation_id.clone(), task_id.to_string());
        // Whether the outcome's own transaction ended this node's lease on the wake
        // (`fail_wake`, `record_unhealthy`); otherwise it is released below.
        let mut released = false;
        // Whether the activation is left for the next start (its retries ran out): this
        // queue keeps holding it, so no re-read of the store admits it again meanwhile.
        let mut parked = false;
        let requeue = match outcome {
            TurnOutcome::Failed => {
                plane.metrics().turn("failed");
                let reason = reason
                    .map(str::trim)
                    .filter(|r| !r.is_empty())
                    .unwrap_or("the session reported no reason")
                    .to_string();
                pending.failures += 1;
                if pending.failures > TURN_RETRIES {
                    crate::log::warn(
                        "a2a_turn_retries_exhausted",
                        json!({ "taskId": task, "activationId": activation_id, "failures": pending.failures, "reason": reason }),
                    );
                    let evidence = format!(
                        "the task's session failed {} turns in a row (last: {reason}); it is offered again after a restart",
                        pending.failures
                    );
                    plane.record_unhealthy(
                        &activation_id,
                        &task,
                        EvidenceKind::TurnFailed,
                        &evidence,
                    )?;
                    released = true;
                    parked = true;
                    self.note(&task, &turns_exhausted_message(&reason, pending.failures));
                    false
                } else {
                    let delays = &self.inner.options.retry_delays;
                    let delay = delays
                        .get(pending.failures as usize - 1)
                        .or(delays.last())
                        .copied()
                        .unwrap_or_default();
                    crate::log::warn(
                        "a2a_turn_failed",
                        json!({ "taskId": task, "activationId": activation_id, "delivery": delivery, "failures": pending.failures, "retryInMs": delay.as_millis() as u64, "reason": reason }),
                    );
                    // A newer message for the Task supersedes this retry (it is offered at
                    // once, afresh): then there is no retry to announce.
                    let superseded = self
                        .lock()
                        .waiting
                        .iter()
                        .any(|p| p.accepted.task_id == task);
                    if !superseded {
                        self.note(&task, &turn_retry_message(&reason, pending.failures, delay));
                    }
                    pending.not_before = Some(Instant::now() + delay);
                    true
                }
            }
            TurnOutcome::Held => {
                pending.not_before = None;
                if let Some(why) = self.held() {
                    self.note(&task, &why);
                }
                true
            }
            TurnOutcome::Ended => {
                let settled = plane
                    .task(&task, Some(0), false)?
                    .is_none_or(|t| t.state.is_settled());
                if settled {
                    false
                } else if delivery >= MAX_DELIVERIES {
                    let reason = match &pending.last_error {
                        Some(e) => format!("the task was still unsettled after {delivery} consecutive turns (last error: {})", e.text),
                        None => format!("the task was still unsettled after {delivery} consecutive turns"),
                    };
                    crate::log::warn(
                        "a2a_wake_failed",
                        json!({ "taskId": task, "activationId": activation_id, "deliveries": delivery, "reason": reason }),
                    );
                    plane.fail_wake(
                        &activation_id,
                        &task,
                        EvidenceKind::WakeFailed,
                        &reason,
                        &unsettled_failure_message(delivery, pending.last_error.as_ref()),
                    )?;
                    released = true;
                    false
                } else {
                    pending.failures = 0;
                    pending.not_before = None;
                    true
                }
            }
        };
        if !released {
            // The turn is over: another node may take the wake (a requeued one too: this
            // node takes the lease again when it delivers it). A failure leaves the lease to
            // expire after at most one lease length; it is logged, not fatal to the turn.
            if let Err(err) = plane.release_wake_lease(&activation_id) {
                if !err.is_closed() {
                    crate::log::warn(
                        "a2a_wake_lease_release_failed",
                        json!({ "taskId": task, "activationId": activation_id, "error": err.to_string() }),
                    );
                }
            }
        }
        let mut state = self.lock();
        if !state.closed {
            if requeue {
                requeue_front(&mut state, pending);
            } else if !parked {
                state.forget(&activation_id);
            }
        }
        self.notify();
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
