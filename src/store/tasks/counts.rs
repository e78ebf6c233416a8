//! The kept Task counts.
//!
//! `task_counts` holds each principal's number of Tasks by state, so a listing's
//! `totalSize` is one lookup. An insert and a state change count themselves in their
//! transaction (`WriteTx::count`), and the transaction writes the sums once, just before
//! it commits: a batch of writes for a dozen Tasks moves the same few counts again and
//! again, and one upsert per count and state per commit replaced five statements per Task
//! (~6% of a one-core `message:send`'s instructions). A delete (compaction only) keeps
//! the count by the `task_counts_delete` trigger. Triggers did all of it before schema 7,
//! but a statement that fires a trigger runs with a statement journal: every page it
//! touches is copied first.

use rusqlite::params;

use crate::record::TaskState;
use crate::store::writer::SqliteWriteTx;
use crate::store::StoreError;

/// A transaction's changes to the kept counts: (principal, state) → Tasks more or fewer.
#[derive(Debug, Clone, Default)]
pub struct CountChanges(Vec<(String, TaskState, i64)>);

impl CountChanges {
    pub fn add(&mut self, principal: &str, state: TaskState, by: i64) {
        match self
            .0
            .iter_mut()
            .find(|(p, s, _)| *s == state && p == principal)
        {
            Some((_, _, n)) => *n += by,
            None => self.0.push((principal.to_string(), state, by)),
        }
    }

    pub fn clear(&mut self) {
        self.0.clear();
    }
}

/// Writes the transaction's count changes (each non-zero sum once) and forgets them.
pub fn write_counts(tx: &SqliteWriteTx<'_, '_>) -> Result<(), StoreError> {
    let changes = std::mem::take(&mut *tx.counts.borrow_mut());
    for (principal, state, by) in changes.0 {
        if by == 0 {
            continue;
        }
        tx.with_statement(
            "INSERT INTO task_counts (principal, state, n) VALUES (?1, ?2, ?3) \
             ON CONFLICT (principal, state) DO UPDATE SET n = n + excluded.n",
            |s| s.execute(params![principal, state.as_str(), by]),
        )?;
    }
    Ok(())
}
