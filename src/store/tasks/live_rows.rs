//! The writer's live rows: the rows of live Tasks as the writer's transactions leave them.
//!
//! The writer reads a Task's row for nearly every write about it (is it live, in which
//! state, whose), and an agent that settles a Task at once writes it three times in a row:
//! created, WORKING, COMPLETED. Each read was an index seek and a row decode (~12k
//! instructions; callgrind, one-core message:send). The writer keeps the rows of live
//! Tasks as its own writes leave them, so the next write about the Task needs no read.
//!
//! Why a kept row is always the stored one: SQLite itself reports every row of `tasks`
//! the writer's connection inserts, updates or deletes (an update hook, installed with the
//! kept rows by [`LiveRows::following`], counts them), and the kept rows account for each:
//! [`super::insert`] and [`super::set_status`] record what their statement did, and any
//! change they did not make (compaction's delete, a raw statement through
//! [`SqliteWriteTx::conn`](crate::store::writer::SqliteWriteTx::conn), a trigger) makes the writer forget
//! every kept row before it serves one again. SQLite reports no change for rows a rollback
//! restores, so the writer forgets every kept row whenever it rolls anything back (a
//! failed batch, a job's savepoint). The test
//! `a_raw_write_to_the_tasks_table_through_the_writer_connection_is_never_served_stale`
//! below writes past the kept rows; the tests in `plane::agent::live_rows` compare kept
//! and stored rows through an agent's writes and a rollback. Only what is small and hot is
//! kept: live Tasks without a status message or input schema, at most
//! [`LIVE_ROWS_AT_MOST`]. Readers never see them: only the writer's own reads
//! ([`super::by_id`] on the writer's [`SqliteWriteTx`](crate::store::writer::SqliteWriteTx)) do.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use rusqlite::hooks::Action;
use rusqlite::Connection;

use super::{InputRequest, TaskRow};
use crate::record::{MessageRecord, TaskState};
use crate::store::StoreError;

/// At most this many rows are kept (~0.5 KB each); past it the writer starts again.
const LIVE_ROWS_AT_MOST: usize = 4096;

/// The rows of live Tasks, by id, as the writer's own transactions leave them.
#[derive(Debug)]
pub struct LiveRows {
    rows: HashMap<String, TaskRow>,
    /// Rows of `tasks` the writer's connection changed, as SQLite's update hook counts
    /// them.
    changed: Arc<AtomicU64>,
    /// How many of those changes the kept rows account for: while it is behind `changed`,
    /// a row changed under them and none is served.
    followed: u64,
}

/// Whether the writer keeps `row`: a live Task's, small (no status message, input schema,
/// history or artifacts).
fn worth_keeping(row: &TaskRow) -> bool {
    let record = &row.record;
    !record.state.is_terminal()
        && record.status_message.is_none()
        && row.input_schema.is_none()
        && record.history.is_empty()
        && record.artifacts.is_empty()
}

impl LiveRows {
    /// No rows yet, for the writer's connection `conn`: installs the update hook that
    /// counts `conn`'s changes to `tasks` (the only hook the store sets on it). It runs
    /// for every row any statement changes, so it is one comparison and one addition.
    pub(crate) fn following(conn: &mut Connection) -> Result<LiveRows, StoreError> {
        let changed = Arc::new(AtomicU64::new(0));
        let counter = changed.clone();
        conn.update_hook(Some(move |_: Action, _: &str, table: &str, _: i64| {
            if table == "tasks" {
                counter.fetch_add(1, Ordering::Relaxed);
            }
        }))?;
        Ok(LiveRows {
            rows: HashMap::new(),
            changed,
            followed: 0,
        })
    }

    /// The kept row of Task `task_id`, unless `tasks` changed in a way the kept rows have
    /// not followed.
    pub(crate) fn get(&self, task_id: &str) -> Option<TaskRow> {
        if self.changed.load(Ordering::Relaxed) != self.followed {
            return None;
        }
        self.rows.get(task_id).cloned()
    }

    /// Takes in the changes to `tasks` since the last call: `written` of them are the
    /// caller's own statement's, which the caller records; any other was made under the
    /// kept rows, and every row is forgotten.
    fn follow(&mut self, written: usize) {
        let changed = self.changed.load(Ordering::Relaxed);
        if changed != self.followed + written as u64 {
            self.rows.clear();
        }
        self.followed = changed;
    }

    /// Keeps `row` (the row as stored, after a read or after the caller's statement that
    /// changed `written` rows of `tasks`) if it is worth keeping, else forgets the Task's.
    pub(super) fn keep(&mut self, row: Cow<'_, TaskRow>, written: usize) {
        self.follow(written);
        if !worth_keeping(&row) {
            self.rows.remove(&row.record.task_id);
            return;
        }
        if self.rows.len() >= LIVE_ROWS_AT_MOST && !self.rows.contains_key(&row.record.task_id) {
            self.rows.clear();
        }
        let row = row.into_owned();
        self.rows.insert(row.record.task_id.clone(), row);
    }

    /// What [`super::set_status`]'s statement (which changed `written` rows of `tasks`)
    /// did to the row, done to the kept one (with [`TaskRow::with_status`]), which stays
    /// only if still worth keeping: `task` is the row the caller changed.
    pub(super) fn set_status(
        &mut self,
        task: &TaskRow,
        state: TaskState,
        message: Option<&MessageRecord>,
        now_ms: i64,
        input_request: InputRequest<'_>,
        written: usize,
    ) {
        self.follow(written);
        let Some((task_id, row)) = self.rows.remove_entry(&task.record.task_id) else {
            return;
        };
        // The statement changed the row at `task.seq`: that is the kept row only if the
        // caller's row is the kept one (a stale row's `seq` may have been reused since).
        if written != 1 || row.seq != task.seq {
            self.clear();
            return;
        }
        // The statement leaves `status_ms` out when it equals the caller's row's.
        let status_ms = if now_ms == task.record.status_ms {
            row.record.status_ms
        } else {
            now_ms
        };
        let row = row.with_status(state, message, status_ms, input_request);
        if worth_keeping(&row) {
            self.rows.insert(task_id, row);
        }
    }

    /// Forgets every kept row (after a rollback).
    pub fn clear(&mut self) {
        self.rows.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::super::{by_id, NewTask};
    use super::*;
    use crate::record::Continuation;
    use crate::store::{Store, StoreOptions, WriteTx};

    struct Root(std::path::PathBuf);
    impl Drop for Root {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    /// What a job does with Task `t-1` before its raw write.
    #[derive(Clone, Copy)]
    enum Before {
        /// Creates it (the store's own insert).
        Create,
        /// Reads it the way the writer's jobs do.
        Read,
    }

    /// What a job does after its raw write.
    #[derive(Clone, Copy)]
    enum After {
        Nothing,
        /// The store's own status change, for the row read before the raw write: it must
        /// not be taken for the raw one.
        SetStatus,
    }

    /// Each job: what comes before, the raw write through `tx.conn()`, what comes after.
    const JOBS: [(Before, &str, After); 5] = [
        (
            Before::Create,
            "UPDATE tasks SET context_id = 'c-2' WHERE task_id = 't-1'",
            After::Nothing,
        ),
        (
            Before::Read,
            "UPDATE tasks SET state = 'working' WHERE task_id = 't-1'",
            After::Nothing,
        ),
        (
            Before::Read,
            "UPDATE tasks SET principal = 'bob' WHERE task_id = 't-1'",
            After::SetStatus,
        ),
        // SQLite deletes the row this one replaces without reporting the delete.
        (
            Before::Read,
            "INSERT OR REPLACE INTO tasks \
             (task_id, principal, context_id, source, continuation, state, status_ms, created_ms, extensions) \
             SELECT task_id, principal, 'c-3', source, continuation, state, status_ms, created_ms, extensions \
             FROM tasks WHERE task_id = 't-1'",
            After::Nothing,
        ),
        (
            Before::Read,
            "DELETE FROM tasks WHERE task_id = 't-1'",
            After::Nothing,
        ),
    ];

    /// Runs one job; answers whether the writer kept the row before the raw write (else
    /// the job could not show a stale one), the row its own read then serves, and the row
    /// the store holds.
    fn job(
        tx: &dyn WriteTx,
        before: Before,
        raw: &str,
        after: After,
    ) -> Result<(bool, Option<TaskRow>, Option<TaskRow>), StoreError> {
        let row = match before {
            Before::Create => {
                let task = NewTask {
                    task_id: "t-1",
                    principal: "alice",
                    context_id: "c-1",
                    source: "test",
                    continuation: Continuation::None,
                    state: TaskState::Submitted,
                    extensions: &[],
                    now_ms: 1_000,
                };
                tx.insert_task(&task)?;
                None
            }
            Before::Read => tx.task_by_id("t-1")?,
        };
        let sqlite = tx.sqlite().expect("a SQLite store");
        let kept = sqlite.kept_task_row("t-1").is_some();
        sqlite.conn().execute(raw, [])?;
        if let (After::SetStatus, Some(row)) = (after, &row) {
            let unchanged = InputRequest::Unchanged;
            tx.set_task_status(row, TaskState::Working, None, 2_000, unchanged)?;
        }
        Ok((kept, tx.task_by_id("t-1")?, by_id(sqlite.conn(), "t-1")?))
    }

    #[test]
    fn a_raw_write_to_the_tasks_table_through_the_writer_connection_is_never_served_stale() {
        let root = Root(std::env::temp_dir().join(format!("tp-live-rows-{}", crate::ids::mint())));
        let store = Store::open(&root.0, StoreOptions::default()).unwrap();
        for (before, raw, after) in JOBS {
            let (kept, served, stored) =
                store.write(move |tx| job(tx, before, raw, after)).unwrap();
            assert!(
                kept,
                "{raw}: the row was not kept, so no stale one could be served"
            );
            assert_eq!(served, stored, "{raw}");
        }
        store.close();
    }
}
