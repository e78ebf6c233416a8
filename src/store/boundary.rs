//! The storage boundary (architecture decision 11): what the plane, the wake queue and
//! everything else outside `store` may ask of a store, whatever database is behind it.
//!
//! - [`ReadTx`]: the typed reads, inside one read transaction (every read of one call
//!   sees the same committed snapshot). A writer job's transaction reads through the
//!   same methods and sees its own uncommitted writes.
//! - [`WriteTx`]: the typed writes of one write transaction (plus [`WriteTx::step`], the
//!   named acceptance steps a test's [`super::Faults`] may fail or crash at).
//! - [`Backend`]: an open store as the handle ([`super::Store`]) drives it: where write
//!   jobs are queued ([`Backend::queue`]), a read, close.
//!
//! Native records in, native records out (the record types live beside the SQLite
//! statements that have always produced them: [`super::tasks::TaskRow`],
//! [`super::claims::NewClaim`], …; they hold no SQLite type). Each method is named after
//! what it does and returns [`StoreError`]; no SQL, connection or statement crosses this
//! line. The SQLite implementation ([`super::sqlite`]) delegates to the per-table modules;
//! a PostgreSQL one implements the same three traits and is handed to
//! [`super::Store::with_backend`].
//!
//! Why trait objects rather than an enum of backends: a backend outside `store` (the
//! PostgreSQL one in `src/pg/`) uses these traits, so `store` cannot name its types
//! without an import cycle; `&dyn WriteTx` costs one indirect call per typed operation,
//! and jobs were already boxed (`Box<dyn Job>`), so the job model is unchanged.

use std::any::Any;
use std::path::Path;

use super::anchors::Anchor;
use super::claims::{Deliverable, NewClaim, PriorClaim, WakeClaim, WakeLease};
use super::deliveries::{NewDelivery, StoredDelivery};
use super::evidence::Evidence;
use super::jobs::Queue;
use super::tasks::{InputRequest, NewTask, Page, PageQuery, SummaryFilter, TaskRow, TaskSummary};
use super::StoreError;
use crate::record::{
    ArtifactRecord, ClaimState, DeliveryState, EvidenceKind, MessageRecord, TaskState,
};

/// The typed reads. Object-safe: callers hold `&dyn ReadTx`.
pub trait ReadTx {
    // --- Tasks ---------------------------------------------------------------------
    /// Task `task_id`'s row (without history or artifacts), whoever owns it.
    fn task_by_id(&self, task_id: &str) -> Result<Option<TaskRow>, StoreError>;
    /// Task `task_id`'s row when `principal` owns it.
    fn task_owned_by(&self, principal: &str, task_id: &str) -> Result<Option<TaskRow>, StoreError>;
    /// The Task's history, oldest first; with `limit`, only the newest `limit` messages
    /// (still oldest first).
    fn task_history(
        &self,
        task_seq: i64,
        limit: Option<u32>,
    ) -> Result<Vec<MessageRecord>, StoreError>;
    /// The Task's artifacts in the order they were appended.
    fn task_artifacts(&self, task_seq: i64) -> Result<Vec<ArtifactRecord>, StoreError>;
    /// The Task's first history message (the one that created it).
    fn task_first_message(&self, task_seq: i64) -> Result<Option<MessageRecord>, StoreError>;
    /// Up to `limit` of `principal`'s Tasks in `context_id` created before `before_seq`,
    /// newest first.
    fn tasks_earlier_in_context(
        &self,
        principal: &str,
        context_id: &str,
        before_seq: i64,
        limit: u32,
    ) -> Result<Vec<TaskRow>, StoreError>;
    /// Up to `limit` Task ids that contain `fragment` (any principal's: the operator's).
    fn task_ids_matching(&self, fragment: &str, limit: u32) -> Result<Vec<String>, StoreError>;
    /// One page of `principal`'s Tasks, newest status first (keyset pagination).
    fn task_page(&self, principal: &str, query: &PageQuery<'_>) -> Result<Page, StoreError>;
    /// The operator's view: every principal's Tasks that match `filter`.
    fn task_summaries(&self, filter: &SummaryFilter) -> Result<Vec<TaskSummary>, StoreError>;

    // --- Claims (the activation journal) ---------------------------------------------
    /// What an earlier acceptance of (principal, dedupe key) recorded.
    fn claim_by_dedupe_key(
        &self,
        principal: &str,
        dedupe_key: &str,
    ) -> Result<Option<PriorClaim>, StoreError>;
    /// The state of the claim a source's event made for `principal`, if accepted.
    fn claim_state_of_event(
        &self,
        principal: &str,
        source: &str,
        event_id: &str,
    ) -> Result<Option<ClaimState>, StoreError>;
    /// Where the wake of claim `activation_id` for Task `task_id` stands.
    fn wake_claim(
        &self,
        activation_id: &str,
        task_id: &str,
    ) -> Result<Option<WakeClaim>, StoreError>;
    /// The newest activation of Task `task_id`.
    fn newest_claim_of_task(&self, task_id: &str) -> Result<Option<String>, StoreError>;
    /// For each live Task not waiting for its caller, its newest activation when still
    /// deliverable, oldest first (what the wake queue is offered at startup).
    fn newest_deliverable_claims(&self) -> Result<Vec<Deliverable>, StoreError>;
    /// [`ReadTx::newest_deliverable_claims`] without the Tasks another node than `node`
    /// holds a live lease on, on any of their claims (what `node`'s wake queue may be
    /// offered).
    fn deliverable_claims_for(&self, node: &str) -> Result<Vec<Deliverable>, StoreError>;
    /// How long until the earliest live lease held by a node other than `node` expires,
    /// in ms on the database's clock (`None`: no other node holds one). A node sets its
    /// one timer to this, never polls.
    fn earliest_foreign_lease_ms(&self, node: &str) -> Result<Option<i64>, StoreError>;

    // --- Contexts, reply anchors, checkpoints, evidence --------------------------------
    /// The principal that owns `context_id`, if it exists.
    fn context_owner(&self, context_id: &str) -> Result<Option<String>, StoreError>;
    /// The anchor of `provider_response_id` on `source` for `principal`.
    fn reply_anchor(
        &self,
        principal: &str,
        source: &str,
        provider_response_id: &str,
    ) -> Result<Option<Anchor>, StoreError>;
    /// The source's cursor for `principal`.
    fn checkpoint(&self, principal: &str, source: &str) -> Result<Option<String>, StoreError>;
    /// The evidence recorded about Task `task_id`, oldest first.
    fn evidence_of_task(&self, task_id: &str) -> Result<Vec<Evidence>, StoreError>;

    // --- Deliveries ----------------------------------------------------------------
    /// The delivery `delivery_id`, if prepared.
    fn delivery_by_id(&self, delivery_id: &str) -> Result<Option<StoredDelivery>, StoreError>;
    /// (delivery id, payload digest) of the delivery that used `operation_id` on `source`.
    fn delivery_by_operation(
        &self,
        source: &str,
        operation_id: &str,
    ) -> Result<Option<(String, String)>, StoreError>;
    /// Whether a delivery of Task `task_id` on `source` was answered with
    /// `provider_response_id`.
    fn delivered_response(
        &self,
        task_id: &str,
        source: &str,
        provider_response_id: &str,
    ) -> Result<bool, StoreError>;

    // --- The store itself ----------------------------------------------------------
    /// The secret named `name`, made with the store (e.g. `page_tokens`).
    fn secret(&self, name: &str) -> Result<Vec<u8>, StoreError>;
    /// How many Tasks are in each stored state (`None`: a state this build does not know).
    fn tasks_by_state(&self) -> Result<Vec<(Option<TaskState>, u64)>, StoreError>;
    /// How many Tasks, claims and contexts the store holds.
    fn record_counts(&self) -> Result<(u64, u64, u64), StoreError>;
    /// The oldest Task that is not terminal: (task id, created at, Unix ms).
    fn oldest_live_task(&self) -> Result<Option<(String, i64)>, StoreError>;
    /// What is wrong with the store's own invariants (empty: nothing).
    fn problems(&self) -> Result<Vec<String>, StoreError>;

    /// The Pi session files kept for `task_id` (a fleet's: see [`Backend::keeps_sessions`]),
    /// by name; `local` names the node's own copies with their content addresses
    /// ([`crate::digest::content_address`]), and a kept file that equals its local copy
    /// comes without its body. Added for the fleet (issue #38); a backend whose sessions
    /// stay in its local root keeps none and refuses.
    fn task_session_files(
        &self,
        _task_id: &str,
        _local: &[LocalSessionFile],
    ) -> Result<Vec<KeptSessionFile>, StoreError> {
        Err(no_session_keeping())
    }

    /// Task `task_id`'s status changes and artifacts with a version after `after` and at
    /// most `upto` (every one when `None`), not written by node `not_by`, in the order they
    /// were made, with the Task's row and its version (`None` when there is no such Task).
    /// Added for a fleet's updates across nodes (docs/fleet.md); a backend no other node
    /// shares keeps no versions and has nothing to say (`None`).
    fn task_changes(
        &self,
        _task_id: &str,
        _after: i64,
        _upto: Option<i64>,
        _not_by: &str,
    ) -> Result<Option<TaskChanges>, StoreError> {
        Ok(None)
    }
}

/// What [`ReadTx::task_changes`] found.
#[derive(Debug, Clone, PartialEq)]
pub struct TaskChanges {
    /// The Task's row as the read found it (its newest status).
    pub row: TaskRow,
    /// The version the read covers: `upto`, or the Task's version when none was given.
    pub version: i64,
    /// The Task's version as the read found it (its row's).
    pub newest: i64,
    /// The changes, oldest first.
    pub changes: Vec<TaskChange>,
}

/// One change of a Task, as the node that wrote it published it.
#[derive(Debug, Clone, PartialEq)]
pub enum TaskChange {
    Status {
        state: TaskState,
        message: Option<MessageRecord>,
        at_ms: i64,
    },
    Artifact(ArtifactRecord),
}

/// One Pi session file of a Task to keep in the database: its file name in
/// `sessions/<taskId>/` and its bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionFile {
    pub name: String,
    pub body: Vec<u8>,
}

/// A node's own copy of a session file: its name and content address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocalSessionFile {
    pub name: String,
    pub digest: String,
}

/// A session file the database keeps: `body` is `None` when it equals the local copy
/// named in the read (nothing to restore).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeptSessionFile {
    pub name: String,
    pub body: Option<Vec<u8>>,
}

fn no_session_keeping() -> StoreError {
    StoreError::Database {
        backend: "store",
        message: "this store keeps the Pi sessions in its local root, not in the database \
                  (only a fleet's PostgreSQL keeps them; a bug if you see this)"
            .into(),
    }
}

/// The typed writes of one write transaction. Every read of [`ReadTx`] sees this
/// transaction's own writes. A job may run again in a fresh transaction (a backend may
/// retry a batch for another job's sake), so a job is a function of the store's state.
///
/// A `&dyn WriteTx` is a `&dyn ReadTx` where one is expected (trait upcasting).
pub trait WriteTx: ReadTx {
    /// Marks a named step of the write (see [`super::ACCEPTANCE_STEPS`]); a test's
    /// [`super::Faults`] may crash or fail the process here.
    fn step(&self, name: &str) -> Result<(), StoreError>;

    // --- Tasks ---------------------------------------------------------------------
    /// Creates a Task; returns its sequence number.
    fn insert_task(&self, task: &NewTask<'_>) -> Result<i64, StoreError>;
    /// The first history message of a Task just created.
    fn insert_first_message(
        &self,
        task_seq: i64,
        message: &MessageRecord,
    ) -> Result<(), StoreError>;
    /// Appends a message to the Task's history.
    fn append_history(&self, task: &TaskRow, message: &MessageRecord) -> Result<(), StoreError>;
    /// The number the Task's next artifact gets.
    fn next_artifact_n(&self, task: &TaskRow) -> Result<i64, StoreError>;
    /// Appends an artifact to the Task.
    fn append_artifact(&self, task: &TaskRow, artifact: &ArtifactRecord) -> Result<(), StoreError>;
    /// Sets the Task's status (state, message, time) and its input request
    /// ([`TaskRow::with_status`] makes the same change in memory).
    fn set_task_status(
        &self,
        task: &TaskRow,
        state: TaskState,
        message: Option<&MessageRecord>,
        now_ms: i64,
        input_request: InputRequest<'_>,
    ) -> Result<(), StoreError>;

    // --- Claims ----------------------------------------------------------------------
    /// Records a new claim (the dedupe authority for its (principal, dedupe key)).
    fn insert_claim(&self, claim: &NewClaim<'_>) -> Result<(), StoreError>;
    /// The claim's first state record, ACCEPTED.
    fn record_claim_accepted(&self, activation_id: &str, now_ms: i64) -> Result<(), StoreError>;
    /// A new state record for the claim (and its current state).
    fn push_claim_state(
        &self,
        activation_id: &str,
        state: ClaimState,
        detail: Option<&str>,
        now_ms: i64,
    ) -> Result<(), StoreError>;
    /// WAKE_DELIVERED `n` for the claim.
    fn record_wake_delivery(
        &self,
        activation_id: &str,
        n: i64,
        now_ms: i64,
    ) -> Result<(), StoreError>;

    /// Takes the lease on the wake of claim `activation_id` for `node`, for `lease_ms` on
    /// the database's clock, when it is free, expired or already `node`'s and no other node
    /// holds a live lease on another claim of the same Task (one node works a Task at a
    /// time); a claim another transaction has locked is skipped ([`WakeLease::Busy`]),
    /// never waited for.
    fn take_wake_lease(
        &self,
        activation_id: &str,
        node: &str,
        lease_ms: i64,
    ) -> Result<WakeLease, StoreError>;
    /// Moves every lease `node` holds on to `lease_ms` from now (database clock); returns
    /// how many it holds.
    fn renew_wake_leases(&self, node: &str, lease_ms: i64) -> Result<u64, StoreError>;
    /// Ends `node`'s lease on the wake of claim `activation_id` (nothing when `node` does
    /// not hold it); on a shared database other nodes are told the wake may be theirs.
    fn release_wake_lease(&self, activation_id: &str, node: &str) -> Result<bool, StoreError>;
    /// Ends every lease `node` holds (it is stopping); returns how many it held. Other
    /// nodes are told, as for [`WriteTx::release_wake_lease`].
    fn release_node_wake_leases(&self, node: &str) -> Result<u64, StoreError>;

    // --- Contexts, reply anchors, checkpoints, evidence --------------------------------
    /// The context of a conversation: the one its first message got (`new_context_id`
    /// when this is the first), whoever accepted it.
    fn context_of_conversation(
        &self,
        new_context_id: &str,
        principal: &str,
        source: &str,
        conversation_key: &str,
        now_ms: i64,
    ) -> Result<String, StoreError>;
    /// A new context with no conversation key.
    fn insert_fresh_context(
        &self,
        context_id: &str,
        principal: &str,
        source: &str,
        now_ms: i64,
    ) -> Result<(), StoreError>;
    /// Moves the context's last event time on to `now_ms` (never back).
    fn touch_context(&self, context_id: &str, now_ms: i64) -> Result<(), StoreError>;
    /// Records (or replaces) the reply anchor of `provider_response_id`.
    fn upsert_reply_anchor(
        &self,
        principal: &str,
        source: &str,
        provider_response_id: &str,
        anchor: &Anchor,
        now_ms: i64,
    ) -> Result<(), StoreError>;
    /// Sets the source's cursor for `principal`.
    fn set_checkpoint(
        &self,
        principal: &str,
        source: &str,
        cursor: &str,
        now_ms: i64,
    ) -> Result<(), StoreError>;
    /// Records evidence unless the same (id, Task) is recorded already. The id and the
    /// JSON texts are computed by [`super::evidence::insert`], the same for every backend.
    fn insert_evidence(&self, evidence: &EvidenceRow<'_>) -> Result<(), StoreError>;

    // --- Deliveries ----------------------------------------------------------------
    /// Records a delivery in state `prepared`.
    fn insert_delivery(&self, delivery: &NewDelivery<'_>) -> Result<(), StoreError>;
    /// Moves a delivery to `state` (entering `sending` counts an attempt).
    fn set_delivery_state(
        &self,
        delivery_id: &str,
        state: DeliveryState,
        provider_response_id: Option<&str>,
        detail: Option<&str>,
        now_ms: i64,
    ) -> Result<(), StoreError>;

    // --- Retention (compaction; see `plane::retention` for the rules) -------------------
    /// The claims of Tasks removed since the last call whose Task is missing, as
    /// (activation id, task id); the note of removed Tasks is cleared.
    fn take_orphaned_claims(&self) -> Result<Vec<(String, String)>, StoreError>;
    /// Removes terminal Tasks whose status is older than `cutoff_ms` (with history and
    /// artifacts); returns their ids.
    fn delete_settled_tasks(&self, cutoff_ms: i64) -> Result<Vec<String>, StoreError>;
    /// Removes claims older than `cutoff_ms` whose Task is gone; returns how many.
    fn delete_unused_claims(&self, cutoff_ms: i64) -> Result<usize, StoreError>;
    /// Removes evidence older than `cutoff_ms` whose Task is gone; returns how many.
    fn delete_unused_evidence(&self, cutoff_ms: i64) -> Result<usize, StoreError>;
    /// Removes reply anchors older than `cutoff_ms` of Tasks not waiting; returns how many.
    fn delete_unused_anchors(&self, cutoff_ms: i64) -> Result<usize, StoreError>;
    /// Removes settled deliveries older than `cutoff_ms` of no live Task; returns how many.
    fn delete_unused_deliveries(&self, cutoff_ms: i64) -> Result<usize, StoreError>;
    /// Removes contexts idle since before `cutoff_ms` with no live Task; returns how many.
    fn delete_unused_contexts(&self, cutoff_ms: i64) -> Result<usize, StoreError>;

    /// Makes `files` the Pi session files kept for `task_id` (the files kept before and
    /// not named here are removed). Added for the fleet (issue #38); see
    /// [`ReadTx::task_session_files`].
    fn keep_task_session(&self, _task_id: &str, _files: &[SessionFile]) -> Result<(), StoreError> {
        Err(no_session_keeping())
    }

    /// SQLite's own tests reach the writer's connection here; every other caller uses
    /// the typed operations. `None` for any other backend.
    #[doc(hidden)]
    fn sqlite(&self) -> Option<&dyn super::sqlite::SqliteTx> {
        None
    }
}

/// One piece of evidence as a backend stores it: the content address `evidence_id` of
/// `content` (JSON text), and `locator` as JSON text.
pub struct EvidenceRow<'a> {
    pub evidence_id: &'a str,
    pub kind: &'a EvidenceKind,
    pub healthy: bool,
    pub task_id: Option<&'a str>,
    pub activation_id: Option<&'a str>,
    pub locator: &'a str,
    pub content: &'a str,
    pub now_ms: i64,
}

/// A read job as a backend runs it: called once inside one read transaction.
pub type ReadJob<'r> = &'r mut dyn FnMut(&dyn ReadTx) -> Result<(), StoreError>;

/// An open store as [`super::Store`] drives it. The handle builds each write job (a
/// boxed [`super::Job`], answered through its reply after the commit that made it
/// durable) and sends it on [`Backend::queue`]; the backend's own threads take jobs from
/// the other end ([`super::Jobs`]), run each inside a write transaction
/// (`Job::run(&dyn WriteTx)`), commit, and only then complete them.
pub trait Backend: Send + Sync + 'static {
    /// The store root (the lock, the sessions folder; for SQLite the database too).
    fn root(&self) -> &Path;
    /// Where write jobs go; `None` once closed.
    fn queue(&self) -> Option<Queue>;
    /// Runs `read` once inside one read transaction (committed data only). A closed
    /// store answers [`StoreError::Closed`] without calling it.
    fn read(&self, read: ReadJob<'_>) -> Result<(), StoreError>;
    /// Stops the writers after the jobs already queued, closes every connection and
    /// releases the root. Idempotent.
    fn close(&self);
    fn is_closed(&self) -> bool;
    /// The space the store takes, in bytes (the operator's health view): SQLite's files,
    /// PostgreSQL's database.
    fn bytes(&self) -> Result<u64, StoreError>;
    /// The backend itself, for its own tests ([`super::Store::sqlite`]).
    fn as_any(&self) -> &dyn Any;
    /// Whether the Tasks' Pi sessions are kept in the database (a fleet's PostgreSQL, so
    /// that a Task's session follows it to another node) rather than only in the local
    /// root (SQLite: the root holds the database and the sessions on one machine, and a
    /// second process cannot open it, so there is nowhere else a session is needed).
    fn keeps_sessions(&self) -> bool {
        false
    }
}
