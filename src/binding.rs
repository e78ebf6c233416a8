//! The Node addon surface. Conversions only: every rule lives in the plain Rust modules.
//! Nothing here is a static: whatever the addon opens is owned by a handle JS holds and
//! closed by its `close()`.
//!
//! Calls that write return Promises computed on the libuv thread pool, so an fsync never
//! blocks the JS thread; a panic there becomes a rejected Promise, never an abort.

use std::collections::{BTreeMap, HashMap};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::PathBuf;

use napi::bindgen_prelude::{AsyncTask, PromiseRaw, ToNapiValue, TypeName, ValueType};
use napi::sys;
use napi::threadsafe_function::{ThreadsafeFunction, ThreadsafeFunctionCallMode};
use napi::{Env, Error, Result, Status, Task};
use napi_derive::napi;
use serde_json::Value;

use std::sync::Mutex;

use crate::config::{self, ListenerConfig};
use crate::events::Accepted;
use crate::http;
use crate::plane::{self, InterruptKind, PlaneError, PlaneOptions};
use crate::record::{ArtifactRecord, Continuation, MessageRecord, Role, TaskState};
use crate::wire;

fn invalid_arg(err: impl std::fmt::Display) -> Error {
    Error::new(Status::InvalidArg, err.to_string())
}

fn plane_error(err: PlaneError) -> Error {
    let status = match err {
        PlaneError::Store(_) => Status::GenericFailure,
        _ => Status::InvalidArg,
    };
    Error::new(status, err.to_string())
}

/// A state named as on the wire (`TASK_STATE_WORKING`) or as stored (`working`).
fn parse_state_name(name: &str) -> Result<TaskState> {
    let wire_name = name.trim();
    if let Some(state) =
        wire::TaskState::from_str_name(wire_name).and_then(wire::convert::state_from_wire)
    {
        return Ok(state);
    }
    TaskState::parse(&wire_name.to_ascii_lowercase()).ok_or_else(|| {
        let names: Vec<&str> = TaskState::ALL.iter().map(|s| s.as_str()).collect();
        invalid_arg(format!(
            "invalid `state`: `{name}`; use one of {}",
            names.join(", ")
        ))
    })
}

/// The A2A protocol version the task plane serves (`"1.0"`).
#[napi(catch_unwind)]
pub fn protocol_version() -> String {
    wire::PROTOCOL_VERSION.to_string()
}

/// Parses an A2A `Message` in ProtoJSON, checks its REQUIRED members, and returns it
/// re-encoded in canonical ProtoJSON (camelCase, defaults omitted). Throws an error that
/// names the offending field when the text is not a valid Message.
#[napi(catch_unwind)]
pub fn normalize_message(json: String) -> Result<String> {
    let message: wire::Message =
        wire::json::decode("Message", json.as_bytes()).map_err(invalid_arg)?;
    Ok(wire::json::encode(&message))
}

/// Same as `normalizeMessage` for a `SendMessageRequest` (the body of `message:send`).
#[napi(catch_unwind)]
pub fn normalize_send_message_request(json: String) -> Result<String> {
    let request: wire::SendMessageRequest =
        wire::json::decode("SendMessageRequest", json.as_bytes()).map_err(invalid_arg)?;
    Ok(wire::json::encode(&request))
}

/// The store root the task plane uses when none is given: `CHANNELS_TASK_STORE_PATH`, else
/// `${XDG_DATA_HOME:-$HOME/.local/share}/outfitter/channels/task-plane`.
#[napi(catch_unwind)]
pub fn default_store_root() -> Result<String> {
    let root = config::store_root(&config::process_env).map_err(invalid_arg)?;
    Ok(root.display().to_string())
}

/// The durable outcome of an intake, returned only after it is committed.
#[napi(object)]
pub struct Acceptance {
    pub activation_id: String,
    /// Absent for a direct Message outcome.
    pub task_id: Option<String>,
    pub context_id: String,
    /// `created`, `continued` or `duplicate`.
    pub disposition: String,
    /// The Task's current state as an A2A name (`TASK_STATE_SUBMITTED`, ...).
    pub state: Option<String>,
    /// The direct Message outcome (an A2A Message), verbatim.
    pub direct_reply: Option<Value>,
}

impl From<plane::Acceptance> for Acceptance {
    fn from(a: plane::Acceptance) -> Self {
        let direct_reply = a.direct_reply.as_ref().map(|m| {
            serde_json::to_value(wire::convert::message_to_wire(m, &a.context_id, None))
                .unwrap_or(Value::Null)
        });
        Acceptance {
            activation_id: a.activation_id,
            task_id: a.task_id,
            context_id: a.context_id,
            disposition: a.disposition.as_str().to_string(),
            state: a
                .state
                .map(|s| wire::convert::state_to_wire(s).as_str_name().to_string()),
            direct_reply,
        }
    }
}

/// A native provider event for `accept` / `continue`.
#[napi(object)]
pub struct ActivationInput {
    /// The authenticated intake principal.
    pub principal: String,
    /// The registered source.
    pub source: String,
    /// The source's event identity (the idempotency key, scoped to the principal).
    pub event_id: String,
    /// The source's Conversation fields as one identifier; absent gives a fresh context.
    pub conversation_key: Option<String>,
    /// The provider id of the message this event directly replies to.
    pub reply_to: Option<String>,
    /// The exact provider object: identifier keys, opaque values of 1..4096 characters.
    pub locator: Option<HashMap<String, String>>,
    /// The content, as an A2A `Message` object (role `ROLE_USER`).
    pub message: Value,
}

/// A JSON value handed to JS as a plain object (an A2A document).
pub struct Json(pub Value);

impl TypeName for Json {
    fn type_name() -> &'static str {
        "Record<string, unknown>"
    }

    fn value_type() -> ValueType {
        ValueType::Object
    }
}

impl ToNapiValue for Json {
    unsafe fn to_napi_value(env: sys::napi_env, val: Self) -> Result<sys::napi_value> {
        // SAFETY: forwarded unchanged to serde_json::Value's conversion, with the env napi
        // gave us.
        unsafe { Value::to_napi_value(env, val.0) }
    }
}

/// Runs `work`, turning a panic into an error (no Rust panic may cross into Node).
fn guarded<T>(work: impl FnOnce() -> Result<T>) -> Result<T> {
    catch_unwind(AssertUnwindSafe(work)).unwrap_or_else(|panic| {
        let what = panic
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_else(|| "unknown panic".into());
        Err(Error::new(
            Status::GenericFailure,
            format!("task-plane internal error: {what}"),
        ))
    })
}

/// Runs blocking `work` that may wait long (a lease) on the addon's runtime's blocking
/// pool, so none of libuv's four pool threads (shared with Node's fs, dns and crypto) waits.
fn off_libuv_pool<'env, T: ToNapiValue + Send + 'static>(
    env: &'env Env,
    work: impl FnOnce() -> Result<T> + Send + 'static,
) -> Result<PromiseRaw<'env, T>> {
    env.spawn_future(async move {
        napi::bindgen_prelude::spawn_blocking(move || guarded(work))
            .await
            .unwrap_or_else(|e| {
                Err(Error::new(
                    Status::GenericFailure,
                    format!("task-plane internal error: {e}"),
                ))
            })
    })
}

/// Runs one plane call on the libuv thread pool.
pub struct PlaneCall<T> {
    work: Option<Box<dyn FnOnce() -> Result<T> + Send>>,
}

impl<T: ToNapiValue + TypeName + Send + 'static> PlaneCall<T> {
    fn new(work: impl FnOnce() -> Result<T> + Send + 'static) -> AsyncTask<Self> {
        AsyncTask::new(PlaneCall {
            work: Some(Box::new(work)),
        })
    }
}

impl<T: ToNapiValue + TypeName + Send + 'static> Task for PlaneCall<T> {
    type Output = T;
    type JsValue = T;

    fn compute(&mut self) -> Result<T> {
        let work = self
            .work
            .take()
            .ok_or_else(|| Error::new(Status::GenericFailure, "task-plane call ran twice"))?;
        guarded(work)
    }

    fn resolve(&mut self, _env: Env, output: T) -> Result<T> {
        Ok(output)
    }
}

fn inbound_message(value: Value) -> Result<(MessageRecord, Option<String>, Option<String>)> {
    let message: wire::Message = wire::json::decode_value("Message", value).map_err(invalid_arg)?;
    let (record, context_id, task_id) = wire::convert::message_from_wire(message).map_err(|e| {
        invalid_arg(format!(
            "invalid Message: field `{}`: {}",
            e.field, e.message
        ))
    })?;
    if record.role != Role::User {
        return Err(invalid_arg(
            "invalid Message: field `role`: an inbound message is ROLE_USER",
        ));
    }
    Ok((record, context_id, task_id))
}

fn activation(input: ActivationInput) -> Result<plane::Activation> {
    let (message, _, _) = inbound_message(input.message)?;
    Ok(plane::Activation {
        principal: input.principal,
        source: input.source,
        event_id: input.event_id,
        conversation_key: input.conversation_key,
        reply_to: input.reply_to,
        locator: input
            .locator
            .unwrap_or_default()
            .into_iter()
            .collect::<BTreeMap<_, _>>(),
        message,
    })
}

/// An agent-side message (`ROLE_AGENT`); a missing `messageId` is minted.
fn agent_message(mut value: Value) -> Result<MessageRecord> {
    if let Value::Object(map) = &mut value {
        map.entry("messageId")
            .or_insert_with(|| Value::String(crate::ids::mint()));
        map.entry("role")
            .or_insert_with(|| Value::String("ROLE_AGENT".into()));
    }
    let message: wire::Message = wire::json::decode_value("Message", value).map_err(invalid_arg)?;
    let (record, _, _) = wire::convert::message_from_wire(message).map_err(|e| {
        invalid_arg(format!(
            "invalid Message: field `{}`: {}",
            e.field, e.message
        ))
    })?;
    if record.role != Role::Agent {
        return Err(invalid_arg(
            "invalid Message: field `role`: the agent's messages are ROLE_AGENT",
        ));
    }
    Ok(record)
}

/// An agent-side artifact; a missing `artifactId` is minted.
fn agent_artifact(mut value: Value) -> Result<ArtifactRecord> {
    if let Value::Object(map) = &mut value {
        map.entry("artifactId")
            .or_insert_with(|| Value::String(crate::ids::mint()));
    }
    let artifact: wire::Artifact =
        wire::json::decode_value("Artifact", value).map_err(invalid_arg)?;
    wire::convert::artifact_from_wire(artifact).map_err(|e| {
        invalid_arg(format!(
            "invalid Artifact: field `{}`: {}",
            e.field, e.message
        ))
    })
}

/// A Task that was accepted and waits for the agent.
#[napi(object)]
pub struct AcceptedTask {
    pub activation_id: String,
    pub task_id: String,
    pub context_id: String,
}

/// An open task plane: the durable store of one root. Open it in Pi's `session_start`
/// and close it in `session_shutdown`; a second open of the same root fails until then.
#[napi]
pub struct TaskPlane {
    plane: plane::TaskPlane,
    accepted:
        std::sync::Arc<tokio::sync::Mutex<Option<tokio::sync::broadcast::Receiver<Accepted>>>>,
    /// Wakes `nextAccepted` waiters on `close()`.
    closing: std::sync::Arc<tokio::sync::Notify>,
}

#[napi]
impl TaskPlane {
    /// Opens the store at `root` (default: `defaultStoreRoot()`), takes its lock, and runs
    /// startup recovery and compaction.
    #[napi(factory, catch_unwind)]
    pub fn open(root: Option<String>) -> Result<TaskPlane> {
        let root = match root {
            Some(root) => PathBuf::from(root),
            None => config::store_root(&config::process_env).map_err(invalid_arg)?,
        };
        let plane = plane::TaskPlane::open(&root, PlaneOptions::default()).map_err(plane_error)?;
        let accepted = std::sync::Arc::new(tokio::sync::Mutex::new(Some(
            plane.events().subscribe_accepted(),
        )));
        Ok(TaskPlane {
            plane,
            accepted,
            closing: std::sync::Arc::default(),
        })
    }

    /// The store root.
    #[napi(getter)]
    pub fn root(&self) -> String {
        self.plane.root().display().to_string()
    }

    /// Closes the store and releases the root's lock. Idempotent.
    #[napi(catch_unwind)]
    pub fn close(&self) {
        if let Ok(mut receiver) = self.accepted.try_lock() {
            receiver.take();
        }
        self.plane.close();
        // After the plane reads as closed: a waiter that missed this sees it.
        self.closing.notify_waiters();
    }

    #[napi(getter)]
    pub fn closed(&self) -> bool {
        self.plane.is_closed()
    }

    /// Registers a source and its continuation method: `none`, `reply_anchors` or
    /// `explicit_task_id`.
    #[napi(catch_unwind)]
    pub fn register_source(&self, source: String, continuation: String) -> Result<()> {
        let continuation = Continuation::parse(&continuation).ok_or_else(|| {
            invalid_arg(format!(
                "invalid `continuation`: `{continuation}`; use none, reply_anchors or explicit_task_id"
            ))
        })?;
        self.plane
            .register_source(&source, continuation)
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
                .map(Acceptance::from)
                .map_err(plane_error)
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
                .map(Acceptance::from)
                .map_err(plane_error)
        }))
    }

    /// An authorized explicit continuation of `taskId` (an A2A `Message` object; its
    /// `contextId`, if any, must be the Task's).
    #[napi(ts_return_type = "Promise<Acceptance>")]
    pub fn continue_task(
        &self,
        principal: String,
        task_id: String,
        message: Value,
    ) -> Result<AsyncTask<PlaneCall<Acceptance>>> {
        let (record, context_id, _) = inbound_message(message)?;
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
                .map(Acceptance::from)
                .map_err(plane_error)
        }))
    }

    /// A2A intake of new work: the message's `contextId` is used only when the principal
    /// owns it; otherwise the Task gets a fresh context.
    #[napi(ts_return_type = "Promise<Acceptance>")]
    pub fn accept_in_context(
        &self,
        principal: String,
        message: Value,
    ) -> Result<AsyncTask<PlaneCall<Acceptance>>> {
        let (record, context_id, task_id) = inbound_message(message)?;
        if task_id.is_some() {
            return Err(invalid_arg(
                "invalid Message: field `taskId`: a message naming a Task is a continuation; use continueTask",
            ));
        }
        let plane = self.plane.clone();
        Ok(PlaneCall::new(move || {
            plane
                .accept_in_context(&principal, context_id.as_deref(), record, Vec::new())
                .map(Acceptance::from)
                .map_err(plane_error)
        }))
    }

    /// Trusted creation of a new Task in an existing context the principal owns.
    #[napi(ts_return_type = "Promise<Acceptance>")]
    pub fn create_task(
        &self,
        principal: String,
        context_id: String,
        message: Value,
    ) -> Result<AsyncTask<PlaneCall<Acceptance>>> {
        let (record, _, _) = inbound_message(message)?;
        let plane = self.plane.clone();
        Ok(PlaneCall::new(move || {
            plane
                .create_task(&principal, &context_id, record)
                .map(Acceptance::from)
                .map_err(plane_error)
        }))
    }

    /// Records a direct Message outcome (no Task). `reply` is an A2A `Message` with role
    /// `ROLE_AGENT`; a duplicate returns the first reply verbatim.
    #[napi(ts_return_type = "Promise<Acceptance>")]
    pub fn respond_directly(
        &self,
        principal: String,
        message: Value,
        reply: Value,
    ) -> Result<AsyncTask<PlaneCall<Acceptance>>> {
        let (record, context_id, _) = inbound_message(message)?;
        let reply: wire::Message =
            wire::json::decode_value("Message", reply).map_err(invalid_arg)?;
        let (reply, _, _) = wire::convert::message_from_wire(reply).map_err(|e| {
            invalid_arg(format!("invalid reply: field `{}`: {}", e.field, e.message))
        })?;
        let plane = self.plane.clone();
        Ok(PlaneCall::new(move || {
            plane
                .respond_directly(&principal, context_id.as_deref(), record, reply)
                .map(Acceptance::from)
                .map_err(plane_error)
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
                .map_err(|e| Error::new(Status::GenericFailure, e.to_string()))
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

    /// The Task's Pi session file (the newest `.jsonl` in `sessions/<taskId>/`), if it has
    /// one.
    #[napi(catch_unwind)]
    pub fn session_file(&self, task_id: String) -> Option<String> {
        plane::session_file(self.plane.root(), &task_id).map(|p| p.display().to_string())
    }

    /// The operator's view: the newest-status Tasks of every principal (at most `limit`,
    /// default 20), optionally only those in `state` (`TASK_STATE_WORKING` or `working`).
    /// Never expose this to callers: it crosses principals.
    #[napi(ts_return_type = "Promise<TaskSummary[]>")]
    pub fn recent_tasks(
        &self,
        state: Option<String>,
        limit: Option<u32>,
    ) -> Result<AsyncTask<PlaneCall<Vec<TaskSummary>>>> {
        let state = state.map(|s| parse_state_name(&s)).transpose()?;
        let plane = self.plane.clone();
        Ok(PlaneCall::new(move || {
            let filter = plane::SummaryFilter {
                state,
                limit: limit.unwrap_or(20),
                ..Default::default()
            };
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

    // ---- Outbound delivery (one provider mutation per delivery id) ----------------------

    /// Starts a delivery. Concurrent calls for the same delivery id wait for each other and
    /// share one outcome. `canLookUp`: you have the source's reconciler for `lookup`.
    #[napi(ts_return_type = "Promise<DeliveryStep>")]
    pub fn begin_delivery<'env>(
        &self,
        env: &'env Env,
        request: DeliveryInput,
        can_look_up: Option<bool>,
    ) -> Result<PromiseRaw<'env, DeliveryStep>> {
        let request = delivery_request(request)?;
        let plane = self.plane.clone();
        // It may wait up to the lease timeout for a concurrent identical delivery: on the
        // addon's runtime's blocking pool, never on libuv's.
        off_libuv_pool(env, move || {
            plane
                .begin_delivery(&request, can_look_up.unwrap_or(false))
                .map(delivery_step)
                .map_err(plane_error)
        })
    }

    /// The reconciler's answer after `lookup`: `{providerResponseId}` found, `{}` not
    /// found (send now), `{error}` the lookup failed (ambiguous).
    #[napi(ts_return_type = "Promise<DeliveryStep>")]
    pub fn resolve_lookup(
        &self,
        request: DeliveryInput,
        provider_response_id: Option<String>,
        error: Option<String>,
    ) -> Result<AsyncTask<PlaneCall<DeliveryStep>>> {
        let request = delivery_request(request)?;
        let found = match error {
            Some(err) => Err(err),
            None => Ok(provider_response_id),
        };
        let plane = self.plane.clone();
        Ok(PlaneCall::new(move || {
            plane
                .resolve_lookup(&request, found)
                .map(delivery_step)
                .map_err(plane_error)
        }))
    }

    /// Records how the mutation went (after `send`) and releases the delivery id.
    #[napi(ts_return_type = "Promise<DeliveryResult>")]
    pub fn finish_delivery(
        &self,
        request: DeliveryInput,
        result: SendResult,
    ) -> Result<AsyncTask<PlaneCall<DeliveryResult>>> {
        let request = delivery_request(request)?;
        let result =
            match (result.provider_response_id, result.not_sent, result.unknown) {
                (Some(id), None, None) => Ok(id),
                (None, Some(detail), None) => Err(plane::SendFailure::NotSent(detail)),
                (None, None, Some(detail)) => Err(plane::SendFailure::Unknown(detail)),
                _ => return Err(invalid_arg(
                    "invalid `result`: give exactly one of providerResponseId, notSent or unknown",
                )),
            };
        let plane = self.plane.clone();
        Ok(PlaneCall::new(move || {
            plane
                .finish_delivery(&request, result)
                .map(delivery_result)
                .map_err(plane_error)
        }))
    }

    // ---- The trusted agent API (drivers of the agent; the Pi bridge adds turn authority) --

    /// The next Task accepted since the plane opened (created or continued), or `null` when
    /// none arrives within `timeoutMs` (default 1000) or the plane is closed.
    #[napi(ts_return_type = "Promise<AcceptedTask | null>")]
    pub fn next_accepted<'env>(
        &self,
        env: &'env Env,
        timeout_ms: Option<u32>,
    ) -> Result<PromiseRaw<'env, Option<AcceptedTask>>> {
        let (accepted, closing, plane) = (
            self.accepted.clone(),
            self.closing.clone(),
            self.plane.clone(),
        );
        let deadline = tokio::time::Instant::now()
            + std::time::Duration::from_millis(u64::from(timeout_ms.unwrap_or(1000)));
        // Awaited on the addon's runtime: no thread waits, nothing polls.
        env.spawn_future(async move {
            let closed = closing.notified();
            tokio::pin!(closed);
            closed.as_mut().enable();
            if plane.is_closed() {
                return Ok(None);
            }
            let mut guard = tokio::select! {
                guard = accepted.lock() => guard,
                _ = &mut closed => return Ok(None),
                _ = tokio::time::sleep_until(deadline) => return Ok(None),
            };
            let Some(receiver) = guard.as_mut() else {
                return Ok(None);
            };
            loop {
                tokio::select! {
                    next = receiver.recv() => match next {
                        Ok(a) => return Ok(Some(AcceptedTask {
                            activation_id: a.activation_id,
                            task_id: a.task_id,
                            context_id: a.context_id,
                        })),
                        Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => continue,
                        Err(tokio::sync::broadcast::error::RecvError::Closed) => return Ok(None),
                    },
                    _ = &mut closed => return Ok(None),
                    _ = tokio::time::sleep_until(deadline) => return Ok(None),
                }
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
                .map_err(|e| Error::new(Status::GenericFailure, e.to_string()))
        })
    }

    /// SUBMITTED → WORKING.
    #[napi(ts_return_type = "Promise<void>")]
    pub fn start_work(&self, task_id: String) -> AsyncTask<PlaneCall<()>> {
        let plane = self.plane.clone();
        PlaneCall::new(move || plane.start_work(&task_id).map(|_| ()).map_err(plane_error))
    }

    /// Records one artifact (an A2A `Artifact`) while the Task is WORKING.
    #[napi(ts_return_type = "Promise<void>")]
    pub fn record_artifact(
        &self,
        task_id: String,
        artifact: Value,
    ) -> Result<AsyncTask<PlaneCall<()>>> {
        let artifact = agent_artifact(artifact)?;
        let plane = self.plane.clone();
        Ok(PlaneCall::new(move || {
            plane
                .record_artifact(&task_id, artifact)
                .map_err(plane_error)
        }))
    }

    /// Records `artifacts` in order, then COMPLETED with `message` (an agent Message).
    #[napi(ts_return_type = "Promise<void>")]
    pub fn complete(
        &self,
        task_id: String,
        artifacts: Vec<Value>,
        message: Option<Value>,
    ) -> Result<AsyncTask<PlaneCall<()>>> {
        let artifacts = artifacts
            .into_iter()
            .map(agent_artifact)
            .collect::<Result<Vec<_>>>()?;
        let message = message.map(agent_message).transpose()?;
        let plane = self.plane.clone();
        Ok(PlaneCall::new(move || {
            plane
                .complete(&task_id, artifacts, message)
                .map_err(plane_error)
        }))
    }

    /// Settles the Task as `rejected` or `failed` with `message` as the reason.
    #[napi(ts_return_type = "Promise<void>")]
    pub fn finish(
        &self,
        task_id: String,
        outcome: String,
        message: Value,
    ) -> Result<AsyncTask<PlaneCall<()>>> {
        let state = match outcome.as_str() {
            "rejected" => TaskState::Rejected,
            "failed" => TaskState::Failed,
            other => {
                return Err(invalid_arg(format!(
                    "invalid `outcome`: `{other}`; use rejected or failed"
                )))
            }
        };
        let message = agent_message(message)?;
        let plane = self.plane.clone();
        Ok(PlaneCall::new(move || {
            plane
                .finish_unsuccessfully(&task_id, state, message)
                .map_err(plane_error)
        }))
    }

    /// Pauses the Task on its caller (`input_required` or `auth_required`) with `message`.
    #[napi(ts_return_type = "Promise<void>")]
    pub fn require_input(
        &self,
        task_id: String,
        kind: String,
        message: Value,
    ) -> Result<AsyncTask<PlaneCall<()>>> {
        let kind = match kind.as_str() {
            "input_required" => InterruptKind::InputRequired,
            "auth_required" => InterruptKind::AuthRequired,
            other => {
                return Err(invalid_arg(format!(
                    "invalid `kind`: `{other}`; use input_required or auth_required"
                )))
            }
        };
        let message = agent_message(message)?;
        let plane = self.plane.clone();
        Ok(PlaneCall::new(move || {
            plane
                .require_input(&task_id, kind, message, None)
                .map_err(plane_error)
        }))
    }
}

/// One Task in the operator's view (`recentTasks`).
#[napi(object)]
pub struct TaskSummary {
    pub task_id: String,
    pub principal: String,
    pub context_id: String,
    pub source: String,
    /// `TASK_STATE_WORKING`, ...
    pub state: String,
    /// When the status last changed (Unix ms).
    pub status_ms: f64,
    pub created_ms: f64,
}

impl From<plane::TaskSummary> for TaskSummary {
    fn from(t: plane::TaskSummary) -> Self {
        TaskSummary {
            task_id: t.task_id,
            principal: t.principal,
            context_id: t.context_id,
            source: t.source,
            state: wire::convert::state_to_wire(t.state)
                .as_str_name()
                .to_string(),
            status_ms: t.status_ms as f64,
            created_ms: t.created_ms as f64,
        }
    }
}

/// One Task with its owner, for the operator (`inspectTask`).
#[napi(object)]
pub struct InspectedTask {
    pub principal: String,
    pub source: String,
    /// The A2A Task (all history and artifacts).
    pub task: Value,
}

impl TryFrom<crate::record::TaskRecord> for InspectedTask {
    type Error = Error;

    fn try_from(task: crate::record::TaskRecord) -> Result<Self> {
        let wire_task = serde_json::to_value(wire::convert::task_to_wire(&task))
            .map_err(|e| Error::new(Status::GenericFailure, e.to_string()))?;
        Ok(InspectedTask {
            principal: task.principal,
            source: task.source,
            task: wire_task,
        })
    }
}

/// What `StoreInspector.tasks` lists.
#[napi(object)]
pub struct InspectFilter {
    /// `working` or `TASK_STATE_WORKING`, ...
    pub state: Option<String>,
    pub principal: Option<String>,
    pub context_id: Option<String>,
    /// At most this many (default 50, at most 1000).
    pub limit: Option<u32>,
}

/// Counts and sizes of a store (`StoreInspector.stats`).
#[napi(object)]
pub struct StoreStats {
    /// Tasks by state (`TASK_STATE_WORKING`: n), every state listed.
    pub by_state: HashMap<String, u32>,
    pub tasks: u32,
    pub claims: u32,
    pub contexts: u32,
    /// The database with its WAL and shared-memory files, in bytes.
    pub store_bytes: f64,
    /// The oldest Task that is not terminal.
    pub oldest_live_task_id: Option<String>,
    pub oldest_live_created_ms: Option<f64>,
    /// Folders under `sessions/`.
    pub session_folders: u32,
}

type SharedInspector = std::sync::Arc<Mutex<plane::Inspector>>;

/// A read-only view of a store root for the person operating it (the inspection CLI): no
/// root lock, never a write, so it works while the resident runs. It crosses principals:
/// never expose it to callers.
#[napi]
pub struct StoreInspector {
    inner: Mutex<Option<SharedInspector>>,
    root: String,
}

impl StoreInspector {
    fn inspector(&self) -> Result<SharedInspector> {
        self.inner
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
            .ok_or_else(|| Error::new(Status::GenericFailure, "the store inspector is closed"))
    }

    fn call<T: ToNapiValue + TypeName + Send + 'static>(
        &self,
        work: impl FnOnce(&plane::Inspector) -> Result<T> + Send + 'static,
    ) -> Result<AsyncTask<PlaneCall<T>>> {
        let inspector = self.inspector()?;
        Ok(PlaneCall::new(move || {
            work(&inspector.lock().unwrap_or_else(|p| p.into_inner()))
        }))
    }
}

#[napi]
impl StoreInspector {
    /// Opens the store at `root` (default: the configured root) read-only; throws when
    /// there is no store there or a newer build wrote it.
    #[napi(factory, catch_unwind)]
    pub fn open(root: Option<String>) -> Result<StoreInspector> {
        let root = match root {
            Some(root) => PathBuf::from(root),
            None => {
                config::store_root(&config::process_env).map_err(|e| invalid_arg(e.to_string()))?
            }
        };
        let inspector = plane::Inspector::open(&root).map_err(plane_error)?;
        Ok(StoreInspector {
            inner: Mutex::new(Some(std::sync::Arc::new(Mutex::new(inspector)))),
            root: root.display().to_string(),
        })
    }

    #[napi(getter)]
    pub fn root(&self) -> String {
        self.root.clone()
    }

    /// The newest-status Tasks of every principal that match `filter`.
    #[napi(ts_return_type = "Promise<TaskSummary[]>")]
    pub fn tasks(
        &self,
        filter: Option<InspectFilter>,
    ) -> Result<AsyncTask<PlaneCall<Vec<TaskSummary>>>> {
        let filter = filter.unwrap_or(InspectFilter {
            state: None,
            principal: None,
            context_id: None,
            limit: None,
        });
        let filter = plane::SummaryFilter {
            state: filter.state.map(|s| parse_state_name(&s)).transpose()?,
            principal: filter.principal,
            context_id: filter.context_id,
            limit: filter.limit.unwrap_or(50),
        };
        self.call(move |i| {
            Ok(i.tasks(&filter)
                .map_err(plane_error)?
                .into_iter()
                .map(TaskSummary::from)
                .collect())
        })
    }

    /// One Task (all history and artifacts) with its owner, or `null`.
    #[napi(ts_return_type = "Promise<InspectedTask | null>")]
    pub fn task(&self, task_id: String) -> Result<AsyncTask<PlaneCall<Option<InspectedTask>>>> {
        self.call(move |i| {
            i.task(&task_id)
                .map_err(plane_error)?
                .map(InspectedTask::try_from)
                .transpose()
        })
    }

    /// The Task's Pi session file, if it has one.
    #[napi(catch_unwind)]
    pub fn session_file(&self, task_id: String) -> Result<Option<String>> {
        let inspector = self.inspector()?;
        let file = inspector
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .session_file(&task_id);
        Ok(file.map(|p| p.display().to_string()))
    }

    /// Counts by state, sizes, the oldest live Task.
    #[napi(ts_return_type = "Promise<StoreStats>")]
    pub fn stats(&self) -> Result<AsyncTask<PlaneCall<StoreStats>>> {
        self.call(|i| {
            let s = i.stats().map_err(plane_error)?;
            Ok(StoreStats {
                by_state: s
                    .by_state
                    .into_iter()
                    .map(|(state, n)| {
                        let name = TaskState::parse(state).map_or(state.to_string(), |s| {
                            wire::convert::state_to_wire(s).as_str_name().to_string()
                        });
                        (name, n as u32)
                    })
                    .collect(),
                tasks: s.tasks as u32,
                claims: s.claims as u32,
                contexts: s.contexts as u32,
                store_bytes: s.store_bytes as f64,
                oldest_live_task_id: s.oldest_live.as_ref().map(|(id, _)| id.clone()),
                oldest_live_created_ms: s.oldest_live.map(|(_, ms)| ms as f64),
                session_folders: s.session_folders as u32,
            })
        })
    }

    /// SQLite's integrity check and the store's own invariants: the problems found, one
    /// sentence each (empty: sound).
    #[napi(ts_return_type = "Promise<string[]>")]
    pub fn check(&self) -> Result<AsyncTask<PlaneCall<Vec<String>>>> {
        self.call(|i| i.check().map_err(plane_error))
    }

    /// Closes the read-only connection. Idempotent.
    #[napi(catch_unwind)]
    pub fn close(&self) {
        self.inner.lock().unwrap_or_else(|p| p.into_inner()).take();
    }
}

/// Options of `A2AListener.start`; anything left out comes from the `A2A_*` environment
/// variables (and their defaults).
#[napi(object)]
#[derive(Default)]
pub struct ListenerOptions {
    pub host: Option<String>,
    /// 0 picks a free port.
    pub port: Option<u32>,
    pub public_url: Option<String>,
    pub credentials_path: Option<String>,
    pub agent_name: Option<String>,
    pub agent_description: Option<String>,
    pub agent_version: Option<String>,
    pub blocking_timeout_ms: Option<u32>,
    pub max_body_bytes: Option<u32>,
    pub max_connections: Option<u32>,
    pub idle_timeout_ms: Option<u32>,
    pub write_timeout_ms: Option<u32>,
    pub max_streams: Option<u32>,
    pub max_streams_per_principal: Option<u32>,
}

/// The listener's configuration: each option given overrides its `A2A_*` variable, and the
/// result is validated by the one function that reads the environment
/// ([`ListenerConfig::from_env`]), so an option and its variable accept exactly the same
/// values; an error names the option it came from.
fn listener_config(options: Option<ListenerOptions>) -> Result<ListenerConfig> {
    let o = options.unwrap_or_default();
    let number = |n: Option<u32>| n.map(|n| n.to_string());
    let given: Vec<(&str, &str, Option<String>)> = vec![
        ("host", "A2A_HOST", o.host),
        ("port", "A2A_PORT", number(o.port)),
        ("publicUrl", "A2A_PUBLIC_URL", o.public_url),
        ("agentName", "A2A_AGENT_NAME", o.agent_name),
        (
            "agentDescription",
            "A2A_AGENT_DESCRIPTION",
            o.agent_description,
        ),
        ("agentVersion", "A2A_AGENT_VERSION", o.agent_version),
        (
            "credentialsPath",
            "A2A_CREDENTIALS_PATH",
            o.credentials_path,
        ),
        (
            "blockingTimeoutMs",
            "A2A_BLOCKING_TIMEOUT_MS",
            number(o.blocking_timeout_ms),
        ),
        (
            "maxBodyBytes",
            "A2A_MAX_BODY_BYTES",
            number(o.max_body_bytes),
        ),
        (
            "maxConnections",
            "A2A_MAX_CONNECTIONS",
            number(o.max_connections),
        ),
        (
            "idleTimeoutMs",
            "A2A_IDLE_TIMEOUT_MS",
            number(o.idle_timeout_ms),
        ),
        (
            "writeTimeoutMs",
            "A2A_WRITE_TIMEOUT_MS",
            number(o.write_timeout_ms),
        ),
        ("maxStreams", "A2A_MAX_STREAMS", number(o.max_streams)),
        (
            "maxStreamsPerPrincipal",
            "A2A_MAX_STREAMS_PER_PRINCIPAL",
            number(o.max_streams_per_principal),
        ),
    ];
    let overlay = |name: &str| -> Option<String> {
        match given.iter().find(|(_, variable, _)| *variable == name) {
            Some((_, _, Some(value))) => Some(value.clone()),
            _ => config::process_env(name),
        }
    };
    ListenerConfig::from_env(&overlay).map_err(|err| {
        match given
            .iter()
            .find(|(_, variable, value)| *variable == err.variable && value.is_some())
        {
            Some((option, variable, _)) => invalid_arg(format!(
                "invalid option `{option}` (the same rule as {variable}): {}",
                err.message
            )),
            None => invalid_arg(err.to_string()),
        }
    })
}

/// The A2A HTTP+JSON listener over an open `TaskPlane`. Start it in `session_start` (when
/// `A2A_SERVER=1`) and close it in `session_shutdown`, before the plane.
#[napi(js_name = "A2AListener")]
pub struct A2aListener {
    inner: Mutex<Option<http::Listener>>,
    url: String,
    port: u32,
    warnings: Vec<String>,
}

#[napi]
impl A2aListener {
    /// Binds and starts serving; throws (naming the variable or file) when the
    /// configuration or the credentials file is unusable or the address is taken.
    #[napi(factory, catch_unwind)]
    pub fn start(plane: &TaskPlane, options: Option<ListenerOptions>) -> Result<A2aListener> {
        let config = listener_config(options)?;
        let listener = http::Listener::start(
            plane.plane.clone(),
            config,
            std::sync::Arc::new(http::AlwaysTask),
        )
        .map_err(|e| Error::new(Status::GenericFailure, e))?;
        Ok(A2aListener {
            url: listener.url().to_string(),
            port: u32::from(listener.local_addr().port()),
            warnings: listener.warnings().to_vec(),
            inner: Mutex::new(Some(listener)),
        })
    }

    /// What the operator should fix although the listener started (e.g. a credentials
    /// file readable by others).
    #[napi(getter)]
    pub fn warnings(&self) -> Vec<String> {
        self.warnings.clone()
    }

    /// The interface URL (as in the Agent Card).
    #[napi(getter)]
    pub fn url(&self) -> String {
        self.url.clone()
    }

    /// The bound port.
    #[napi(getter)]
    pub fn port(&self) -> u32 {
        self.port
    }

    /// Stops accepting, ends open streams, lets in-flight sends return their snapshot, and
    /// frees the port (within a few seconds). Idempotent.
    #[napi(catch_unwind)]
    pub fn close(&self) {
        let listener = self.inner.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(mut listener) = listener {
            listener.close();
        }
    }
}

/// Where `configureLogging` sends log lines.
#[napi(object)]
pub struct LoggingOptions {
    /// Also write lines to stderr (for journald, print and RPC modes). Never in Pi's
    /// interactive mode: it would draw over the screen.
    pub stderr: bool,
    /// The directory of the rotating log file; default `A2A_LOG_DIR`, else
    /// `<storeRoot>/logs`.
    pub directory: Option<String>,
    /// The store root whose `logs/` folder to use when no directory is given; default the
    /// configured one (`CHANNELS_TASK_STORE_PATH` or its default).
    pub store_root: Option<String>,
}

/// What `configureLogging` set up.
#[napi(object)]
pub struct LoggingConfigured {
    /// The log file, when one could be opened.
    pub file: Option<String>,
    /// What could not be applied, one sentence each (show them to the person).
    pub problems: Vec<String>,
}

/// Points this process's structured log lines (Rust's and `log()`'s) at a size-bounded,
/// rotating file and, optionally, stderr; filtered by `A2A_LOG` (EnvFilter syntax, default
/// `info`). Whether lines go to stderr is always applied, whatever else fails; an unusable
/// filter keeps the default, a directory that cannot hold the file leaves none, and each
/// problem is returned. Before the first call lines go to stderr only.
#[napi(catch_unwind)]
pub fn configure_logging(options: LoggingOptions) -> LoggingConfigured {
    let mut problems = Vec::new();
    let directory = match options.directory {
        Some(dir) => Some(PathBuf::from(dir)),
        None => config::log_dir(
            &config::process_env,
            options.store_root.as_deref().map(std::path::Path::new),
        )
        .map_err(|e| problems.push(format!("no log file: {e}")))
        .ok(),
    };
    let configured = crate::log::configure(&crate::log::LogTarget {
        directory,
        stderr: options.stderr,
        filter: config::var(&config::process_env, crate::log::LOG_FILTER_VAR),
    });
    problems.extend(configured.problems);
    LoggingConfigured {
        file: configured.file.map(|p| p.display().to_string()),
        problems,
    }
}

/// Writes one structured log line `{ts, level, event, ...fields}` through the same sink as
/// the Rust core, so an event name means one thing in both. `level`: `debug`, `info`
/// (default), `warn` or `error`. Secret-named fields (`token`, ...) are redacted.
#[napi(
    catch_unwind,
    ts_args_type = "event: string, fields?: Record<string, unknown> | undefined | null, level?: \"debug\" | \"info\" | \"warn\" | \"error\" | undefined | null"
)]
pub fn log(event: String, fields: Option<Value>, level: Option<String>) -> Result<()> {
    let level = crate::log::parse_level(level.as_deref().unwrap_or("info")).map_err(invalid_arg)?;
    crate::log::event_at(level, &event, fields.unwrap_or(Value::Null));
    Ok(())
}

/// Whether `A2A_SERVER` asks for the listener (`1`/`true`; `0`/`false`/unset: no). Throws
/// naming the variable for any other value.
#[napi(catch_unwind)]
pub fn listener_enabled() -> Result<bool> {
    config::listener_enabled(&config::process_env).map_err(invalid_arg)
}

/// Warnings about the environment to show once at startup (e.g. the legacy
/// `A2A_STORE_PATH`, which is not merged into the task-plane store).
#[napi(catch_unwind)]
pub fn startup_warnings() -> Vec<String> {
    config::startup_warnings(&config::process_env)
}

/// One outbound response to deliver to a provider.
#[napi(object)]
pub struct DeliveryInput {
    pub delivery_id: String,
    pub principal: String,
    pub source: String,
    pub task_id: Option<String>,
    /// The provider-side idempotency key of the mutation.
    pub operation_id: String,
    /// `sha256:<hex>` of the payload.
    pub payload_digest: String,
    /// `idempotency_key`, `lookup` or `ambiguous`: how a delivery found mid-send after a
    /// crash is recovered.
    pub recovery: String,
}

/// Where a delivery ended.
#[napi(object)]
pub struct DeliveryResult {
    /// `delivered`, `not_sent` or `ambiguous` (final: never retried automatically).
    pub state: String,
    pub provider_response_id: Option<String>,
    /// Whether this call performed the mutation.
    pub sent_now: Option<bool>,
    pub detail: Option<String>,
}

/// What to do next with a delivery.
#[napi(object)]
pub struct DeliveryStep {
    /// `send` (perform the mutation, then `finishDelivery`), `lookup` (ask the reconciler,
    /// then `resolveLookup`) or `finished` (see `outcome`).
    pub next: String,
    pub outcome: Option<DeliveryResult>,
}

/// How the provider mutation went: exactly one member.
#[napi(object)]
pub struct SendResult {
    /// It happened; the provider's response id.
    pub provider_response_id: Option<String>,
    /// It certainly did not happen (a later call may retry).
    pub not_sent: Option<String>,
    /// It may or may not have happened (the delivery becomes ambiguous).
    pub unknown: Option<String>,
}

fn delivery_request(input: DeliveryInput) -> Result<plane::DeliveryRequest> {
    let recovery = plane::Recovery::parse(&input.recovery).ok_or_else(|| {
        invalid_arg(format!(
            "invalid `recovery`: `{}`; use idempotency_key, lookup or ambiguous",
            input.recovery
        ))
    })?;
    Ok(plane::DeliveryRequest {
        delivery_id: input.delivery_id,
        principal: input.principal,
        source: input.source,
        task_id: input.task_id,
        operation_id: input.operation_id,
        payload_digest: input.payload_digest,
        recovery,
    })
}

fn delivery_result(outcome: plane::DeliveryOutcome) -> DeliveryResult {
    match outcome {
        plane::DeliveryOutcome::Delivered {
            provider_response_id,
            sent_now,
        } => DeliveryResult {
            state: "delivered".into(),
            provider_response_id: Some(provider_response_id),
            sent_now: Some(sent_now),
            detail: None,
        },
        plane::DeliveryOutcome::NotSent { detail } => DeliveryResult {
            state: "not_sent".into(),
            provider_response_id: None,
            sent_now: Some(false),
            detail: Some(detail),
        },
        plane::DeliveryOutcome::Ambiguous { detail } => DeliveryResult {
            state: "ambiguous".into(),
            provider_response_id: None,
            sent_now: Some(false),
            detail: Some(detail),
        },
    }
}

fn delivery_step(start: plane::DeliveryStart) -> DeliveryStep {
    match start {
        plane::DeliveryStart::Send => DeliveryStep {
            next: "send".into(),
            outcome: None,
        },
        plane::DeliveryStart::Lookup => DeliveryStep {
            next: "lookup".into(),
            outcome: None,
        },
        plane::DeliveryStart::Finished(outcome) => DeliveryStep {
            next: "finished".into(),
            outcome: Some(delivery_result(outcome)),
        },
    }
}

/// A wake handed to the driver: prompt this Task's session now.
#[napi(object)]
pub struct WakeInfo {
    pub activation_id: String,
    pub task_id: String,
    pub context_id: String,
    /// Which consecutive delivery of this activation this is (1-based).
    pub delivery: u32,
}

/// Something that happened to a Task: `state` is `null` for an arrival (a new message),
/// else the state (`TASK_STATE_COMPLETED`, ...) its status moved to, with the status
/// message's text.
#[napi(object)]
pub struct TaskActivity {
    pub task_id: String,
    pub state: Option<String>,
    pub message: Option<String>,
}

impl From<crate::events::Activity> for TaskActivity {
    fn from(a: crate::events::Activity) -> Self {
        TaskActivity {
            task_id: a.task_id,
            state: a
                .state
                .map(|s| wire::convert::state_to_wire(s).as_str_name().to_string()),
            message: a.message,
        }
    }
}

/// What `readTask` returns: the text for the model, and the A2A Task.
#[napi(object)]
pub struct ReadTaskResult {
    pub text: String,
    pub task: Value,
}

/// One entry of `completeTask`'s `outputs`.
#[napi(object)]
pub struct OutputInput {
    pub output: String,
    pub value: Value,
}

/// The resident-agent bridge: the durable wake queue, turn authority, and the four agent
/// tools (every tool checks that its Task is the active turn's). Start it in
/// `session_start` after opening the plane; close it in `session_shutdown` first.
#[napi]
pub struct AgentBridge {
    queue: crate::wake::WakeQueue,
    tools: crate::tools::AgentTools,
    watch: Mutex<Option<u64>>,
}

#[napi]
impl AgentBridge {
    /// Starts the queue over `plane`: replays eligible activations, then admits new ones.
    /// The workflow outputs come from `A2A_WORKFLOW_MANIFEST` / `A2A_WORKFLOW`.
    #[napi(factory, catch_unwind)]
    pub fn start(plane: &TaskPlane) -> Result<AgentBridge> {
        let queue = crate::wake::WakeQueue::start(plane.plane.clone()).map_err(plane_error)?;
        let outputs = crate::tools::manifest::load(&config::process_env);
        Ok(AgentBridge {
            tools: crate::tools::AgentTools::new(queue.clone(), outputs),
            queue,
            watch: Mutex::new(None),
        })
    }

    /// The next wake, durably delivered (the Task is WORKING and is now the turn's
    /// authority); `null` after `timeoutMs` (default 1000) or once closed.
    #[napi(ts_return_type = "Promise<WakeInfo | null>")]
    pub fn next_wake<'env>(
        &self,
        env: &'env Env,
        timeout_ms: Option<u32>,
    ) -> Result<PromiseRaw<'env, Option<WakeInfo>>> {
        let queue = self.queue.clone();
        let timeout = std::time::Duration::from_millis(u64::from(timeout_ms.unwrap_or(1000)));
        // Awaited on the addon's runtime: no thread waits for a wake.
        env.spawn_future(async move {
            Ok(queue.next_wake_async(timeout).await.map(|w| WakeInfo {
                activation_id: w.activation_id,
                task_id: w.task_id,
                context_id: w.context_id,
                delivery: w.delivery as u32,
            }))
        })
    }

    /// Ends the active turn: `ended` (the session's turn ran to its end) or `failed`, with
    /// `reason` (why it failed: logged, and told to the caller in the Task's status).
    #[napi(
        catch_unwind,
        ts_args_type = "taskId: string, outcome: \"ended\" | \"failed\", reason?: string | undefined | null",
        ts_return_type = "Promise<void>"
    )]
    pub fn turn_ended(
        &self,
        task_id: String,
        outcome: String,
        reason: Option<String>,
    ) -> Result<AsyncTask<PlaneCall<()>>> {
        let outcome = match outcome.as_str() {
            "ended" => crate::wake::TurnOutcome::Ended,
            "failed" => crate::wake::TurnOutcome::Failed,
            other => {
                return Err(invalid_arg(format!(
                    "invalid `outcome`: `{other}`; use ended or failed"
                )))
            }
        };
        let queue = self.queue.clone();
        Ok(PlaneCall::new(move || {
            queue
                .turn_ended(&task_id, outcome, reason.as_deref())
                .map_err(plane_error)
        }))
    }

    /// Holds the queue while the agent cannot work Tasks (`reason`: why, e.g. no usable
    /// model; each waiting Task's status then says so), or releases it (`null`).
    #[napi(ts_return_type = "Promise<void>")]
    pub fn hold(&self, reason: Option<String>) -> AsyncTask<PlaneCall<()>> {
        let queue = self.queue.clone();
        PlaneCall::new(move || {
            queue.hold(reason);
            Ok(())
        })
    }

    /// Why the queue is held, if it is.
    #[napi(getter)]
    pub fn held(&self) -> Option<String> {
        self.queue.held()
    }

    /// How many wakes wait behind the active turn.
    #[napi(getter)]
    pub fn waiting(&self) -> u32 {
        self.queue.waiting() as u32
    }

    /// Calls `callback` with each batch of Task activity (arrivals and status changes of
    /// every Task, for the person watching the resident), from a thread that ends on
    /// `close()`. The callback never keeps Node's event loop alive. One watcher per bridge:
    /// a second call replaces the first.
    #[napi(
        catch_unwind,
        ts_args_type = "callback: (err: Error | null, batch: TaskActivity[]) => void"
    )]
    pub fn watch_activity(
        &self,
        callback: ThreadsafeFunction<Vec<TaskActivity>, (), Vec<TaskActivity>, Status, true, true>,
    ) -> Result<()> {
        if self.queue.is_closed() {
            return Err(Error::new(
                Status::GenericFailure,
                "the agent bridge is closed; start a new one to watch activity",
            ));
        }
        let events = self.queue.plane().events();
        let (id, receiver) = events.watch_activity();
        let previous = self
            .watch
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .replace(id);
        if let Some(previous) = previous {
            events.unwatch(previous);
        }
        std::thread::Builder::new()
            .name("task-plane-activity".into())
            .spawn(move || {
                // Blocks until activity arrives; ends when the watch is dropped (close).
                while let Ok(first) = receiver.recv() {
                    let mut batch = vec![TaskActivity::from(first)];
                    while let Ok(more) = receiver.try_recv() {
                        batch.push(TaskActivity::from(more));
                    }
                    callback.call(Ok(batch), ThreadsafeFunctionCallMode::NonBlocking);
                }
            })
            .map_err(|e| {
                Error::new(
                    Status::GenericFailure,
                    format!("cannot start the activity thread: {e}"),
                )
            })?;
        Ok(())
    }

    /// The Task whose turn is active, if any.
    #[napi(getter)]
    pub fn authority(&self) -> Option<String> {
        self.queue.authority()
    }

    /// The declared outputs (`{name: type}`), or `null` without a manifest; throws the
    /// load error when the manifest failed to load.
    #[napi(catch_unwind)]
    pub fn declared_outputs(&self) -> Result<Option<HashMap<String, String>>> {
        match self.tools.outputs() {
            crate::tools::manifest::Outputs::None => Ok(None),
            crate::tools::manifest::Outputs::Declared(w) => {
                Ok(Some(w.outputs.clone().into_iter().collect()))
            }
            crate::tools::manifest::Outputs::Failed(reason) => {
                Err(Error::new(Status::GenericFailure, reason.clone()))
            }
        }
    }

    /// `a2a_read_task`.
    #[napi(ts_return_type = "Promise<ReadTaskResult>")]
    pub fn read_task(&self, task_id: String) -> AsyncTask<PlaneCall<ReadTaskResult>> {
        let tools = self.tools.clone();
        PlaneCall::new(move || {
            let (text, task) = tools.read_task(&task_id).map_err(plane_error)?;
            let task = serde_json::to_value(wire::convert::task_to_wire(&task))
                .map_err(|e| Error::new(Status::GenericFailure, e.to_string()))?;
            Ok(ReadTaskResult { text, task })
        })
    }

    /// `a2a_complete_task`: `completed` (outputs, then the response, as artifacts) or
    /// `rejected` (the response is the reason).
    #[napi(ts_return_type = "Promise<void>")]
    pub fn complete_task(
        &self,
        task_id: String,
        outcome: String,
        response: String,
        outputs: Option<Vec<OutputInput>>,
    ) -> Result<AsyncTask<PlaneCall<()>>> {
        let outcome = match outcome.as_str() {
            "completed" => crate::tools::Outcome::Completed,
            "rejected" => crate::tools::Outcome::Rejected,
            other => {
                return Err(invalid_arg(format!(
                    "invalid `outcome`: `{other}`; use completed or rejected"
                )))
            }
        };
        let outputs: Vec<(String, Value)> = outputs
            .unwrap_or_default()
            .into_iter()
            .map(|o| (o.output, o.value))
            .collect();
        let tools = self.tools.clone();
        Ok(PlaneCall::new(move || {
            tools
                .complete_task(&task_id, outcome, &response, outputs)
                .map_err(plane_error)
        }))
    }

    /// `a2a_record_output`: one declared output while the Task is WORKING.
    #[napi(ts_return_type = "Promise<void>")]
    pub fn record_output(
        &self,
        task_id: String,
        output: String,
        value: Value,
    ) -> AsyncTask<PlaneCall<()>> {
        let tools = self.tools.clone();
        PlaneCall::new(move || {
            tools
                .record_output(&task_id, &output, value)
                .map_err(plane_error)
        })
    }

    /// `a2a_require_input`: INPUT_REQUIRED with `question`; an optional MCP elicitation
    /// `requestedSchema`.
    #[napi(ts_return_type = "Promise<void>")]
    pub fn require_input(
        &self,
        task_id: String,
        question: String,
        requested_schema: Option<Value>,
    ) -> AsyncTask<PlaneCall<()>> {
        let tools = self.tools.clone();
        PlaneCall::new(move || {
            tools
                .require_input(&task_id, &question, requested_schema)
                .map_err(plane_error)
        })
    }

    /// Stops the queue: a pending `nextWake` resolves `null`, authority ends, the activity
    /// watcher stops. Idempotent.
    #[napi(catch_unwind)]
    pub fn close(&self) {
        self.queue.close();
        if let Some(id) = self.watch.lock().unwrap_or_else(|p| p.into_inner()).take() {
            self.queue.plane().events().unwatch(id);
        }
    }
}
