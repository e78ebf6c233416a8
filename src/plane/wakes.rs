//! The durable half of the wake queue: what `crate::wake` (admission, the one active
//! turn, retries) records in the store as it goes. These are plane rules, not queue
//! bookkeeping: a delivery makes the Task WORKING and is skipped when cancel (or the
//! caller) got there first; giving an activation up fails its Task only when it is the
//! Task's newest and the Task is not settled; replay offers only what is still
//! deliverable. The queue calls them; they never call the queue.

use serde_json::json;

use super::agent::status;
use super::{PlaneError, Published, TaskPlane};
use crate::events::Accepted;
use crate::record::{ClaimState, EvidenceKind, MessageRecord, PartRecord, TaskState};
use crate::store::claims::WakeLease;
use crate::store::evidence::{self, NewEvidence};
use crate::store::tasks::InputRequest;
use crate::store::{ReadTx, WriteTx};

/// Unhealthy evidence about an activation of a Task.
fn unhealthy_wake_evidence(
    tx: &dyn WriteTx,
    kind: &EvidenceKind,
    activation_id: &str,
    task_id: &str,
    reason: &str,
    now: i64,
) -> Result<(), PlaneError> {
    evidence::insert(
        tx,
        &NewEvidence {
            kind,
            healthy: false,
            task_id: Some(task_id),
            activation_id: Some(activation_id),
            locator: &json!({ "activationId": activation_id }),
            content: &json!({ "kind": kind.as_str(), "activationId": activation_id, "taskId": task_id, "reason": reason, "at": now }),
            now_ms: now,
        },
    )?;
    Ok(())
}

/// What delivering a wake did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Delivery {
    /// The Task is WORKING and this is delivery `n` of the activation.
    Delivered { delivery: i64 },
    /// Nothing to deliver any more (the Task settled or was canceled meanwhile, or the
    /// activation is no longer live); the reason says which.
    Skipped(String),
}

impl TaskPlane {
    /// Delivers a wake: the Task becomes WORKING, and the claim records WOKEN (on its first
    /// delivery) and WAKE_DELIVERED n — one transaction, immediately before the agent is
    /// prompted. A canceled (terminal) Task is skipped: cancel wins over a wake.
    ///
    /// The same transaction takes this node's lease on the wake ([`WriteTx::take_wake_lease`]):
    /// when another node holds a live one, or is delivering or ending a turn of it right
    /// now, the delivery is skipped with that reason, so two residents never work one Task.
    /// The delivery count is the claim's, whichever node delivered before.
    pub fn deliver_wake(&self, activation_id: &str, task_id: &str) -> Result<Delivery, PlaneError> {
        let (activation_id, task_id) = (activation_id.to_string(), task_id.to_string());
        let (node, lease_ms) = (self.node.clone(), self.wake_lease_ms);
        let now = self.now();
        self.write_publishing(move |tx| {
            let no_claim = || {
                Delivery::Skipped(format!(
                    "activation {activation_id} has no claim for task {task_id}"
                ))
            };
            match tx.take_wake_lease(&activation_id, &node, lease_ms)? {
                WakeLease::Taken => {}
                WakeLease::Missing => return Ok((no_claim(), vec![])),
                WakeLease::HeldBy {
                    owner,
                    remaining_ms,
                } => {
                    return Ok((
                        Delivery::Skipped(format!(
                            "task {task_id} is being worked by node {owner} (its lease runs {remaining_ms} ms more)"
                        )),
                        vec![],
                    ))
                }
                WakeLease::Busy => {
                    return Ok((
                        Delivery::Skipped(format!(
                            "another node is delivering or ending a turn of activation {activation_id} (task {task_id}) right now"
                        )),
                        vec![],
                    ))
                }
            }
            let Some(claim) = tx.wake_claim(&activation_id, &task_id)? else {
                tx.release_wake_lease(&activation_id, &node)?;
                return Ok((no_claim(), vec![]));
            };
            let skip = |why: String| -> Result<(Delivery, Vec<Published>), PlaneError> {
                // Nothing to work: the lease just taken is not kept.
                tx.release_wake_lease(&activation_id, &node)?;
                Ok((Delivery::Skipped(why), vec![]))
            };
            if !claim.state.is_deliverable() {
                return skip(format!(
                    "activation {activation_id} is {}",
                    claim.state.as_str()
                ));
            }
            let Some(task) = tx.task_by_id(&task_id)? else {
                return skip(format!("task {task_id} is gone"));
            };
            let state = task.record.state;
            if state.is_terminal() {
                return skip(format!("task {task_id} is {}", state.as_str()));
            }
            if task.record.awaits_caller() {
                return skip(format!("task {task_id} waits for its caller"));
            }
            let mut published = vec![];
            // WORKING, and no stale note (why an earlier turn failed, why it waited).
            if state != TaskState::Working || task.record.status_message.is_some() {
                tx.set_task_status(
                    &task,
                    TaskState::Working,
                    None,
                    now,
                    InputRequest::Unchanged,
                )?;
                published.push(status(&task, TaskState::Working, None, now));
            }
            let n = claim.deliveries + 1;
            if claim.state == ClaimState::Accepted {
                tx.push_claim_state(&activation_id, ClaimState::Woken, None, now)?;
            }
            tx.record_wake_delivery(&activation_id, n, now)?;
            Ok((Delivery::Delivered { delivery: n }, published))
        })
    }

    /// Gives up on an activation: WAKE_FAILED plus unhealthy evidence with `reason`. Startup
    /// does not resurrect it. When it is the Task's newest activation and the Task is not
    /// settled, the Task becomes FAILED with `caller_message` (why, and what the caller can
    /// do) as its status message, so callers waiting on it (blocking sends, streams) are
    /// answered instead of waiting forever. This node's lease on the wake ends in the same
    /// transaction (a turn that ends by giving up leaves nothing leased).
    pub fn fail_wake(
        &self,
        activation_id: &str,
        task_id: &str,
        kind: EvidenceKind,
        reason: &str,
        caller_message: &str,
    ) -> Result<(), PlaneError> {
        let (activation_id, task_id, reason, caller_message) = (
            activation_id.to_string(),
            task_id.to_string(),
            reason.to_string(),
            caller_message.to_string(),
        );
        let node = self.node.clone();
        let now = self.now();
        self.write_publishing(move |tx| {
            tx.release_wake_lease(&activation_id, &node)?;
            tx.push_claim_state(&activation_id, ClaimState::WakeFailed, Some(&reason), now)?;
            unhealthy_wake_evidence(tx, &kind, &activation_id, &task_id, &reason, now)?;
            let newest = tx.newest_claim_of_task(&task_id)?;
            let mut published = vec![];
            if let Some(task) = tx.task_by_id(&task_id)? {
                if newest.as_deref() == Some(activation_id.as_str())
                    && !task.record.state.is_terminal()
                    && !task.record.awaits_caller()
                {
                    let message =
                        MessageRecord::agent(vec![PartRecord::text(caller_message.clone())]);
                    tx.append_history(&task, &message)?;
                    tx.set_task_status(
                        &task,
                        TaskState::Failed,
                        Some(&message),
                        now,
                        InputRequest::Closed,
                    )?;
                    published.push(status(&task, TaskState::Failed, Some(&message), now));
                }
            }
            Ok(((), published))
        })
    }

    /// Records unhealthy evidence about an activation without changing its state (it stays
    /// replayable after a restart), at the end of its turn: this node's lease on the wake
    /// ends in the same transaction.
    pub fn record_unhealthy(
        &self,
        activation_id: &str,
        task_id: &str,
        kind: EvidenceKind,
        reason: &str,
    ) -> Result<(), PlaneError> {
        let (activation_id, task_id, reason) = (
            activation_id.to_string(),
            task_id.to_string(),
            reason.to_string(),
        );
        let node = self.node.clone();
        let now = self.now();
        self.write(move |tx| {
            tx.release_wake_lease(&activation_id, &node)?;
            unhealthy_wake_evidence(tx, &kind, &activation_id, &task_id, &reason, now)?;
            Ok(())
        })
    }

    /// The activations startup may offer, oldest first: for each non-terminal Task, its
    /// newest activation when that one is ACCEPTED or WOKEN and the Task is not waiting
    /// for its caller (an unanswered INPUT_REQUIRED/AUTH_REQUIRED Task waits for a newer
    /// continuation), and no other node holds a live lease on it.
    pub fn wakes_to_replay(&self) -> Result<Vec<Accepted>, PlaneError> {
        let node = self.node.clone();
        self.read(|tx| deliverable_for(tx, &node))
    }
}

/// The wakes `node` may take, oldest first (see [`TaskPlane::wakes_to_replay`]).
pub(super) fn deliverable_for(tx: &dyn ReadTx, node: &str) -> Result<Vec<Accepted>, PlaneError> {
    Ok(tx
        .deliverable_claims_for(node)?
        .into_iter()
        .map(|d| Accepted {
            activation_id: d.activation_id,
            task_id: d.task_id,
            context_id: d.context_id,
        })
        .collect())
}
