//! The batching behind [`super::Settler`], with no N-API in it so that it is tested without
//! Node: what waits for the JS thread, whether a call of the function is on its way, how
//! many Promises are unsettled (the function keeps Node alive while any is), and whether
//! the function may still be touched.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Mutex;

/// Items `S` that wait for one call of a function `F` on the JS thread, which settles them
/// all in order.
pub(super) struct Batch<S, F> {
    waiting: Mutex<Vec<S>>,
    /// The emptied list of the last call, kept for the writer to fill next (JS thread
    /// only): a new list per call grew again from nothing by reallocation, each batch.
    spare: Mutex<Vec<S>>,
    /// A call of the function is on its way, and will take what is queued.
    scheduled: AtomicBool,
    /// Promises made and not yet settled (changed on the JS thread only).
    unsettled: AtomicUsize,
    /// The function, until it is finalized: Node finalizes it itself when it tears the env
    /// down (before it finalizes the objects that still hold a Settler), and a call or
    /// release after that would touch freed memory. Every use holds this lock.
    function: Mutex<Option<F>>,
}

impl<S, F> Batch<S, F> {
    /// A batch with no function yet ([`Batch::attach`]).
    pub(super) fn new() -> Self {
        Batch {
            waiting: Mutex::new(Vec::new()),
            spare: Mutex::new(Vec::new()),
            scheduled: AtomicBool::new(false),
            unsettled: AtomicUsize::new(0),
            function: Mutex::new(None),
        }
    }

    /// The function the batch calls, once it exists.
    pub(super) fn attach(&self, function: F) {
        *self.function.lock().unwrap_or_else(|p| p.into_inner()) = Some(function);
    }

    /// The function is finalized: nothing touches it from now on.
    pub(super) fn finalized(&self) {
        *self.function.lock().unwrap_or_else(|p| p.into_inner()) = None;
    }

    /// Runs `f` with the function, unless it is finalized (or not attached yet).
    pub(super) fn with_function(&self, f: impl FnOnce(&F)) {
        if let Some(function) = self
            .function
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_ref()
        {
            f(function);
        }
    }

    /// Counts a new unsettled Promise (on the JS thread); the first one runs `hold` with
    /// the function, so that Node waits for it.
    pub(super) fn promised(&self, hold: impl FnOnce(&F)) {
        if self.unsettled.fetch_add(1, Ordering::AcqRel) == 0 {
            self.with_function(hold);
        }
    }

    /// Queues `item` (from any thread). True for the first of a batch: the caller then
    /// asks for one call of the function, which takes everything queued until it runs.
    pub(super) fn queue(&self, item: S) -> bool {
        self.waiting
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(item);
        !self.scheduled.swap(true, Ordering::AcqRel)
    }

    /// In the function's call, on the JS thread: runs `settle` on everything queued, in
    /// order, then `let_go` with the function if no Promise is left unsettled, so that it
    /// no longer keeps Node alive. A panic in `settle` does not stop the rest (and never
    /// unwinds into Node).
    pub(super) fn settle_queued(&self, mut settle: impl FnMut(S), let_go: impl FnOnce(&F)) {
        let mut settling = self.take_queued();
        let count = settling.len();
        for item in settling.drain(..) {
            let _ = catch_unwind(AssertUnwindSafe(|| settle(item)));
        }
        drop(settling);
        if count > 0 && self.unsettled.fetch_sub(count, Ordering::AcqRel) == count {
            self.with_function(let_go);
        }
    }

    /// In a call while Node tears the env down: what is queued is dropped unsettled (its
    /// Promises are gone with the env).
    pub(super) fn discard_queued(&self) {
        self.take_queued().clear();
    }

    /// Everything queued, in the spare list (returned to it when the guard drops).
    fn take_queued(&self) -> std::sync::MutexGuard<'_, Vec<S>> {
        // Cleared before taking the queue: an item queued after this asks for a new call.
        self.scheduled.store(false, Ordering::Release);
        let mut spare = self.spare.lock().unwrap_or_else(|p| p.into_inner());
        std::mem::swap(
            &mut *spare,
            &mut *self.waiting.lock().unwrap_or_else(|p| p.into_inner()),
        );
        spare
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::RefCell;

    /// A function that records what was done with it.
    #[derive(Default)]
    struct Recorder(RefCell<Vec<&'static str>>);

    impl Recorder {
        fn note(&self, what: &'static str) {
            self.0.borrow_mut().push(what);
        }
    }

    fn attached() -> Batch<u32, Recorder> {
        let batch = Batch::new();
        batch.attach(Recorder::default());
        batch
    }

    fn notes(batch: &Batch<u32, Recorder>) -> Vec<&'static str> {
        let mut notes = Vec::new();
        batch.with_function(|f| notes = f.0.borrow().clone());
        notes
    }

    fn settle_all(batch: &Batch<u32, Recorder>) -> Vec<u32> {
        let mut settled = Vec::new();
        batch.settle_queued(|n| settled.push(n), |f| f.note("let go"));
        settled
    }

    #[test]
    fn outcomes_queued_in_one_batch_settle_in_one_call_in_order() {
        let batch = attached();
        for _ in 0..3 {
            batch.promised(|f| f.note("hold"));
        }
        let calls_asked: Vec<bool> = [7, 8, 9].into_iter().map(|n| batch.queue(n)).collect();
        assert_eq!(calls_asked, [true, false, false], "one call for the batch");
        assert_eq!(settle_all(&batch), [7, 8, 9]);
        assert_eq!(
            settle_all(&batch),
            Vec::<u32>::new(),
            "the call took them all"
        );
        assert_eq!(notes(&batch), ["hold", "let go"]);
    }

    #[test]
    fn a_call_scheduled_is_not_scheduled_twice() {
        let batch = attached();
        assert!(batch.queue(1));
        assert!(!batch.queue(2), "a call is on its way already");
        assert_eq!(settle_all(&batch), [1, 2]);
        assert!(
            batch.queue(3),
            "after the call, the next item asks for a new one"
        );
    }

    #[test]
    fn the_function_is_held_while_any_promise_is_unsettled() {
        let batch = attached();
        batch.promised(|f| f.note("hold"));
        batch.promised(|f| f.note("hold"));
        batch.queue(1);
        settle_all(&batch);
        assert_eq!(notes(&batch), ["hold"], "one Promise still waits");
        batch.promised(|f| f.note("hold"));
        batch.queue(2);
        batch.queue(3);
        settle_all(&batch);
        assert_eq!(notes(&batch), ["hold", "let go"]);
        batch.promised(|f| f.note("hold"));
        assert_eq!(notes(&batch), ["hold", "let go", "hold"]);
    }

    #[test]
    fn after_finalize_nothing_is_called() {
        let batch = attached();
        batch.promised(|f| f.note("hold"));
        batch.finalized();
        let mut touched = false;
        batch.promised(|_| touched = true);
        batch.with_function(|_| touched = true);
        batch.queue(1);
        batch.queue(2);
        batch.settle_queued(|_| {}, |_| touched = true);
        assert!(!touched, "the finalized function was touched");
    }

    #[test]
    fn a_panicking_settlement_does_not_stop_the_rest() {
        let batch = attached();
        for n in 1..=3 {
            batch.promised(|_| {});
            batch.queue(n);
        }
        let mut settled = Vec::new();
        batch.settle_queued(
            |n| {
                assert_ne!(n, 2, "a settlement that panics");
                settled.push(n);
            },
            |f| f.note("let go"),
        );
        assert_eq!(settled, [1, 3]);
        assert_eq!(
            notes(&batch),
            ["let go"],
            "the panicked one counts as settled"
        );
    }

    #[test]
    fn what_is_queued_when_node_tears_down_is_dropped_unsettled() {
        let batch = attached();
        batch.queue(1);
        batch.discard_queued();
        assert_eq!(settle_all(&batch), Vec::<u32>::new());
        assert!(batch.queue(2), "nothing is on its way any more");
    }

    #[test]
    fn the_emptied_lists_are_filled_again() {
        let batch = attached();
        // Two lists take turns: the one a call empties is the one filled after the next.
        for _ in 0..2 {
            for n in 0..64 {
                batch.queue(n);
            }
            settle_all(&batch);
        }
        batch.queue(64);
        let capacity = batch.waiting.lock().unwrap().capacity();
        assert!(capacity >= 64, "a new list grew from nothing: {capacity}");
    }
}
