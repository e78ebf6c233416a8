//! What the wake queue holds in memory, under its one lock: the waiting wakes (at most one
//! per Task), the active turn, the hold and the closed flag; and the two decisions made
//! under that lock: which wake may be delivered now ([`State::take`]) and where a turn
//! that must run again goes ([`requeue_front`]).

use std::collections::{HashSet, VecDeque};
use std::time::{Duration, Instant};

use super::{TurnError, Wake};
use crate::events::Accepted;

#[derive(Debug, Clone)]
pub(super) struct Pending {
    pub(super) accepted: Accepted,
    pub(super) failures: u32,
    /// Not offered before this (a failed turn waits for its retry delay).
    pub(super) not_before: Option<Instant>,
    /// The last error the agent met on this activation.
    pub(super) last_error: Option<TurnError>,
}

impl Pending {
    pub(super) fn new(accepted: Accepted) -> Self {
        Pending {
            accepted,
            failures: 0,
            not_before: None,
            last_error: None,
        }
    }
}

#[derive(Debug)]
pub(super) struct Active {
    pub(super) pending: Pending,
    pub(super) delivery: i64,
}

#[derive(Default)]
pub(super) struct State {
    pub(super) waiting: VecDeque<Pending>,
    pub(super) active: Option<Active>,
    pub(super) closed: bool,
    /// Why the driver cannot work Tasks now; nothing is delivered while it is set.
    pub(super) hold: Option<String>,
    /// A wake is being delivered (taken from `waiting`, not yet `active`): nobody else may
    /// take one meanwhile.
    pub(super) delivering: bool,
    /// The activations this queue holds, by id: waiting, being delivered, active, between
    /// a turn's end and its requeue, being given up (overflow), or parked after their
    /// retries ran out (offered again after a restart). Admission skips these, so reading
    /// the store again (a fleet's LISTEN re-read) or hearing an acceptance twice never
    /// admits a wake twice, resets a retry's delay, or records an overflow twice.
    pub(super) holds: HashSet<String>,
    /// While the store is read again ([`State::begin_reread`]): the activations let go of
    /// meanwhile, which that read must not admit again.
    left_during_reread: Option<HashSet<String>>,
}

/// What [`State::take`] found.
pub(super) enum Take {
    Closed,
    TimedOut,
    Ready(Pending),
    /// Nothing to deliver now; look again at this instant (or when notified).
    Wait(Instant),
}

/// What to do after a delivery attempt.
pub(super) enum After {
    Done(Option<Wake>),
    Again,
    Backoff(Duration),
}

impl State {
    /// This queue no longer holds `activation_id` (its turn is over, it was given up, or
    /// nothing here can work it now).
    pub(super) fn forget(&mut self, activation_id: &str) {
        self.holds.remove(activation_id);
        if let Some(left) = self.left_during_reread.as_mut() {
            left.insert(activation_id.to_string());
        }
    }

    /// A read of the deliverable wakes starts: remember what is let go of until it ends.
    pub(super) fn begin_reread(&mut self) {
        self.left_during_reread = Some(HashSet::new());
    }

    /// The read ended: the activations let go of while it ran.
    pub(super) fn end_reread(&mut self) -> HashSet<String> {
        self.left_during_reread.take().unwrap_or_default()
    }

    /// Under the lock: the next wake to deliver, if one may be delivered now (no turn active
    /// or being delivered, not held, its retry delay passed); it is then marked as being
    /// delivered, so there is one active turn whoever calls. Else when to look again.
    pub(super) fn take(&mut self, now: Instant, deadline: Instant) -> Take {
        if self.closed {
            return Take::Closed;
        }
        let mut wake_at = deadline;
        if self.active.is_none() && !self.delivering && self.hold.is_none() {
            // The first waiting wake whose retry delay has passed.
            let ready = self
                .waiting
                .iter()
                .position(|p| p.not_before.is_none_or(|t| t <= now));
            if let Some(pending) = ready.and_then(|i| self.waiting.remove(i)) {
                self.delivering = true;
                return Take::Ready(pending);
            }
            if let Some(t) = self.waiting.iter().filter_map(|p| p.not_before).min() {
                wake_at = wake_at.min(t);
            }
        }
        if now >= deadline {
            Take::TimedOut
        } else {
            Take::Wait(wake_at)
        }
    }
}

/// Puts a wake back at the front, unless a newer activation of the same Task is waiting
/// already (it supersedes this one: one wake per Task; this queue then no longer holds it).
pub(super) fn requeue_front(state: &mut State, pending: Pending) {
    if state
        .waiting
        .iter()
        .any(|p| p.accepted.task_id == pending.accepted.task_id)
    {
        state.forget(&pending.accepted.activation_id);
    } else {
        state.waiting.push_front(pending);
    }
}
