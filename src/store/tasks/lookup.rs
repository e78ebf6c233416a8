//! Finding Tasks by what people type and by conversation: the ids that start or end with
//! a fragment (the operator's lookups), and the earlier Tasks of one caller's context
//! (what the agent is told of a conversation's past).

use std::sync::LazyLock;

use rusqlite::params;

use super::{task_from_row, TaskRow, TASK_COLUMNS};
use crate::record::MessageRecord;
use crate::store::writer::Statements;
use crate::store::StoreError;

/// The ids of the Tasks whose id starts or ends with `fragment` (lowercase hex digits and
/// `-`, checked by `ids::id_fragment`, so it holds no GLOB wildcard), at most `limit`, in
/// id order. A prefix is an index range; a suffix scans the ids (operator lookups only).
pub fn ids_matching(
    on: &impl Statements,
    fragment: &str,
    limit: u32,
) -> Result<Vec<String>, StoreError> {
    on.statement(
        "SELECT task_id FROM tasks WHERE task_id GLOB ?1 || '*' OR task_id GLOB '*' || ?1 \
         ORDER BY task_id LIMIT ?2",
        |s| {
            s.query_map(params![fragment, limit], |r| r.get::<_, String>(0))?
                .collect::<rusqlite::Result<Vec<_>>>()
        },
    )
}

/// The newest `limit` Tasks of `principal` in `context_id` created before the Task with
/// row `before_seq` (in creation order, so a Task created later never counts as earlier),
/// newest first.
pub fn earlier_in_context(
    on: &impl Statements,
    principal: &str,
    context_id: &str,
    before_seq: i64,
    limit: u32,
) -> Result<Vec<TaskRow>, StoreError> {
    static SQL: LazyLock<String> = LazyLock::new(|| {
        format!(
            "SELECT {TASK_COLUMNS} FROM tasks WHERE principal = ?1 AND context_id = ?2 \
             AND seq < ?3 ORDER BY seq DESC LIMIT ?4"
        )
    });
    on.statement(SQL.as_str(), |s| {
        s.query_map(
            params![principal, context_id, before_seq, limit],
            task_from_row,
        )?
        .collect::<rusqlite::Result<Vec<_>>>()
    })?
    .into_iter()
    .collect()
}

/// The first message of a Task's history (the request that created it).
pub fn first_message(
    on: &impl Statements,
    task_seq: i64,
) -> Result<Option<MessageRecord>, StoreError> {
    let body = on.statement(
        "SELECT body FROM history WHERE task_seq = ?1 ORDER BY n LIMIT 1",
        |s| {
            s.query_map([task_seq], |r| r.get::<_, String>(0))?
                .next()
                .transpose()
        },
    )?;
    body.map(|b| Ok(serde_json::from_str::<MessageRecord>(&b)?))
        .transpose()
}
