//! A Task's live updates for a caller: waiting for a Task to settle (a blocking
//! `message:send`), and the SSE stream of `message:stream` and `tasks/{id}:subscribe` —
//! the snapshot first, then each update from the Task's broadcast (`events.rs`) as it is
//! committed, until the Task settles, the client leaves, or the listener shuts down.
//!
//! Framing and what a slow stream holds are `sse.rs`'s; what a frame carries is
//! `project.rs`'s.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;

use hyper::Response;

use super::conn::StreamGuard;
use super::error::ApiError;
use super::project::{event_frame_into, project_task, read_task, task_state};
use super::{sse, Body, Ctx};
use crate::events::{TaskEvent, TaskSubscription};
use crate::record::{TaskRecord, TaskState};
use crate::wire::Task;
use crate::wire::{stream_response, StreamResponse};

/// SSE keep-alive interval.
const KEEP_ALIVE: Duration = Duration::from_secs(15);

/// Waits until the Task is terminal or interrupted, `timeout` passes, or the listener
/// shuts down — whichever comes first. Returns the Task as the settling update left it
/// when that update carried it (`TaskEvent::Status::settled`); otherwise the caller reads
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
            let updates = ctx.shared.plane.events().subscribe_until_settled(task_id);
            if task_state(ctx, task_id)?.is_settled() {
                return Ok(None);
            }
            updates
        }
    };
    // One timer for the whole wait (a new one per update would register with tokio's
    // driver again each time).
    let deadline = tokio::time::sleep(timeout);
    tokio::pin!(deadline);
    let mut shutdown = ctx.shared.shutdown.clone();
    loop {
        tokio::select! {
            update = updates.recv() => match update {
                Ok(event) => if let TaskEvent::Status { state, settled, .. } = &*event {
                    if state.is_settled() {
                        return Ok(settled.clone());
                    }
                },
                Err(_) => return Ok(None), // fell behind: the snapshot read next tells the truth
            },
            _ = &mut deadline => return Ok(None),
            _ = shutdown.changed() => return Ok(None),
        }
    }
}

/// Holds a new Task's first `message:stream` frame until the Task's first update is there
/// (`updates`, taken at the commit that accepted it), or until the listener shuts down;
/// without an update, for at most `stream_coalesce_ms` (`A2A_STREAM_COALESCE_MS`) and at
/// least half of it (holds that start close together share one timer,
/// [`super::timer::Waves`]). The snapshot then goes out
/// in the same write as the updates already there: an agent that answers at once costs the
/// stream one write, and one wake-up of its client, instead of two. Written as they came,
/// the snapshot and the updates were two writes and the stream cost ~40% more of the
/// listener's time than a blocking send (one-core `message:stream`: 2.3 socket writes per
/// request, where a blocking send makes 1). The frames and their order are unchanged; only
/// the snapshot can be later, by the window at most.
pub async fn hold_first_frame(ctx: &Ctx, updates: &mut TaskSubscription) {
    let window = ctx.shared.config.stream_coalesce_ms;
    if window == 0 {
        return;
    }
    if updates.is_ready() {
        return; // nothing to wait for: no timer
    }
    let mut shutdown = ctx.shared.shutdown.clone();
    let window_ends = ctx.shared.holds.wait(Duration::from_millis(window));
    tokio::select! {
        _ = updates.ready() => {}
        _ = window_ends => {}
        _ = shutdown.changed() => {}
    }
}

/// Streams a Task: its snapshot first, then live updates, until an update settles it
/// (terminal or interrupted), the client leaves, or the listener shuts down. With
/// `close_if_settled`, a snapshot that is settled already ends the stream at once.
pub async fn stream_updates(
    ctx: Ctx,
    slot: StreamGuard,
    framing: sse::Framing,
    task_id: String,
    history_length: Option<u32>,
    close_if_settled: bool,
) -> Result<Response<Body>, ApiError> {
    // Subscribe before reading the snapshot, so no update falls between the two.
    let updates = ctx.shared.plane.events().subscribe(&task_id);
    let record = read_task(&ctx, &task_id, history_length).await?;
    let first = project_task(&ctx, &record);
    Ok(stream_from(
        ctx,
        slot,
        framing,
        first,
        record.state,
        updates,
        close_if_settled,
    ))
}

/// Streams `first`, a snapshot of the Task in `state`, then each update `updates` brings
/// (a subscription taken before the snapshot was), as [`stream_updates`] describes.
pub fn stream_from(
    ctx: Ctx,
    slot: StreamGuard,
    framing: sse::Framing,
    first: Task,
    state: TaskState,
    updates: TaskSubscription,
    close_if_settled: bool,
) -> Response<Body> {
    // A terminal snapshot always ends the stream (nothing more can happen), even when the
    // Task settled between the caller's checks and this read.
    let ends_now = state.is_terminal() || (close_if_settled && state.is_settled());
    let mut then = TaskUpdates {
        framing,
        extensions: ctx.extensions.clone(),
        updates,
        shutdown: ctx.shared.shutdown.clone(),
        ended: ends_now,
        quiet: Quiet::new(),
    };
    let first = then.first_piece(first);
    sse::response(&ctx.extensions, slot, first, then)
}

/// The frames after a Task stream's snapshot: one per update of the Task, a keep-alive
/// comment after [`KEEP_ALIVE`] without one; the stream ends after the update that
/// settles the Task, when the subscription falls behind or closes, or when the listener
/// shuts down. A client that leaves drops it with its connection.
struct TaskUpdates {
    /// How each event is framed (by binding).
    framing: sse::Framing,
    /// The extensions the caller activated (what its frames carry).
    extensions: Vec<String>,
    updates: TaskSubscription,
    shutdown: tokio::sync::watch::Receiver<bool>,
    ended: bool,
    quiet: Quiet,
}

/// A stream's keep-alive clock: one tokio timer for the whole stream, moved to a later
/// deadline at each frame (lock-free in tokio while the timer is pending), where a new
/// timer per frame would register with tokio's driver, and wake it, each time.
struct Quiet {
    /// Made at the first [`Quiet::restart`]: a stream that its first piece ends never
    /// needs one (a tokio timer costs an allocation and a read of the clock).
    sleep: Option<Pin<Box<tokio::time::Sleep>>>,
    /// Whether `sleep` was polled (so registered with the driver) since it was last set.
    armed: bool,
}

impl Quiet {
    fn new() -> Self {
        Quiet {
            sleep: None,
            armed: false,
        }
    }

    /// Starts the clock again: [`Quiet::elapsed`] resolves `after` from now.
    fn restart(&mut self, after: Duration) {
        let deadline = tokio::time::Instant::now() + after;
        match self.sleep.as_mut() {
            Some(sleep) if self.armed => sleep.as_mut().reset(deadline),
            // Not registered yet: replaced in place, and registered only if polled.
            Some(sleep) => sleep.set(tokio::time::sleep_until(deadline)),
            None => self.sleep = Some(Box::pin(tokio::time::sleep_until(deadline))),
        }
    }

    /// Resolves once the time given to the last [`Quiet::restart`] has passed (never
    /// restarted: [`KEEP_ALIVE`] from now).
    fn elapsed(&mut self) -> impl Future<Output = ()> + '_ {
        std::future::poll_fn(move |cx| {
            self.armed = true;
            self.sleep
                .get_or_insert_with(|| Box::pin(tokio::time::sleep(KEEP_ALIVE)))
                .as_mut()
                .poll(cx)
        })
    }
}

impl TaskUpdates {
    /// The stream's first piece of body: the snapshot `first`, with the frames of the
    /// updates already there. Encoded before the response goes out, so the stream keeps
    /// neither the record nor its wire copy: only the bytes, until the client has taken
    /// them.
    fn first_piece(&mut self, first: Task) -> Bytes {
        // A Task settled at once is four frames, ~1,050 bytes: one allocation.
        let mut frames = Vec::with_capacity(2048);
        self.framing.frame_into(
            &mut frames,
            &StreamResponse {
                payload: Some(stream_response::Payload::Task(first)),
            },
        );
        self.take_waiting(&mut frames);
        Bytes::from(frames)
    }

    /// Appends `event`'s frame to `frames`; the update that settles the Task ends the
    /// stream.
    fn append(&mut self, frames: &mut Vec<u8>, event: &TaskEvent) {
        self.ended = event.state().is_some_and(TaskState::is_settled);
        event_frame_into(frames, &self.framing, &self.extensions, event);
    }

    /// Appends the frames of the updates that wait already, without waiting, until one
    /// ends the stream or the piece holds [`sse::PIECE_AT_MOST`] bytes. News of lost
    /// updates ends it too, after the frames before it (the client reads the Task again),
    /// as it would have had it come by itself.
    fn take_waiting(&mut self, frames: &mut Vec<u8>) {
        while !self.ended && frames.len() < sse::PIECE_AT_MOST {
            match self.updates.try_recv() {
                Some(Ok(event)) => self.append(frames, &event),
                Some(Err(_)) => self.ended = true,
                None => break,
            }
        }
    }
}

impl sse::Frames for TaskUpdates {
    /// The frames of the next update and of any that came with it (an agent's updates
    /// committed together: one piece of the body, one write), or a keep-alive.
    async fn next(&mut self) -> Option<Bytes> {
        if self.ended {
            return None;
        }
        self.quiet.restart(KEEP_ALIVE);
        tokio::select! {
            // An update already there goes out without the keep-alive timer being touched.
            biased;
            update = self.updates.recv() => {
                let event = update.ok()?;
                let mut frames = Vec::with_capacity(512);
                self.append(&mut frames, &event);
                self.take_waiting(&mut frames);
                Some(Bytes::from(frames))
            }
            _ = self.shutdown.changed() => None,
            _ = self.quiet.elapsed() => Some(sse::keep_alive()),
        }
    }

    fn ended(&self) -> bool {
        self.ended
    }
}

/// `message:stream` after acceptance (`slot` was taken before intake, so an accepted
/// message is never refused for want of a stream).
pub async fn stream_task(
    ctx: Ctx,
    slot: StreamGuard,
    framing: sse::Framing,
    task_id: String,
    history_length: Option<u32>,
) -> Result<Response<Body>, ApiError> {
    stream_updates(ctx, slot, framing, task_id, history_length, true).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::EventBus;
    use sse::Frames;
    use std::time::Instant;

    fn status(state: TaskState) -> TaskEvent {
        TaskEvent::Status {
            task_id: "t-1".into(),
            context_id: "c-1".into(),
            state,
            message: None,
            at_ms: 1_700_000_000_000,
            settled: None,
        }
    }

    /// What the stream sends for `events`, one frame after the other.
    fn frames_of(events: &[TaskEvent]) -> Vec<u8> {
        let mut frames = Vec::new();
        for event in events {
            sse::frame_into(&mut frames, &super::super::project::event_frame(&[], event));
        }
        frames
    }

    fn updates_of(bus: &EventBus) -> TaskUpdates {
        TaskUpdates {
            framing: sse::Framing::Rest,
            extensions: Vec::new(),
            updates: bus.subscribe("t-1"),
            shutdown: tokio::sync::watch::channel(false).1,
            ended: false,
            quiet: Quiet::new(),
        }
    }

    fn snapshot() -> Task {
        Task {
            id: "t-1".into(),
            context_id: "c-1".into(),
            ..Task::default()
        }
    }

    /// The snapshot's own frame.
    fn snapshot_frame() -> Vec<u8> {
        let mut frame = Vec::new();
        sse::frame_into(
            &mut frame,
            &StreamResponse {
                payload: Some(stream_response::Payload::Task(snapshot())),
            },
        );
        frame
    }

    #[test]
    fn updates_that_wait_together_go_out_as_one_piece_ending_at_the_one_that_settles() {
        crate::http::test_runtime().block_on(async {
            let bus = EventBus::default();
            let mut stream = updates_of(&bus);
            let first = stream.first_piece(snapshot());
            assert_eq!(
                first,
                snapshot_frame(),
                "nothing waited: the snapshot alone"
            );
            let sent = [
                status(TaskState::Working),
                status(TaskState::Completed),
                status(TaskState::Working),
            ];
            for event in sent.clone() {
                bus.publish(event);
            }
            let piece = stream.next().await.expect("the updates");
            assert_eq!(piece, frames_of(&sent[..2]));
            assert_eq!(stream.next().await, None, "the settling update ends it");
        });
    }

    #[test]
    fn a_streams_first_piece_carries_the_snapshot_and_the_updates_already_there() {
        crate::http::test_runtime().block_on(async {
            let bus = EventBus::default();
            let mut stream = updates_of(&bus);
            bus.publish(status(TaskState::Working));
            let first = stream.first_piece(snapshot());
            let mut expected = snapshot_frame();
            expected.extend(frames_of(&[status(TaskState::Working)]));
            assert_eq!(first, expected);
            bus.publish(status(TaskState::InputRequired));
            let piece = stream.next().await.expect("the next update");
            assert_eq!(piece, frames_of(&[status(TaskState::InputRequired)]));
            assert_eq!(stream.next().await, None, "an interrupted Task ends it");
        });
    }

    #[test]
    fn updates_that_wait_together_go_out_in_pieces_of_at_most_16_kib_and_a_frame() {
        crate::http::test_runtime().block_on(async {
            let bus = EventBus::default();
            let mut stream = updates_of(&bus);
            let sent: Vec<TaskEvent> = (0..120).map(|_| status(TaskState::Working)).collect();
            for event in sent.clone() {
                bus.publish(event);
            }
            let frame = frames_of(&sent[..1]).len();
            let mut received = stream.first_piece(snapshot()).to_vec();
            assert!(received.len() < sse::PIECE_AT_MOST + frame);
            let mut pieces = 1;
            while received.len() < snapshot_frame().len() + frames_of(&sent).len() {
                let piece = stream.next().await.expect("the updates left");
                assert!(piece.len() < sse::PIECE_AT_MOST + frame, "{}", piece.len());
                received.extend_from_slice(&piece);
                pieces += 1;
            }
            assert!(pieces > 1, "120 frames of {frame} bytes fit in one piece");
            let mut expected = snapshot_frame();
            expected.extend(frames_of(&sent));
            assert_eq!(received, expected, "every frame, once, in order");
        });
    }

    #[test]
    fn news_of_lost_updates_ends_a_stream_after_the_frames_before_it() {
        crate::http::test_runtime().block_on(async {
            let bus = EventBus::default();
            let mut stream = updates_of(&bus);
            for _ in 0..200 {
                bus.publish(status(TaskState::Working));
            }
            let first = stream.first_piece(snapshot());
            assert!(first.ends_with(b"\n\n") && first.starts_with(b"data: {\"task\""));
            assert_eq!(
                first.windows(6).filter(|w| w == b"data: ").count(),
                1,
                "the snapshot only: the updates after it were lost"
            );
            assert_eq!(stream.next().await, None);
        });
    }

    #[test]
    fn a_streams_keep_alive_clock_restarts_at_each_frame_and_again_after_it_fired() {
        crate::http::test_runtime().block_on(async {
            let mut quiet = Quiet::new();
            let tick = Duration::from_millis(40);
            // Restarted before it was ever polled, then quiet: fires after `tick`.
            quiet.restart(tick);
            let started = Instant::now();
            quiet.elapsed().await;
            assert!(started.elapsed() >= tick);
            // After it fired, a restart arms it again.
            quiet.restart(tick);
            let started = Instant::now();
            quiet.elapsed().await;
            assert!(started.elapsed() >= tick);
            // A frame half-way (a restart while pending) pushes the deadline out.
            quiet.restart(tick);
            let started = Instant::now();
            assert!(
                tokio::time::timeout(tick / 2, quiet.elapsed())
                    .await
                    .is_err(),
                "fired before its time"
            );
            quiet.restart(tick);
            quiet.elapsed().await;
            assert!(started.elapsed() >= tick / 2 + tick);
        });
    }
}
