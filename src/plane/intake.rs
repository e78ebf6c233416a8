//! Intake: how an inbound message becomes an acceptance. Each entry point validates the
//! message ([`inbound`](super::inbound)), answers a duplicate with its prior outcome, then
//! routes it by the rules of the contract (a conversation's context, a verified reply
//! anchor, an authorized explicit taskId, a context the principal owns) and accepts it
//! in one writer transaction ([`acceptance`](super::acceptance)).

use std::sync::Arc;

use serde_json::Value;

use super::acceptance;
use super::inbound::{check_content, Intake};
use super::{PlaneError, Published, TaskPlane, WriteJob};
use crate::events::{Accepted, Arrival, TaskEvent};
use crate::record::{Continuation, Locator, MessageRecord, Role, TaskRecord, TaskState};
use crate::store::tasks;
use crate::store::{ReadTx, WriteTx};

/// A native provider event handed to the plane by a source adapter.
#[derive(Debug, Clone)]
pub struct Activation {
    /// The authenticated intake principal.
    pub principal: String,
    /// The registered source (provider key).
    pub source: String,
    /// The source's event identity: scoped to the principal it is the idempotency key.
    pub event_id: String,
    /// The source's Conversation fields as one identifier; `None` gives a fresh context.
    pub conversation_key: Option<String>,
    /// The provider id of the message this event directly replies to, if any.
    pub reply_to: Option<String>,
    /// The exact provider object (opaque values).
    pub locator: Locator,
    /// The event's content, from the caller.
    pub message: MessageRecord,
}

/// What acceptance did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Disposition {
    /// A new Task (or a direct Message outcome).
    Created,
    /// An existing waiting Task was continued.
    Continued,
    /// The same (principal, id) with the same payload was accepted before: this is the
    /// prior outcome.
    Duplicate,
}

impl Disposition {
    /// The outcome label of `a2a_messages_total`.
    pub fn metric(self) -> &'static str {
        match self {
            Disposition::Created => "accepted",
            Disposition::Continued => "continued",
            Disposition::Duplicate => "duplicate",
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Disposition::Created => "created",
            Disposition::Continued => "continued",
            Disposition::Duplicate => "duplicate",
        }
    }
}

/// The durable outcome of an intake; returned only after commit.
#[derive(Debug, Clone, PartialEq)]
pub struct Acceptance {
    pub activation_id: String,
    /// `None` for a direct Message outcome.
    pub task_id: Option<String>,
    pub context_id: String,
    pub disposition: Disposition,
    /// The Task's current state (for a duplicate, now; not at first acceptance).
    pub state: Option<TaskState>,
    /// The direct Message outcome, verbatim.
    pub direct_reply: Option<MessageRecord>,
    /// A Task this acceptance created, whole, as its commit left it (a stream's first
    /// frame, without reading it back); `None` for any other outcome.
    pub created: Option<Arc<TaskRecord>>,
    /// The message this acceptance attached to a Task (created or continued), as stored;
    /// `None` for a direct Message outcome and a duplicate.
    pub message: Option<Arc<MessageRecord>>,
}

impl TaskPlane {
    /// A native provider event that is not a reply: a new Task in the context of its
    /// conversation (or a fresh context without a conversation key).
    pub fn accept(&self, activation: Activation) -> Result<Acceptance, PlaneError> {
        let (intake, activation) = self.native_intake(activation)?;
        let now = self.now();
        self.write_intake(move |tx| {
            if let Some(prior) = acceptance::prior_outcome(tx, &intake)? {
                return Ok(prior);
            }
            let context_id = native_context(tx, &activation, now)?;
            acceptance::create_task(tx, &intake, context_id, now)
        })
    }

    /// A native provider reply. It continues a Task only through a verified reply anchor;
    /// when any condition fails it is new work in the conversation's context, never a
    /// rejection. A taskId-looking string in the body is just text.
    pub fn continue_activation(&self, activation: Activation) -> Result<Acceptance, PlaneError> {
        let (intake, activation) = self.native_intake(activation)?;
        let now = self.now();
        self.write_intake(move |tx| {
            if let Some(prior) = acceptance::prior_outcome(tx, &intake)? {
                return Ok(prior);
            }
            if let Some(task) = Self::verified_anchor(tx, &intake, activation.reply_to.as_deref())?
            {
                return acceptance::continue_task(tx, &intake, &task, now);
            }
            let context_id = native_context(tx, &activation, now)?;
            acceptance::create_task(tx, &intake, context_id, now)
        })
    }

    /// The Task a native reply continues, when all six conditions of a verified reply
    /// anchor hold:
    /// 1. the Task is INPUT_REQUIRED or AUTH_REQUIRED;
    /// 2. the plane sent a provider response for it, and
    /// 3. stored that response's id as a reply anchor (an anchor row exists);
    /// 4. the event directly replies to that anchor (`reply_to` is its id);
    /// 5. the event's principal is the anchor's (the anchor key is principal-scoped);
    /// 6. the Task records an unanswered input request — the one the anchor was sent for.
    ///
    /// The source must also have declared reply anchors as its continuation method.
    fn verified_anchor(
        tx: &dyn ReadTx,
        intake: &Intake,
        reply_to: Option<&str>,
    ) -> Result<Option<tasks::TaskRow>, PlaneError> {
        if intake.continuation != Continuation::ReplyAnchors {
            return Ok(None);
        }
        let Some(reply_to) = reply_to else {
            return Ok(None);
        };
        let Some(anchor) = tx.reply_anchor(&intake.principal, &intake.source, reply_to)? else {
            return Ok(None);
        };
        let Some(task) = tx.task_owned_by(&intake.principal, &anchor.task_id)? else {
            return Ok(None);
        };
        let waiting =
            task.record.awaits_caller() && task.input_request_seq == anchor.input_request_seq;
        Ok(waiting.then_some(task))
    }

    /// An authorized explicit continuation: attaches `message` to `task_id` only when
    /// `principal` owns the Task and it waits for input (INPUT_REQUIRED or AUTH_REQUIRED
    /// with an unanswered request). A foreign Task is `TaskNotFound`, like a missing one;
    /// a terminal Task is `TaskTerminal`; a Task not waiting is `NotAwaitingInput`.
    /// `context_id`, when given, must be the Task's own.
    pub fn continue_task(
        &self,
        principal: &str,
        task_id: &str,
        context_id: Option<&str>,
        message: MessageRecord,
        extensions: Vec<String>,
    ) -> Result<Acceptance, PlaneError> {
        self.continue_task_job(principal, task_id, context_id, message, extensions)
            .wait()
    }

    /// [`TaskPlane::continue_task`] as a [`WriteJob`].
    pub fn continue_task_job(
        &self,
        principal: &str,
        task_id: &str,
        context_id: Option<&str>,
        message: MessageRecord,
        extensions: Vec<String>,
    ) -> WriteJob<Acceptance> {
        let intake =
            match self.message_intake(principal, context_id, Some(task_id), message, extensions) {
                Ok(intake) => intake,
                Err(err) => return WriteJob::refused(err),
            };
        let (task_id, context_id) = (task_id.to_string(), context_id.map(str::to_string));
        let now = self.now();
        self.intake_job(move |tx| {
            if let Some(prior) = acceptance::prior_outcome(tx, &intake)? {
                return Ok(prior);
            }
            let task = tx
                .task_owned_by(&intake.principal, &task_id)?
                .ok_or_else(|| PlaneError::TaskNotFound(task_id.clone()))?;
            if let Some(context_id) = &context_id {
                if *context_id != task.record.context_id {
                    return Err(PlaneError::ContextMismatch {
                        task_id: task_id.clone(),
                        context_id: context_id.clone(),
                    });
                }
            }
            let state = task.record.state;
            if state.is_terminal() {
                return Err(PlaneError::TaskTerminal {
                    task_id: task_id.clone(),
                    state,
                });
            }
            if !task.record.awaits_caller() {
                return Err(PlaneError::NotAwaitingInput {
                    task_id: task_id.clone(),
                    state,
                });
            }
            if let Some(schema) = &task.input_schema {
                Self::check_structured_answer(schema, &intake.message)?;
            }
            acceptance::continue_task(tx, &intake, &task, now)
        })
    }

    /// An answer given as a data part in MCP's result shape (`{action, content}`) must fit
    /// the schema the agent asked with; a plain-text answer is always accepted.
    fn check_structured_answer(schema: &Value, message: &MessageRecord) -> Result<(), PlaneError> {
        for (i, part) in message.parts.iter().enumerate() {
            if let crate::record::PartContent::Data(data) = &part.content {
                if crate::elicitation::is_answer(data) {
                    crate::elicitation::check_answer(
                        schema,
                        data,
                        &format!("message.parts[{i}].data"),
                    )?;
                }
            }
        }
        Ok(())
    }

    /// A2A intake of new work: a new Task in `context_id` when `principal` already owns
    /// that context; a foreign or unknown contextId (or none) gets a fresh context instead
    /// of joining anyone's work.
    pub fn accept_in_context(
        &self,
        principal: &str,
        context_id: Option<&str>,
        message: MessageRecord,
        extensions: Vec<String>,
    ) -> Result<Acceptance, PlaneError> {
        self.accept_in_context_job(principal, context_id, message, extensions)
            .wait()
    }

    /// [`TaskPlane::accept_in_context`] as a [`WriteJob`].
    pub fn accept_in_context_job(
        &self,
        principal: &str,
        context_id: Option<&str>,
        message: MessageRecord,
        extensions: Vec<String>,
    ) -> WriteJob<Acceptance> {
        let intake = match self.message_intake(principal, context_id, None, message, extensions) {
            Ok(intake) => intake,
            Err(err) => return WriteJob::refused(err),
        };
        let now = self.now();
        self.intake_job(move |tx| {
            if let Some(prior) = acceptance::prior_outcome(tx, &intake)? {
                return Ok(prior);
            }
            let context_id = Self::authorized_context(tx, &intake, now)?;
            acceptance::create_task(tx, &intake, context_id, now)
        })
    }

    /// The context a client's contextId resolves to: its own when the principal owns it,
    /// else a fresh one.
    fn authorized_context(
        tx: &dyn WriteTx,
        intake: &Intake,
        now: i64,
    ) -> Result<String, PlaneError> {
        if let Some(requested) = intake.requested_context_id.as_deref() {
            if acceptance::owns_context(tx, &intake.principal, requested)? {
                tx.step("context")?;
                tx.touch_context(requested, now)?;
                return Ok(requested.to_string());
            }
        }
        acceptance::fresh_context(tx, &intake.principal, &intake.source, now)
    }

    /// Trusted creation of a new Task in an existing context the principal owns.
    pub fn create_task(
        &self,
        principal: &str,
        context_id: &str,
        message: MessageRecord,
    ) -> Result<Acceptance, PlaneError> {
        let intake = self.message_intake(principal, Some(context_id), None, message, Vec::new())?;
        let context_id = context_id.to_string();
        let now = self.now();
        self.write_intake(move |tx| {
            if let Some(prior) = acceptance::prior_outcome(tx, &intake)? {
                return Ok(prior);
            }
            if !acceptance::owns_context(tx, &intake.principal, &context_id)? {
                return Err(PlaneError::ContextNotFound(context_id.clone()));
            }
            tx.step("context")?;
            tx.touch_context(&context_id, now)?;
            acceptance::create_task(tx, &intake, context_id.clone(), now)
        })
    }

    /// Records the executor's decision to answer `message` with a direct Message and no
    /// Task. A duplicate (same principal and messageId, same payload) returns the first
    /// reply verbatim, even if this call's `reply` differs.
    pub fn respond_directly(
        &self,
        principal: &str,
        context_id: Option<&str>,
        message: MessageRecord,
        reply: MessageRecord,
    ) -> Result<Acceptance, PlaneError> {
        self.respond_directly_job(principal, context_id, message, reply)
            .wait()
    }

    /// [`TaskPlane::respond_directly`] as a [`WriteJob`].
    pub fn respond_directly_job(
        &self,
        principal: &str,
        context_id: Option<&str>,
        message: MessageRecord,
        reply: MessageRecord,
    ) -> WriteJob<Acceptance> {
        let intake = self
            .message_intake(principal, context_id, None, message, Vec::new())
            .and_then(|intake| check_content(&reply, Role::Agent, "reply").map(|_| intake));
        let intake = match intake {
            Ok(intake) => intake,
            Err(err) => return WriteJob::refused(err),
        };
        let now = self.now();
        self.intake_job(move |tx| {
            if let Some(prior) = acceptance::prior_outcome(tx, &intake)? {
                return Ok(prior);
            }
            let context_id = Self::authorized_context(tx, &intake, now)?;
            acceptance::record_direct(tx, &intake, &context_id, &reply, now)
        })
    }

    /// The prior outcome of `(principal, message_id)` for this exact message, without
    /// accepting anything: lets an executor answer a duplicate before deciding again.
    pub fn prior_outcome(
        &self,
        principal: &str,
        context_id: Option<&str>,
        task_id: Option<&str>,
        message: &MessageRecord,
    ) -> Result<Option<Acceptance>, PlaneError> {
        let intake =
            self.message_intake(principal, context_id, task_id, message.clone(), Vec::new())?;
        self.read(|tx| acceptance::prior_outcome(tx, &intake))
    }

    /// An intake write: a new or continued Task is announced to agent drivers, and a
    /// continued one's subscribers see it resume.
    fn write_intake(
        &self,
        work: impl FnMut(&dyn WriteTx) -> Result<Acceptance, PlaneError> + Send + 'static,
    ) -> Result<Acceptance, PlaneError> {
        self.intake_job(work).wait()
    }

    /// [`TaskPlane::write_intake`] as a [`WriteJob`].
    fn intake_job(
        &self,
        mut work: impl FnMut(&dyn WriteTx) -> Result<Acceptance, PlaneError> + Send + 'static,
    ) -> WriteJob<Acceptance> {
        let now = self.now();
        let metrics = self.metrics.clone();
        self.publishing_job(move |tx| {
            let outcome = work(tx)?;
            let mut published = Vec::new();
            if let (Some(task_id), Disposition::Created | Disposition::Continued) =
                (&outcome.task_id, outcome.disposition)
            {
                if outcome.disposition == Disposition::Continued {
                    published.push(Published::Task(TaskEvent::Status {
                        task_id: task_id.clone(),
                        context_id: outcome.context_id.clone(),
                        state: TaskState::Submitted,
                        message: None,
                        at_ms: now,
                        settled: None,
                    }));
                }
                if let Some(message) = &outcome.message {
                    published.push(Published::Accepted(Arrival {
                        accepted: Accepted {
                            activation_id: outcome.activation_id.clone(),
                            task_id: task_id.clone(),
                            context_id: outcome.context_id.clone(),
                        },
                        continued: outcome.disposition == Disposition::Continued,
                        message: message.clone(),
                    }));
                }
            }
            Ok((outcome, published))
        })
        .map(move |outcome| {
            metrics.message(outcome.disposition.metric());
            outcome
        })
    }
}

/// The context of a native activation: its conversation's, or a fresh one.
fn native_context(
    tx: &dyn WriteTx,
    activation: &Activation,
    now: i64,
) -> Result<String, PlaneError> {
    match &activation.conversation_key {
        Some(key) => acceptance::conversation_context(
            tx,
            &activation.principal,
            &activation.source,
            key,
            now,
        ),
        None => acceptance::fresh_context(tx, &activation.principal, &activation.source, now),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::Arrival;
    use crate::plane::{InterruptKind, PlaneOptions};
    use std::sync::Mutex;

    #[test]
    fn an_acceptance_hands_its_watchers_the_stored_message_and_whether_it_continued_a_task() {
        let root = std::env::temp_dir().join(format!("tp-arrival-{}", crate::ids::mint()));
        let plane = TaskPlane::open(&root, PlaneOptions::default()).unwrap();
        let arrivals = Arc::new(Mutex::new(Vec::<Arrival>::new()));
        let sink = arrivals.clone();
        plane.events().watch_accepted_with(Arc::new(move |arrival| {
            sink.lock().unwrap().push(arrival.clone());
            true
        }));
        let first = MessageRecord::user_text("m-1", "ask me");
        let task = plane
            .accept_in_context("alice", None, first.clone(), Vec::new())
            .unwrap()
            .task_id
            .unwrap();
        plane.start_work(&task).unwrap();
        plane
            .require_input(
                &task,
                InterruptKind::InputRequired,
                MessageRecord::agent(vec![crate::record::PartRecord::text("which?")]),
                None,
            )
            .unwrap();
        let answer = MessageRecord::user_text("m-2", "that one");
        plane
            .continue_task("alice", &task, None, answer.clone(), Vec::new())
            .unwrap();
        // A duplicate accepts nothing, so it hands nothing over.
        plane
            .continue_task("alice", &task, None, answer.clone(), Vec::new())
            .unwrap();
        let stored = plane.task(&task, None, true).unwrap().unwrap().history;
        let arrivals = arrivals.lock().unwrap();
        let seen: Vec<_> = arrivals
            .iter()
            .map(|a| (a.accepted.task_id.as_str(), a.continued, &*a.message))
            .collect();
        assert_eq!(
            seen,
            [
                (task.as_str(), false, &stored[0]),
                (task.as_str(), true, &stored[2]),
            ]
        );
        assert_eq!((&stored[0], &stored[2]), (&first, &answer));
        plane.close();
        let _ = std::fs::remove_dir_all(&root);
    }
}
