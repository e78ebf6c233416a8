//! An embedder agent's acceptances, handed to its waiting `nextAccepted` calls without a
//! thread in between.
//!
//! The writer publishes each acceptance right after its commit. Through a channel awaited
//! on the addon's runtime, every acceptance woke a runtime worker, which then woke Node's
//! JS thread; on one busy core each wake preempted the writer mid-batch, so acceptances
//! reached the agent one at a time (a profile of one-core `message:send` counted about
//! 1.3 runtime wake-ups and 1.2 JS-thread wake-ups per Task). Here the writer hands an
//! acceptance straight to the oldest waiting call's Promise, which the agent's
//! [`Settler`] settles with the rest of the batch in one wake of the JS thread; with no
//! call waiting, the acceptance is kept for the next call, which takes it at once.
//!
//! A waiting call's timeout is kept by one timer task per inbox on the addon's runtime.
//! It sleeps until the earliest deadline it was told of and is told again only when a
//! call waits with an earlier one, so a busy agent does not wake it per call.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard, Weak};

use napi::bindgen_prelude::{Object, PromiseRaw, ToNapiValue};
use napi::{sys, Env, JsValue};
use tokio::sync::Notify;
use tokio::time::Instant;

use super::convert::AcceptedTask;
use super::settle::{Pending, Settler};
use super::{internal, js_error, Result, Settled};
use crate::events::Arrival;

/// A `nextAccepted` call waiting for an acceptance.
struct Waiter {
    deadline: Instant,
    pending: Pending<Option<Handover>>,
}

#[derive(Default)]
struct State {
    /// Acceptances no call has taken yet, oldest first.
    queued: VecDeque<Arrival>,
    /// Calls waiting, oldest first (each acceptance goes to one of them).
    waiters: VecDeque<Waiter>,
    /// The deadline the timer task sleeps until, if it sleeps until one.
    armed: Option<Instant>,
    /// The agent is gone or the plane closed: every call answers `null`.
    closed: bool,
}

/// See the module doc.
pub(super) struct Inbox {
    state: Mutex<State>,
    /// Tells the timer task to look again (an earlier deadline, or the end).
    rearm: Arc<Notify>,
    settler: Arc<Settler>,
}

/// An acceptance on its way to a `nextAccepted` call. It becomes the agent's
/// [`AcceptedTask`] (its message an A2A `Message`) on the JS thread as the call settles,
/// not on the writer thread that hands it over under the bus's lock.
struct Handover(Arrival);

impl ToNapiValue for Handover {
    unsafe fn to_napi_value(env: sys::napi_env, val: Self) -> napi::Result<sys::napi_value> {
        let task = AcceptedTask::from_arrival(&val.0).map_err(|failure| js_error(env, failure))?;
        // SAFETY: forwarded to the object's own conversion, with the env napi gave us.
        unsafe { AcceptedTask::to_napi_value(env, task) }
    }
}

impl Inbox {
    /// A new inbox and its timer task, which ends with the inbox or when `closing` is
    /// notified. On the JS thread.
    pub(super) fn new(
        settler: Arc<Settler>,
        plane: crate::plane::TaskPlane,
        closing: Arc<Notify>,
    ) -> Arc<Inbox> {
        let inbox = Arc::new(Inbox {
            state: Mutex::default(),
            rearm: Arc::default(),
            settler,
        });
        napi::bindgen_prelude::spawn(expire(Arc::downgrade(&inbox), plane, closing));
        inbox
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Takes one acceptance (the bus's sink, on the writer thread): to the oldest waiting
    /// call, else kept. Returns whether the inbox still wants acceptances.
    pub(super) fn push(&self, arrival: &Arrival) -> bool {
        let mut state = self.state();
        if state.closed {
            return false;
        }
        match state.waiters.pop_front() {
            Some(waiter) => waiter.pending.settle(Ok(Some(Handover(arrival.clone())))),
            None => state.queued.push_back(arrival.clone()),
        }
        true
    }

    /// `nextAccepted`: a kept acceptance at once, else a Promise the next acceptance (or
    /// `null` after `timeout`, or when the plane closes) settles. On the JS thread.
    pub(super) fn next<'env>(
        &self,
        env: &'env Env,
        timeout: std::time::Duration,
    ) -> Result<Object<'env>> {
        let mut state = self.state();
        let now = match state.queued.pop_front() {
            Some(arrival) => Some(Some(Handover(arrival))),
            None if state.closed || timeout.is_zero() => Some(None),
            None => None,
        };
        if let Some(now) = now {
            drop(state);
            let promise = PromiseRaw::resolve(env, Settled(Ok(now)))
                .map_err(|e| internal(format!("cannot settle the call: {}", e.reason)))?;
            return Ok(Object::from_raw(env.raw(), promise.raw()));
        }
        let (pending, promise) = self.settler.promise(env)?;
        let deadline = Instant::now() + timeout;
        state.waiters.push_back(Waiter { deadline, pending });
        if state.armed.is_none_or(|armed| deadline < armed) {
            state.armed = Some(deadline);
            self.rearm.notify_one();
        }
        Ok(promise)
    }

    /// The agent is gone: waiting calls answer `null`, the timer task ends.
    pub(super) fn close(&self) {
        let waiters = {
            let mut state = self.state();
            state.closed = true;
            state.queued.clear();
            std::mem::take(&mut state.waiters)
        };
        for waiter in waiters {
            waiter.pending.settle(Ok(None));
        }
        self.rearm.notify_one();
    }

    /// Answers `null` to the calls whose deadline has passed; returns the earliest deadline
    /// left, which the timer task then sleeps until.
    fn expire_due(&self) -> Option<Instant> {
        let now = Instant::now();
        let mut state = self.state();
        let (expired, kept): (VecDeque<Waiter>, VecDeque<Waiter>) =
            std::mem::take(&mut state.waiters)
                .into_iter()
                .partition(|w| w.deadline <= now);
        state.waiters = kept;
        state.armed = state.waiters.iter().map(|w| w.deadline).min();
        let armed = state.armed;
        drop(state);
        for waiter in expired {
            waiter.pending.settle(Ok(None));
        }
        armed
    }
}

/// The inbox's timer task (see the module doc). It holds the inbox only while it looks,
/// and ends when the inbox is closed or gone, or the plane closes.
async fn expire(inbox: Weak<Inbox>, plane: crate::plane::TaskPlane, closing: Arc<Notify>) {
    let Some(rearm) = inbox.upgrade().map(|held| held.rearm.clone()) else {
        return;
    };
    loop {
        let closed = closing.notified();
        tokio::pin!(closed);
        closed.as_mut().enable();
        let woken = rearm.notified();
        tokio::pin!(woken);
        woken.as_mut().enable();
        let Some(held) = inbox.upgrade() else {
            return;
        };
        if plane.is_closed() {
            held.close();
            return;
        }
        if held.state().closed {
            return;
        }
        let armed = held.expire_due();
        drop(held);
        let sleep = tokio::time::sleep_until(armed.unwrap_or_else(Instant::now));
        tokio::select! {
            _ = &mut woken => {}
            _ = &mut closed => {
                if let Some(held) = inbox.upgrade() {
                    held.close();
                }
                return;
            }
            _ = sleep, if armed.is_some() => {}
        }
    }
}
