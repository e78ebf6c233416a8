//! `EmbedderAgent`: the agent API without turn authority, for an embedder that runs its
//! own concurrent agent without Pi (the benchmarks, the official clients' conformance
//! runs). It is not the resident's: Pi's tools reach Tasks only through `AgentBridge`,
//! which checks that each call is for the active turn's Task.

use std::sync::Arc;

use napi::bindgen_prelude::{AsyncTask, Object, PromiseRaw};
use napi::Env;
use napi_derive::napi;
use serde_json::Value;
use tokio::sync::{mpsc, Mutex, Notify};

use super::convert::{agent_artifact, agent_message, AcceptedTask};
use super::plane::TaskPlane;
use super::{internal, plane_error, queued_write, spawn, Json, PlaneCall, Result, Settled};
use crate::events::Accepted;
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
#[napi]
pub struct EmbedderAgent {
    plane: plane::TaskPlane,
    /// Every acceptance since this agent was obtained, none dropped (a watch on the bus).
    accepted: Arc<Mutex<mpsc::UnboundedReceiver<Accepted>>>,
    watch: u64,
    /// The plane's: notified when it closes.
    closing: Arc<Notify>,
    /// Settles this agent's write Promises, a batch at a time.
    settler: Arc<super::settle::Settler>,
}

#[napi]
impl TaskPlane {
    /// An agent API without turn authority, for an embedder that runs its own agent
    /// without Pi (see `EmbedderAgent`); it sees the Tasks accepted from now on. Never the
    /// resident's way to act: Pi's tools go through `AgentBridge`.
    #[napi(catch_unwind)]
    pub fn embedder_agent(&self, env: &Env) -> Result<EmbedderAgent> {
        let settler = super::settle::Settler::new(env)?;
        let (watch, accepted) = self.plane.events().watch_accepted_async();
        Ok(EmbedderAgent {
            plane: self.plane.clone(),
            accepted: Arc::new(Mutex::new(accepted)),
            watch,
            closing: self.closing.clone(),
            settler,
        })
    }
}

/// The agent's watch ends with it: acceptances stop queueing for an agent nobody holds.
impl Drop for EmbedderAgent {
    fn drop(&mut self) {
        self.plane.events().unwatch(self.watch);
    }
}

fn accepted_task(accepted: Accepted) -> AcceptedTask {
    AcceptedTask {
        activation_id: accepted.activation_id,
        task_id: accepted.task_id,
        context_id: accepted.context_id,
    }
}

#[napi]
impl EmbedderAgent {
    /// The next Task accepted (created or continued) since this agent was obtained, or
    /// `null` when none arrives within `timeoutMs` (default 1000) or the plane is closed.
    /// Concurrent calls share the acceptances: each goes to one of them.
    #[napi(ts_return_type = "Promise<AcceptedTask | null>")]
    pub fn next_accepted<'env>(
        &self,
        env: &'env Env,
        timeout_ms: Option<u32>,
    ) -> Result<PromiseRaw<'env, Settled<Option<AcceptedTask>>>> {
        let (accepted, closing, plane) = (
            self.accepted.clone(),
            self.closing.clone(),
            self.plane.clone(),
        );
        // An acceptance already waiting is handed over at once, on the JS thread: under load
        // there usually is one, and taking it here saves the runtime's two thread switches.
        if let (false, Ok(mut receiver)) = (self.plane.is_closed(), self.accepted.try_lock()) {
            if let Ok(next) = receiver.try_recv() {
                return PromiseRaw::resolve(env, Settled(Ok(Some(accepted_task(next)))))
                    .map_err(|e| internal(format!("cannot settle the call: {}", e.reason)));
            }
        }
        let deadline = tokio::time::Instant::now()
            + std::time::Duration::from_millis(u64::from(timeout_ms.unwrap_or(1000)));
        // Awaited on the addon's runtime: no thread waits, nothing polls.
        spawn(env, async move {
            let closed = closing.notified();
            tokio::pin!(closed);
            closed.as_mut().enable();
            if plane.is_closed() {
                return Ok(None);
            }
            let mut receiver = tokio::select! {
                guard = accepted.lock() => guard,
                _ = &mut closed => return Ok(None),
                _ = tokio::time::sleep_until(deadline) => return Ok(None),
            };
            tokio::select! {
                next = receiver.recv() => Ok(next.map(accepted_task)),
                _ = &mut closed => Ok(None),
                _ = tokio::time::sleep_until(deadline) => Ok(None),
            }
        })
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
            self.plane.start_work_job(&task_id),
            |_| Ok(()),
        )
    }

    /// Records one artifact (an A2A `Artifact`) while the Task is WORKING.
    #[napi(ts_return_type = "Promise<void>")]
    pub fn record_artifact<'env>(
        &self,
        env: &'env Env,
        task_id: String,
        artifact: Value,
    ) -> Result<Object<'env>> {
        let artifact = agent_artifact(artifact)?;
        queued_write(
            env,
            &self.settler,
            self.plane.record_artifact_job(&task_id, artifact),
            Ok,
        )
    }

    /// Records `artifacts` in order, then COMPLETED with `message` (an agent Message).
    #[napi(ts_return_type = "Promise<void>")]
    pub fn complete<'env>(
        &self,
        env: &'env Env,
        task_id: String,
        artifacts: Vec<Value>,
        message: Option<Value>,
    ) -> Result<Object<'env>> {
        let artifacts = artifacts
            .into_iter()
            .map(agent_artifact)
            .collect::<Result<Vec<_>>>()?;
        let message = message.map(agent_message).transpose()?;
        queued_write(
            env,
            &self.settler,
            self.plane.complete_job(&task_id, artifacts, message),
            Ok,
        )
    }

    /// Settles the Task as rejected or failed with `message` as the reason.
    #[napi(ts_return_type = "Promise<void>")]
    pub fn finish<'env>(
        &self,
        env: &'env Env,
        task_id: String,
        outcome: UnsuccessfulOutcome,
        message: Value,
    ) -> Result<Object<'env>> {
        let state = match outcome {
            UnsuccessfulOutcome::Rejected => record::TaskState::Rejected,
            UnsuccessfulOutcome::Failed => record::TaskState::Failed,
        };
        let message = agent_message(message)?;
        queued_write(
            env,
            &self.settler,
            self.plane
                .finish_unsuccessfully_job(&task_id, state, message),
            Ok,
        )
    }

    /// Pauses the Task on its caller (for input or for authorization) with `message`.
    #[napi(ts_return_type = "Promise<void>")]
    pub fn require_input<'env>(
        &self,
        env: &'env Env,
        task_id: String,
        kind: InterruptKind,
        message: Value,
    ) -> Result<Object<'env>> {
        let kind = match kind {
            InterruptKind::InputRequired => plane::InterruptKind::InputRequired,
            InterruptKind::AuthRequired => plane::InterruptKind::AuthRequired,
        };
        let message = agent_message(message)?;
        queued_write(
            env,
            &self.settler,
            self.plane.require_input_job(&task_id, kind, message, None),
            Ok,
        )
    }
}
