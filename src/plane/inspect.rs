//! Looking inside a store without touching it, for the person operating the resident (the
//! inspection CLI): a read-only connection, no root lock, never a write, so it works while
//! the resident runs. Everything here crosses principals: never expose it to callers.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::query::read_full;
use super::PlaneError;
use crate::record::{TaskRecord, TaskState};
use crate::store::tasks::{SummaryFilter, TaskSummary};
use crate::store::{self, ReadOnly};

/// Counts and sizes of a store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreStats {
    /// Tasks by state (every state listed, zero included).
    pub by_state: BTreeMap<&'static str, u64>,
    pub tasks: u64,
    pub claims: u64,
    pub contexts: u64,
    /// The database, its WAL and shared-memory files, in bytes.
    pub store_bytes: u64,
    /// The oldest Task that is not terminal: (task id, created at, Unix ms).
    pub oldest_live: Option<(String, i64)>,
    /// Folders under `sessions/`.
    pub session_folders: u64,
}

/// A read-only view of one store root.
pub struct Inspector {
    store: ReadOnly,
    root: PathBuf,
}

impl Inspector {
    /// Opens the store at `root` read-only (see [`ReadOnly::open`]).
    pub fn open(root: &Path) -> Result<Inspector, PlaneError> {
        Ok(Inspector {
            store: ReadOnly::open(root)?,
            root: root.to_path_buf(),
        })
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The newest-status Tasks that match `filter`.
    pub fn tasks(&self, filter: &SummaryFilter) -> Result<Vec<TaskSummary>, PlaneError> {
        self.store.read(|tx| Ok(tx.task_summaries(filter)?))
    }

    /// One Task with its whole history and artifacts, whoever owns it.
    pub fn task(&self, task_id: &str) -> Result<Option<TaskRecord>, PlaneError> {
        self.store.read(|tx| {
            tx.task_by_id(task_id)?
                .map(|row| read_full(tx, row, None, true))
                .transpose()
        })
    }

    /// The Task a person named by part of its id ([`super::lookup::resolve_task_id`]).
    pub fn resolve_task_id(&self, typed: &str) -> Result<Option<String>, PlaneError> {
        self.store
            .read(|tx| super::lookup::resolve_task_id(tx, typed))
    }

    /// The folder of a Task's Pi session and its session file, if they exist.
    pub fn session_file(&self, task_id: &str) -> Option<PathBuf> {
        super::session_file(&self.root, task_id)
    }

    pub fn stats(&self) -> Result<StoreStats, PlaneError> {
        let (counts, (tasks, claims, contexts), oldest_live) = self.store.read(|tx| {
            Ok::<_, PlaneError>((
                tx.tasks_by_state()?,
                tx.record_counts()?,
                tx.oldest_live_task()?,
            ))
        })?;
        let mut by_state: BTreeMap<&'static str, u64> =
            TaskState::ALL.iter().map(|s| (s.as_str(), 0)).collect();
        for (state, count) in counts {
            *by_state
                .entry(state.map_or("unknown", TaskState::as_str))
                .or_insert(0) += count;
        }
        let store_bytes = store_bytes(&self.root);
        let session_folders = std::fs::read_dir(self.root.join(super::SESSIONS_DIR))
            .map(|d| d.flatten().filter(|e| e.path().is_dir()).count() as u64)
            .unwrap_or(0);
        Ok(StoreStats {
            by_state,
            tasks,
            claims,
            contexts,
            store_bytes,
            oldest_live,
            session_folders,
        })
    }

    /// SQLite's `integrity_check` and the store's own invariants; each problem found is
    /// one sentence (empty: the store is sound).
    pub fn check(&self) -> Result<Vec<String>, PlaneError> {
        self.store.read(|tx| Ok(tx.problems()?))
    }
}

/// The size of the store's database files under `root` (with its WAL and shared memory).
pub fn store_bytes(root: &std::path::Path) -> u64 {
    store::file_bytes(root)
}
