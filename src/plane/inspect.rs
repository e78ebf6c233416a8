//! Looking inside a store without touching it, for the person operating the resident (the
//! inspection CLI): a read-only connection, no root lock, never a write, so it works while
//! the resident runs. Everything here crosses principals: never expose it to callers.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use rusqlite::Connection;

use super::{read_full, PlaneError};
use crate::record::{ClaimState, TaskRecord, TaskState};
use crate::store;
use crate::store::claims;
use crate::store::tasks::{self, SummaryFilter, TaskSummary};

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
    conn: Connection,
    root: PathBuf,
}

impl Inspector {
    /// Opens the store at `root` read-only (see [`store::open_read_only`]).
    pub fn open(root: &Path) -> Result<Inspector, PlaneError> {
        Ok(Inspector {
            conn: store::open_read_only(root)?,
            root: root.to_path_buf(),
        })
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The newest-status Tasks that match `filter`.
    pub fn tasks(&self, filter: &SummaryFilter) -> Result<Vec<TaskSummary>, PlaneError> {
        Ok(tasks::summaries(&self.conn, filter)?)
    }

    /// One Task with its whole history and artifacts, whoever owns it.
    pub fn task(&self, task_id: &str) -> Result<Option<TaskRecord>, PlaneError> {
        let tx = self.conn.unchecked_transaction()?;
        let task = tasks::by_id(&tx, task_id)?
            .map(|row| read_full(&tx, row, None, true))
            .transpose()?;
        tx.finish()?;
        Ok(task)
    }

    /// The folder of a Task's Pi session and its session file, if they exist.
    pub fn session_file(&self, task_id: &str) -> Option<PathBuf> {
        super::session_file(&self.root, task_id)
    }

    pub fn stats(&self) -> Result<StoreStats, PlaneError> {
        let tx = self.conn.unchecked_transaction()?;
        let mut by_state: BTreeMap<&'static str, u64> =
            TaskState::ALL.iter().map(|s| (s.as_str(), 0)).collect();
        {
            let mut stmt = tx.prepare("SELECT state, COUNT(*) FROM tasks GROUP BY state")?;
            let mut rows = stmt.query([])?;
            while let Some(row) = rows.next()? {
                let state: String = row.get(0)?;
                let count: i64 = row.get(1)?;
                let key = TaskState::parse(&state).map_or("unknown", TaskState::as_str);
                *by_state.entry(key).or_insert(0) += count as u64;
            }
        }
        let count = |table: &str| -> Result<u64, PlaneError> {
            Ok(
                tx.query_row(&format!("SELECT COUNT(*) FROM {table}"), [], |r| {
                    r.get::<_, i64>(0)
                })? as u64,
            )
        };
        let (tasks, claims, contexts) = (count("tasks")?, count("claims")?, count("contexts")?);
        let oldest_live = rusqlite::OptionalExtension::optional(tx.query_row(
            &format!(
                "SELECT task_id, created_ms FROM tasks WHERE state IN {} ORDER BY created_ms, seq LIMIT 1",
                tasks::live_states_sql()
            ),
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        ))?;
        tx.finish()?;
        let db = self.root.join(store::DB_FILE);
        let store_bytes = ["", "-wal", "-shm"]
            .iter()
            .filter_map(|suffix| {
                let mut name = db.as_os_str().to_owned();
                name.push(suffix);
                std::fs::metadata(PathBuf::from(name)).ok()
            })
            .map(|m| m.len())
            .sum();
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
        let tx = self.conn.unchecked_transaction()?;
        let mut problems = Vec::new();
        {
            let mut stmt = tx.prepare("PRAGMA integrity_check")?;
            let mut rows = stmt.query([])?;
            while let Some(row) = rows.next()? {
                let line: String = row.get(0)?;
                if line != "ok" {
                    problems.push(format!("SQLite integrity_check: {line}"));
                }
            }
        }
        let terminal = tasks::terminal_states_sql();
        let invariants: [(String, &str); 7] = [
            (
                "SELECT 'principal ' || principal || ', state ' || state FROM (SELECT principal, state, COUNT(*) AS n FROM tasks GROUP BY principal, state) t \
                 WHERE n IS NOT (SELECT c.n FROM task_counts c WHERE c.principal = t.principal AND c.state = t.state) \
                 UNION SELECT 'principal ' || principal || ', state ' || state FROM task_counts c WHERE n != 0 AND NOT EXISTS \
                 (SELECT 1 FROM tasks t WHERE t.principal = c.principal AND t.state = c.state)".into(),
                "has a kept Task count (GET /tasks totalSize) that differs from its Tasks",
            ),
            (
                format!("SELECT task_id FROM tasks WHERE state NOT IN {}", tasks::known_states_sql()),
                "has an unknown state",
            ),
            (
                "SELECT t.task_id FROM tasks t WHERE NOT EXISTS (SELECT 1 FROM claims c WHERE c.task_id = t.task_id)".into(),
                "has no claim (every Task is accepted with one, in one transaction)",
            ),
            (
                format!(
                    "SELECT c.activation_id FROM claims c WHERE c.task_id IS NOT NULL AND c.state NOT IN {} \
                     AND NOT EXISTS (SELECT 1 FROM tasks t WHERE t.task_id = c.task_id)",
                    claims::states_sql(ClaimState::is_given_up)
                ),
                "is a claim whose Task is missing (the next start quarantines it)",
            ),
            (
                "SELECT DISTINCT h.task_seq FROM history h WHERE NOT EXISTS (SELECT 1 FROM tasks t WHERE t.seq = h.task_seq) \
                 UNION SELECT DISTINCT a.task_seq FROM artifacts a WHERE NOT EXISTS (SELECT 1 FROM tasks t WHERE t.seq = a.task_seq)".into(),
                "is the sequence number of history or artifacts whose Task is missing",
            ),
            (
                format!(
                    "SELECT task_id FROM tasks WHERE input_request_open = 1 AND state NOT IN {}",
                    tasks::interrupted_states_sql()
                ),
                "has an open input request but does not wait for input",
            ),
            (
                format!(
                    "SELECT t.task_id FROM tasks t WHERE t.state NOT IN {terminal} \
                     AND NOT EXISTS (SELECT 1 FROM contexts x WHERE x.context_id = t.context_id)"
                ),
                "is a live Task whose context is missing",
            ),
        ];
        // A store not yet migrated to schema 4 (opened read-only here) keeps no counts.
        let keeps_counts: bool = tx.query_row(
            "SELECT EXISTS (SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'task_counts')",
            [],
            |r| r.get(0),
        )?;
        for (sql, what) in invariants {
            if !keeps_counts && sql.contains("task_counts") {
                continue;
            }
            let mut stmt = tx.prepare(&sql)?;
            let mut rows = stmt.query([])?;
            while let Some(row) = rows.next()? {
                let id: rusqlite::types::Value = row.get(0)?;
                let id = match id {
                    rusqlite::types::Value::Text(t) => t,
                    rusqlite::types::Value::Integer(n) => n.to_string(),
                    other => format!("{other:?}"),
                };
                problems.push(format!("{id} {what}"));
            }
        }
        tx.finish()?;
        Ok(problems)
    }
}
