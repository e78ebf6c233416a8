//! Per-Task broadcast of status and artifact updates, published after commit.
//!
//! The plane publishes from the writer thread, right after the commit that made an update
//! durable, so subscribers see updates in commit order and never before they are durable.
//! A Task has a channel only while someone listens; streams are ephemeral and nothing is
//! replayed (a reconnecting client reads the Task, then subscribes again).

use std::collections::HashMap;
use std::sync::mpsc;
use std::sync::{Arc, Mutex};

use tokio::sync::broadcast;

use crate::record::{ArtifactRecord, MessageRecord, TaskRecord, TaskState};

/// How many updates a slow subscriber may fall behind before it is cut off (one commit may
/// carry many outputs; a channel is allocated only per watched Task).
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
}

/// Takes one acceptance, on the thread that publishes it (the writer, right after the
/// commit), under the bus's lock: it must not block or call back into the bus. Returns
/// whether it still wants acceptances.
pub type AcceptedSink = Arc<dyn Fn(&Accepted) -> bool + Send + Sync>;

/// A Task that was just accepted (created or continued) and now waits for the agent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Accepted {
    pub activation_id: String,
    pub task_id: String,
    pub context_id: String,
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
    /// Updates are shared, not copied, between a Task's subscribers.
    sender: broadcast::Sender<Arc<TaskEvent>>,
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
    /// blocking `message:send`): while it listens, the Task's settling update carries the
    /// Task as its commit left it (`TaskEvent::Status::settled`).
    pub fn subscribe_until_settled(&self, task_id: &str) -> TaskSubscription {
        self.subscription(task_id, true)
    }

    fn subscription(&self, task_id: &str, wants_settled: bool) -> TaskSubscription {
        let mut channels = self.channels.lock().unwrap_or_else(|p| p.into_inner());
        let channel = channels
            .tasks
            .entry(task_id.to_string())
            .or_insert_with(|| TaskChannel {
                sender: broadcast::channel(TASK_CHANNEL_CAPACITY).0,
                settled_waiters: 0,
            });
        channel.settled_waiters += usize::from(wants_settled);
        TaskSubscription {
            receiver: Some(channel.sender.subscribe()),
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
            // No receiver left is fine: the last subscription is being dropped.
            let _ = channel.sender.send(Arc::new(event));
        }
    }

    pub(crate) fn publish_accepted(&self, accepted: Accepted) {
        {
            let mut channels = self.channels.lock().unwrap_or_else(|p| p.into_inner());
            channels.send_activity(|| Activity {
                task_id: accepted.task_id.clone(),
                state: None,
                message: None,
            });
            channels
                .accepted
                .retain(|(_, tx)| tx.send(accepted.clone()).is_ok());
            channels.accepted_sinks.retain(|(_, sink)| sink(&accepted));
        }
    }
}

/// A live subscription to one Task; its channel goes away with the last subscription.
pub struct TaskSubscription {
    receiver: Option<broadcast::Receiver<Arc<TaskEvent>>>,
    task_id: String,
    wants_settled: bool,
    channels: Arc<Mutex<Channels>>,
}

impl TaskSubscription {
    /// The next update; `Err` when the subscriber fell too far behind (updates were lost:
    /// read the Task again) or the bus is gone.
    pub async fn recv(&mut self) -> Result<Arc<TaskEvent>, broadcast::error::RecvError> {
        match self.receiver.as_mut() {
            Some(receiver) => receiver.recv().await,
            None => Err(broadcast::error::RecvError::Closed),
        }
    }
}

impl Drop for TaskSubscription {
    fn drop(&mut self) {
        self.receiver.take();
        let mut channels = self.channels.lock().unwrap_or_else(|p| p.into_inner());
        let Some(channel) = channels.tasks.get_mut(&self.task_id) else {
            return;
        };
        channel.settled_waiters -= usize::from(self.wants_settled);
        if channel.sender.receiver_count() == 0 {
            channels.tasks.remove(&self.task_id);
        }
    }
}
