//! Per-Task broadcast of status and artifact updates, published after commit.
//!
//! The plane publishes from the writer thread, right after the commit that made an update
//! durable, so subscribers see updates in commit order and never before they are durable.
//! A Task has a channel only while someone listens; streams are ephemeral and nothing is
//! replayed (a reconnecting client reads the Task, then subscribes again).

use std::collections::{HashMap, VecDeque};
use std::future::poll_fn;
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};

use crate::record::{ArtifactRecord, MessageRecord, TaskRecord, TaskState};

/// How many updates a slow subscriber may fall behind before it is told it lagged (one
/// commit may carry many outputs). A subscriber's queue grows to this only while it is
/// behind: a Task watched by one blocking send holds its few updates, not 128 slots.
const TASK_CHANNEL_CAPACITY: usize = 128;

/// One durable change of a Task.
#[derive(Debug, Clone, PartialEq)]
pub enum TaskEvent {
    Status {
        task_id: String,
        context_id: String,
        state: TaskState,
        message: Option<MessageRecord>,
        at_ms: i64,
        /// The whole Task (every history message and artifact) as the commit of a settling
        /// update left it, when someone waited to answer with it as the update was written
        /// ([`EventBus::subscribe_until_settled`]): a blocking `message:send` answers with
        /// it instead of reading the Task again on a cold read connection. `None`
        /// otherwise; a waiter then reads.
        settled: Option<Arc<TaskRecord>>,
    },
    Artifact {
        task_id: String,
        context_id: String,
        artifact: ArtifactRecord,
    },
}

impl TaskEvent {
    pub fn task_id(&self) -> &str {
        match self {
            TaskEvent::Status { task_id, .. } | TaskEvent::Artifact { task_id, .. } => task_id,
        }
    }

    /// The state a status update moves to (`None` for an artifact).
    pub fn state(&self) -> Option<TaskState> {
        match self {
            TaskEvent::Status { state, .. } => Some(*state),
            TaskEvent::Artifact { .. } => None,
        }
    }

    /// Whether a caller waiting for the Task to settle (a blocking send) is answered on
    /// this update: one that settles the Task, or a note on a Task still SUBMITTED (the wake
    /// queue is held, and says why on each waiting Task: the caller is told at once).
    pub fn answers_a_waiting_caller(&self) -> bool {
        match self {
            TaskEvent::Status { state, message, .. } => {
                state.is_settled() || (*state == TaskState::Submitted && message.is_some())
            }
            TaskEvent::Artifact { .. } => false,
        }
    }
}

/// Takes one acceptance, on the thread that publishes it (the writer, right after the
/// commit), under the bus's lock: it must not block or call back into the bus. Returns
/// whether it still wants acceptances.
pub type AcceptedSink = Arc<dyn Fn(&Arrival) -> bool + Send + Sync>;

/// A Task that was just accepted (created or continued) and now waits for the agent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Accepted {
    pub activation_id: String,
    pub task_id: String,
    pub context_id: String,
}

/// An acceptance with what was accepted, for a consumer that works the Task itself (an
/// embedder's agent): it can start on the message without reading the Task back. The
/// message is the one the acceptance's commit holds in memory, shared, not copied, with
/// every consumer.
#[derive(Debug, Clone, PartialEq)]
pub struct Arrival {
    pub accepted: Accepted,
    /// The message continued a Task that waited for its caller (INPUT_REQUIRED or
    /// AUTH_REQUIRED); otherwise it created the Task.
    pub continued: bool,
    /// The message accepted, as stored: the Task's newest history entry.
    pub message: Arc<MessageRecord>,
}

/// What happened to some Task, for the person watching the resident (the Pi UI): an
/// arrival or a status change of any Task, whoever owns it. Never sent to callers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Activity {
    pub task_id: String,
    /// `None` for an acceptance (a new message for the Task), else the status it moved to.
    pub state: Option<TaskState>,
    /// The text of the status message, if any (why a Task failed, what it asks).
    pub message: Option<String>,
}

/// One watched Task's channel.
struct TaskChannel {
    /// Each subscriber's queue. Updates are shared, not copied, between them.
    inboxes: Vec<Arc<Inbox>>,
    /// Subscribers that answer with the settled Task (see
    /// [`EventBus::subscribe_until_settled`]).
    settled_waiters: usize,
}

#[derive(Default)]
struct Channels {
    tasks: HashMap<String, TaskChannel>,
    /// Activity watchers by id; a watcher whose receiver is gone is dropped on send.
    activity: Vec<(u64, mpsc::Sender<Activity>)>,
    /// Acceptance watchers (wake queues) by id; never lag, never poll.
    accepted: Vec<(u64, mpsc::Sender<Accepted>)>,
    /// Acceptance watchers that take each acceptance themselves (embedder agents) by id;
    /// never lag either.
    accepted_sinks: Vec<(u64, AcceptedSink)>,
    next_watcher: u64,
}

impl Channels {
    /// A watch id, unique across both kinds of watch.
    fn next_id(&mut self) -> u64 {
        self.next_watcher += 1;
        self.next_watcher
    }

    /// Sends `activity()` to every watcher; builds nothing when nobody watches.
    fn send_activity(&mut self, activity: impl FnOnce() -> Activity) {
        if self.activity.is_empty() {
            return;
        }
        let activity = activity();
        self.activity
            .retain(|(_, tx)| tx.send(activity.clone()).is_ok());
    }
}

/// The plane's event bus.
#[derive(Default)]
pub struct EventBus {
    channels: Arc<Mutex<Channels>>,
}

impl EventBus {
    /// Listens to one Task's updates from now on.
    pub fn subscribe(&self, task_id: &str) -> TaskSubscription {
        self.subscription(task_id, false)
    }

    /// [`EventBus::subscribe`] for a caller that answers with the Task once it settles (a
    /// blocking `message:send`): it is handed only the updates it is answered on
    /// ([`TaskEvent::answers_a_waiting_caller`]: a terminal or interrupted state, or the
    /// held queue's note), so the updates before (WORKING, artifacts) do not wake it for
    /// nothing; and while it listens, the settling update carries the Task as
    /// its commit left it (`TaskEvent::Status::settled`).
    pub fn subscribe_until_settled(&self, task_id: &str) -> TaskSubscription {
        self.subscription(task_id, true)
    }

    fn subscription(&self, task_id: &str, wants_settled: bool) -> TaskSubscription {
        let mut channels = self.channels.lock().unwrap_or_else(|p| p.into_inner());
        let channel = channels
            .tasks
            .entry(task_id.to_string())
            .or_insert_with(|| TaskChannel {
                inboxes: Vec::new(),
                settled_waiters: 0,
            });
        channel.settled_waiters += usize::from(wants_settled);
        let inbox = Arc::new(Inbox {
            settling_only: wants_settled,
            ..Inbox::default()
        });
        channel.inboxes.push(inbox.clone());
        TaskSubscription {
            inbox,
            task_id: task_id.to_string(),
            wants_settled,
            channels: self.channels.clone(),
        }
    }

    /// Watches every Task's activity (see [`Activity`]) until [`EventBus::unwatch`] is
    /// called with the returned id; the receiver then reports disconnection.
    pub fn watch_activity(&self) -> (u64, mpsc::Receiver<Activity>) {
        let (tx, rx) = mpsc::channel();
        let mut channels = self.channels.lock().unwrap_or_else(|p| p.into_inner());
        let id = channels.next_id();
        channels.activity.push((id, tx));
        (id, rx)
    }

    /// Watches acceptances (for the wake queue): a blocking receiver that misses nothing,
    /// until [`EventBus::unwatch`] is called with the returned id.
    pub fn watch_accepted(&self) -> (u64, mpsc::Receiver<Accepted>) {
        let (tx, rx) = mpsc::channel();
        let mut channels = self.channels.lock().unwrap_or_else(|p| p.into_inner());
        let id = channels.next_id();
        channels.accepted.push((id, tx));
        (id, rx)
    }

    /// [`EventBus::watch_accepted`] for a consumer that takes each acceptance itself (an
    /// embedder's agent hands it to a waiting call, or keeps it until one comes): misses
    /// nothing; `sink` is called for every acceptance until it returns false or
    /// [`EventBus::unwatch`] ends the watch.
    pub fn watch_accepted_with(&self, sink: AcceptedSink) -> u64 {
        let mut channels = self.channels.lock().unwrap_or_else(|p| p.into_inner());
        let id = channels.next_id();
        channels.accepted_sinks.push((id, sink));
        id
    }

    /// Ends the watch `id` (of any kind): its receiver's `recv` returns an error.
    pub fn unwatch(&self, id: u64) {
        let mut channels = self.channels.lock().unwrap_or_else(|p| p.into_inner());
        channels.activity.retain(|(w, _)| *w != id);
        channels.accepted.retain(|(w, _)| *w != id);
        channels.accepted_sinks.retain(|(w, _)| *w != id);
    }

    /// Whether someone waits to answer with Task `task_id` once it settles (see
    /// [`EventBus::subscribe_until_settled`]).
    pub fn wants_settled(&self, task_id: &str) -> bool {
        let channels = self.channels.lock().unwrap_or_else(|p| p.into_inner());
        channels
            .tasks
            .get(task_id)
            .is_some_and(|c| c.settled_waiters > 0)
    }

    /// Whether anyone here listens to Task `task_id`'s updates (a subscriber or a waiter).
    pub fn is_watched(&self, task_id: &str) -> bool {
        let channels = self.channels.lock().unwrap_or_else(|p| p.into_inner());
        channels.tasks.contains_key(task_id)
    }

    /// The Tasks someone here listens to.
    pub fn watched_tasks(&self) -> Vec<String> {
        let channels = self.channels.lock().unwrap_or_else(|p| p.into_inner());
        channels.tasks.keys().cloned().collect()
    }

    pub(crate) fn publish(&self, event: TaskEvent) {
        let mut channels = self.channels.lock().unwrap_or_else(|p| p.into_inner());
        if let TaskEvent::Status {
            task_id,
            state,
            message,
            ..
        } = &event
        {
            channels.send_activity(|| Activity {
                task_id: task_id.clone(),
                state: Some(*state),
                message: message.as_ref().map(MessageRecord::text),
            });
        }
        if let Some(channel) = channels.tasks.get(event.task_id()) {
            let answers = event.answers_a_waiting_caller();
            let event = Arc::new(event);
            for inbox in &channel.inboxes {
                if answers || !inbox.settling_only {
                    inbox.push(&event);
                }
            }
        }
    }

    pub(crate) fn publish_accepted(&self, arrival: Arrival) {
        let mut channels = self.channels.lock().unwrap_or_else(|p| p.into_inner());
        channels.send_activity(|| Activity {
            task_id: arrival.accepted.task_id.clone(),
            state: None,
            message: None,
        });
        channels
            .accepted
            .retain(|(_, tx)| tx.send(arrival.accepted.clone()).is_ok());
        channels.accepted_sinks.retain(|(_, sink)| sink(&arrival));
    }
}

/// One subscriber's updates not yet taken, oldest first.
#[derive(Default)]
struct Inbox {
    state: Mutex<InboxState>,
    /// Takes only the updates a waiting caller is answered on
    /// ([`TaskEvent::answers_a_waiting_caller`], [`EventBus::subscribe_until_settled`]).
    settling_only: bool,
}

#[derive(Default)]
struct InboxState {
    queue: VecDeque<Arc<TaskEvent>>,
    /// Updates dropped (oldest first) since the subscriber last heard of it.
    lagged: u64,
    /// The task waiting in [`TaskSubscription::recv`], if any.
    waker: Option<Waker>,
}

impl InboxState {
    /// Whether an update, or news of lost ones, waits to be taken.
    fn has_news(&self) -> bool {
        self.lagged > 0 || !self.queue.is_empty()
    }

    /// The next update kept, or news of lost ones (once), if either waits.
    fn take_next(&mut self) -> Option<Result<Arc<TaskEvent>, Lagged>> {
        if self.lagged > 0 {
            return Some(Err(Lagged(std::mem::take(&mut self.lagged))));
        }
        self.queue.pop_front().map(Ok)
    }

    /// Wakes the task of `cx` at the next push (the waker kept unless it wakes another task).
    fn wake_next(&mut self, cx: &Context<'_>) {
        if !self.waker.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
            self.waker = Some(cx.waker().clone());
        }
    }
}

impl Inbox {
    /// Queues `event`; a subscriber [`TASK_CHANNEL_CAPACITY`] behind loses its oldest
    /// update, and its next `recv` says so. Wakes the waiting subscriber (outside the lock).
    fn push(&self, event: &Arc<TaskEvent>) {
        let waker = {
            let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
            if state.queue.len() == TASK_CHANNEL_CAPACITY {
                state.queue.pop_front();
                state.lagged += 1;
            }
            state.queue.push_back(event.clone());
            state.waker.take()
        };
        if let Some(waker) = waker {
            waker.wake();
        }
    }
}

/// A subscriber fell more than [`TASK_CHANNEL_CAPACITY`] updates behind: this many were
/// lost, oldest first (read the Task again for the truth).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lagged(pub u64);

/// A live subscription to one Task; its channel goes away with the last subscription.
pub struct TaskSubscription {
    inbox: Arc<Inbox>,
    task_id: String,
    wants_settled: bool,
    channels: Arc<Mutex<Channels>>,
}

impl TaskSubscription {
    /// Resolves once an update (or news of lost ones) waits to be taken, without taking it.
    pub async fn ready(&mut self) {
        poll_fn(|cx| {
            let mut state = self.inbox.state.lock().unwrap_or_else(|p| p.into_inner());
            if state.has_news() {
                return Poll::Ready(());
            }
            state.wake_next(cx);
            Poll::Pending
        })
        .await
    }

    /// Whether [`TaskSubscription::ready`] would resolve at once.
    pub fn is_ready(&self) -> bool {
        let state = self.inbox.state.lock().unwrap_or_else(|p| p.into_inner());
        state.has_news()
    }

    /// The next update, in publish order. `Err` once when the subscriber fell too far
    /// behind (updates were lost: read the Task again); later calls go on with the updates
    /// kept. Cancel-safe: an update is taken only when it is returned.
    pub async fn recv(&mut self) -> Result<Arc<TaskEvent>, Lagged> {
        poll_fn(|cx| {
            let mut state = self.inbox.state.lock().unwrap_or_else(|p| p.into_inner());
            if let Some(next) = state.take_next() {
                return Poll::Ready(next);
            }
            state.wake_next(cx);
            Poll::Pending
        })
        .await
    }

    /// What [`TaskSubscription::recv`] would return at once, or `None` when nothing waits
    /// yet (it does not wait).
    pub fn try_recv(&mut self) -> Option<Result<Arc<TaskEvent>, Lagged>> {
        let mut state = self.inbox.state.lock().unwrap_or_else(|p| p.into_inner());
        state.take_next()
    }
}

impl Drop for TaskSubscription {
    fn drop(&mut self) {
        let mut channels = self.channels.lock().unwrap_or_else(|p| p.into_inner());
        let Some(channel) = channels.tasks.get_mut(&self.task_id) else {
            return;
        };
        channel.settled_waiters -= usize::from(self.wants_settled);
        channel.inboxes.retain(|i| !Arc::ptr_eq(i, &self.inbox));
        if channel.inboxes.is_empty() {
            channels.tasks.remove(&self.task_id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::future::Future;
    use std::task::{Context, Wake};
    use std::thread::Thread;
    use std::time::Duration;

    /// Runs `future` on this thread, parking it until a wake: a subscriber's real waker,
    /// with no runtime that could poll it for another reason. Each park ends after 10 s
    /// at most, so a wake that never comes shows as a slow poll, not a hung test.
    fn block_on<F: Future>(future: F) -> F::Output {
        struct Unpark(Thread);
        impl Wake for Unpark {
            fn wake(self: Arc<Self>) {
                self.0.unpark();
            }
        }
        let waker = Arc::new(Unpark(std::thread::current())).into();
        let mut cx = Context::from_waker(&waker);
        let mut future = std::pin::pin!(future);
        loop {
            if let Poll::Ready(out) = future.as_mut().poll(&mut cx) {
                return out;
            }
            std::thread::park_timeout(Duration::from_secs(10));
        }
    }

    fn status(task_id: &str, state: TaskState, at_ms: i64) -> TaskEvent {
        TaskEvent::Status {
            task_id: task_id.into(),
            context_id: "c".into(),
            state,
            message: None,
            at_ms,
            settled: None,
        }
    }

    fn at_ms(event: &TaskEvent) -> i64 {
        match event {
            TaskEvent::Status { at_ms, .. } => *at_ms,
            TaskEvent::Artifact { .. } => panic!("a status update"),
        }
    }

    #[test]
    fn every_subscriber_of_a_task_gets_its_updates_in_publish_order_and_no_other_tasks() {
        block_on(async {
            let bus = EventBus::default();
            let mut first = bus.subscribe("t1");
            let mut second = bus.subscribe("t1");
            let mut other = bus.subscribe("t2");
            bus.publish(status("t1", TaskState::Working, 1));
            bus.publish(status("t2", TaskState::Working, 7));
            bus.publish(status("t1", TaskState::Completed, 2));
            for updates in [&mut first, &mut second] {
                assert_eq!(at_ms(&updates.recv().await.unwrap()), 1);
                assert_eq!(at_ms(&updates.recv().await.unwrap()), 2);
            }
            assert_eq!(at_ms(&other.recv().await.unwrap()), 7);
        });
    }

    #[test]
    fn a_waiting_caller_is_also_handed_the_held_queues_note_on_a_submitted_task() {
        block_on(async {
            let bus = EventBus::default();
            let mut waiting = bus.subscribe_until_settled("t");
            let noted = |state, at_ms, text: &str| TaskEvent::Status {
                task_id: "t".into(),
                context_id: "c".into(),
                state,
                message: Some(MessageRecord::user_text("n", text)),
                at_ms,
                settled: None,
            };
            bus.publish(noted(TaskState::Submitted, 1, "the queue is held: no key"));
            bus.publish(noted(TaskState::Working, 2, "working on it"));
            bus.publish(status("t", TaskState::Completed, 3));
            assert_eq!(at_ms(&waiting.recv().await.unwrap()), 1);
            assert_eq!(at_ms(&waiting.recv().await.unwrap()), 3);
        });
    }

    #[test]
    fn a_subscriber_until_settled_is_handed_only_the_updates_that_settle_the_task() {
        block_on(async {
            let bus = EventBus::default();
            let mut waiting = bus.subscribe_until_settled("t");
            bus.publish(status("t", TaskState::Working, 1));
            bus.publish(TaskEvent::Artifact {
                task_id: "t".into(),
                context_id: "c".into(),
                artifact: ArtifactRecord {
                    artifact_id: "a".into(),
                    name: None,
                    description: None,
                    parts: vec![],
                    metadata: None,
                    extensions: vec![],
                },
            });
            assert!(
                !waiting.is_ready(),
                "nothing that settles the Task: not woken"
            );
            bus.publish(status("t", TaskState::InputRequired, 2));
            bus.publish(status("t", TaskState::Submitted, 3));
            bus.publish(status("t", TaskState::Completed, 4));
            assert_eq!(at_ms(&waiting.recv().await.unwrap()), 2);
            assert_eq!(at_ms(&waiting.recv().await.unwrap()), 4);
            assert!(waiting.try_recv().is_none());
        });
    }

    /// A subscription to Task `t`, and a thread that publishes `t`'s updates at the given
    /// times 50 ms from now (a subscriber waiting for them has nothing else to wake it).
    fn updates_from_another_thread(at: &[i64]) -> (TaskSubscription, std::thread::JoinHandle<()>) {
        let bus = Arc::new(EventBus::default());
        let updates = bus.subscribe("t");
        let at = at.to_vec();
        let thread = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(50));
            for n in at {
                bus.publish(status("t", TaskState::Working, n));
            }
        });
        (updates, thread)
    }

    #[test]
    fn a_waiting_subscriber_wakes_when_an_update_is_published_from_another_thread() {
        block_on(async {
            let (mut updates, thread) = updates_from_another_thread(&[3]);
            let waiting = std::time::Instant::now();
            let event = updates.recv().await.unwrap();
            assert!(
                waiting.elapsed() < Duration::from_secs(5),
                "the publish woke the subscriber (not the 10 s park timeout)"
            );
            assert_eq!(at_ms(&event), 3);
            thread.join().unwrap();
        });
    }

    #[test]
    fn a_subscription_waits_ready_for_an_update_from_another_thread_and_leaves_it_to_recv() {
        block_on(async {
            let (mut updates, thread) = updates_from_another_thread(&[3, 4]);
            let waiting = std::time::Instant::now();
            updates.ready().await;
            assert!(
                waiting.elapsed() < Duration::from_secs(5),
                "the publish woke the waiting subscription (not the 10 s park timeout)"
            );
            thread.join().unwrap();
            // Ready again at once, and nothing was taken: both updates, in order.
            updates.ready().await;
            assert_eq!(at_ms(&updates.recv().await.unwrap()), 3);
            assert_eq!(at_ms(&updates.recv().await.unwrap()), 4);
        });
    }

    #[test]
    fn a_subscriber_more_than_128_updates_behind_is_told_how_many_it_lost_then_gets_the_newest() {
        block_on(async {
            let bus = EventBus::default();
            let mut slow = bus.subscribe("t");
            let total = TASK_CHANNEL_CAPACITY as i64 + 5;
            for n in 0..total {
                bus.publish(status("t", TaskState::Working, n));
            }
            assert_eq!(slow.recv().await.unwrap_err(), Lagged(5));
            for n in 5..total {
                assert_eq!(at_ms(&slow.recv().await.unwrap()), n);
            }
            bus.publish(status("t", TaskState::Completed, total));
            assert_eq!(at_ms(&slow.recv().await.unwrap()), total);
        });
    }

    #[test]
    fn a_tasks_channel_and_its_settled_waiters_go_away_with_its_last_subscription() {
        let bus = EventBus::default();
        let waiting = bus.subscribe_until_settled("t");
        let watching = bus.subscribe("t");
        assert!(bus.wants_settled("t"));
        drop(waiting);
        assert!(!bus.wants_settled("t"));
        assert!(bus.channels.lock().unwrap().tasks.contains_key("t"));
        drop(watching);
        assert!(!bus.channels.lock().unwrap().tasks.contains_key("t"));
        // Publishing to a Task nobody watches keeps nothing.
        bus.publish(status("t", TaskState::Working, 1));
        assert!(bus.channels.lock().unwrap().tasks.is_empty());
    }
}
