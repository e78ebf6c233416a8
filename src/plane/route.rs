//! The intake decision for an A2A message, in one function ([`TaskPlane::intake`]) that the
//! HTTP binding and the addon both call:
//!
//! 1. an explicit `taskId` continues that Task ([`TaskPlane::continue_task`]: only the
//!    owner's, only while it waits for input) — the executor is never asked;
//! 2. a message accepted before (same principal, messageId and payload) gets its prior
//!    outcome — the same Task, or the first direct Message verbatim — and the executor is
//!    never asked again;
//! 3. new work: the [`Executor`] decides, within a bounded time, whether it is a simple
//!    interaction answered by a direct Message (no Task ever exists) or a Task.
//!
//! A caller's message is never lost or refused because an executor misbehaved: an executor
//! that answers late (`a2a_executor_timed_out`), fails or answers with something that is not
//! a direct reply (`a2a_executor_failed`) makes the message a Task, with a log line.
//!
//! The plane's calls block (a store read, or a write that waits for its commit): `intake`
//! runs them on the tokio runtime's blocking pool, so it must be awaited inside a tokio
//! runtime (the listener's, or the addon's).

use std::future::Future;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use serde_json::json;

use super::{Acceptance, Disposition, PlaneError, TaskPlane, WriteJob};
use crate::events::TaskSubscription;
use crate::record::{MessageRecord, Role};

/// An executor's answer: `Ok(Some(reply))` answers directly, `Ok(None)` makes the message a
/// Task, `Err(why)` is a failed executor (the message becomes a Task, and `why` is logged).
pub type Answer = Pin<Box<dyn Future<Output = Result<Option<MessageRecord>, String>> + Send>>;

/// Decides whether new work is a simple interaction answered with a direct Message instead
/// of a Task ("Message versus Task is the executor's decision"). Asked only for new work:
/// never for a continuation or a duplicate.
pub trait Executor: Send + Sync + 'static {
    /// Whether this executor ever answers directly; `false` skips asking it.
    fn answers(&self) -> bool {
        true
    }

    /// The answer to `message` from `principal`.
    fn answer(&self, principal: &str, message: &MessageRecord) -> Answer;
}

/// How a caller of [`TaskPlane::intake_watching`] follows the Task it created or
/// continued.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Watch {
    /// Every update (a stream).
    Updates,
    /// Every update, to answer with the Task once it settles (a blocking send): the
    /// settling update carries the Task (`EventBus::subscribe_until_settled`).
    UntilSettled,
}

/// The default executor: every message is work (the resident mints Tasks).
pub struct AlwaysTask;

impl Executor for AlwaysTask {
    fn answers(&self) -> bool {
        false
    }

    fn answer(&self, _principal: &str, _message: &MessageRecord) -> Answer {
        Box::pin(std::future::ready(Ok(None)))
    }
}

/// An inbound A2A message, as the binding parsed it.
#[derive(Debug, Clone)]
pub struct Inbound {
    /// The authenticated caller.
    pub principal: String,
    /// The message's `contextId`, if any (used only when the principal owns it).
    pub context_id: Option<String>,
    /// The message's `taskId`, if any: an explicit continuation.
    pub task_id: Option<String>,
    pub message: MessageRecord,
    /// The extension URIs active for this request (carried on a new Task).
    pub extensions: Vec<String>,
}

/// A direct reply is an agent message with content; anything else is not a reply.
pub fn check_direct_reply(reply: &MessageRecord) -> Result<(), PlaneError> {
    super::inbound::check_content(reply, Role::Agent, "reply")
}

impl TaskPlane {
    /// The intake decision (see the module doc): continuation by explicit taskId, else the
    /// prior outcome, else the executor's direct Message or a new Task. `executor_timeout`
    /// bounds how long the executor may take.
    pub async fn intake(
        &self,
        inbound: Inbound,
        executor: Arc<dyn Executor>,
        executor_timeout: Duration,
    ) -> Result<Acceptance, PlaneError> {
        self.decide(inbound, executor, executor_timeout, None)
            .await
            .map(|(acceptance, _)| acceptance)
    }

    /// [`TaskPlane::intake`], with a subscription (`watch`) to the Task's updates from the
    /// commit that created or continued it: the caller misses none of them and need not
    /// read the Task's state to learn whether one came first. `None` for a duplicate (its
    /// Task may have moved on long ago) and a direct Message.
    pub async fn intake_watching(
        &self,
        inbound: Inbound,
        executor: Arc<dyn Executor>,
        executor_timeout: Duration,
        watch: Watch,
    ) -> Result<(Acceptance, Option<TaskSubscription>), PlaneError> {
        self.decide(inbound, executor, executor_timeout, Some(watch))
            .await
    }

    async fn decide(
        &self,
        inbound: Inbound,
        executor: Arc<dyn Executor>,
        executor_timeout: Duration,
        watch: Option<Watch>,
    ) -> Result<(Acceptance, Option<TaskSubscription>), PlaneError> {
        let Inbound {
            principal,
            context_id,
            task_id,
            message,
            extensions,
        } = inbound;
        // Writes are awaited (no thread waits for the commit); the duplicate check before
        // asking the executor is one indexed read, run in place.
        let watching = |job: WriteJob<Acceptance>| self.watching(job, watch);
        if let Some(task_id) = task_id {
            return watching(self.continue_task_job(
                &principal,
                &task_id,
                context_id.as_deref(),
                message,
                extensions,
            ))
            .done()
            .await;
        }
        if executor.answers() {
            if let Some(prior) =
                self.prior_outcome(&principal, context_id.as_deref(), None, &message)?
            {
                self.metrics().message(prior.disposition.metric());
                return Ok((prior, None));
            }
            if let Some(reply) = ask(executor, &principal, &message, executor_timeout).await {
                // A concurrent duplicate that won the race gets the first reply verbatim.
                return watching(self.respond_directly_job(
                    &principal,
                    context_id.as_deref(),
                    message,
                    reply,
                ))
                .done()
                .await;
            }
        }
        watching(self.accept_in_context_job(&principal, context_id.as_deref(), message, extensions))
            .done()
            .await
    }

    /// `job`, with (when `watch`) a subscription to the Task it creates or continues,
    /// taken on the writer thread right after its commit and its announcement to the
    /// agent. Every later update of the Task is published by the writer after a later
    /// commit (the agent acts on the announcement with writes of its own), so the
    /// subscription misses none.
    fn watching(
        &self,
        job: WriteJob<Acceptance>,
        watch: Option<Watch>,
    ) -> WriteJob<(Acceptance, Option<TaskSubscription>)> {
        let events = watch.map(|watch| (self.events.clone(), watch));
        job.map(move |acceptance| {
            let updates = match (&events, &acceptance.task_id, acceptance.disposition) {
                (
                    Some((events, watch)),
                    Some(task_id),
                    Disposition::Created | Disposition::Continued,
                ) => Some(match watch {
                    Watch::Updates => events.subscribe(task_id),
                    Watch::UntilSettled => events.subscribe_until_settled(task_id),
                }),
                _ => None,
            };
            (acceptance, updates)
        })
    }
}

/// The executor's direct reply, or `None` for a Task: also when it declines, takes longer
/// than `bound`, fails or panics, or answers with something that is not a direct reply (each
/// logged).
async fn ask(
    executor: Arc<dyn Executor>,
    principal: &str,
    message: &MessageRecord,
    bound: Duration,
) -> Option<MessageRecord> {
    let fields = |why: String| {
        json!({
            "principal": principal,
            "messageId": message.message_id,
            "error": why,
            "outcome": "the message becomes a Task",
        })
    };
    let answer = match catch_unwind(AssertUnwindSafe(|| executor.answer(principal, message))) {
        Ok(answer) => answer,
        Err(_) => {
            crate::log::warn(
                "a2a_executor_failed",
                fields("the executor panicked".into()),
            );
            return None;
        }
    };
    // Its own task: a panic in the executor's future is its failure, not the caller's.
    let mut running = tokio::spawn(answer);
    let outcome = match tokio::time::timeout(bound, &mut running).await {
        Ok(joined) => joined,
        Err(_) => {
            running.abort();
            crate::log::warn(
                "a2a_executor_timed_out",
                json!({
                    "principal": principal,
                    "messageId": message.message_id,
                    "timeoutMs": bound.as_millis() as u64,
                    "outcome": "the message becomes a Task",
                }),
            );
            return None;
        }
    };
    let reply = match outcome {
        Ok(Ok(reply)) => reply?,
        Ok(Err(why)) => {
            crate::log::warn("a2a_executor_failed", fields(why));
            return None;
        }
        Err(_) => {
            crate::log::warn(
                "a2a_executor_failed",
                fields("the executor panicked".into()),
            );
            return None;
        }
    };
    match check_direct_reply(&reply) {
        Ok(()) => Some(reply),
        Err(refused) => {
            crate::log::warn("a2a_executor_failed", fields(refused.to_string()));
            None
        }
    }
}
