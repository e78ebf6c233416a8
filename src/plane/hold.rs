//! Whether the wake queue is held, as the rest of the plane sees it: the queue
//! (`WakeQueue::hold`) sets it, and a blocking send reads it so that a caller of a held
//! queue is answered at once with the note that says why, instead of after the blocking
//! timeout.

use super::TaskPlane;

impl TaskPlane {
    /// Records why the queue is held (what its waiting Tasks' status notes say), or that
    /// it is not (`None`).
    pub fn set_queue_hold(&self, reason: Option<String>) {
        *self.hold.write().unwrap_or_else(|p| p.into_inner()) = reason;
    }

    /// Why the queue is held, if it is.
    pub fn queue_hold(&self) -> Option<String> {
        self.hold.read().unwrap_or_else(|p| p.into_inner()).clone()
    }
}
