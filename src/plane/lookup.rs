//! Finding Tasks the way people and the agent need them: by part of an id a person typed
//! (the operator's `/a2a show` and CLI), and the earlier Tasks of a Task's conversation
//! (what `a2a_read_task` tells the agent of it).

use super::{PlaneError, TaskPlane};
use crate::field_error::FieldError;
use crate::record::{MessageRecord, PartRecord, TaskState};
use crate::store::ReadTx;

/// The most Tasks an ambiguous typed id names.
const CANDIDATES_SHOWN: u32 = 10;

/// The Task a person named by typing part of its id: any prefix or suffix of at least six
/// characters ([`crate::ids::id_fragment`]; a whole id, and the short id shown, are
/// such parts). `None` when no Task's id starts or ends with it; refused when several do,
/// naming them, so the person can type more.
pub(crate) fn resolve_task_id(on: &dyn ReadTx, typed: &str) -> Result<Option<String>, PlaneError> {
    let fragment = crate::ids::id_fragment(typed)?;
    let mut found = on.task_ids_matching(&fragment, CANDIDATES_SHOWN + 1)?;
    if found.len() <= 1 {
        return Ok(found.pop());
    }
    let more = found.len() > CANDIDATES_SHOWN as usize;
    found.truncate(CANDIDATES_SHOWN as usize);
    Err(PlaneError::Invalid(FieldError::new(
        "taskId",
        format!(
            "`{fragment}` is part of more than one task id: {}{}; type more of the id",
            found.join(", "),
            if more { ", and more" } else { "" }
        ),
    )))
}

/// One earlier Task of a conversation, as the agent is told of it.
#[derive(Debug, Clone, PartialEq)]
pub struct EarlierTask {
    pub task_id: String,
    pub state: TaskState,
    /// The message that created it.
    pub request: Option<MessageRecord>,
    /// Its final answer: the `response` artifact, else the status message of a settled
    /// Task (a rejection's reason, a question still open, why it failed).
    pub answer: Option<Vec<PartRecord>>,
}

impl TaskPlane {
    /// [`resolve_task_id`] in this store.
    pub fn resolve_task_id(&self, typed: &str) -> Result<Option<String>, PlaneError> {
        self.read(|tx| resolve_task_id(tx, typed))
    }

    /// The newest `limit` Tasks of the same principal and context created before
    /// `task_id`, oldest first (none for a missing Task).
    pub fn earlier_tasks(&self, task_id: &str, limit: u32) -> Result<Vec<EarlierTask>, PlaneError> {
        self.read(|tx| {
            let Some(task) = tx.task_by_id(task_id)? else {
                return Ok(Vec::new());
            };
            let record = &task.record;
            let rows = tx.tasks_earlier_in_context(
                &record.principal,
                &record.context_id,
                task.seq,
                limit,
            )?;
            let mut earlier = rows
                .into_iter()
                .map(|row| {
                    let response = tx
                        .task_artifacts(row.seq)?
                        .into_iter()
                        .rev()
                        .find(|a| a.name.as_deref() == Some("response"))
                        .map(|a| a.parts);
                    let state = row.record.state;
                    let answer = response.or_else(|| {
                        state
                            .is_settled()
                            .then_some(row.record.status_message)
                            .flatten()
                            .map(|m| m.parts)
                    });
                    Ok(EarlierTask {
                        request: tx.task_first_message(row.seq)?,
                        task_id: row.record.task_id,
                        state,
                        answer,
                    })
                })
                .collect::<Result<Vec<_>, PlaneError>>()?;
            earlier.reverse();
            Ok(earlier)
        })
    }
}
