//! What the agent does to a Task: start work, ask for input, record outputs, settle it;
//! and the caller's cancel. Turn authority (which Task the agent may touch now) is checked
//! by the wake queue before these are called; the state rules are here.

use super::{PlaneError, Published, TaskPlane, WriteJob};
use crate::events::TaskEvent;
use crate::field_error::FieldError;
use crate::record::{ArtifactRecord, Continuation, MessageRecord, Role, TaskRecord, TaskState};
use crate::store::tasks::{InputRequest, TaskRow};
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

fn live_task(tx: &dyn WriteTx, task_id: &str) -> Result<TaskRow, PlaneError> {
    let task = tx
        .task_by_id(task_id)?
        .ok_or_else(|| PlaneError::TaskNotFound(task_id.to_string()))?;
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
                    tx.set_task_status(
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
            tx.append_history(&task, &question)?;
            tx.set_task_status(
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
            tx.append_artifact(&task, &artifact)?;
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
                && tx.next_artifact_n(&task)? == 0;
            let mut published = Vec::with_capacity(artifacts.len() + 1);
            for artifact in &artifacts {
                tx.append_artifact(&task, artifact)?;
                published.push(artifact_event(&task, artifact));
            }
            if let Some(message) = &message {
                tx.append_history(&task, message)?;
            }
            tx.set_task_status(
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
            tx.append_history(&task, &reason)?;
            tx.set_task_status(&task, state, Some(&reason), now, InputRequest::Closed)?;
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
            let Some(task) = tx.task_by_id(&task_id)? else {
                return Ok((false, vec![]));
            };
            let state = task.record.state;
            if !matches!(state, TaskState::Submitted | TaskState::Working) {
                return Ok((false, vec![]));
            }
            tx.set_task_status(&task, state, Some(&message), now, InputRequest::Unchanged)?;
            Ok((true, vec![status(&task, state, Some(&message), now)]))
        })
    }

    /// The caller cancels its own Task: CANCELED, unless it is terminal already.
    pub fn cancel(&self, principal: &str, task_id: &str) -> Result<TaskRecord, PlaneError> {
        self.cancel_as(Some(principal.to_string()), task_id, None)
    }

    /// The operator cancels any Task: CANCELED, unless it is terminal already, with a
    /// status message that says the operator did it, and why when `reason` is given.
    pub fn operator_cancel(
        &self,
        task_id: &str,
        reason: Option<&str>,
    ) -> Result<TaskRecord, PlaneError> {
        let reason = reason.map(str::trim).filter(|r| !r.is_empty());
        let text = match reason {
            Some(reason) => format!("Canceled by the operator: {reason}"),
            None => "Canceled by the operator.".to_string(),
        };
        let note = MessageRecord::agent(vec![crate::record::PartRecord::text(&text)]);
        self.cancel_as(None, task_id, Some(note))
    }

    /// CANCELED as `principal` (its own Task only) or as the operator (`None`: any Task).
    fn cancel_as(
        &self,
        principal: Option<String>,
        task_id: &str,
        note: Option<MessageRecord>,
    ) -> Result<TaskRecord, PlaneError> {
        let task_id = task_id.to_string();
        let now = self.now();
        self.write_publishing(move |tx| {
            let task = match &principal {
                Some(principal) => tx.task_owned_by(principal, &task_id)?,
                None => tx.task_by_id(&task_id)?,
            }
            .ok_or_else(|| PlaneError::TaskNotFound(task_id.clone()))?;
            if task.record.state.is_terminal() {
                return Err(PlaneError::NotCancelable {
                    task_id: task_id.clone(),
                    state: task.record.state,
                });
            }
            tx.set_task_status(
                &task,
                TaskState::Canceled,
                note.as_ref(),
                now,
                InputRequest::Closed,
            )?;
            let published = vec![status(&task, TaskState::Canceled, note.as_ref(), now)];
            let mut record = task.record;
            record.state = TaskState::Canceled;
            record.status_message = note.clone();
            record.status_ms = now;
            record.input_request_open = false;
            Ok((record, published))
        })
    }
}

/// The writer keeps the rows of live Tasks between its writes (`store::tasks::live_rows`);
/// the agent's writes are what it follows.
#[cfg(test)]
mod live_rows {
    use super::*;
    use crate::clock::ManualClock;
    use crate::plane::{InterruptKind, PlaneOptions};
    use crate::record::PartRecord;
    use crate::store::StoreError;
    use std::sync::Arc;

    struct Root(std::path::PathBuf);
    impl Drop for Root {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn plane_at(tag: &str, clock: &ManualClock) -> (Root, TaskPlane) {
        let root = Root(std::env::temp_dir().join(format!("tp-{tag}-{}", crate::ids::mint())));
        let plane = TaskPlane::open(
            &root.0,
            PlaneOptions {
                clock: Arc::new(clock.clone()),
                ..PlaneOptions::default()
            },
        )
        .unwrap();
        (root, plane)
    }

    /// The Task's row as the writer keeps it (`None`: not kept) and as the store holds it.
    fn kept_and_stored(plane: &TaskPlane, task_id: &str) -> (Option<TaskRow>, TaskRow) {
        let task_id = task_id.to_string();
        plane
            .store()
            .write(move |tx| {
                let sqlite = tx.sqlite().expect("a SQLite store");
                let kept = sqlite.kept_task_row(&task_id);
                // Read on the connection itself, past the kept rows.
                let stored = crate::store::tasks::by_id(sqlite.conn(), &task_id)?
                    .expect("the Task is stored");
                Ok::<_, StoreError>((kept, stored))
            })
            .unwrap()
    }

    /// Reads the Task's row the way the writer's jobs do (which keeps it, if it may).
    fn read_in_writer(plane: &TaskPlane, task_id: &str) {
        let task_id = task_id.to_string();
        plane
            .store()
            .write(move |tx| tx.task_by_id(&task_id).map(|_| ()))
            .unwrap();
    }

    /// The kept row, which must be there and equal the stored one.
    fn assert_kept_true(plane: &TaskPlane, task_id: &str, step: &str) -> TaskRow {
        let (kept, stored) = kept_and_stored(plane, task_id);
        assert_eq!(kept.as_ref(), Some(&stored), "after {step}");
        stored
    }

    fn assert_not_kept(plane: &TaskPlane, task_id: &str, step: &str) {
        assert_eq!(kept_and_stored(plane, task_id).0, None, "after {step}");
    }

    #[test]
    fn the_writers_kept_row_of_a_live_task_is_the_row_the_store_holds() {
        let clock = ManualClock::new(1_800_000_000_000);
        let (_root, plane) = plane_at("live-rows", &clock);
        let extensions = vec!["https://example.org/ext/v1".to_string()];
        let task = plane
            .accept_in_context(
                "alice",
                None,
                MessageRecord::user_text("m-1", "work"),
                extensions.clone(),
            )
            .unwrap()
            .task_id
            .unwrap();
        let created = assert_kept_true(&plane, &task, "creation");
        assert_eq!(created.record.extensions, extensions);
        // Started in the millisecond it was created (the status time is left out of the
        // statement), then an artifact a little later.
        plane.start_work(&task).unwrap();
        assert_kept_true(&plane, &task, "start in the same millisecond");
        clock.advance(7);
        plane
            .record_artifact(
                &task,
                ArtifactRecord {
                    artifact_id: "a-1".into(),
                    name: Some("part".into()),
                    description: None,
                    parts: vec![PartRecord::text("half")],
                    metadata: None,
                    extensions: Vec::new(),
                },
            )
            .unwrap();
        assert_kept_true(&plane, &task, "an artifact");
        // A question is a status message: the row is forgotten, and a read does not keep it.
        plane
            .require_input(
                &task,
                InterruptKind::InputRequired,
                MessageRecord::agent(vec![PartRecord::text("which?")]),
                None,
            )
            .unwrap();
        assert_not_kept(&plane, &task, "a question");
        read_in_writer(&plane, &task);
        assert_not_kept(&plane, &task, "a read of a Task with a status message");
        // Answered: the continuation closes the request; a read keeps the row again, and
        // the next start follows it at a later time.
        clock.advance(3);
        plane
            .continue_task(
                "alice",
                &task,
                None,
                MessageRecord::user_text("m-2", "that"),
                vec![],
            )
            .unwrap();
        read_in_writer(&plane, &task);
        let answered = assert_kept_true(&plane, &task, "the answer and a read");
        assert!(!answered.record.input_request_open);
        assert_eq!(answered.input_request_seq, 1);
        clock.advance(2);
        plane.start_work(&task).unwrap();
        let working = assert_kept_true(&plane, &task, "a start at a later time");
        assert_eq!(working.record.status_ms, clock_now(&clock));
        // Settled: terminal rows are never kept.
        plane.complete(&task, vec![], None).unwrap();
        assert_not_kept(&plane, &task, "completion");
        plane.close();
    }

    fn clock_now(clock: &ManualClock) -> i64 {
        crate::clock::Clock::now_ms(clock)
    }

    /// A writer job that moves Task `task_id` to WORKING and then fails.
    fn fails_after_starting(
        task_id: &str,
    ) -> impl FnMut(&dyn WriteTx) -> Result<(), StoreError> + Send + 'static {
        let task_id = task_id.to_string();
        move |tx| {
            let row = tx.task_by_id(&task_id)?.unwrap();
            tx.set_task_status(
                &row,
                TaskState::Working,
                None,
                row.record.status_ms + 1,
                InputRequest::Unchanged,
            )?;
            Err(StoreError::Corrupt("fails after writing".into()))
        }
    }

    #[test]
    fn a_status_change_rolled_back_in_a_batchs_second_run_leaves_no_kept_row_ahead() {
        let clock = ManualClock::new(1_800_000_000_000);
        let (_root, plane) = plane_at("live-rows-rerun", &clock);
        let accept = |id: &str| {
            plane
                .accept_in_context("alice", None, MessageRecord::user_text(id, "work"), vec![])
                .unwrap()
                .task_id
                .unwrap()
        };
        let (first, second) = (accept("m-1"), accept("m-2"));
        let store = plane.store().clone();
        // Hold the writer in one job, so the two failing writes share the next batch: the
        // first fails having written (the batch runs again, each job in a savepoint), and
        // the second fails again in its savepoint there.
        let (held, writer_held) = std::sync::mpsc::channel::<()>();
        let (release, released) = std::sync::mpsc::channel::<()>();
        let released = std::sync::Mutex::new(released);
        let hold = move |_: &dyn WriteTx| {
            let _ = held.send(());
            let _ = released.lock().unwrap().recv();
            Ok::<(), StoreError>(())
        };
        assert!(store.submit(hold, None, Box::new(|_| {})).is_none());
        writer_held.recv().unwrap();
        let (done, outcomes) = std::sync::mpsc::channel();
        for task in [&first, &second] {
            let done = done.clone();
            let reply = Box::new(move |r: Result<(), StoreError>| {
                let _ = done.send(r.is_err());
            });
            assert!(store
                .submit(fails_after_starting(task), None, reply)
                .is_none());
        }
        release.send(()).unwrap();
        assert!(
            outcomes.recv().unwrap() && outcomes.recv().unwrap(),
            "both fail"
        );
        for task in [&first, &second] {
            let (kept, stored) = kept_and_stored(&plane, task);
            assert_eq!(stored.record.state, TaskState::Submitted);
            assert!(
                kept.is_none_or(|kept| kept == stored),
                "the writer kept a row the store does not hold"
            );
        }
        plane.close();
    }

    #[test]
    fn a_rolled_back_status_change_leaves_no_kept_row_ahead_of_the_store() {
        let clock = ManualClock::new(1_800_000_000_000);
        let (_root, plane) = plane_at("live-rows-rollback", &clock);
        let task = plane
            .accept_in_context(
                "alice",
                None,
                MessageRecord::user_text("m-1", "work"),
                vec![],
            )
            .unwrap()
            .task_id
            .unwrap();
        assert_kept_true(&plane, &task, "creation");
        // A write that moves the Task to WORKING and then fails: its batch is rolled back.
        assert!(plane.store().write(fails_after_starting(&task)).is_err());
        let (kept, stored) = kept_and_stored(&plane, &task);
        assert_eq!(
            stored.record.state,
            TaskState::Submitted,
            "the change was rolled back"
        );
        assert!(
            kept.is_none_or(|kept| kept == stored),
            "the writer kept a row the store does not hold"
        );
        plane.close();
    }
}
