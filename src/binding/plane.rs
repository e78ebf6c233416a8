//! `TaskPlane`: the durable store of one root, its intake, reads and the operator's views.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use napi::bindgen_prelude::{AsyncTask, PromiseRaw};
use napi::Env;
use napi_derive::napi;
use serde_json::Value;

use super::convert::{
    activation, inbound_message, Acceptance, ActivationInput, InspectedTask, TaskState, TaskSummary,
};
use super::{internal, invalid_arg, plane_error, spawn, Json, JsonArg, PlaneCall, Result, Settled};
use crate::config;
use crate::plane::{self, PlaneOptions};
use crate::record;
use crate::wire;

js_enum! {
    [" How a reply on a source continues a Task: `none` (never: every event is new work),"
     " `reply_anchors` (through a verified reply anchor) or `explicit_task_id` (an authorized"
     " explicit taskId, as in the A2A binding)."]
    pub enum Continuation for "continuation" {
        None = "none": " Replies never continue a Task: every event is new work.",
        ReplyAnchors = "reply_anchors": " A verified reply anchor continues the waiting Task.",
        ExplicitTaskId = "explicit_task_id": " An authorized explicit taskId continues it (the A2A binding).",
    }
}

impl From<Continuation> for record::Continuation {
    fn from(name: Continuation) -> Self {
        match name {
            Continuation::None => record::Continuation::None,
            Continuation::ReplyAnchors => record::Continuation::ReplyAnchors,
            Continuation::ExplicitTaskId => record::Continuation::ExplicitTaskId,
        }
    }
}

/// The store root the task plane uses when none is given: `CHANNELS_TASK_STORE_PATH`, else
/// `${XDG_DATA_HOME:-$HOME/.local/share}/outfitter/channels/task-plane`.
#[napi(catch_unwind)]
pub fn default_store_root() -> Result<String> {
    let root = config::store_root(&config::process_env).map_err(invalid_arg)?;
    Ok(root.display().to_string())
}

/// An open task plane: the durable store of one root. Open it in Pi's `session_start`
/// (`await TaskPlane.open()`) and close it in `session_shutdown`; a second open of the same
/// root fails until then.
///
/// Every error it throws or rejects with has a `code`: the A2A reason the HTTP listener
/// gives the same error (`TASK_NOT_FOUND`, `DUPLICATE_MESSAGE_ID`, `FAILED_PRECONDITION`,
/// `UNAVAILABLE`, ...) or `INVALID_ARGUMENT` for a bad argument (see the README's table).
#[napi]
pub struct TaskPlane {
    pub(super) plane: plane::TaskPlane,
    /// Wakes the embedder agents' `nextAccepted` waiters on `close()`.
    pub(super) closing: std::sync::Arc<tokio::sync::Notify>,
}

#[napi]
impl TaskPlane {
    /// Opens the store at `root` (default: `defaultStoreRoot()`), takes its lock, and runs
    /// startup recovery and compaction (writes: off the JS thread, like every write).
    /// Rejects while another process or handle holds the root.
    #[napi(ts_return_type = "Promise<TaskPlane>")]
    pub fn open(root: Option<String>) -> Result<AsyncTask<PlaneCall<TaskPlane>>> {
        let root = match root {
            Some(root) => PathBuf::from(root),
            None => config::store_root(&config::process_env).map_err(invalid_arg)?,
        };
        // A2A_STORE_URL: a fleet's PostgreSQL instead of the embedded SQLite (an unusable
        // value is refused here, naming the variable).
        let store = config::store_backend(&config::process_env).map_err(invalid_arg)?;
        let wake_lease_ms = config::wake_lease_ms(&config::process_env).map_err(invalid_arg)?;
        Ok(PlaneCall::new(move || {
            let options = PlaneOptions {
                store,
                wake_lease_ms,
                ..PlaneOptions::default()
            };
            let plane = plane::TaskPlane::open(&root, options).map_err(plane_error)?;
            Ok(TaskPlane {
                plane,
                closing: std::sync::Arc::default(),
            })
        }))
    }

    /// This node's id (host name, pid, random suffix; minted when the plane opened): the
    /// owner of the wake leases it takes on a shared store, for the operator's status.
    #[napi(getter)]
    pub fn node_id(&self) -> String {
        self.plane.node_id().to_string()
    }

    /// The store root.
    #[napi(getter)]
    pub fn root(&self) -> String {
        self.plane.root().display().to_string()
    }

    /// Closes the store and releases the root's lock. Idempotent.
    #[napi(catch_unwind)]
    pub fn close(&self) {
        self.plane.close();
        // After the plane reads as closed: a waiter that missed this sees it.
        self.closing.notify_waiters();
    }

    #[napi(getter)]
    pub fn closed(&self) -> bool {
        self.plane.is_closed()
    }

    /// Registers a source and how a reply on it continues a Task.
    #[napi(catch_unwind)]
    pub fn register_source(&self, source: String, continuation: Continuation) -> Result<()> {
        self.plane
            .register_source(&source, continuation.into())
            .map_err(plane_error)
    }

    /// A native provider event that is not a reply: a new Task in its conversation's context.
    #[napi(ts_return_type = "Promise<Acceptance>")]
    pub fn accept(
        &self,
        activation_input: ActivationInput,
    ) -> Result<AsyncTask<PlaneCall<Acceptance>>> {
        let activation = activation(activation_input)?;
        let plane = self.plane.clone();
        Ok(PlaneCall::new(move || {
            plane
                .accept(activation)
                .map_err(plane_error)
                .and_then(Acceptance::try_from)
        }))
    }

    /// A native provider reply: continues a Task only through a verified reply anchor,
    /// else new work in the conversation's context.
    #[napi(js_name = "continue", ts_return_type = "Promise<Acceptance>")]
    pub fn continue_activation(
        &self,
        activation_input: ActivationInput,
    ) -> Result<AsyncTask<PlaneCall<Acceptance>>> {
        let activation = activation(activation_input)?;
        let plane = self.plane.clone();
        Ok(PlaneCall::new(move || {
            plane
                .continue_activation(activation)
                .map_err(plane_error)
                .and_then(Acceptance::try_from)
        }))
    }

    /// An authorized explicit continuation of `taskId` (an A2A `Message` object; its
    /// `contextId`, if any, must be the Task's).
    #[napi(
        ts_args_type = "principal: string, taskId: string, message: any",
        ts_return_type = "Promise<Acceptance>"
    )]
    pub fn continue_task(
        &self,
        principal: String,
        task_id: String,
        message: JsonArg,
    ) -> Result<AsyncTask<PlaneCall<Acceptance>>> {
        let (record, context_id, _) = inbound_message(message.value()?)?;
        let plane = self.plane.clone();
        Ok(PlaneCall::new(move || {
            plane
                .continue_task(
                    &principal,
                    &task_id,
                    context_id.as_deref(),
                    record,
                    Vec::new(),
                )
                .map_err(plane_error)
                .and_then(Acceptance::try_from)
        }))
    }

    /// A2A intake, decided as the HTTP listener decides it (one function in the plane): a
    /// message with a `taskId` continues that Task (only the principal's own, only while it
    /// waits for input); a duplicate gets its prior outcome; anything else is new work, a
    /// Task in the message's `contextId` when the principal owns it, else in a fresh one.
    #[napi(
        ts_args_type = "principal: string, message: any",
        ts_return_type = "Promise<Acceptance>"
    )]
    pub fn accept_in_context<'env>(
        &self,
        env: &'env Env,
        principal: String,
        message: JsonArg,
    ) -> Result<PromiseRaw<'env, Settled<Acceptance>>> {
        let (record, context_id, task_id) = inbound_message(message.value()?)?;
        let inbound = plane::Inbound {
            principal,
            context_id,
            task_id,
            message: record,
            extensions: Vec::new(),
        };
        let plane = self.plane.clone();
        spawn(env, async move {
            // Its own task: a panic in a plane call rejects, never crosses into Node.
            let intake = tokio::spawn(async move {
                plane
                    .intake(inbound, Arc::new(plane::AlwaysTask), Duration::ZERO)
                    .await
            });
            match intake.await {
                Ok(result) => result.map_err(plane_error).and_then(Acceptance::try_from),
                Err(e) => Err(internal(e)),
            }
        })
    }

    /// Trusted creation of a new Task in an existing context the principal owns.
    #[napi(
        ts_args_type = "principal: string, contextId: string, message: any",
        ts_return_type = "Promise<Acceptance>"
    )]
    pub fn create_task(
        &self,
        principal: String,
        context_id: String,
        message: JsonArg,
    ) -> Result<AsyncTask<PlaneCall<Acceptance>>> {
        let (record, _, _) = inbound_message(message.value()?)?;
        let plane = self.plane.clone();
        Ok(PlaneCall::new(move || {
            plane
                .create_task(&principal, &context_id, record)
                .map_err(plane_error)
                .and_then(Acceptance::try_from)
        }))
    }

    /// Records a direct Message outcome (no Task). `reply` is an A2A `Message` with role
    /// `ROLE_AGENT`; a duplicate returns the first reply verbatim.
    #[napi(
        ts_args_type = "principal: string, message: any, reply: any",
        ts_return_type = "Promise<Acceptance>"
    )]
    pub fn respond_directly(
        &self,
        principal: String,
        message: JsonArg,
        reply: JsonArg,
    ) -> Result<AsyncTask<PlaneCall<Acceptance>>> {
        let (record, context_id, _) = inbound_message(message.value()?)?;
        let reply: wire::Message =
            wire::json::decode_value("Message", reply.value()?).map_err(invalid_arg)?;
        let (reply, _, _) = wire::convert::message_from_wire(reply).map_err(|e| {
            invalid_arg(format!("invalid reply: field `{}`: {}", e.field, e.message))
        })?;
        let plane = self.plane.clone();
        Ok(PlaneCall::new(move || {
            plane
                .respond_directly(&principal, context_id.as_deref(), record, reply)
                .map_err(plane_error)
                .and_then(Acceptance::try_from)
        }))
    }

    /// The durable Task as an A2A `Task` object, or `null` when the principal has no such
    /// Task. `historyLength`: absent all, `n` the newest n.
    #[napi(ts_return_type = "Promise<Record<string, unknown> | null>")]
    pub fn get_task(
        &self,
        principal: String,
        task_id: String,
        history_length: Option<u32>,
    ) -> AsyncTask<PlaneCall<Option<Json>>> {
        let plane = self.plane.clone();
        PlaneCall::new(move || {
            let task = plane
                .get_task(&principal, &task_id, history_length, true)
                .map_err(plane_error)?;
            task.map(|t| serde_json::to_value(wire::convert::task_to_wire(&t)).map(Json))
                .transpose()
                .map_err(internal)
        })
    }

    /// The folder of a Task's own Pi session, `<root>/sessions/<taskId>/`, created durably
    /// (mode 0700, each new folder's parent fsynced) if needed.
    #[napi(ts_return_type = "Promise<string>")]
    pub fn session_dir(&self, task_id: String) -> AsyncTask<PlaneCall<String>> {
        let plane = self.plane.clone();
        PlaneCall::new(move || {
            plane
                .session_dir(&task_id)
                .map(|p| p.display().to_string())
                .map_err(plane_error)
        })
    }

    /// The Task whose id starts or ends with `typed` (6+ characters, as a person types
    /// it), or `null`; rejects when several match. Works on every store backend (the
    /// offline `StoreInspector` reads only SQLite).
    #[napi(ts_return_type = "Promise<string | null>")]
    pub fn resolve_task_id(&self, typed: String) -> AsyncTask<PlaneCall<Option<String>>> {
        let plane = self.plane.clone();
        PlaneCall::new(move || plane.resolve_task_id(&typed).map_err(plane_error))
    }

    /// The Task's Pi session file (the newest `.jsonl` in `sessions/<taskId>/`), if it has
    /// one.
    #[napi(catch_unwind)]
    pub fn session_file(&self, task_id: String) -> Option<String> {
        plane::session_file(self.plane.root(), &task_id).map(|p| p.display().to_string())
    }

    /// The operator's view: the newest-status Tasks of every principal (at most `limit`,
    /// default 20), optionally only those in `state` (`TASK_STATE_WORKING`; the short
    /// `working` is taken too). Never expose this to callers: it crosses principals.
    #[napi(ts_return_type = "Promise<TaskSummary[]>")]
    pub fn recent_tasks(
        &self,
        state: Option<TaskState>,
        limit: Option<u32>,
    ) -> Result<AsyncTask<PlaneCall<Vec<TaskSummary>>>> {
        let plane = self.plane.clone();
        Ok(PlaneCall::new(move || {
            let filter = plane::defaults::recent_tasks(state.map(record::TaskState::from), limit);
            Ok(plane
                .recent_tasks(&filter)
                .map_err(plane_error)?
                .into_iter()
                .map(TaskSummary::from)
                .collect())
        }))
    }

    /// The operator's view of one Task, whoever owns it, or `null`. Never expose this to
    /// callers: it crosses principals.
    #[napi(ts_return_type = "Promise<InspectedTask | null>")]
    pub fn inspect_task(&self, task_id: String) -> AsyncTask<PlaneCall<Option<InspectedTask>>> {
        let plane = self.plane.clone();
        PlaneCall::new(move || {
            plane
                .task(&task_id, None, true)
                .map_err(plane_error)?
                .map(InspectedTask::try_from)
                .transpose()
        })
    }

    /// Records that `providerResponseId` was sent on `source` for the Task's open input
    /// request, so a direct reply to it can continue the Task.
    #[napi(ts_return_type = "Promise<void>")]
    pub fn record_reply_anchor(
        &self,
        principal: String,
        source: String,
        provider_response_id: String,
        task_id: String,
    ) -> AsyncTask<PlaneCall<()>> {
        let plane = self.plane.clone();
        PlaneCall::new(move || {
            plane
                .record_reply_anchor(&principal, &source, &provider_response_id, &task_id)
                .map_err(plane_error)
        })
    }

    /// Records content-addressed evidence; resolves to its id (`sha256:<hex>`).
    #[napi(ts_return_type = "Promise<string>")]
    pub fn record_evidence(
        &self,
        kind: String,
        healthy: bool,
        task_id: Option<String>,
        locator: Option<HashMap<String, String>>,
        content: Value,
    ) -> AsyncTask<PlaneCall<String>> {
        let plane = self.plane.clone();
        PlaneCall::new(move || {
            let locator = locator.unwrap_or_default().into_iter().collect();
            plane
                .record_evidence(&kind, healthy, task_id.as_deref(), &locator, content)
                .map_err(plane_error)
        })
    }

    /// A source's durable cursor for this principal (`null` before the first advance).
    #[napi(ts_return_type = "Promise<string | null>")]
    pub fn checkpoint(
        &self,
        principal: String,
        source: String,
    ) -> AsyncTask<PlaneCall<Option<String>>> {
        let plane = self.plane.clone();
        PlaneCall::new(move || plane.checkpoint(&principal, &source).map_err(plane_error))
    }

    /// Runs retention now (the resident does on SIGHUP): what it removed.
    #[napi(ts_return_type = "Promise<CompactionReport>")]
    pub fn compact(&self) -> AsyncTask<PlaneCall<CompactionReport>> {
        let plane = self.plane.clone();
        PlaneCall::new(move || plane.compact().map(Into::into).map_err(plane_error))
    }

    /// Runs retention when an hour has passed since it last ran (the resident asks every
    /// minute); `null` when it is not due.
    #[napi(ts_return_type = "Promise<CompactionReport | null>")]
    pub fn compact_if_due(&self) -> AsyncTask<PlaneCall<Option<CompactionReport>>> {
        let plane = self.plane.clone();
        PlaneCall::new(move || {
            plane
                .compact_if_due()
                .map(|r| r.map(Into::into))
                .map_err(plane_error)
        })
    }

    /// The operator cancels any Task (whoever its caller is): CANCELED, with a status
    /// message naming the operator and `reason`. Rejects with `TASK_NOT_FOUND`, or
    /// `TASK_NOT_CANCELABLE` when it is terminal already. Resolves to the A2A `Task`.
    #[napi(ts_return_type = "Promise<Record<string, unknown>>")]
    pub fn operator_cancel(
        &self,
        task_id: String,
        reason: Option<String>,
    ) -> AsyncTask<PlaneCall<Json>> {
        let plane = self.plane.clone();
        PlaneCall::new(move || {
            let task = plane
                .operator_cancel(&task_id, reason.as_deref())
                .map_err(plane_error)?;
            serde_json::to_value(wire::convert::task_to_wire(&task))
                .map(Json)
                .map_err(internal)
        })
    }

    /// Records (`problem` given) or clears (`null`) a start-up problem named `name` (e.g.
    /// `workflow_manifest`): `GET /healthz` says `degraded` and names it while recorded.
    #[napi(catch_unwind)]
    pub fn report_problem(&self, name: String, problem: Option<String>) {
        self.plane.metrics().set_problem(&name, problem);
    }

    /// Advances a source's cursor once every event it selected has been accepted.
    #[napi(ts_return_type = "Promise<void>")]
    pub fn advance_checkpoint(
        &self,
        principal: String,
        source: String,
        cursor: String,
        event_ids: Vec<String>,
    ) -> AsyncTask<PlaneCall<()>> {
        let plane = self.plane.clone();
        PlaneCall::new(move || {
            plane
                .advance_checkpoint(&principal, &source, &cursor, event_ids)
                .map_err(plane_error)
        })
    }
}

/// What one run of retention removed or quarantined.
#[napi(object, object_from_js = false)]
pub struct CompactionReport {
    pub quarantined_claims: u32,
    pub tasks: u32,
    pub claims: u32,
    pub evidence: u32,
    pub reply_anchors: u32,
    pub deliveries: u32,
    pub contexts: u32,
    /// Task session folders removed.
    pub sessions: u32,
}

impl From<plane::CompactionReport> for CompactionReport {
    fn from(r: plane::CompactionReport) -> Self {
        let n = |v: usize| u32::try_from(v).unwrap_or(u32::MAX);
        CompactionReport {
            quarantined_claims: n(r.quarantined_claims),
            tasks: n(r.tasks),
            claims: n(r.claims),
            evidence: n(r.evidence),
            reply_anchors: n(r.reply_anchors),
            deliveries: n(r.deliveries),
            contexts: n(r.contexts),
            sessions: n(r.sessions),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_continuation_method_is_named_as_the_plane_parses_it() {
        for name in Continuation::ALL {
            assert_eq!(
                record::Continuation::parse(name.as_str()),
                Some(record::Continuation::from(*name))
            );
        }
    }
}
