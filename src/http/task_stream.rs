//! A stream of the handler's (`handler::streams::EventStream`) as an SSE response: its
//! first event, with the updates already there, as the first piece of the body; then each
//! update (with any that came with it) as one piece, and a keep-alive comment after
//! [`KEEP_ALIVE`] without one. The framing is the binding's (`sse::Framing`); what a
//! frame carries is `handler::project`'s.

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use bytes::Bytes;
use hyper::Response;

use super::{sse, Body, Caller};
use crate::events::TaskEvent;
use crate::handler::project::event_json_into;
use crate::handler::streams::{EventStream, Updates};

/// SSE keep-alive interval.
const KEEP_ALIVE: Duration = Duration::from_secs(15);

/// The SSE response for `stream`, framed by `framing`. Its connection leaves the
/// connection pool until the stream ends.
pub fn respond(caller: &Caller, stream: EventStream, framing: sse::Framing) -> Response<Body> {
    let EventStream {
        place,
        first,
        updates,
    } = stream;
    let hold = sse::Hold::new(place, caller.connections.carry_stream(&caller.slot));
    let extensions = &caller.ctx.extensions;
    let mut then = TaskUpdates {
        framing,
        extensions: extensions.clone(),
        updates,
        quiet: Quiet::new(),
    };
    let first = then.first_piece(&first);
    sse::response(extensions, hold, first, then)
}

/// The frames after a stream's first event: one piece per update (and the ones that came
/// with it), a keep-alive after [`KEEP_ALIVE`] without one, until the updates end. A
/// client that leaves drops it with its connection.
struct TaskUpdates {
    /// How each event is framed (by binding).
    framing: sse::Framing,
    /// The extensions the caller activated (what its frames carry).
    extensions: Vec<String>,
    /// `None`: the stream ends after its first event.
    updates: Option<Updates>,
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
    /// The stream's first piece of body: `first`, with the frames of the updates already
    /// there. Encoded before the response goes out, so the stream keeps neither the record
    /// nor its wire copy: only the bytes, until the client has taken them.
    fn first_piece(&mut self, first: &crate::wire::StreamResponse) -> Bytes {
        // A Task settled at once is four frames, ~1,050 bytes: one allocation.
        let mut frames = Vec::with_capacity(2048);
        self.framing.frame_into(&mut frames, first);
        self.take_waiting(&mut frames);
        Bytes::from(frames)
    }

    fn append(&self, frames: &mut Vec<u8>, event: &TaskEvent) {
        self.framing.frame_with(frames, |json| {
            event_json_into(json, &self.extensions, event)
        });
    }

    /// Appends the frames of the updates that wait already, without waiting, until one
    /// ends the stream or the piece holds [`sse::PIECE_AT_MOST`] bytes.
    fn take_waiting(&mut self, frames: &mut Vec<u8>) {
        while frames.len() < sse::PIECE_AT_MOST {
            let Some(event) = self.updates.as_mut().and_then(Updates::try_next) else {
                break;
            };
            self.append(frames, &event);
        }
    }
}

impl sse::Frames for TaskUpdates {
    /// The frames of the next update and of any that came with it (an agent's updates
    /// committed together: one piece of the body, one write), or a keep-alive.
    async fn next(&mut self) -> Option<Bytes> {
        let updates = self.updates.as_mut().filter(|u| !u.ended())?;
        self.quiet.restart(KEEP_ALIVE);
        tokio::select! {
            // An update already there goes out without the keep-alive timer being touched.
            biased;
            update = updates.next() => {
                let event = update?;
                let mut frames = Vec::with_capacity(512);
                self.append(&mut frames, &event);
                self.take_waiting(&mut frames);
                Some(Bytes::from(frames))
            }
            _ = self.quiet.elapsed() => Some(sse::keep_alive()),
        }
    }

    fn ended(&self) -> bool {
        self.updates.as_ref().is_none_or(Updates::ended)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::EventBus;
    use crate::record::TaskState;
    use crate::wire::{stream_response, StreamResponse, Task};
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
            sse::frame_into(
                &mut frames,
                &crate::handler::project::event_frame(&[], event),
            );
        }
        frames
    }

    fn updates_of(bus: &EventBus) -> TaskUpdates {
        TaskUpdates {
            framing: sse::Framing::Rest,
            extensions: Vec::new(),
            updates: Some(Updates::new(
                bus.subscribe("t-1"),
                tokio::sync::watch::channel(false).1,
                false,
            )),
            quiet: Quiet::new(),
        }
    }

    fn snapshot() -> StreamResponse {
        StreamResponse {
            payload: Some(stream_response::Payload::Task(Task {
                id: "t-1".into(),
                context_id: "c-1".into(),
                ..Task::default()
            })),
        }
    }

    /// The snapshot's own frame.
    fn snapshot_frame() -> Vec<u8> {
        let mut frame = Vec::new();
        sse::frame_into(&mut frame, &snapshot());
        frame
    }

    #[test]
    fn updates_that_wait_together_go_out_as_one_piece_ending_at_the_one_that_settles() {
        crate::handler::test_runtime().block_on(async {
            let bus = EventBus::default();
            let mut stream = updates_of(&bus);
            let first = stream.first_piece(&snapshot());
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
        crate::handler::test_runtime().block_on(async {
            let bus = EventBus::default();
            let mut stream = updates_of(&bus);
            bus.publish(status(TaskState::Working));
            let first = stream.first_piece(&snapshot());
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
        crate::handler::test_runtime().block_on(async {
            let bus = EventBus::default();
            let mut stream = updates_of(&bus);
            let sent: Vec<TaskEvent> = (0..120).map(|_| status(TaskState::Working)).collect();
            for event in sent.clone() {
                bus.publish(event);
            }
            let frame = frames_of(&sent[..1]).len();
            let mut received = stream.first_piece(&snapshot()).to_vec();
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
        crate::handler::test_runtime().block_on(async {
            let bus = EventBus::default();
            let mut stream = updates_of(&bus);
            for _ in 0..200 {
                bus.publish(status(TaskState::Working));
            }
            let first = stream.first_piece(&snapshot());
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
        crate::handler::test_runtime().block_on(async {
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
