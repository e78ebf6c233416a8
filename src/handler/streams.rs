//! A Task's live updates for a caller, for every binding: waiting for a Task to settle (a
//! blocking SendMessage), and the streams of SendStreamingMessage and SubscribeToTask —
//! each an [`EventStream`]: its place in the stream pool, its first event (the Task's
//! snapshot, or a direct Message), then each update from the Task's broadcast
//! (`events.rs`) as it is committed, until the Task settles, the subscription falls
//! behind, or the listener shuts down. The binding frames the events and ends the stream
//! when its client leaves (dropping the `EventStream` frees its place).
//!
//! The stream pool bounds what streams hold: `max_streams` overall and
//! `max_streams_per_principal` per caller, across every binding; beyond either, a new
//! stream is refused with `RESOURCE_EXHAUSTED`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::error::ApiError;
use super::project::{project_task, read_task, task_state};
use super::Ctx;
use crate::events::{TaskEvent, TaskSubscription};
use crate::record::{MessageRecord, PartContent, TaskRecord, TaskState};
use crate::wire::{stream_response, StreamResponse, Task};

/// The stream pool's limits.
#[derive(Debug, Clone, Copy)]
pub struct StreamLimits {
    pub max_streams: usize,
    pub max_streams_per_principal: usize,
}

/// Open streams, overall and by principal.
pub struct StreamPool {
    limits: StreamLimits,
    open: Mutex<Open>,
}

#[derive(Default)]
struct Open {
    total: usize,
    by_principal: HashMap<String, usize>,
}

impl StreamPool {
    pub fn new(limits: StreamLimits) -> Arc<StreamPool> {
        Arc::new(StreamPool {
            limits,
            open: Mutex::new(Open::default()),
        })
    }

    fn open(&self) -> std::sync::MutexGuard<'_, Open> {
        self.open.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// How many streams are open now.
    pub fn live(&self) -> usize {
        self.open().total
    }

    /// A place for one more stream of `principal`'s, or `RESOURCE_EXHAUSTED` naming the
    /// limit that was reached.
    pub fn take(self: &Arc<Self>, principal: &str) -> Result<StreamPlace, ApiError> {
        let mut open = self.open();
        if open.total >= self.limits.max_streams {
            return Err(ApiError::resource_exhausted(format!(
                "this agent already serves {} streams (A2A_MAX_STREAMS); poll the Task with GetTask or subscribe again later",
                self.limits.max_streams
            )));
        }
        let mine = open.by_principal.get(principal).copied().unwrap_or(0);
        if mine >= self.limits.max_streams_per_principal {
            return Err(ApiError::resource_exhausted(format!(
                "you already have {mine} open streams (A2A_MAX_STREAMS_PER_PRINCIPAL); close one, or poll the Task with GetTask"
            )));
        }
        open.total += 1;
        *open.by_principal.entry(principal.to_string()).or_insert(0) += 1;
        Ok(StreamPlace {
            pool: self.clone(),
            principal: principal.to_string(),
        })
    }
}

/// One stream's place in the pool, freed when dropped (when the binding has sent the
/// whole stream, or its client left).
pub struct StreamPlace {
    pool: Arc<StreamPool>,
    principal: String,
}

impl Drop for StreamPlace {
    fn drop(&mut self) {
        let mut open = self.pool.open();
        open.total = open.total.saturating_sub(1);
        if let Some(n) = open.by_principal.get_mut(&self.principal) {
            *n -= 1;
            if *n == 0 {
                open.by_principal.remove(&self.principal);
            }
        }
    }
}

/// A stream for a caller: its first event, then the Task's updates (none after a direct
/// Message), holding its place in the pool while it lives.
pub struct EventStream {
    pub place: StreamPlace,
    /// The Task's snapshot, or the executor's direct Message.
    pub first: StreamResponse,
    /// The Task's updates after `first`; `None` when the stream ends with it.
    pub updates: Option<Updates>,
}

impl EventStream {
    /// A stream of one event, a direct Message.
    pub fn message(place: StreamPlace, message: crate::wire::Message) -> Self {
        EventStream {
            place,
            first: StreamResponse {
                payload: Some(stream_response::Payload::Message(message)),
            },
            updates: None,
        }
    }

    /// `first`, a snapshot of the Task in `state`, then each update `updates` brings (a
    /// subscription taken before the snapshot was read). A terminal snapshot always ends
    /// the stream (nothing more can happen), even when the Task settled between the
    /// caller's checks and this read; with `close_if_settled`, so does an interrupted one.
    pub fn task(
        ctx: &Ctx,
        place: StreamPlace,
        first: Task,
        state: TaskState,
        updates: TaskSubscription,
        close_if_settled: bool,
    ) -> Self {
        let ended = state.is_terminal() || (close_if_settled && state.is_settled());
        EventStream {
            place,
            first: StreamResponse {
                payload: Some(stream_response::Payload::Task(first)),
            },
            updates: Some(Updates::new(updates, ctx.handler.shutdown.clone(), ended)),
        }
    }

    /// Whether the stream ends with its first event.
    pub fn ends_with_first(&self) -> bool {
        self.updates.as_ref().is_none_or(Updates::ended)
    }
}

/// The updates of a Task's stream after its snapshot: the stream ends after the update
/// that settles the Task (terminal or interrupted), when the subscription falls behind
/// (the client reads the Task again) or closes, or when the listener shuts down.
pub struct Updates {
    updates: TaskSubscription,
    shutdown: tokio::sync::watch::Receiver<bool>,
    ended: bool,
}

impl Updates {
    /// The updates `updates` brings until `shutdown` turns `true`; `ended`: none.
    pub fn new(
        updates: TaskSubscription,
        shutdown: tokio::sync::watch::Receiver<bool>,
        ended: bool,
    ) -> Self {
        Updates {
            updates,
            shutdown,
            ended,
        }
    }

    /// Whether nothing more follows.
    pub fn ended(&self) -> bool {
        self.ended
    }

    fn took(&mut self, event: Arc<TaskEvent>) -> Arc<TaskEvent> {
        self.ended = event.state().is_some_and(TaskState::is_settled);
        event
    }

    /// The next update if one is there already, without waiting; `None` when none is, or
    /// the stream has ended (news of lost updates ends it).
    pub fn try_next(&mut self) -> Option<Arc<TaskEvent>> {
        if self.ended {
            return None;
        }
        match self.updates.try_recv()? {
            Ok(event) => Some(self.took(event)),
            Err(_) => {
                self.ended = true;
                None
            }
        }
    }

    /// The next update, waiting for it; `None` once the stream ends.
    pub async fn next(&mut self) -> Option<Arc<TaskEvent>> {
        if self.ended {
            return None;
        }
        tokio::select! {
            // An update already there goes out before a shutdown is looked at.
            biased;
            update = self.updates.recv() => match update {
                Ok(event) => Some(self.took(event)),
                Err(_) => {
                    self.ended = true;
                    None
                }
            },
            _ = self.shutdown.changed() => {
                self.ended = true;
                None
            }
        }
    }
}

/// Waits until the Task is terminal or interrupted, `timeout` passes, the wake queue is
/// held (its note is on the Task), or the listener shuts down — whichever comes first.
/// Returns the Task as the settling update left it when that update carried it (`TaskEvent::Status::settled`); otherwise the caller reads
/// the snapshot it answers with. `since_acceptance` is a subscription taken at the
/// commit that made the Task wait for the agent (`TaskPlane::intake_watching`): it has
/// seen every update since, so the Task's state need not be read first.
pub async fn wait_settled(
    ctx: &Ctx,
    task_id: &str,
    since_acceptance: Option<TaskSubscription>,
    timeout: Duration,
) -> Result<Option<Arc<TaskRecord>>, ApiError> {
    let mut updates = match since_acceptance {
        Some(updates) => updates,
        None => {
            let updates = ctx.handler.plane.events().subscribe_until_settled(task_id);
            let state = task_state(ctx, task_id)?;
            if state.is_settled()
                || (state == TaskState::Submitted && ctx.handler.plane.queue_hold().is_some())
            {
                return Ok(None);
            }
            updates
        }
    };
    // One timer for the whole wait (a new one per update would register with tokio's
    // driver again each time).
    let deadline = tokio::time::sleep(timeout);
    tokio::pin!(deadline);
    let mut shutdown = ctx.handler.shutdown.clone();
    loop {
        tokio::select! {
            update = updates.recv() => match update {
                Ok(event) => if let TaskEvent::Status { state, settled, message, .. } = &*event {
                    if state.is_settled() {
                        return Ok(settled.clone());
                    }
                    if is_hold_note(ctx, message.as_ref()) {
                        return Ok(None);
                    }
                },
                Err(_) => return Ok(None), // fell behind: the snapshot read next tells the truth
            },
            _ = &mut deadline => return Ok(None),
            _ = shutdown.changed() => return Ok(None),
        }
    }
}

/// Whether a status update's `message` is the note of a held queue (no Task is worked on
/// until the operator fixes what it names): a blocking send answers with it at once.
fn is_hold_note(ctx: &Ctx, message: Option<&MessageRecord>) -> bool {
    let (Some(why), Some(message)) = (ctx.handler.plane.queue_hold(), message) else {
        return false;
    };
    message
        .parts
        .iter()
        .any(|p| matches!(&p.content, PartContent::Text(text) if *text == why))
}

/// Holds a new Task's first stream event until the Task's first update is there
/// (`updates`, taken at the commit that accepted it), or until the listener shuts down;
/// without an update, for at most `stream_coalesce_ms` (`A2A_STREAM_COALESCE_MS`) and at
/// least half of it (holds that start close together share one timer,
/// [`super::timer::Waves`]). The snapshot then goes out
/// in the same write as the updates already there: an agent that answers at once costs the
/// stream one write, and one wake-up of its client, instead of two. Written as they came,
/// the snapshot and the updates were two writes and the stream cost ~40% more of the
/// listener's time than a blocking send (one-core `message:stream`: 2.3 socket writes per
/// request, where a blocking send makes 1). The events and their order are unchanged; only
/// the snapshot can be later, by the window at most.
pub async fn hold_first_frame(ctx: &Ctx, updates: &mut TaskSubscription) {
    let window = ctx.handler.config.stream_coalesce_ms;
    if window == 0 {
        return;
    }
    if updates.is_ready() {
        return; // nothing to wait for: no timer
    }
    let mut shutdown = ctx.handler.shutdown.clone();
    let window_ends = ctx.handler.holds.wait(Duration::from_millis(window));
    tokio::select! {
        _ = updates.ready() => {}
        _ = window_ends => {}
        _ = shutdown.changed() => {}
    }
}

/// A Task's stream: its snapshot first, then live updates, as [`EventStream::task`]
/// describes.
pub async fn stream_updates(
    ctx: &Ctx,
    place: StreamPlace,
    task_id: &str,
    history_length: Option<u32>,
    close_if_settled: bool,
) -> Result<EventStream, ApiError> {
    // Subscribe before reading the snapshot, so no update falls between the two.
    let updates = ctx.handler.plane.events().subscribe(task_id);
    let record = read_task(ctx, task_id, history_length).await?;
    let first = project_task(ctx, &record);
    Ok(EventStream::task(
        ctx,
        place,
        first,
        record.state,
        updates,
        close_if_settled,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_stream_pool_limits_streams_overall_and_per_principal_until_a_place_is_dropped() {
        let pool = StreamPool::new(StreamLimits {
            max_streams: 3,
            max_streams_per_principal: 2,
        });
        let a1 = pool.take("alice").expect("alice's first");
        let _a2 = pool.take("alice").expect("alice's second");
        let refused = pool.take("alice").err().expect("alice is at her limit");
        assert_eq!(refused.reason, "RESOURCE_EXHAUSTED");
        assert!(refused.message.contains("A2A_MAX_STREAMS_PER_PRINCIPAL"));
        let _b1 = pool.take("bob").expect("bob has his own places");
        let full = pool.take("carol").err().expect("the pool is full");
        assert!(full.message.contains("A2A_MAX_STREAMS"), "{}", full.message);
        drop(a1);
        pool.take("carol").expect("a dropped place is free again");
    }
}
