//! What the agent does to a Task: start work, ask for input, record outputs, settle it;
//! and the caller's cancel. Turn authority (which Task the agent may touch now) is checked
//! by the wake queue before these are called; the state rules are here.

use super::{PlaneError, Published, TaskPlane, WriteJob};
use crate::events::TaskEvent;
use crate::field_error::FieldError;
use crate::record::{ArtifactRecord, Continuation, MessageRecord, Role, TaskRecord, TaskState};
use crate::store::tasks::{self, InputRequest, TaskRow};
use crate::store::WriteTx;

/// Which interrupted state a request for input puts the Task in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InterruptKind {
    InputRequired,
    AuthRequired,
}

pub(super) fn status(
    task: &TaskRow,
    state: TaskState,
    message: Option<&MessageRecord>,
    at_ms: i64,
) -> Published {
    Published::Task(TaskEvent::Status {
        task_id: task.record.task_id.clone(),
        context_id: task.record.context_id.clone(),
        state,
        message: message.cloned(),
        at_ms,
        settled: None,
    })
}

fn artifact_event(task: &TaskRow, artifact: &ArtifactRecord) -> Published {
    Published::Task(TaskEvent::Artifact {
        task_id: task.record.task_id.clone(),
        context_id: task.record.context_id.clone(),
        artifact: artifact.clone(),
    })
}

fn live_task(tx: &WriteTx<'_, '_>, task_id: &str) -> Result<TaskRow, PlaneError> {
    let task =
        tasks::by_id(tx, task_id)?.ok_or_else(|| PlaneError::TaskNotFound(task_id.to_string()))?;
    if task.record.state.is_terminal() {
        return Err(PlaneError::TaskTerminal {
            task_id: task_id.to_string(),
            state: task.record.state,
        });
    }
    Ok(task)
}

fn agent_message(message: &MessageRecord) -> Result<(), PlaneError> {
    super::inbound::check_content(message, Role::Agent, "message")
}

fn artifact_ok(artifact: &ArtifactRecord) -> Result<(), PlaneError> {
    if artifact.artifact_id.is_empty() || artifact.parts.is_empty() {
        return Err(PlaneError::Invalid(FieldError::new(
            "artifact",
            "needs an artifactId and at least one part",
        )));
    }
    Ok(())
}

impl TaskPlane {
    /// SUBMITTED → WORKING: the agent has been given the Task. A Task already WORKING
    /// stays so; an interrupted or terminal one is refused.
    pub fn start_work(&self, task_id: &str) -> Result<TaskState, PlaneError> {
        self.start_work_job(task_id).wait()
    }

    /// [`TaskPlane::start_work`] as a [`WriteJob`].
    pub fn start_work_job(&self, task_id: &str) -> WriteJob<TaskState> {
        let task_id = task_id.to_string();
        let now = self.now();
        self.publishing_job(move |tx| {
            let task = live_task(tx, &task_id)?;
            match task.record.state {
                TaskState::Working => Ok((TaskState::Working, vec![])),
                TaskState::Submitted => {
                    tasks::set_status(
                        tx,
                        &task,
                        TaskState::Working,
                        None,
                        now,
                        InputRequest::Unchanged,
                    )?;
                    Ok((
                        TaskState::Working,
                        vec![status(&task, TaskState::Working, None, now)],
                    ))
                }
                state => Err(PlaneError::FailedPrecondition(format!(
                    "task {task_id} is {} and waits for a continuation before work can start",
                    state.as_str()
                ))),
            }
        })
    }

    /// Pauses the Task on its caller: INPUT_REQUIRED (or AUTH_REQUIRED) with `question`
    /// as the status message (also appended to the history), and an open input request.
    /// Refused for a Task whose source declares no continuation method: nobody could
    /// answer, so the agent must complete or reject it instead. `input_schema`, an MCP
    /// elicitation `requestedSchema`, is kept so a structured answer can be checked.
    pub fn require_input(
        &self,
        task_id: &str,
        kind: InterruptKind,
        question: MessageRecord,
        input_schema: Option<serde_json::Value>,
    ) -> Result<(), PlaneError> {
        self.require_input_job(task_id, kind, question, input_schema)
            .wait()
    }

    /// [`TaskPlane::require_input`] as a [`WriteJob`].
    pub fn require_input_job(
        &self,
        task_id: &str,
        kind: InterruptKind,
        question: MessageRecord,
        input_schema: Option<serde_json::Value>,
    ) -> WriteJob<()> {
        let check = input_schema
            .as_ref()
            .map_or(Ok(()), crate::elicitation::check_requested_schema)
            .map_err(PlaneError::from)
            .and_then(|_| agent_message(&question));
        if let Err(err) = check {
            return WriteJob::refused(err);
        }
        let task_id = task_id.to_string();
        let now = self.now();
        self.publishing_job(move |tx| {
            let task = live_task(tx, &task_id)?;
            if task.record.continuation == Continuation::None {
                return Err(PlaneError::FailedPrecondition(format!(
                    "task {task_id} came from source `{}`, which declares no continuation method, so no answer could ever reach it; complete or reject the task instead",
                    task.record.source
                )));
            }
            let state = match kind {
                InterruptKind::InputRequired => TaskState::InputRequired,
                InterruptKind::AuthRequired => TaskState::AuthRequired,
            };
            tasks::append_history(tx, &task, &question)?;
            tasks::set_status(
                tx,
                &task,
                state,
                Some(&question),
                now,
                InputRequest::Open(input_schema.as_ref()),
            )?;
            Ok(((), vec![status(&task, state, Some(&question), now)]))
        })
    }

    /// Records one artifact while the Task is WORKING.
    pub fn record_artifact(
        &self,
        task_id: &str,
        artifact: ArtifactRecord,
    ) -> Result<(), PlaneError> {
        self.record_artifact_job(task_id, artifact).wait()
    }

    /// [`TaskPlane::record_artifact`] as a [`WriteJob`].
    pub fn record_artifact_job(&self, task_id: &str, artifact: ArtifactRecord) -> WriteJob<()> {
        if let Err(err) = artifact_ok(&artifact) {
            return WriteJob::refused(err);
        }
        let task_id = task_id.to_string();
        self.publishing_job(move |tx| {
            let task = live_task(tx, &task_id)?;
            if task.record.state != TaskState::Working {
                return Err(PlaneError::FailedPrecondition(format!(
                    "task {task_id} is {}; outputs are recorded only while it is working",
                    task.record.state.as_str()
                )));
            }
            tasks::append_artifact(tx, &task, &artifact)?;
            Ok(((), vec![artifact_event(&task, &artifact)]))
        })
    }

    /// Records `artifacts` in order, then COMPLETED with `message` as status message.
    pub fn complete(
        &self,
        task_id: &str,
        artifacts: Vec<ArtifactRecord>,
        message: Option<MessageRecord>,
    ) -> Result<(), PlaneError> {
        self.complete_job(task_id, artifacts, message).wait()
    }

    /// [`TaskPlane::complete`] as a [`WriteJob`].
    pub fn complete_job(
        &self,
        task_id: &str,
        artifacts: Vec<ArtifactRecord>,
        message: Option<MessageRecord>,
    ) -> WriteJob<()> {
        let check = artifacts
            .iter()
            .try_for_each(artifact_ok)
            .and_then(|_| message.as_ref().map_or(Ok(()), agent_message));
        if let Err(err) = check {
            return WriteJob::refused(err);
        }
        let task_id = task_id.to_string();
        let now = self.now();
        let events = self.events.clone();
        self.publishing_job(move |tx| {
            let task = live_task(tx, &task_id)?;
            // A caller waiting to answer with the settled Task gets it from the rows this
            // job leaves. When the Task had no artifacts before, they are this job's own,
            // which it has in hand: reading them back parsed again what it just wrote (a
            // profile of one-core blocking `message:send` put ~2% of all instructions there).
            let only_these = !artifacts.is_empty()
                && events.wants_settled(&task_id)
                && tasks::next_artifact_n(tx, &task)? == 0;
            let mut published = Vec::with_capacity(artifacts.len() + 1);
            for artifact in &artifacts {
                tasks::append_artifact(tx, &task, artifact)?;
                published.push(artifact_event(&task, artifact));
            }
            if let Some(message) = &message {
                tasks::append_history(tx, &task, message)?;
            }
            tasks::set_status(
                tx,
                &task,
                TaskState::Completed,
                message.as_ref(),
                now,
                InputRequest::Closed,
            )?;
            let mut completed = status(&task, TaskState::Completed, message.as_ref(), now);
            let after = task.with_status(
                TaskState::Completed,
                message.as_ref(),
                now,
                InputRequest::Closed,
            );
            let known = only_these.then(|| artifacts.clone());
            super::settle_from_row(tx, &events, &mut completed, after, known);
            published.push(completed);
            Ok(((), published))
        })
    }

    /// Settles the Task as REJECTED or FAILED with `reason` as its status message.
    pub fn finish_unsuccessfully(
        &self,
        task_id: &str,
        state: TaskState,
        reason: MessageRecord,
    ) -> Result<(), PlaneError> {
        self.finish_unsuccessfully_job(task_id, state, reason)
            .wait()
    }

    /// [`TaskPlane::finish_unsuccessfully`] as a [`WriteJob`].
    pub fn finish_unsuccessfully_job(
        &self,
        task_id: &str,
        state: TaskState,
        reason: MessageRecord,
    ) -> WriteJob<()> {
        if !matches!(state, TaskState::Rejected | TaskState::Failed) {
            return WriteJob::refused(PlaneError::Invalid(FieldError::new(
                "state",
                "must be rejected or failed",
            )));
        }
        if let Err(err) = agent_message(&reason) {
            return WriteJob::refused(err);
        }
        let task_id = task_id.to_string();
        let now = self.now();
        self.publishing_job(move |tx| {
            let task = live_task(tx, &task_id)?;
            tasks::append_history(tx, &task, &reason)?;
            tasks::set_status(tx, &task, state, Some(&reason), now, InputRequest::Closed)?;
            Ok(((), vec![status(&task, state, Some(&reason), now)]))
        })
    }

    /// Tells the Task's caller why it does not progress: its status keeps its state
    /// (SUBMITTED or WORKING) and gets `text` as the agent's status message, published to
    /// streams; the history is left alone (the note is transient: the next delivery or
    /// settlement replaces it). A Task that is interrupted or terminal is left as it is
    /// (`Ok(false)`): its own status message already says what it waits for.
    pub fn note_status(&self, task_id: &str, text: &str) -> Result<bool, PlaneError> {
        let message = MessageRecord::agent(vec![crate::record::PartRecord::text(text)]);
        let task_id = task_id.to_string();
        let now = self.now();
        self.write_publishing(move |tx| {
            let Some(task) = tasks::by_id(tx, &task_id)? else {
                return Ok((false, vec![]));
            };
            let state = task.record.state;
            if !matches!(state, TaskState::Submitted | TaskState::Working) {
                return Ok((false, vec![]));
            }
            tasks::set_status(
                tx,
                &task,
                state,
                Some(&message),
                now,
                InputRequest::Unchanged,
            )?;
            Ok((true, vec![status(&task, state, Some(&message), now)]))
        })
    }

    /// The caller cancels its own Task: CANCELED, unless it is terminal already.
    pub fn cancel(&self, principal: &str, task_id: &str) -> Result<TaskRecord, PlaneError> {
        let (principal, task_id) = (principal.to_string(), task_id.to_string());
        let now = self.now();
        self.write_publishing(move |tx| {
            let task = tasks::owned(tx, &principal, &task_id)?
                .ok_or_else(|| PlaneError::TaskNotFound(task_id.clone()))?;
            if task.record.state.is_terminal() {
                return Err(PlaneError::NotCancelable {
                    task_id: task_id.clone(),
                    state: task.record.state,
                });
            }
            tasks::set_status(
                tx,
                &task,
                TaskState::Canceled,
                None,
                now,
                InputRequest::Closed,
            )?;
            let published = vec![status(&task, TaskState::Canceled, None, now)];
            let mut record = task.record;
            record.state = TaskState::Canceled;
            record.status_message = None;
            record.status_ms = now;
            record.input_request_open = false;
            Ok((record, published))
        })
    }
}
