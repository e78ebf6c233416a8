//! The task plane: the trusted intake and every rule of the contract's Task and
//! conversation semantics. Rules only: each reads typed rows through `crate::store`,
//! decides, and writes through it (no SQL here).
//!
//! Every rule lives in exactly one function:
//! - conversation → context: [`acceptance::conversation_context`] (one atomic upsert);
//! - a client contextId joins only a context its principal owns: [`TaskPlane::accept_in_context`];
//! - continuation through a verified reply anchor (all six conditions):
//!   [`TaskPlane::verified_anchor`]; through an authorized explicit taskId:
//!   [`TaskPlane::continue_task`];
//! - idempotency on (principal, messageId / event identity): [`acceptance::prior_outcome`];
//! - acceptance = claim + Task + history + evidence + wake record in one transaction:
//!   [`acceptance::create_task`], [`acceptance::continue_task`];
//! - the intake decision for an A2A message (explicit taskId → continue; prior outcome;
//!   the executor's direct Message or a Task): [`TaskPlane::intake`] (`route.rs`);
//! - a listing's page size, and who may subscribe to a Task: [`ListFilter::page_size`],
//!   [`TaskPlane::subscribable`] (`query.rs`);
//! - what the agent may do to a Task, and the caller's cancel: [`agent`];
//! - the durable half of the wake queue (deliver, give up, replay): [`wakes`];
//! - outbound delivery, at most one provider mutation per delivery: [`delivery`];
//! - retention and compaction, at startup and hourly while open: [`retention`];
//! - the defaults of the operator views and of a wait for the next wake or acceptance:
//!   [`defaults`].
//!
//! The files: [`intake`] (entry points and routing), [`inbound`] (validation, dedupe key
//! and digest), [`acceptance`] (the transaction bodies), [`sources`] (registration,
//! reply anchors, evidence, checkpoints), [`query`] (reads), [`lookup`] (Tasks by a typed
//! id, a conversation's earlier Tasks), [`hold`] (whether the wake queue is held), [`session`] (Pi session
//! folders), [`inspect`] (the operator's read-only view), [`error`].
//!
//! Nothing in an inbound message selects an agent, a tool set or a workflow: intake only
//! stores content and routes by the caller's identity and the ids the plane minted.

mod acceptance;
mod agent;
pub mod defaults;
mod delivery;
mod error;
mod follow;
mod hold;
mod inbound;
mod inspect;
mod intake;
mod lookup;
mod node;
mod query;
mod retention;
mod route;
mod session;
mod sources;
mod wakes;
mod write;

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, RwLock};

pub use crate::digest::content_address;
pub use crate::record::Recovery;
pub use agent::InterruptKind;
pub use delivery::{
    lease_duration, DeliveryLease, DeliveryOutcome, DeliveryRequest, DeliveryStart, DeliveryTurn,
    Reconciler, SendFailure, DEFAULT_LEASE_MS, MAX_LEASE_MS, MIN_LEASE_MS,
};
pub use error::PlaneError;
pub use inspect::{store_bytes, Inspector, StoreStats};
pub use intake::{Acceptance, Activation, Disposition};
pub use lookup::EarlierTask;
pub use node::mint_node_id;
pub use query::{ListFilter, PageCursor, SummaryFilter, TaskPage, TaskSummary};
pub use retention::{CompactionReport, RETENTION_EVERY_MS, RETENTION_MS};
pub use route::{check_direct_reply, AlwaysTask, Answer, Executor, Inbound, Watch};
pub use session::{local_session_files, session_file, MAX_KEPT_SESSION_BYTES, SESSIONS_DIR};
pub use sources::A2A_SOURCE;
pub use wakes::Delivery;
pub use write::WriteJob;

use crate::clock::{Clock, SystemClock};
use crate::config::StoreBackend;
use crate::events::{Arrival, EventBus, TaskEvent};
use crate::record::{Continuation, TaskRecord};
use crate::store::{Faults, ReadTx, Store, StoreOptions, WriteTx};

/// Options for [`TaskPlane::open`].
#[derive(Clone)]
pub struct PlaneOptions {
    pub clock: Arc<dyn Clock>,
    /// How long operational records outlive their last use (default 30 days).
    pub retention_ms: i64,
    /// Test-only failure injection.
    pub faults: Option<Arc<Faults>>,
    /// Where the durable store lives: the embedded SQLite under the root (default), or a
    /// PostgreSQL database shared by a fleet (`A2A_STORE_URL`, [`crate::config::store_backend`]).
    pub store: StoreBackend,
    /// How long this node's lease on a wake lasts unless renewed (`A2A_WAKE_LEASE_MS`,
    /// [`crate::config::wake_lease_ms`]); it matters on a shared store only.
    pub wake_lease_ms: i64,
}

impl Default for PlaneOptions {
    fn default() -> Self {
        PlaneOptions {
            clock: Arc::new(SystemClock),
            retention_ms: RETENTION_MS,
            faults: None,
            store: StoreBackend::Sqlite,
            wake_lease_ms: crate::config::DEFAULT_WAKE_LEASE_MS,
        }
    }
}

/// An open task plane: the store plus the registered sources. Cheap to clone (shared);
/// `close()` closes it for every clone.
#[derive(Clone)]
pub struct TaskPlane {
    store: Store,
    clock: Arc<dyn Clock>,
    retention_ms: i64,
    sources: Arc<RwLock<HashMap<String, Continuation>>>,
    deliveries: Arc<delivery::Leases>,
    events: Arc<EventBus>,
    metrics: Arc<crate::metrics::Metrics>,
    /// When retention last ran (the plane's clock), for [`TaskPlane::compact_if_due`].
    compacted_ms: Arc<std::sync::atomic::AtomicI64>,
    startup: CompactionReport,
    /// Why the wake queue is held, if it is (`hold.rs`).
    hold: Arc<RwLock<Option<String>>>,
    /// This node's id ([`mint_node_id`]): the owner of the wake leases it takes.
    node: Arc<str>,
    /// How long a wake lease lasts unless renewed, in ms.
    wake_lease_ms: i64,
    /// On a store other nodes share: this node's LISTEN connection (`follow.rs`).
    listening: Arc<follow::Listening>,
}

/// What a committed write announces.
#[derive(Debug, Clone)]
pub(crate) enum Published {
    Task(TaskEvent),
    Accepted(Arrival),
}

impl TaskPlane {
    /// Opens the store at `root` (taking its lock), then runs startup recovery and
    /// compaction. The A2A binding's source is registered already.
    pub fn open(root: &Path, options: PlaneOptions) -> Result<TaskPlane, PlaneError> {
        let store_options = StoreOptions {
            faults: options.faults.clone(),
        };
        let node: Arc<str> = mint_node_id().into();
        let store = match &options.store {
            StoreBackend::Sqlite => Store::open(root, store_options)?,
            StoreBackend::Postgres(url) => crate::pg::open_store(root, url, store_options, &node)?,
        };
        let mut plane = TaskPlane {
            store,
            clock: options.clock,
            retention_ms: options.retention_ms,
            sources: Arc::new(RwLock::new(HashMap::from([(
                A2A_SOURCE.to_string(),
                Continuation::ExplicitTaskId,
            )]))),
            deliveries: Arc::new(delivery::Leases::default()),
            events: Arc::new(EventBus::default()),
            metrics: Arc::default(),
            compacted_ms: Arc::default(),
            startup: CompactionReport::default(),
            hold: Arc::default(),
            node,
            wake_lease_ms: options.wake_lease_ms,
            listening: Arc::default(),
        };
        crate::log::event(
            "a2a_node_started",
            serde_json::json!({
                "nodeId": &*plane.node,
                "store": match &options.store {
                    StoreBackend::Sqlite => "sqlite".to_string(),
                    StoreBackend::Postgres(url) => url.redacted(),
                },
                "wakeLeaseMs": plane.wake_lease_ms,
            }),
        );
        let startup = plane.recover_and_compact();
        match startup.and_then(|report| {
            plane.startup = report;
            plane.start_listening()
        }) {
            Ok(()) => Ok(plane),
            Err(err) => {
                plane.close();
                Err(err)
            }
        }
    }

    /// The key that signs `GET /tasks` page tokens (made with the store, kept with it).
    pub fn page_token_key(&self) -> Result<Vec<u8>, PlaneError> {
        self.store
            .read(|tx| tx.secret("page_tokens").map_err(PlaneError::from))
    }

    /// Closes the store and releases the root's lock. Idempotent.
    pub fn close(&self) {
        // First what reads the store on its own: the LISTEN connection.
        self.listening.close();
        // A node that stops frees the Tasks it was working for the others (a node that
        // dies leaves them until its leases expire).
        if let Err(err) = self.release_node_wake_leases() {
            if !err.is_closed() {
                crate::log::warn(
                    "a2a_wake_lease_release_failed",
                    serde_json::json!({ "nodeId": &*self.node, "error": err.to_string() }),
                );
            }
        }
        self.store.close();
        // Ends the delivery leases and wakes their waiters, who find the plane closed.
        self.deliveries.close();
    }

    pub fn is_closed(&self) -> bool {
        self.store.is_closed()
    }

    pub fn root(&self) -> &Path {
        self.store.root()
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
        work: impl FnMut(&dyn WriteTx) -> Result<R, PlaneError> + Send + 'static,
    ) -> Result<R, PlaneError> {
        self.store.write(work)
    }

    /// A write whose committed result announces events (published from the writer thread,
    /// in commit order, before the caller hears back).
    fn write_publishing<R: Send + 'static>(
        &self,
        work: impl FnMut(&dyn WriteTx) -> Result<(R, Vec<Published>), PlaneError> + Send + 'static,
    ) -> Result<R, PlaneError> {
        self.publishing_job(work).wait()
    }

    /// [`TaskPlane::write_publishing`] as a [`WriteJob`], for callers that must not block.
    fn publishing_job<R: Send + 'static>(
        &self,
        mut work: impl FnMut(&dyn WriteTx) -> Result<(R, Vec<Published>), PlaneError> + Send + 'static,
    ) -> WriteJob<R> {
        let events = self.events.clone();
        let work = move |tx: &dyn WriteTx| {
            let (result, mut published) = work(tx)?;
            attach_settled(tx, &events, &mut published);
            Ok((result, published))
        };
        let bus = self.events.clone();
        let metrics = self.metrics.clone();
        let publish: crate::store::OnCommit<(R, Vec<Published>)> =
            Box::new(move |(_, published)| {
                // Moved to their subscribers: the job's own answer does not keep them.
                for p in std::mem::take(published) {
                    match p {
                        Published::Task(event) => {
                            if let TaskEvent::Status { state, .. } = &event {
                                if state.is_settled() {
                                    metrics.settled(state.as_str());
                                }
                            }
                            bus.publish(event)
                        }
                        Published::Accepted(accepted) => bus.publish_accepted(accepted),
                    }
                }
            });
        let job = WriteJob::new(&self.store, work, Some(publish));
        job.map(|(result, _)| result)
    }

    /// The plane's metrics and health (`GET /metrics`, `GET /healthz`).
    pub fn metrics(&self) -> &crate::metrics::Metrics {
        &self.metrics
    }

    /// The plane's event bus: per-Task updates and acceptances.
    pub fn events(&self) -> &EventBus {
        &self.events
    }

    fn read<R>(
        &self,
        read: impl FnOnce(&dyn ReadTx) -> Result<R, PlaneError>,
    ) -> Result<R, PlaneError> {
        self.store.read(read)
    }
}

/// The place for the settled Task in `update` when it should carry one: a settling
/// update (terminal or interrupted) that carries none yet, of a Task someone waits on to
/// answer with it (see `TaskEvent::Status::settled`). A Task nobody waits on costs one
/// lookup in the bus.
fn settled_slot<'a>(
    events: &EventBus,
    update: &'a mut Published,
) -> Option<(&'a str, &'a mut Option<Arc<TaskRecord>>)> {
    let Published::Task(TaskEvent::Status {
        task_id,
        state,
        settled,
        ..
    }) = update
    else {
        return None;
    };
    (state.is_settled() && settled.is_none() && events.wants_settled(task_id))
        .then_some((task_id.as_str(), settled))
}

/// Gives `update`, a settling update of the Task whose row is `after` (as this
/// transaction leaves it), the Task in full when [`settled_slot`] says so: like
/// [`attach_settled`], which then has nothing left to read, but without reading the row
/// back. `artifacts`, when given, are the Task's artifacts as the transaction leaves them,
/// so only its history is read.
fn settle_from_row(
    on: &dyn ReadTx,
    events: &EventBus,
    update: &mut Published,
    after: crate::store::tasks::TaskRow,
    artifacts: Option<Vec<crate::record::ArtifactRecord>>,
) {
    if let Some((_, slot)) = settled_slot(events, update) {
        let read = query::read_full(on, after, None, artifacts.is_none());
        *slot = read
            .ok()
            .map(|mut task| {
                if let Some(artifacts) = artifacts {
                    task.artifacts = artifacts;
                }
                task
            })
            .map(Arc::new);
    }
}

/// Gives each settling update that [`settled_slot`] names the Task as this transaction
/// leaves it. The writer's connection reads it from its warm page cache; a waiter's own
/// read after the commit would start from an empty one. A failed read only leaves the
/// waiter to read for itself.
fn attach_settled(on: &dyn ReadTx, events: &EventBus, published: &mut [Published]) {
    for p in published {
        if let Some((task_id, slot)) = settled_slot(events, p) {
            *slot = on
                .task_by_id(task_id)
                .ok()
                .flatten()
                .and_then(|row| query::read_full(on, row, None, true).ok())
                .map(Arc::new);
        }
    }
}
