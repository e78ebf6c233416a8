//! Updates across nodes (docs/fleet.md): on a store other nodes share, the node's one
//! `LISTEN` connection, owned by the plane, and what it does with what it hears.
//!
//! - `a2a_wake` (and every (re)connection and tick) goes to the wake queue, if this node
//!   runs one ([`TaskPlane::hear_wakes`]).
//! - `a2a_task` (`<taskId> <version> <writer node>`, sent by every transaction that changes
//!   a Task's status or artifacts, on commit) goes to the [`Follower`]: for a Task someone
//!   here listens to, written by another node, it reads the Task's changes since the
//!   version this node last published for it and publishes them on the local event bus as
//!   the same [`TaskEvent`]s a local write publishes. This node's own changes were published
//!   when they committed: they only move the version on. A Task nobody here listens to
//!   costs the notification and nothing else.
//! - On each (re)connection the follower reads every listened-to Task again from the
//!   version it last published (a notification sent while the connection was down is lost).
//!
//! The version is the Task's change counter (`tasks.version`, PostgreSQL schema v3): one
//! step per transaction that changes the Task, so a subscriber is handed each change once
//! and in the order the transactions committed.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use serde_json::json;

use super::{query, PlaneError, TaskPlane};
use crate::events::{EventBus, TaskEvent};
use crate::pg::listen::{Heard, Listener};
use crate::store::{Store, TaskChange};

/// What the wake queue does with what the LISTEN connection hears.
pub(crate) type WakeEars = Box<dyn FnMut(Heard) + Send>;

/// How long after a failed read the follower reads every listened-to Task again.
const RETRY_AFTER: Duration = Duration::from_secs(1);
/// How long opening a plane waits for its LISTEN connection.
const FIRST_CONNECTION: Duration = Duration::from_secs(10);
/// How often the follower forgets the versions of Tasks nobody listens to any more.
const PRUNE_EVERY: Duration = Duration::from_secs(10);

/// The plane's LISTEN connection and the wake queue's ears on it; closed by
/// [`TaskPlane::close`].
#[derive(Default)]
pub(crate) struct Listening {
    listener: Mutex<Option<Listener>>,
    wakes: Mutex<Option<WakeSlot>>,
    /// The id the next wake queue's ears are given.
    next_ears: std::sync::atomic::AtomicU64,
}

struct WakeSlot {
    /// Which queue's ears these are (a queue closing takes back only its own).
    id: u64,
    ears: WakeEars,
    /// Whether these ears were told of a connection yet (a queue that starts after the
    /// connection was made is told at the next thing heard, so it reads what it may take).
    connected: bool,
}

impl Listening {
    /// Hands `heard` to the wake queue's ears, if a queue listens.
    fn tell_wakes(&self, heard: Heard) {
        let mut slot = self.wakes.lock().unwrap_or_else(|p| p.into_inner());
        let Some(slot) = slot.as_mut() else { return };
        if !slot.connected && heard != Heard::Connected {
            (slot.ears)(Heard::Connected);
        }
        slot.connected = true;
        (slot.ears)(heard);
    }

    pub(crate) fn close(&self) {
        let listener = self
            .listener
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        if let Some(listener) = listener {
            listener.close();
        }
        self.wakes.lock().unwrap_or_else(|p| p.into_inner()).take();
    }
}

impl TaskPlane {
    /// On a store other nodes share: starts this node's LISTEN connection on `a2a_wake` and
    /// `a2a_task` (see the module doc). Nothing on SQLite.
    pub(super) fn start_listening(&self) -> Result<(), PlaneError> {
        let Some(pg) = crate::pg::of(&self.store) else {
            return Ok(());
        };
        let mut follower = Follower {
            events: self.events.clone(),
            metrics: self.metrics.clone(),
            store: self.store.clone(),
            node: self.node.clone(),
            published: HashMap::new(),
            retry_at: None,
            pruned_at: Instant::now(),
        };
        let listening: Weak<Listening> = Arc::downgrade(&self.listening);
        let (connected, first_connection) = std::sync::mpsc::channel();
        let mut connected = Some(connected);
        let listener = pg.listen(
            &[crate::pg::WAKE_CHANNEL, crate::pg::TASK_CHANNEL],
            Box::new(move |heard| {
                match &heard {
                    Heard::Notification { channel, payload }
                        if channel == crate::pg::TASK_CHANNEL =>
                    {
                        follower.notified(payload);
                        return;
                    }
                    Heard::Notification { .. } => {}
                    Heard::Connected => {
                        follower.catch_up();
                        if let Some(connected) = connected.take() {
                            let _ = connected.send(());
                        }
                    }
                    Heard::Tick => follower.tick(),
                }
                if let Some(listening) = listening.upgrade() {
                    listening.tell_wakes(heard);
                }
            }),
        )?;
        *self
            .listening
            .listener
            .lock()
            .unwrap_or_else(|p| p.into_inner()) = Some(listener);
        // An open plane listens: a change another node commits from now on reaches this
        // node's subscribers (one committed before the connection is made would not, and
        // its Task's listeners may already have read the Task without it). Bounded: a
        // connection that cannot be made yet is retried by the listener, and logged.
        let _ = first_connection.recv_timeout(FIRST_CONNECTION);
        Ok(())
    }

    /// Gives the wake queue what this node's LISTEN connection hears (`a2a_wake`,
    /// connections, ticks) instead of any queue before it; returns the id that takes it
    /// back ([`TaskPlane::stop_hearing_wakes`]).
    pub(crate) fn hear_wakes(&self, ears: WakeEars) -> u64 {
        let id = self
            .listening
            .next_ears
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        *self
            .listening
            .wakes
            .lock()
            .unwrap_or_else(|p| p.into_inner()) = Some(WakeSlot {
            id,
            ears,
            connected: false,
        });
        id
    }

    /// Takes back the ears [`TaskPlane::hear_wakes`] gave as `id` (the queue closing),
    /// unless a later queue's replaced them.
    pub(crate) fn stop_hearing_wakes(&self, id: u64) {
        let mut wakes = self
            .listening
            .wakes
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        if wakes.as_ref().is_some_and(|slot| slot.id == id) {
            wakes.take();
        }
    }
}

/// Publishes other nodes' changes of the Tasks listened to here (on the LISTEN thread).
struct Follower {
    events: Arc<EventBus>,
    metrics: Arc<crate::metrics::Metrics>,
    store: Store,
    node: Arc<str>,
    /// Task id → the newest version whose changes this node's bus has had, for the Tasks
    /// someone here listens to.
    published: HashMap<String, i64>,
    /// When to read every listened-to Task again after a read failed.
    retry_at: Option<Instant>,
    pruned_at: Instant,
}

/// `<taskId> <version> <writer node id>`, as `a2a_task` carries it.
fn parse_task_notification(payload: &str) -> Option<(&str, i64, &str)> {
    let mut words = payload.splitn(3, ' ');
    let task_id = words.next().filter(|t| !t.is_empty())?;
    let version = words.next()?.parse().ok()?;
    Some((task_id, version, words.next()?))
}

impl Follower {
    /// One `a2a_task` notification: the writer's transaction gave Task `taskId` `version`.
    fn notified(&mut self, payload: &str) {
        let Some((task_id, version, writer)) = parse_task_notification(payload) else {
            crate::log::warn(
                "a2a_task_notification_unreadable",
                json!({ "payload": payload, "expected": "<taskId> <version> <writer node id>" }),
            );
            return;
        };
        if !self.events.is_watched(task_id) {
            self.published.remove(task_id);
            return;
        }
        if writer == &*self.node {
            // Published when it committed; the versions before it were notified first.
            let last = self.published.entry(task_id.to_string()).or_insert(version);
            *last = (*last).max(version);
            return;
        }
        // A Task this node has published nothing of yet: its listeners read it after they
        // began to listen, and every change since is this one or a later one.
        let after = self.published.get(task_id).copied().unwrap_or(version - 1);
        if version > after {
            self.follow(task_id, after, Some(version));
        }
    }

    /// (Re)connected, or a read failed a moment ago: reads every Task listened to here
    /// from the version last published, up to its newest.
    fn catch_up(&mut self) {
        self.retry_at = None;
        let events = self.events.clone();
        self.published
            .retain(|task_id, _| events.is_watched(task_id));
        let known: Vec<(String, i64)> = self
            .published
            .iter()
            .map(|(task_id, version)| (task_id.clone(), *version))
            .collect();
        for (task_id, after) in known {
            self.follow(&task_id, after, None);
        }
        // Tasks listened to here of which nothing was published yet: their listeners may
        // have begun while the connection was down, and what changed meanwhile cannot be
        // told change by change from here; each is told the state it settled in meanwhile
        // (a stream ends, a waiter answers), and followed from its version on.
        for task_id in self.events.watched_tasks() {
            if !self.published.contains_key(&task_id) {
                self.settle_unfollowed(&task_id);
            }
        }
    }

    /// For Task `task_id`, listened to here with nothing published of it yet: publishes its
    /// status when it is settled (terminal or interrupted), and notes its version.
    fn settle_unfollowed(&mut self, task_id: &str) {
        self.metrics.fleet_update_read();
        let node = self.node.clone();
        // After the newest version: no change, only the Task as it stands.
        let read = self.store.read(|tx| -> Result<_, PlaneError> {
            Ok(tx.task_changes(task_id, i64::MAX, None, &node)?)
        });
        match read {
            Ok(Some(found)) => {
                let record = &found.row.record;
                if record.state.is_settled() {
                    self.events.publish(TaskEvent::Status {
                        task_id: task_id.to_string(),
                        context_id: record.context_id.clone(),
                        state: record.state,
                        message: record.status_message.clone(),
                        at_ms: record.status_ms,
                        settled: None,
                    });
                }
                self.published.insert(task_id.to_string(), found.newest);
            }
            Ok(None) => {}
            // Still unpublished: the next catch-up reads it again.
            Err(err) => self.read_failed(task_id, &err),
        }
    }

    /// A read of Task `task_id` failed: logged, and every listened-to Task is read again a
    /// moment later ([`RETRY_AFTER`]); nothing when the plane closed.
    fn read_failed(&mut self, task_id: &str, err: &PlaneError) {
        if err.is_closed() {
            return;
        }
        crate::log::warn(
            "a2a_task_follow_failed",
            json!({
                "taskId": task_id,
                "error": err.to_string(),
                "retryInMs": RETRY_AFTER.as_millis() as u64,
            }),
        );
        self.retry_at = Some(Instant::now() + RETRY_AFTER);
    }

    fn tick(&mut self) {
        if self.retry_at.is_some_and(|at| Instant::now() >= at) {
            self.catch_up();
        }
        if self.pruned_at.elapsed() >= PRUNE_EVERY {
            self.pruned_at = Instant::now();
            let events = self.events.clone();
            self.published
                .retain(|task_id, _| events.is_watched(task_id));
        }
    }

    /// Publishes Task `task_id`'s changes by other nodes after version `after` (up to
    /// `upto`, or its newest), in order, and notes the version they reach.
    fn follow(&mut self, task_id: &str, after: i64, upto: Option<i64>) {
        let (events, node) = (&self.events, &*self.node);
        self.metrics.fleet_update_read();
        let read = self.store.read(|tx| -> Result<_, PlaneError> {
            let Some(found) = tx.task_changes(task_id, after, upto, node)? else {
                return Ok(None);
            };
            // A waiter answered on the last change is handed the Task as it left it, when
            // the read saw no later one.
            let settles = matches!(
                found.changes.last(),
                Some(TaskChange::Status { state, .. }) if state.is_settled()
            );
            let settled =
                (settles && found.version == found.newest && events.wants_settled(task_id))
                    .then(|| query::read_full(tx, found.row.clone(), None, true).ok())
                    .flatten()
                    .map(Arc::new);
            Ok(Some((found, settled)))
        });
        match read {
            Ok(None) => {
                self.published.remove(task_id);
            }
            Ok(Some((found, mut settled))) => {
                let context_id = &found.row.record.context_id;
                let last = found.changes.len();
                for (n, change) in found.changes.into_iter().enumerate() {
                    self.events.publish(match change {
                        TaskChange::Status {
                            state,
                            message,
                            at_ms,
                        } => TaskEvent::Status {
                            task_id: task_id.to_string(),
                            context_id: context_id.clone(),
                            state,
                            message,
                            at_ms,
                            settled: if n + 1 == last { settled.take() } else { None },
                        },
                        TaskChange::Artifact(artifact) => TaskEvent::Artifact {
                            task_id: task_id.to_string(),
                            context_id: context_id.clone(),
                            artifact,
                        },
                    });
                }
                let last = self.published.entry(task_id.to_string()).or_insert(0);
                *last = (*last).max(found.version);
            }
            Err(err) => {
                if !err.is_closed() {
                    // Read again from here, with every other listened-to Task.
                    self.published.entry(task_id.to_string()).or_insert(after);
                }
                self.read_failed(task_id, &err);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_task_notification_names_the_task_its_version_and_the_writer() {
        assert_eq!(
            parse_task_notification("t-1 7 host-12-abcd0123"),
            Some(("t-1", 7, "host-12-abcd0123"))
        );
        assert_eq!(parse_task_notification("t-1 seven node"), None);
        assert_eq!(parse_task_notification("t-1 7"), None);
        assert_eq!(parse_task_notification(""), None);
    }
}
