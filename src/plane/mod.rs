//! The task plane's trusted intake and the Task operations built on the store.
//!
//! Every rule of the contract's "Task and conversation semantics" lives in exactly one
//! function here:
//! - conversation → context: [`intake::conversation_context`] (one atomic upsert);
//! - a client contextId joins only a context its principal owns: [`TaskPlane::accept_in_context`];
//! - continuation through a verified reply anchor (all six conditions):
//!   [`TaskPlane::verified_anchor`]; through an authorized explicit taskId:
//!   [`TaskPlane::continue_task`];
//! - idempotency on (principal, messageId / event identity): [`intake::prior_outcome`];
//! - acceptance = claim + Task + history + evidence + wake record in one transaction:
//!   [`intake::create_task`], [`intake::continue_task`];
//! - retention and compaction at startup: [`retention`].
//!
//! Nothing in an inbound message selects an agent, a tool set or a workflow: intake only
//! stores content and routes by the caller's identity and the ids the plane minted.

mod agent;
mod delivery;
mod error;
mod inspect;
mod intake;
mod query;
mod retention;
mod wakes;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

use serde_json::{json, Value};

pub use crate::digest::content_address;
pub use crate::record::Recovery;
pub use agent::InterruptKind;
pub use delivery::{DeliveryOutcome, DeliveryRequest, DeliveryStart, Reconciler, SendFailure};
pub use error::PlaneError;
pub use inspect::{Inspector, StoreStats};
pub use query::{ListFilter, PageCursor, SummaryFilter, TaskPage, TaskSummary};
pub use retention::{CompactionReport, RETENTION_MS};
pub use wakes::Delivery;

use crate::clock::{Clock, SystemClock};
use crate::events::{Accepted, EventBus, TaskEvent};
use crate::field_error::FieldError;
use crate::ids::{self, check_identifier, check_locator};
use crate::record::{
    ClaimState, Continuation, EvidenceKind, Locator, MessageRecord, Role, TaskRecord, TaskState,
};
use crate::store::anchors::{self, Anchor};
use crate::store::evidence::{self, NewEvidence};
use crate::store::{checkpoints, claims, contexts, deliveries, tasks};
use crate::store::{Faults, Store, StoreOptions, WriteTx};
use intake::Intake;

/// The source name of the A2A HTTP+JSON binding; it continues Tasks by explicit taskId.
pub const A2A_SOURCE: &str = "a2a";

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
}

/// Options for [`TaskPlane::open`].
#[derive(Clone)]
pub struct PlaneOptions {
    pub clock: Arc<dyn Clock>,
    /// How long operational records outlive their last use (default 30 days).
    pub retention_ms: i64,
    /// Test-only failure injection.
    pub faults: Option<Arc<Faults>>,
}

impl Default for PlaneOptions {
    fn default() -> Self {
        PlaneOptions {
            clock: Arc::new(SystemClock),
            retention_ms: RETENTION_MS,
            faults: None,
        }
    }
}

/// The folder of the per-Task Pi sessions inside the store root.
pub const SESSIONS_DIR: &str = "sessions";

/// The Pi session file of a Task under the store `root` (the newest `.jsonl` in
/// `sessions/<taskId>/`), if it has one.
pub fn session_file(root: &Path, task_id: &str) -> Option<PathBuf> {
    let dir = root.join(SESSIONS_DIR).join(task_id);
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .ok()?
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "jsonl"))
        .collect();
    files.sort();
    files.pop()
}

/// An open task plane: the store plus the registered sources. Cheap to clone (shared);
/// `close()` closes it for every clone.
#[derive(Clone)]
pub struct TaskPlane {
    store: Store,
    clock: Arc<dyn Clock>,
    retention_ms: i64,
    sources: Arc<RwLock<HashMap<String, Continuation>>>,
    deliveries: Arc<delivery::InFlight>,
    events: Arc<EventBus>,
    startup: CompactionReport,
}

/// What a committed write announces.
#[derive(Debug, Clone)]
pub(crate) enum Published {
    Task(TaskEvent),
    Accepted(Accepted),
}

impl TaskPlane {
    /// Opens the store at `root` (taking its lock), then runs startup recovery and
    /// compaction. The A2A binding's source is registered already.
    pub fn open(root: &Path, options: PlaneOptions) -> Result<TaskPlane, PlaneError> {
        let store = Store::open(
            root,
            StoreOptions {
                faults: options.faults.clone(),
            },
        )?;
        let mut plane = TaskPlane {
            store,
            clock: options.clock,
            retention_ms: options.retention_ms,
            sources: Arc::new(RwLock::new(HashMap::from([(
                A2A_SOURCE.to_string(),
                Continuation::ExplicitTaskId,
            )]))),
            deliveries: Arc::new(delivery::InFlight::default()),
            events: Arc::new(EventBus::default()),
            startup: CompactionReport::default(),
        };
        let startup = plane.recover_and_compact();
        match startup {
            Ok(report) => plane.startup = report,
            Err(err) => {
                plane.close();
                return Err(err);
            }
        }
        Ok(plane)
    }

    /// The key that signs `GET /tasks` page tokens (made with the store, kept with it).
    pub fn page_token_key(&self) -> Result<Vec<u8>, PlaneError> {
        self.store
            .read(|conn| crate::store::secret(conn, "page_tokens").map_err(PlaneError::from))
    }

    /// Closes the store and releases the root's lock. Idempotent.
    pub fn close(&self) {
        self.store.close();
    }

    pub fn is_closed(&self) -> bool {
        self.store.is_closed()
    }

    pub fn root(&self) -> &Path {
        self.store.root()
    }

    /// The folder of a Task's own Pi session, `<root>/sessions/<taskId>/`, created (mode
    /// 0700, each new folder's parent fsynced) if needed: losing it to a power cut would
    /// lose the Task's session. Only for a Task that exists.
    pub fn session_dir(&self, task_id: &str) -> Result<PathBuf, PlaneError> {
        if self.task(task_id, Some(0), false)?.is_none() {
            return Err(PlaneError::TaskNotFound(task_id.to_string()));
        }
        // Task ids are identifiers (no `/`, never `.` or `..`): one path component.
        crate::ids::check_identifier("taskId", task_id)?;
        let dir = self.root().join(SESSIONS_DIR).join(task_id);
        self.store.create_dir_durably(&dir)?;
        Ok(dir)
    }

    pub fn store(&self) -> &Store {
        &self.store
    }

    /// What startup recovery and compaction did.
    pub fn startup_report(&self) -> &CompactionReport {
        &self.startup
    }

    fn now(&self) -> i64 {
        self.clock.now_ms()
    }

    /// One write transaction of the plane, answered after commit.
    fn write<R: Send + 'static>(
        &self,
        work: impl FnOnce(&WriteTx<'_>) -> Result<R, PlaneError> + Send + 'static,
    ) -> Result<R, PlaneError> {
        self.store.write(work)
    }

    /// A write whose committed result announces events (published from the writer thread,
    /// in commit order, before the caller hears back).
    fn write_publishing<R: Send + 'static>(
        &self,
        work: impl FnOnce(&WriteTx<'_>) -> Result<(R, Vec<Published>), PlaneError> + Send + 'static,
    ) -> Result<R, PlaneError> {
        let bus = self.events.clone();
        let (result, _) = self.store.write_then(
            work,
            Box::new(move |(_, published): &(R, Vec<Published>)| {
                for p in published {
                    match p {
                        Published::Task(event) => bus.publish(event.clone()),
                        Published::Accepted(accepted) => bus.publish_accepted(accepted.clone()),
                    }
                }
            }),
        )?;
        Ok(result)
    }

    /// An intake write: a new or continued Task is announced to agent drivers, and a
    /// continued one's subscribers see it resume.
    fn write_intake(
        &self,
        work: impl FnOnce(&WriteTx<'_>) -> Result<Acceptance, PlaneError> + Send + 'static,
    ) -> Result<Acceptance, PlaneError> {
        let now = self.now();
        self.write_publishing(move |tx| {
            let acceptance = work(tx)?;
            let mut published = Vec::new();
            if let (Some(task_id), Disposition::Created | Disposition::Continued) =
                (&acceptance.task_id, acceptance.disposition)
            {
                if acceptance.disposition == Disposition::Continued {
                    published.push(Published::Task(TaskEvent::Status {
                        task_id: task_id.clone(),
                        context_id: acceptance.context_id.clone(),
                        state: TaskState::Submitted,
                        message: None,
                        at_ms: now,
                    }));
                }
                published.push(Published::Accepted(Accepted {
                    activation_id: acceptance.activation_id.clone(),
                    task_id: task_id.clone(),
                    context_id: acceptance.context_id.clone(),
                }));
            }
            Ok((acceptance, published))
        })
    }

    /// The plane's event bus: per-Task updates and acceptances.
    pub fn events(&self) -> &EventBus {
        &self.events
    }

    fn read<R>(
        &self,
        read: impl FnOnce(&crate::store::Connection) -> Result<R, PlaneError>,
    ) -> Result<R, PlaneError> {
        self.store.read(read)
    }

    // ---- Sources ------------------------------------------------------------------------

    /// Registers a source with its declared continuation method. Re-registering replaces
    /// the declaration for new Tasks; the A2A binding's source cannot be redeclared.
    pub fn register_source(
        &self,
        source: &str,
        continuation: Continuation,
    ) -> Result<(), PlaneError> {
        check_identifier("source", source)?;
        if source == A2A_SOURCE && continuation != Continuation::ExplicitTaskId {
            return Err(PlaneError::Invalid(FieldError::new(
                "source",
                "`a2a` is the A2A binding's source; it continues Tasks by explicit taskId only",
            )));
        }
        self.sources
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .insert(source.to_string(), continuation);
        Ok(())
    }

    fn continuation_of(&self, source: &str) -> Result<Continuation, PlaneError> {
        self.sources
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(source)
            .copied()
            .ok_or_else(|| PlaneError::UnknownSource(source.to_string()))
    }

    // ---- Intake ---------------------------------------------------------------------------

    /// A native provider event that is not a reply: a new Task in the context of its
    /// conversation (or a fresh context without a conversation key).
    pub fn accept(&self, activation: Activation) -> Result<Acceptance, PlaneError> {
        let (intake, activation) = self.native_intake(activation)?;
        let now = self.now();
        self.write_intake(move |tx| {
            if let Some(prior) = intake::prior_outcome(tx.conn(), &intake)? {
                return Ok(prior);
            }
            let context_id = native_context(tx, &activation, now)?;
            intake::create_task(tx, &intake, context_id, now)
        })
    }

    /// A native provider reply. It continues a Task only through a verified reply anchor;
    /// when any condition fails it is new work in the conversation's context, never a
    /// rejection. A taskId-looking string in the body is just text.
    pub fn continue_activation(&self, activation: Activation) -> Result<Acceptance, PlaneError> {
        let (intake, activation) = self.native_intake(activation)?;
        let now = self.now();
        self.write_intake(move |tx| {
            if let Some(prior) = intake::prior_outcome(tx.conn(), &intake)? {
                return Ok(prior);
            }
            if let Some(task) =
                Self::verified_anchor(tx.conn(), &intake, activation.reply_to.as_deref())?
            {
                return intake::continue_task(tx, &intake, &task, now);
            }
            let context_id = native_context(tx, &activation, now)?;
            intake::create_task(tx, &intake, context_id, now)
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
        conn: &crate::store::Connection,
        intake: &Intake,
        reply_to: Option<&str>,
    ) -> Result<Option<tasks::TaskRow>, PlaneError> {
        if intake.continuation != Continuation::ReplyAnchors {
            return Ok(None);
        }
        let Some(reply_to) = reply_to else {
            return Ok(None);
        };
        let Some(anchor) = anchors::find(conn, &intake.principal, &intake.source, reply_to)? else {
            return Ok(None);
        };
        let Some(task) = tasks::owned(conn, &intake.principal, &anchor.task_id)? else {
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
        let intake =
            self.message_intake(principal, context_id, Some(task_id), message, extensions)?;
        let (task_id, context_id) = (task_id.to_string(), context_id.map(str::to_string));
        let now = self.now();
        self.write_intake(move |tx| {
            if let Some(prior) = intake::prior_outcome(tx.conn(), &intake)? {
                return Ok(prior);
            }
            let task = tasks::owned(tx.conn(), &intake.principal, &task_id)?
                .ok_or_else(|| PlaneError::TaskNotFound(task_id.clone()))?;
            if let Some(context_id) = context_id {
                if context_id != task.record.context_id {
                    return Err(PlaneError::ContextMismatch {
                        task_id,
                        context_id,
                    });
                }
            }
            let state = task.record.state;
            if state.is_terminal() {
                return Err(PlaneError::TaskTerminal { task_id, state });
            }
            if !task.record.awaits_caller() {
                return Err(PlaneError::NotAwaitingInput { task_id, state });
            }
            if let Some(schema) = &task.input_schema {
                Self::check_structured_answer(schema, &intake.message)?;
            }
            intake::continue_task(tx, &intake, &task, now)
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
        let intake = self.message_intake(principal, context_id, None, message, extensions)?;
        let now = self.now();
        self.write_intake(move |tx| {
            if let Some(prior) = intake::prior_outcome(tx.conn(), &intake)? {
                return Ok(prior);
            }
            let context_id = Self::authorized_context(tx, &intake, now)?;
            intake::create_task(tx, &intake, context_id, now)
        })
    }

    /// The context a client's contextId resolves to: its own when the principal owns it,
    /// else a fresh one.
    fn authorized_context(
        tx: &WriteTx<'_>,
        intake: &Intake,
        now: i64,
    ) -> Result<String, PlaneError> {
        if let Some(requested) = intake.requested_context_id.as_deref() {
            if intake::owns_context(tx.conn(), &intake.principal, requested)? {
                tx.step("context")?;
                contexts::touch(tx.conn(), requested, now)?;
                return Ok(requested.to_string());
            }
        }
        intake::fresh_context(tx, &intake.principal, &intake.source, now)
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
            if let Some(prior) = intake::prior_outcome(tx.conn(), &intake)? {
                return Ok(prior);
            }
            if !intake::owns_context(tx.conn(), &intake.principal, &context_id)? {
                return Err(PlaneError::ContextNotFound(context_id));
            }
            tx.step("context")?;
            contexts::touch(tx.conn(), &context_id, now)?;
            intake::create_task(tx, &intake, context_id, now)
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
        let intake = self.message_intake(principal, context_id, None, message, Vec::new())?;
        check_content(&reply, Role::Agent, "reply")?;
        let now = self.now();
        self.write_intake(move |tx| {
            if let Some(prior) = intake::prior_outcome(tx.conn(), &intake)? {
                return Ok(prior);
            }
            let context_id = Self::authorized_context(tx, &intake, now)?;
            intake::record_direct(tx, &intake, &context_id, &reply, now)
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
        self.read(|conn| intake::prior_outcome(conn, &intake))
    }

    fn native_intake(&self, activation: Activation) -> Result<(Intake, Activation), PlaneError> {
        check_identifier("principal", &activation.principal)?;
        check_identifier("source", &activation.source)?;
        check_identifier("eventId", &activation.event_id)?;
        if let Some(key) = &activation.conversation_key {
            check_identifier("conversationKey", key)?;
        }
        if let Some(reply_to) = &activation.reply_to {
            check_identifier("replyTo", reply_to)?;
        }
        check_locator("locator", &activation.locator)?;
        check_inbound_message(&activation.message, "message", false)?;
        if activation.source == A2A_SOURCE {
            return Err(PlaneError::Invalid(FieldError::new("source", "`a2a` is the A2A binding; its messages enter through acceptInContext or continueTask")));
        }
        let continuation = self.continuation_of(&activation.source)?;
        let locator = Value::Object(
            activation
                .locator
                .iter()
                .map(|(k, v)| (k.clone(), Value::String(v.clone())))
                .collect(),
        );
        let digest = crate::digest::canonical_json(&json!({
            "source": activation.source,
            "conversationKey": activation.conversation_key,
            "replyTo": activation.reply_to,
            "locator": locator,
            "message": activation.message,
        }));
        let intake = Intake {
            principal: activation.principal.clone(),
            source: activation.source.clone(),
            continuation,
            dedupe_key: activation.event_id.clone(),
            digest,
            requested_context_id: None,
            requested_task_id: None,
            message: activation.message.clone(),
            locator,
            extensions: Vec::new(),
        };
        Ok((intake, activation))
    }

    fn message_intake(
        &self,
        principal: &str,
        context_id: Option<&str>,
        task_id: Option<&str>,
        message: MessageRecord,
        extensions: Vec<String>,
    ) -> Result<Intake, PlaneError> {
        check_identifier("principal", principal)?;
        check_inbound_message(&message, "message", true)?;
        // A requested context or task id is stored with the claim: bounded like every other
        // identifier (the ones the plane mints are UUIDs).
        for (field, id) in [
            ("message.contextId", context_id),
            ("message.taskId", task_id),
        ] {
            if let Some(id) = id.filter(|id| !id.is_empty()) {
                check_identifier(field, id)?;
            }
        }
        let digest = crate::digest::canonical_json(&json!({ "message": message }));
        let locator = json!({ "messageId": message.message_id });
        Ok(Intake {
            principal: principal.to_string(),
            source: A2A_SOURCE.to_string(),
            continuation: Continuation::ExplicitTaskId,
            dedupe_key: message.message_id.clone(),
            digest,
            requested_context_id: context_id.filter(|c| !c.is_empty()).map(str::to_string),
            requested_task_id: task_id.filter(|t| !t.is_empty()).map(str::to_string),
            message,
            locator,
            extensions,
        })
    }

    // ---- Reads ----------------------------------------------------------------------------

    /// The durable state of a Task the principal owns (`None` for a foreign or missing
    /// one). `history_length`: `None` all, `Some(n)` the newest n.
    pub fn get_task(
        &self,
        principal: &str,
        task_id: &str,
        history_length: Option<u32>,
        include_artifacts: bool,
    ) -> Result<Option<TaskRecord>, PlaneError> {
        self.read(|conn| {
            tasks::owned(conn, principal, task_id)?
                .map(|row| read_full(conn, row, history_length, include_artifacts))
                .transpose()
        })
    }

    /// The durable state of any Task, whoever owns it: for the agent side (the wake queue
    /// and the agent's tools, which check turn authority first), never for callers.
    pub fn task(
        &self,
        task_id: &str,
        history_length: Option<u32>,
        include_artifacts: bool,
    ) -> Result<Option<TaskRecord>, PlaneError> {
        self.read(|conn| {
            tasks::by_id(conn, task_id)?
                .map(|row| read_full(conn, row, history_length, include_artifacts))
                .transpose()
        })
    }

    // ---- Anchors, evidence, checkpoints ----------------------------------------------------

    /// Records that the plane sent `provider_response_id` on `source` for `task_id`'s
    /// open input request, so a direct reply to it can continue the Task. The Task must be
    /// the principal's and waiting for input, and that response must be one the plane
    /// delivered for it (see `deliver`).
    pub fn record_reply_anchor(
        &self,
        principal: &str,
        source: &str,
        provider_response_id: &str,
        task_id: &str,
    ) -> Result<(), PlaneError> {
        check_identifier("principal", principal)?;
        check_identifier("source", source)?;
        check_identifier("providerResponseId", provider_response_id)?;
        let (principal, source, response, task_id) = (
            principal.to_string(),
            source.to_string(),
            provider_response_id.to_string(),
            task_id.to_string(),
        );
        let now = self.now();
        self.write(move |tx| {
            let task = tasks::owned(tx.conn(), &principal, &task_id)?
                .ok_or_else(|| PlaneError::TaskNotFound(task_id.clone()))?;
            if !task.record.awaits_caller() {
                return Err(PlaneError::NotAwaitingInput {
                    task_id,
                    state: task.record.state,
                });
            }
            if task.record.source != source {
                return Err(PlaneError::Invalid(FieldError::new("source", format!("task {task_id} came from source `{}`, not `{source}`", task.record.source))));
            }
            // Condition 2: the plane itself delivered that provider response for this Task.
            let delivered = deliveries::delivered_response(tx.conn(), &task_id, &source, &response)?;
            if !delivered {
                return Err(PlaneError::FailedPrecondition(format!(
                    "no delivered response {response} on source `{source}` for task {task_id}: a reply anchor \
                     records a response the plane delivered (deliver it first, then record the anchor)"
                )));
            }
            let anchor = Anchor {
                task_id,
                input_request_seq: task.input_request_seq,
            };
            anchors::upsert(tx.conn(), &principal, &source, &response, &anchor, now)?;
            Ok(())
        })
    }

    /// Records content-addressed evidence and returns its id (`sha256:<hex>`).
    pub fn record_evidence(
        &self,
        kind: &str,
        healthy: bool,
        task_id: Option<&str>,
        locator: &Locator,
        content: Value,
    ) -> Result<String, PlaneError> {
        check_identifier("kind", kind)?;
        let kind = EvidenceKind::parse(kind);
        check_locator("locator", locator)?;
        let locator = Value::Object(
            locator
                .iter()
                .map(|(k, v)| (k.clone(), Value::String(v.clone())))
                .collect(),
        );
        let task_id = task_id.map(str::to_string);
        let now = self.now();
        self.write(move |tx| {
            Ok(evidence::insert(
                tx.conn(),
                &NewEvidence {
                    kind: &kind,
                    healthy: healthy,
                    task_id: task_id.as_deref(),
                    activation_id: None,
                    locator: &locator,
                    content: &content,
                    now_ms: now,
                },
            )?)
        })
    }

    /// Evidence recorded for a Task, oldest first: `(evidence id, kind, healthy, content)`.
    pub fn evidence_for_task(
        &self,
        task_id: &str,
    ) -> Result<Vec<(String, String, bool, Value)>, PlaneError> {
        self.read(|conn| {
            Ok(evidence::for_task(conn, task_id)?
                .into_iter()
                .map(|e| {
                    (
                        e.evidence_id,
                        e.kind.as_str().to_string(),
                        e.healthy,
                        e.content,
                    )
                })
                .collect())
        })
    }

    /// A source's durable cursor for this principal.
    pub fn checkpoint(&self, principal: &str, source: &str) -> Result<Option<String>, PlaneError> {
        self.read(|conn| Ok(checkpoints::get(conn, principal, source)?))
    }

    /// Advances a source's cursor, but only when every event it selected (`event_ids`) has
    /// been accepted from that source for that principal: a checkpoint never runs ahead
    /// of acceptance.
    pub fn advance_checkpoint(
        &self,
        principal: &str,
        source: &str,
        cursor: &str,
        event_ids: Vec<String>,
    ) -> Result<(), PlaneError> {
        check_identifier("principal", principal)?;
        check_identifier("source", source)?;
        if cursor.is_empty() || cursor.chars().count() > ids::MAX_LOCATOR_VALUE_LEN {
            return Err(PlaneError::Invalid(FieldError::new(
                "cursor",
                format!("must be 1..={} characters", ids::MAX_LOCATOR_VALUE_LEN),
            )));
        }
        let (principal, source, cursor) = (
            principal.to_string(),
            source.to_string(),
            cursor.to_string(),
        );
        let now = self.now();
        self.write(move |tx| {
            for event_id in &event_ids {
                let claim = claims::state_of_event(tx.conn(), &principal, &source, event_id)?;
                if matches!(claim, None | Some(ClaimState::Quarantined)) {
                    return Err(PlaneError::FailedPrecondition(format!(
                        "event {event_id} of source `{source}` has not been accepted; a checkpoint advances only after every selected event is accepted"
                    )));
                }
            }
            checkpoints::set(tx.conn(), &principal, &source, &cursor, now)?;
            Ok(())
        })
    }

    // ---- Startup ----------------------------------------------------------------------------

    fn recover_and_compact(&self) -> Result<CompactionReport, PlaneError> {
        let now = self.now();
        let retention_ms = self.retention_ms;
        let (mut report, removed) = self.write(move |tx| {
            let quarantined = retention::quarantine_orphaned_claims(tx.conn(), now)?;
            let (mut report, removed) = retention::compact(tx.conn(), now, retention_ms)?;
            report.quarantined_claims = quarantined;
            Ok((report, removed))
        })?;
        // After the commit: a session folder never outlives its Task's record, but a crash
        // before this only leaves an orphan for the next compaction.
        report.sessions = retention::remove_session_folders(
            &self.root().join(SESSIONS_DIR),
            &removed,
            now - retention_ms,
            &|task_id| Ok(self.task(task_id, Some(0), false)?.is_some()),
        )?;
        Ok(report)
    }

    /// Runs compaction now (startup does this already).
    pub fn compact(&self) -> Result<CompactionReport, PlaneError> {
        self.recover_and_compact()
    }
}

/// The context of a native activation: its conversation's, or a fresh one.
fn native_context(
    tx: &WriteTx<'_>,
    activation: &Activation,
    now: i64,
) -> Result<String, PlaneError> {
    match &activation.conversation_key {
        Some(key) => {
            intake::conversation_context(tx, &activation.principal, &activation.source, key, now)
        }
        None => intake::fresh_context(tx, &activation.principal, &activation.source, now),
    }
}

fn read_full(
    conn: &crate::store::Connection,
    row: tasks::TaskRow,
    history_length: Option<u32>,
    include_artifacts: bool,
) -> Result<TaskRecord, PlaneError> {
    let mut record = row.record;
    record.history = match history_length {
        Some(0) => Vec::new(),
        limit => tasks::history(conn, row.seq, limit)?,
    };
    if include_artifacts {
        record.artifacts = tasks::artifacts(conn, row.seq)?;
    }
    Ok(record)
}

/// An inbound message: its id is the dedupe key (an identifier), it comes from the caller,
/// and it carries content.
fn check_inbound_message(
    message: &MessageRecord,
    field: &str,
    message_id_is_key: bool,
) -> Result<(), PlaneError> {
    if message_id_is_key {
        check_identifier(&format!("{field}.messageId"), &message.message_id)?;
    } else if message.message_id.is_empty() {
        return Err(PlaneError::Invalid(FieldError::new(
            format!("{field}.messageId"),
            "is required",
        )));
    }
    check_content(message, Role::User, field)
}

/// A message from `role` (the caller's or the agent's) that carries content.
fn check_content(message: &MessageRecord, role: Role, field: &str) -> Result<(), PlaneError> {
    message.check_role(role, field)?;
    if message.parts.is_empty() {
        return Err(PlaneError::Invalid(FieldError::new(
            format!("{field}.parts"),
            "must hold at least one part",
        )));
    }
    Ok(())
}
