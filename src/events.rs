//! Per-Task broadcast of status and artifact updates, published after commit.
//!
//! The plane publishes from the writer thread, right after the commit that made an update
//! durable, so subscribers see updates in commit order and never before they are durable.
//! A Task has a channel only while someone listens; streams are ephemeral and nothing is
//! replayed (a reconnecting client reads the Task, then subscribes again).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::sync::broadcast;

use crate::record::{ArtifactRecord, MessageRecord, TaskState};

/// How many updates a slow subscriber may fall behind before it is cut off (one commit may
/// carry many outputs; a channel is allocated only per watched Task).
const TASK_CHANNEL_CAPACITY: usize = 128;
/// How many acceptances an agent driver may fall behind.
const ACCEPTED_CAPACITY: usize = 4096;

/// One durable change of a Task.
#[derive(Debug, Clone, PartialEq)]
pub enum TaskEvent {
    Status {
        task_id: String,
        context_id: String,
        state: TaskState,
        message: Option<MessageRecord>,
        at_ms: i64,
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

/// A Task that was just accepted (created or continued) and now waits for the agent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Accepted {
    pub activation_id: String,
    pub task_id: String,
    pub context_id: String,
}

#[derive(Default)]
struct Channels {
    tasks: HashMap<String, broadcast::Sender<TaskEvent>>,
}

/// The plane's event bus.
pub struct EventBus {
    channels: Arc<Mutex<Channels>>,
    accepted: broadcast::Sender<Accepted>,
}

impl Default for EventBus {
    fn default() -> Self {
        EventBus {
            channels: Arc::default(),
            accepted: broadcast::channel(ACCEPTED_CAPACITY).0,
        }
    }
}

impl EventBus {
    /// Listens to one Task's updates from now on.
    pub fn subscribe(&self, task_id: &str) -> TaskSubscription {
        let mut channels = self.channels.lock().unwrap_or_else(|p| p.into_inner());
        let receiver = channels
            .tasks
            .entry(task_id.to_string())
            .or_insert_with(|| broadcast::channel(TASK_CHANNEL_CAPACITY).0)
            .subscribe();
        TaskSubscription {
            receiver: Some(receiver),
            task_id: task_id.to_string(),
            channels: self.channels.clone(),
        }
    }

    /// Listens to acceptances (for agent drivers).
    pub fn subscribe_accepted(&self) -> broadcast::Receiver<Accepted> {
        self.accepted.subscribe()
    }

    pub(crate) fn publish(&self, event: TaskEvent) {
        let channels = self.channels.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(sender) = channels.tasks.get(event.task_id()) {
            // No receiver left is fine: the last subscription is being dropped.
            let _ = sender.send(event);
        }
    }

    pub(crate) fn publish_accepted(&self, accepted: Accepted) {
        let _ = self.accepted.send(accepted);
    }
}

/// A live subscription to one Task; its channel goes away with the last subscription.
pub struct TaskSubscription {
    receiver: Option<broadcast::Receiver<TaskEvent>>,
    task_id: String,
    channels: Arc<Mutex<Channels>>,
}

impl TaskSubscription {
    /// The next update; `Err` when the subscriber fell too far behind (updates were lost:
    /// read the Task again) or the bus is gone.
    pub async fn recv(&mut self) -> Result<TaskEvent, broadcast::error::RecvError> {
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
        if channels
            .tasks
            .get(&self.task_id)
            .is_some_and(|s| s.receiver_count() == 0)
        {
            channels.tasks.remove(&self.task_id);
        }
    }
}
