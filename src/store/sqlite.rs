//! The SQLite implementation of the storage boundary ([`super::boundary`]): the embedded
//! default, one database file per store root, written by one thread.
//!
//! - [`SqliteStore`] opens a root (lock, schema, writer and checkpoint threads) and is the
//!   [`Backend`] behind [`super::Store`]: write jobs go to the writer's queue
//!   ([`super::writer`], one transaction and one fsync per batch), reads run on pooled
//!   read-only connections (WAL: beside the writer, committed data only).
//! - [`ReadTx`] is implemented once for whatever runs statements ([`Statements`]: a
//!   reader's connection or the writer's transaction), [`WriteTx`] for the writer's
//!   transaction ([`SqliteWriteTx`]); each method delegates to the per-table module's
//!   function (`super::tasks`, `super::claims`, …), where the SQL is.
//! - [`ReadOnly`] is the operator's inspection view: a read-only connection, no lock.
//! - [`SqliteTx`] lets SQLite's own tests reach the writer's connection and its kept rows
//!   ([`WriteTx::sqlite`]); nothing else uses it.

use std::fs::{self, File, OpenOptions};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use rusqlite::{Connection, OpenFlags};

use super::anchors::{self, Anchor};
use super::boundary::{Backend, EvidenceRow, ReadJob, ReadTx, WriteTx};
use super::claims::{self, Deliverable, NewClaim, PriorClaim, WakeClaim, WakeLease};
use super::deliveries::{self, NewDelivery, StoredDelivery};
use super::evidence::{self, Evidence};
use super::jobs::{self, Queue};
use super::tasks::TaskSummary;
use super::tasks::{self, InputRequest, NewTask, Page, PageQuery, SummaryFilter, TaskRow};
use super::writer::{self, SqliteWriteTx, Statements};
use super::{checkpoints, connections, contexts, durable, inspect, retention, root_lock};
use super::{schema, wal_appends, wal_checkpointer, StoreError, StoreOptions, DB_FILE};
use crate::record::{ArtifactRecord, ClaimState, DeliveryState, MessageRecord, TaskState};

/// Read connections kept open for reuse. Sized for the listener's concurrency: opening one
/// means parsing the schema again, which showed up in profiles of concurrent reads.
const MAX_IDLE_READERS: usize = 64;

struct Shared {
    root: PathBuf,
    db_path: PathBuf,
    sender: Mutex<Option<jobs::Queue>>,
    writer: Mutex<Option<JoinHandle<()>>>,
    checkpointer: Mutex<Option<wal_checkpointer::Checkpointer>>,
    readers: Mutex<Vec<Connection>>,
    lock: Mutex<Option<File>>,
}

/// The SQLite store of one root (the embedded default). Cheap to clone; `close()` on any
/// clone closes it.
#[derive(Clone)]
pub struct SqliteStore {
    shared: Arc<Shared>,
}

impl SqliteStore {
    /// Opens (creating if needed) the store at `root`, takes its lock, migrates the schema
    /// and starts the writer thread.
    pub fn open(root: &Path, options: StoreOptions) -> Result<SqliteStore, StoreError> {
        let io = |path: &Path, what: &str, err: std::io::Error| StoreError::Io {
            path: path.to_path_buf(),
            message: format!("{what}: {err}"),
        };
        let trace = options.faults.as_deref();
        // The root and its missing parents, each parent fsynced: a power cut right after
        // the first start must not lose the root with what it acknowledged.
        durable::create_dir_all(root, 0o700, trace)
            .map_err(|e| io(root, "cannot create the store directory", e))?;
        let meta =
            fs::metadata(root).map_err(|e| io(root, "cannot read the store directory", e))?;
        if !meta.is_dir() {
            return Err(StoreError::Io {
                path: root.to_path_buf(),
                message: "is not a directory; CHANNELS_TASK_STORE_PATH must name a directory"
                    .into(),
            });
        }
        fs::set_permissions(root, fs::Permissions::from_mode(0o700))
            .map_err(|e| io(root, "cannot set mode 0700 on the store directory", e))?;

        let lock = root_lock::take(root, trace)?;

        let db_path = root.join(DB_FILE);
        // Create the database file 0600 ourselves: SQLite gives its -wal and -shm files the
        // database file's mode.
        OpenOptions::new()
            .create(true)
            .append(true)
            .mode(0o600)
            .open(&db_path)
            .map_err(|e| io(&db_path, "cannot create the database file", e))?;
        // The lock and database files' entries in the root are durable before anything
        // is acknowledged (SQLite syncs the directory only for the journals it creates).
        durable::sync_dir(root, trace)
            .map_err(|e| io(root, "cannot fsync the store directory", e))?;

        connections::configure_sqlite();
        // The writer's WAL appends reach the file in one write per commit (wal_appends).
        let mut conn = wal_appends::open_writer(
            &db_path,
            OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )?;
        connections::configure(&conn)?;
        let mode: String = conn.query_row("PRAGMA journal_mode=WAL", [], |r| r.get(0))?;
        if !mode.eq_ignore_ascii_case("wal") {
            return Err(StoreError::sqlite(format!(
                "{} could not be switched to WAL mode (got {mode})",
                db_path.display()
            )));
        }
        schema::migrate(&mut conn, &db_path)?;
        for suffix in ["", "-wal", "-shm"] {
            let path = PathBuf::from(format!("{}{suffix}", db_path.display()));
            if path.exists() {
                fs::set_permissions(&path, fs::Permissions::from_mode(0o600))
                    .map_err(|e| io(&path, "cannot set mode 0600", e))?;
            }
        }

        // Checkpoints run on their own thread (below), so the writer's commits do not pay
        // for copying the WAL back; the writer checkpoints itself only past a large WAL.
        conn.pragma_update(
            None,
            "wal_autocheckpoint",
            wal_checkpointer::WRITER_CHECKPOINT_PAGES,
        )?;
        let live = tasks::LiveRows::following(&mut conn)?;
        let checkpointer = wal_checkpointer::start(&db_path)
            .map_err(|e| io(root, "cannot start the checkpoint thread", e))?;
        let (sender, receiver) = jobs::queue();
        let faults = options.faults.clone();
        let checkpoint_thread = checkpointer.1.thread().clone();
        let writer = std::thread::Builder::new()
            .name("task-plane-writer".into())
            .spawn(move || writer::writer_loop(conn, live, receiver, faults, checkpoint_thread))
            .map_err(|e| io(root, "cannot start the writer thread", e))?;

        Ok(SqliteStore {
            shared: Arc::new(Shared {
                root: root.to_path_buf(),
                db_path,
                sender: Mutex::new(Some(sender)),
                writer: Mutex::new(Some(writer)),
                checkpointer: Mutex::new(Some(checkpointer)),
                readers: Mutex::new(Vec::new()),
                lock: Mutex::new(Some(lock)),
            }),
        })
    }

    pub fn root(&self) -> &Path {
        &self.shared.root
    }

    pub fn db_path(&self) -> &Path {
        &self.shared.db_path
    }

    /// Runs `read` once on a read-only connection inside one read transaction (every
    /// statement of it sees the same committed snapshot: a Task row and its history are
    /// never from two different commits).
    fn read_snapshot(&self, read: ReadJob<'_>) -> Result<(), StoreError> {
        if self.is_closed() {
            return Err(StoreError::Closed);
        }
        let pooled = self
            .shared
            .readers
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .pop();
        let conn = match pooled {
            Some(conn) => conn,
            None => connections::open_reader(&self.shared.db_path)?,
        };
        let mut reusable = true;
        let result = match connections::savepoint(&conn, "BEGIN") {
            Ok(()) => {
                let result = read(&conn);
                if let Err(err) = connections::savepoint(&conn, "COMMIT") {
                    // The read itself is complete; a connection left inside its read
                    // transaction would pin an old snapshot, so it is not pooled again.
                    crate::log::warn(
                        "a2a_read_commit_failed",
                        serde_json::json!({ "error": err.to_string() }),
                    );
                    reusable = false;
                }
                result
            }
            Err(err) => Err(StoreError::from(err)),
        };
        let closed = self.is_closed() || !reusable;
        let mut idle = self
            .shared
            .readers
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        // A read that overlapped close() must not put its connection back in the pool.
        if !closed && idle.len() < MAX_IDLE_READERS {
            idle.push(conn);
        }
        result
    }

    /// Stops the writer after the writes already queued, closes every connection and
    /// releases the root's lock. Idempotent.
    pub fn close(&self) {
        wal_checkpointer::stop(&self.shared.checkpointer);
        let sender = self
            .shared
            .sender
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        drop(sender);
        let writer = self
            .shared
            .writer
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        if let Some(writer) = writer {
            let _ = writer.join();
        }
        self.shared
            .readers
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clear();
        // Closing the file releases the flock.
        self.shared
            .lock
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
    }

    pub fn is_closed(&self) -> bool {
        self.shared
            .sender
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .is_none()
    }
}

impl Drop for Shared {
    fn drop(&mut self) {
        wal_checkpointer::stop(&self.checkpointer);
        // The last handle went away without close(): stop the writer all the same.
        self.sender
            .get_mut()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        if let Some(writer) = self
            .writer
            .get_mut()
            .unwrap_or_else(|p| p.into_inner())
            .take()
        {
            let _ = writer.join();
        }
    }
}

impl Backend for SqliteStore {
    fn bytes(&self) -> Result<u64, StoreError> {
        Ok(super::file_bytes(&self.shared.root))
    }

    fn root(&self) -> &Path {
        &self.shared.root
    }

    fn queue(&self) -> Option<Queue> {
        self.shared
            .sender
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    fn read(&self, read: ReadJob<'_>) -> Result<(), StoreError> {
        self.read_snapshot(read)
    }

    fn close(&self) {
        SqliteStore::close(self)
    }

    fn is_closed(&self) -> bool {
        SqliteStore::is_closed(self)
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

/// The operator's read-only view of a store root: no lock, no migration, no writer (see
/// [`connections::open_read_only`]); it works while the resident has the store open.
pub struct ReadOnly {
    conn: Connection,
}

impl ReadOnly {
    /// Opens the store at `root` read-only. Refuses a root without a store and a store
    /// written by a newer build.
    pub fn open(root: &Path) -> Result<ReadOnly, StoreError> {
        Ok(ReadOnly {
            conn: connections::open_read_only(root)?,
        })
    }

    /// Runs `read` inside one read transaction (every read sees the same snapshot).
    pub fn read<R, E: From<StoreError>>(
        &self,
        read: impl FnOnce(&dyn ReadTx) -> Result<R, E>,
    ) -> Result<R, E> {
        inspect::snapshot(&self.conn, |conn| read(conn))
    }
}

/// What SQLite's own tests may reach of the writer's transaction ([`WriteTx::sqlite`]).
pub trait SqliteTx {
    /// The writer's connection (any statement may run here; see [`SqliteWriteTx::conn`]).
    fn conn(&self) -> &Connection;
    /// The writer's kept row of Task `task_id`, if it keeps one ([`tasks::LiveRows`]).
    fn kept_task_row(&self, task_id: &str) -> Option<TaskRow>;
}

impl SqliteTx for SqliteWriteTx<'_, '_> {
    fn conn(&self) -> &Connection {
        SqliteWriteTx::conn(self)
    }

    fn kept_task_row(&self, task_id: &str) -> Option<TaskRow> {
        self.live_rows().borrow().get(task_id)
    }
}

/// The reads, for a reader's connection and the writer's transaction alike (the writer's
/// runs its kept statements and consults its kept rows of live Tasks).
impl<S: Statements> ReadTx for S {
    fn task_by_id(&self, task_id: &str) -> Result<Option<TaskRow>, StoreError> {
        tasks::by_id(self, task_id)
    }

    fn task_owned_by(&self, principal: &str, task_id: &str) -> Result<Option<TaskRow>, StoreError> {
        tasks::owned(self, principal, task_id)
    }

    fn task_history(
        &self,
        task_seq: i64,
        limit: Option<u32>,
    ) -> Result<Vec<MessageRecord>, StoreError> {
        tasks::history(self, task_seq, limit)
    }

    fn task_artifacts(&self, task_seq: i64) -> Result<Vec<ArtifactRecord>, StoreError> {
        tasks::artifacts(self, task_seq)
    }

    fn task_first_message(&self, task_seq: i64) -> Result<Option<MessageRecord>, StoreError> {
        tasks::first_message(self, task_seq)
    }

    fn tasks_earlier_in_context(
        &self,
        principal: &str,
        context_id: &str,
        before_seq: i64,
        limit: u32,
    ) -> Result<Vec<TaskRow>, StoreError> {
        tasks::earlier_in_context(self, principal, context_id, before_seq, limit)
    }

    fn task_ids_matching(&self, fragment: &str, limit: u32) -> Result<Vec<String>, StoreError> {
        tasks::ids_matching(self, fragment, limit)
    }

    fn task_page(&self, principal: &str, query: &PageQuery<'_>) -> Result<Page, StoreError> {
        tasks::page(self.connection(), principal, query)
    }

    fn task_summaries(&self, filter: &SummaryFilter) -> Result<Vec<TaskSummary>, StoreError> {
        tasks::summaries(self.connection(), filter)
    }

    fn claim_by_dedupe_key(
        &self,
        principal: &str,
        dedupe_key: &str,
    ) -> Result<Option<PriorClaim>, StoreError> {
        claims::by_dedupe_key(self, principal, dedupe_key)
    }

    fn claim_state_of_event(
        &self,
        principal: &str,
        source: &str,
        event_id: &str,
    ) -> Result<Option<ClaimState>, StoreError> {
        claims::state_of_event(self.connection(), principal, source, event_id)
    }

    fn wake_claim(
        &self,
        activation_id: &str,
        task_id: &str,
    ) -> Result<Option<WakeClaim>, StoreError> {
        claims::wake_claim(self.connection(), activation_id, task_id)
    }

    fn newest_claim_of_task(&self, task_id: &str) -> Result<Option<String>, StoreError> {
        claims::newest_for_task(self.connection(), task_id)
    }

    fn newest_deliverable_claims(&self) -> Result<Vec<Deliverable>, StoreError> {
        claims::newest_deliverable(self.connection())
    }

    /// One process per root (its lock), so no other node can hold a lease here: the same
    /// as [`ReadTx::newest_deliverable_claims`].
    fn deliverable_claims_for(&self, _node: &str) -> Result<Vec<Deliverable>, StoreError> {
        claims::newest_deliverable(self.connection())
    }

    /// No other node shares a SQLite store: never a foreign lease.
    fn earliest_foreign_lease_ms(&self, _node: &str) -> Result<Option<i64>, StoreError> {
        Ok(None)
    }

    fn context_owner(&self, context_id: &str) -> Result<Option<String>, StoreError> {
        contexts::owner(self.connection(), context_id)
    }

    fn reply_anchor(
        &self,
        principal: &str,
        source: &str,
        provider_response_id: &str,
    ) -> Result<Option<Anchor>, StoreError> {
        anchors::find(self.connection(), principal, source, provider_response_id)
    }

    fn checkpoint(&self, principal: &str, source: &str) -> Result<Option<String>, StoreError> {
        checkpoints::get(self.connection(), principal, source)
    }

    fn evidence_of_task(&self, task_id: &str) -> Result<Vec<Evidence>, StoreError> {
        evidence::for_task(self.connection(), task_id)
    }

    fn delivery_by_id(&self, delivery_id: &str) -> Result<Option<StoredDelivery>, StoreError> {
        deliveries::by_id(self.connection(), delivery_id)
    }

    fn delivery_by_operation(
        &self,
        source: &str,
        operation_id: &str,
    ) -> Result<Option<(String, String)>, StoreError> {
        deliveries::by_operation(self.connection(), source, operation_id)
    }

    fn delivered_response(
        &self,
        task_id: &str,
        source: &str,
        provider_response_id: &str,
    ) -> Result<bool, StoreError> {
        deliveries::delivered_response(self.connection(), task_id, source, provider_response_id)
    }

    fn secret(&self, name: &str) -> Result<Vec<u8>, StoreError> {
        schema::secret(self.connection(), name)
    }

    fn tasks_by_state(&self) -> Result<Vec<(Option<TaskState>, u64)>, StoreError> {
        inspect::tasks_by_state(self.connection())
    }

    fn record_counts(&self) -> Result<(u64, u64, u64), StoreError> {
        inspect::record_counts(self.connection())
    }

    fn oldest_live_task(&self) -> Result<Option<(String, i64)>, StoreError> {
        inspect::oldest_live(self.connection())
    }

    fn problems(&self) -> Result<Vec<String>, StoreError> {
        inspect::problems(self.connection())
    }
}

impl WriteTx for SqliteWriteTx<'_, '_> {
    fn step(&self, name: &str) -> Result<(), StoreError> {
        SqliteWriteTx::step(self, name)
    }

    fn insert_task(&self, task: &NewTask<'_>) -> Result<i64, StoreError> {
        tasks::insert(self, task)
    }

    fn insert_first_message(
        &self,
        task_seq: i64,
        message: &MessageRecord,
    ) -> Result<(), StoreError> {
        tasks::insert_first_message(self, task_seq, message)
    }

    fn append_history(&self, task: &TaskRow, message: &MessageRecord) -> Result<(), StoreError> {
        tasks::append_history(self, task, message)
    }

    fn next_artifact_n(&self, task: &TaskRow) -> Result<i64, StoreError> {
        tasks::next_artifact_n(self, task)
    }

    fn append_artifact(&self, task: &TaskRow, artifact: &ArtifactRecord) -> Result<(), StoreError> {
        tasks::append_artifact(self, task, artifact)
    }

    fn set_task_status(
        &self,
        task: &TaskRow,
        state: TaskState,
        message: Option<&MessageRecord>,
        now_ms: i64,
        input_request: InputRequest<'_>,
    ) -> Result<(), StoreError> {
        tasks::set_status(self, task, state, message, now_ms, input_request)
    }

    fn insert_claim(&self, claim: &NewClaim<'_>) -> Result<(), StoreError> {
        claims::insert(self, claim)
    }

    fn record_claim_accepted(&self, activation_id: &str, now_ms: i64) -> Result<(), StoreError> {
        claims::record_accepted(self, activation_id, now_ms)
    }

    fn push_claim_state(
        &self,
        activation_id: &str,
        state: ClaimState,
        detail: Option<&str>,
        now_ms: i64,
    ) -> Result<(), StoreError> {
        claims::push_state(self.conn(), activation_id, state, detail, now_ms)
    }

    fn record_wake_delivery(
        &self,
        activation_id: &str,
        n: i64,
        now_ms: i64,
    ) -> Result<(), StoreError> {
        claims::record_delivery(self.conn(), activation_id, n, now_ms)
    }

    // Wake leases on SQLite: the root's lock makes this process the only node, so a lease
    // is always this node's and nothing is stored; the wake queue's one active turn is
    // the whole of turn authority. What a user sees is the same as on PostgreSQL with one
    // node: a wake is delivered once at a time, and continues after a restart.

    /// Always [`WakeLease::Taken`]: no other node can hold it (see above).
    fn take_wake_lease(
        &self,
        _activation_id: &str,
        _node: &str,
        _lease_ms: i64,
    ) -> Result<WakeLease, StoreError> {
        Ok(WakeLease::Taken)
    }

    /// Nothing to renew: no lease is stored (see above).
    fn renew_wake_leases(&self, _node: &str, _lease_ms: i64) -> Result<u64, StoreError> {
        Ok(0)
    }

    /// Nothing to release: no lease is stored (see above).
    fn release_wake_lease(&self, _activation_id: &str, _node: &str) -> Result<bool, StoreError> {
        Ok(false)
    }

    /// Nothing to release: no lease is stored (see above).
    fn release_node_wake_leases(&self, _node: &str) -> Result<u64, StoreError> {
        Ok(0)
    }

    fn context_of_conversation(
        &self,
        new_context_id: &str,
        principal: &str,
        source: &str,
        conversation_key: &str,
        now_ms: i64,
    ) -> Result<String, StoreError> {
        contexts::of_conversation(
            self.conn(),
            new_context_id,
            principal,
            source,
            conversation_key,
            now_ms,
        )
    }

    fn insert_fresh_context(
        &self,
        context_id: &str,
        principal: &str,
        source: &str,
        now_ms: i64,
    ) -> Result<(), StoreError> {
        contexts::insert_fresh(self, context_id, principal, source, now_ms)
    }

    fn touch_context(&self, context_id: &str, now_ms: i64) -> Result<(), StoreError> {
        contexts::touch(self.conn(), context_id, now_ms)
    }

    fn upsert_reply_anchor(
        &self,
        principal: &str,
        source: &str,
        provider_response_id: &str,
        anchor: &Anchor,
        now_ms: i64,
    ) -> Result<(), StoreError> {
        anchors::upsert(
            self.conn(),
            principal,
            source,
            provider_response_id,
            anchor,
            now_ms,
        )
    }

    fn set_checkpoint(
        &self,
        principal: &str,
        source: &str,
        cursor: &str,
        now_ms: i64,
    ) -> Result<(), StoreError> {
        checkpoints::set(self.conn(), principal, source, cursor, now_ms)
    }

    fn insert_evidence(&self, row: &EvidenceRow<'_>) -> Result<(), StoreError> {
        evidence::insert_row(self, row)
    }

    fn insert_delivery(&self, delivery: &NewDelivery<'_>) -> Result<(), StoreError> {
        deliveries::insert_prepared(self.conn(), delivery)
    }

    fn set_delivery_state(
        &self,
        delivery_id: &str,
        state: DeliveryState,
        provider_response_id: Option<&str>,
        detail: Option<&str>,
        now_ms: i64,
    ) -> Result<(), StoreError> {
        deliveries::set_state(
            self.conn(),
            delivery_id,
            state,
            provider_response_id,
            detail,
            now_ms,
        )
    }

    fn take_orphaned_claims(&self) -> Result<Vec<(String, String)>, StoreError> {
        retention::take_orphaned_claims(self.conn())
    }

    fn delete_settled_tasks(&self, cutoff_ms: i64) -> Result<Vec<String>, StoreError> {
        retention::delete_settled_tasks(self.conn(), cutoff_ms)
    }

    fn delete_unused_claims(&self, cutoff_ms: i64) -> Result<usize, StoreError> {
        retention::delete_unused_claims(self.conn(), cutoff_ms)
    }

    fn delete_unused_evidence(&self, cutoff_ms: i64) -> Result<usize, StoreError> {
        retention::delete_unused_evidence(self.conn(), cutoff_ms)
    }

    fn delete_unused_anchors(&self, cutoff_ms: i64) -> Result<usize, StoreError> {
        retention::delete_unused_anchors(self.conn(), cutoff_ms)
    }

    fn delete_unused_deliveries(&self, cutoff_ms: i64) -> Result<usize, StoreError> {
        retention::delete_unused_deliveries(self.conn(), cutoff_ms)
    }

    fn delete_unused_contexts(&self, cutoff_ms: i64) -> Result<usize, StoreError> {
        retention::delete_unused_contexts(self.conn(), cutoff_ms)
    }

    fn sqlite(&self) -> Option<&dyn SqliteTx> {
        Some(self)
    }
}
