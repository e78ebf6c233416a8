//! `EmbedderAgent`: the agent API without turn authority, for an embedder that runs its
//! own concurrent agent without Pi (the benchmarks, the official clients' conformance
//! runs). It is not the resident's: Pi's tools reach Tasks only through `AgentBridge`,
//! which checks that each call is for the active turn's Task.

use std::sync::Arc;

use napi::bindgen_prelude::{AsyncTask, Object};
use napi::Env;
use napi_derive::napi;

use super::convert::{agent_artifact, agent_message};
use super::inbox::Inbox;
use super::plane::TaskPlane;
use super::{internal, invalid_arg, plane_error, queued_write, Json, JsonArg, PlaneCall, Result};
use crate::plane;
use crate::record;
use crate::wire;

js_enum! {
    [" How a Task ends when it does not complete: `rejected` (the agent declines the work) or"
     " `failed`."]
    pub enum UnsuccessfulOutcome for "outcome" {
        Rejected = "rejected": " The agent declines the work.",
        Failed = "failed": " The work failed.",
    }
}

js_enum! {
    [" What a paused Task waits for from its caller: `input_required` (an answer) or"
     " `auth_required` (an authorization)."]
    pub enum InterruptKind for "kind" {
        InputRequired = "input_required": " An answer (TASK_STATE_INPUT_REQUIRED).",
        AuthRequired = "auth_required": " An authorization (TASK_STATE_AUTH_REQUIRED).",
    }
}

/// The agent API without turn authority, for an embedder that runs its own concurrent
/// agent without Pi (benchmarks, conformance runs against the official A2A clients): it
/// takes accepted Tasks and works them directly. It bypasses the resident's turn
/// authority, so it is never the resident's way to act: a Pi session works its Task through
/// `AgentBridge`, whose tools refuse any Task but the active turn's. Obtain it with
/// `TaskPlane.embedderAgent()`.
///
/// Its writes are applied in the order they are called, also when the store's write queue
/// is full: an agent may call `startWork` and then `complete` without awaiting the first
/// (then await both), and the Task goes WORKING, then COMPLETED, often in one commit. Each
/// Promise still settles only once its write is durable.
#[napi]
pub struct EmbedderAgent {
    plane: plane::TaskPlane,
    /// Every acceptance since this agent was obtained, none dropped (a watch on the bus),
    /// and the calls waiting for one.
    inbox: Arc<Inbox>,
    watch: u64,
    /// Settles this agent's write Promises, a batch at a time.
    settler: Arc<super::settle::Settler>,
    /// Keeps this agent's writes in call order when the writer's queue is full.
    order: Arc<crate::store::InOrder>,
}

#[napi]
impl TaskPlane {
    /// An agent API without turn authority, for an embedder that runs its own agent
    /// without Pi (see `EmbedderAgent`); it sees the Tasks accepted from now on. Never the
    /// resident's way to act: Pi's tools go through `AgentBridge`.
    #[napi(catch_unwind)]
    pub fn embedder_agent(&self, env: &Env) -> Result<EmbedderAgent> {
        let settler = super::settle::Settler::new(env)?;
        let inbox = Inbox::new(settler.clone(), self.plane.clone(), self.closing.clone());
        let sink = inbox.clone();
        let watch = self
            .plane
            .events()
            .watch_accepted_with(Arc::new(move |arrival| sink.push(arrival)));
        Ok(EmbedderAgent {
            plane: self.plane.clone(),
            inbox,
            watch,
            settler,
            order: Arc::default(),
        })
    }
}

/// The agent's watch ends with it: acceptances stop queueing for an agent nobody holds,
/// and its waiting calls answer `null`.
impl Drop for EmbedderAgent {
    fn drop(&mut self) {
        self.plane.events().unwatch(self.watch);
        self.inbox.close();
    }
}

#[napi]
impl EmbedderAgent {
    /// The next Task accepted (created or continued) since this agent was obtained, with
    /// the message that was accepted and whether it continued the Task, so the agent can
    /// start without `readTask`; or `null` when none arrives within `timeoutMs` (default
    /// 1000) or the plane is closed. Concurrent calls share the acceptances: each goes to
    /// one of them.
    #[napi(ts_return_type = "Promise<AcceptedTask | null>")]
    pub fn next_accepted<'env>(
        &self,
        env: &'env Env,
        timeout_ms: Option<u32>,
    ) -> Result<Object<'env>> {
        self.inbox.next(env, plane::defaults::wait(timeout_ms))
    }

    /// Any Task as an A2A `Task` (agent side: no principal check), or `null`.
    #[napi(ts_return_type = "Promise<Record<string, unknown> | null>")]
    pub fn read_task(
        &self,
        task_id: String,
        history_length: Option<u32>,
    ) -> AsyncTask<PlaneCall<Option<Json>>> {
        let plane = self.plane.clone();
        PlaneCall::new(move || {
            let task = plane
                .task(&task_id, history_length, true)
                .map_err(plane_error)?;
            task.map(|t| serde_json::to_value(wire::convert::task_to_wire(&t)).map(Json))
                .transpose()
                .map_err(internal)
        })
    }

    /// SUBMITTED → WORKING.
    #[napi(ts_return_type = "Promise<void>")]
    pub fn start_work<'env>(&self, env: &'env Env, task_id: String) -> Result<Object<'env>> {
        queued_write(
            env,
            &self.settler,
            &self.order,
            self.plane.start_work_job(&task_id),
            |_| Ok(()),
        )
    }

    /// Records one artifact (an A2A `Artifact`) while the Task is WORKING.
    #[napi(
        ts_args_type = "taskId: string, artifact: any",
        ts_return_type = "Promise<void>"
    )]
    pub fn record_artifact<'env>(
        &self,
        env: &'env Env,
        task_id: String,
        artifact: JsonArg,
    ) -> Result<Object<'env>> {
        let artifact = agent_artifact(artifact.decode("Artifact")?)?;
        queued_write(
            env,
            &self.settler,
            &self.order,
            self.plane.record_artifact_job(&task_id, artifact),
            Ok,
        )
    }

    /// Records `artifacts` in order, then COMPLETED with `message` (an agent Message).
    #[napi(
        ts_args_type = "taskId: string, artifacts: Array<any>, message?: any | undefined | null",
        ts_return_type = "Promise<void>"
    )]
    pub fn complete<'env>(
        &self,
        env: &'env Env,
        task_id: String,
        artifacts: JsonArg,
        message: Option<JsonArg>,
    ) -> Result<Object<'env>> {
        let artifacts = artifacts
            .decode::<Vec<wire::Artifact>>("Artifact list")
            .map_err(|e| {
                invalid_arg(format!(
                    "`artifacts` must be an array of A2A Artifacts: {}",
                    e.reason
                ))
            })?
            .into_iter()
            .map(agent_artifact)
            .collect::<Result<Vec<_>>>()?;
        let message = message
            .map(|m| agent_message(m.decode("Message")?))
            .transpose()?;
        queued_write(
            env,
            &self.settler,
            &self.order,
            self.plane.complete_job(&task_id, artifacts, message),
            Ok,
        )
    }

    /// Settles the Task as rejected or failed with `message` as the reason.
    #[napi(
        ts_args_type = "taskId: string, outcome: UnsuccessfulOutcome, message: any",
        ts_return_type = "Promise<void>"
    )]
    pub fn finish<'env>(
        &self,
        env: &'env Env,
        task_id: String,
        outcome: UnsuccessfulOutcome,
        message: JsonArg,
    ) -> Result<Object<'env>> {
        let state = match outcome {
            UnsuccessfulOutcome::Rejected => record::TaskState::Rejected,
            UnsuccessfulOutcome::Failed => record::TaskState::Failed,
        };
        let message = agent_message(message.decode("Message")?)?;
        queued_write(
            env,
            &self.settler,
            &self.order,
            self.plane
                .finish_unsuccessfully_job(&task_id, state, message),
            Ok,
        )
    }

    /// Pauses the Task on its caller (for input or for authorization) with `message`.
    #[napi(
        ts_args_type = "taskId: string, kind: InterruptKind, message: any",
        ts_return_type = "Promise<void>"
    )]
    pub fn require_input<'env>(
        &self,
        env: &'env Env,
        task_id: String,
        kind: InterruptKind,
        message: JsonArg,
    ) -> Result<Object<'env>> {
        let kind = match kind {
            InterruptKind::InputRequired => plane::InterruptKind::InputRequired,
            InterruptKind::AuthRequired => plane::InterruptKind::AuthRequired,
        };
        let message = agent_message(message.decode("Message")?)?;
        queued_write(
            env,
            &self.settler,
            &self.order,
            self.plane.require_input_job(&task_id, kind, message, None),
            Ok,
        )
    }
}
