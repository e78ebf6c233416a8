//! Outbound delivery of a response to a provider, at most one provider mutation per
//! delivery.
//!
//! - **Leases.** [`TaskPlane::begin_delivery`] grants its caller a lease on the delivery
//!   id ([`DeliveryLease`]): an unguessable token (128 random bits) that expires after
//!   `lease_ms` (default 30 s, 100 ms to 10 min). [`TaskPlane::resolve_lookup`] and
//!   [`TaskPlane::finish_delivery`] must present it: any other token, or one whose lease
//!   expired and was taken over by another caller, is refused (`FailedPrecondition`). A
//!   lease that expired but nobody took over is still honoured: its holder is still the
//!   only one. A lookup that answers "not found, send" keeps the lease (renewed).
//! - **Waiting.** A concurrent caller for a leased id waits until the holder finishes, and
//!   then reads the stored outcome (concurrent identical responses share one durable
//!   transition and one provider mutation), or until the lease expires, and then takes it
//!   over: the stored state is `sending`, so it recovers exactly as after a crash (below).
//!   It never waits past the lease's expiry, except while a call that presented the lease
//!   in time is being recorded (one store write): a lease does not expire mid-call.
//!   Awaiting [`TaskPlane::delivery_turn`] holds no thread while it waits (the addon does
//!   that); the blocking [`TaskPlane::begin_delivery`] waits on a Condvar.
//! - **In this process only.** Leases live in memory (one process per store root: the
//!   root's lock says so); after a crash, the stored `sending` state drives recovery.
//! - A delivery id (or operation id) reused with a different payload digest is refused.
//! - Recovery of a delivery found in `sending` (the process died mid-send, or a lease
//!   expired and was taken over) follows its declared policy: an idempotency key makes
//!   resending safe; `lookup` asks the source's reconciler whether the mutation happened,
//!   and without one fails closed as `ambiguous`; the ambiguous policy goes straight to
//!   `ambiguous`.
//! - `ambiguous` is final: recorded with unhealthy evidence, never retried automatically.
//!
//! The lease table (who holds an id until when, who waits, the take-over) is [`leases`].

mod leases;

use std::time::Duration;

use serde_json::json;

use super::{PlaneError, TaskPlane};
use crate::field_error::FieldError;
use crate::ids::check_identifier;
use crate::record::{DeliveryState, EvidenceKind, Recovery};
use crate::store::deliveries::{NewDelivery, StoredDelivery};
use crate::store::evidence::{self, NewEvidence};
pub(super) use leases::Leases;
pub use leases::{
    lease_duration, DeliveryLease, DeliveryTurn, DEFAULT_LEASE_MS, MAX_LEASE_MS, MIN_LEASE_MS,
};

/// One response to deliver.
#[derive(Debug, Clone)]
pub struct DeliveryRequest {
    pub delivery_id: String,
    pub principal: String,
    pub source: String,
    pub task_id: Option<String>,
    /// The provider-side idempotency key of the mutation.
    pub operation_id: String,
    /// Content address of the payload (`sha256:<hex>`).
    pub payload_digest: String,
    pub recovery: Recovery,
}

/// Why a send did not deliver.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SendFailure {
    /// The provider certainly did not perform the mutation; a later call may retry.
    NotSent(String),
    /// It may or may not have happened (timeout, dropped connection).
    Unknown(String),
}

/// Where a delivery stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DeliveryOutcome {
    Delivered {
        provider_response_id: String,
        /// Whether this call performed the mutation (false: an earlier one did).
        sent_now: bool,
    },
    NotSent {
        detail: String,
    },
    Ambiguous {
        detail: String,
    },
}

/// Tells whether a `lookup`-recovered mutation happened: `Ok(Some(id))` it did.
pub trait Reconciler {
    fn lookup(&self, request: &DeliveryRequest) -> Result<Option<String>, String>;
}

/// What the caller of `begin_delivery` must do next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DeliveryStart {
    /// Perform the provider mutation now, then call `finish_delivery` with the lease.
    Send(DeliveryLease),
    /// Ask the source's reconciler whether the mutation happened, then call
    /// `resolve_lookup` with the lease.
    Lookup(DeliveryLease),
    /// Nothing to send: this is the delivery's outcome. No lease is held.
    Finished(DeliveryOutcome),
}

/// What a begun delivery needs, before its lease is granted.
enum Step {
    Send,
    Lookup,
    Finished(DeliveryOutcome),
}

/// Checks a request to begin and its lease, giving the lease's length.
fn check_begin(request: &DeliveryRequest, lease_ms: Option<u64>) -> Result<Duration, PlaneError> {
    check_request(request)?;
    lease_duration(lease_ms)
}

fn check_request(request: &DeliveryRequest) -> Result<(), PlaneError> {
    check_identifier("deliveryId", &request.delivery_id)?;
    check_identifier("principal", &request.principal)?;
    check_identifier("source", &request.source)?;
    check_identifier("operationId", &request.operation_id)?;
    if !crate::digest::is_content_address(&request.payload_digest) {
        return Err(PlaneError::Invalid(FieldError::new(
            "payloadDigest",
            "must be sha256:<64 lowercase hex digits>",
        )));
    }
    Ok(())
}

impl TaskPlane {
    /// Delivers `request` with `send` (the provider mutation, returning the provider's
    /// response id), at most once per delivery id; see the module docs for the rules.
    /// Blocks while another caller holds the delivery's lease; holds a default lease
    /// ([`DEFAULT_LEASE_MS`]) across `send`, and ends it if `send` panics.
    pub fn deliver(
        &self,
        request: DeliveryRequest,
        reconciler: Option<&dyn Reconciler>,
        send: impl FnOnce() -> Result<String, SendFailure>,
    ) -> Result<DeliveryOutcome, PlaneError> {
        let mut next = self.begin_delivery(&request, reconciler.is_some(), None)?;
        if let DeliveryStart::Lookup(lease) = next {
            let found = reconciler.map(|r| r.lookup(&request)).unwrap_or(Ok(None));
            next = self.resolve_lookup(&request, &lease.token, found)?;
        }
        match next {
            DeliveryStart::Finished(outcome) => Ok(outcome),
            DeliveryStart::Lookup(_) => unreachable!("a lookup is resolved above"),
            DeliveryStart::Send(lease) => {
                // Ended even if `send` panics, so other callers need not wait for it to
                // expire (the stored `sending` state then drives their recovery).
                struct EndOnPanic<'a>(&'a TaskPlane, &'a str, &'a str, bool);
                impl Drop for EndOnPanic<'_> {
                    fn drop(&mut self) {
                        if self.3 {
                            self.0.deliveries.release(self.1, self.2);
                        }
                    }
                }
                let mut guard = EndOnPanic(self, &request.delivery_id, &lease.token, true);
                let result = send();
                guard.3 = false;
                drop(guard);
                self.finish_delivery(&request, &lease.token, result)
            }
        }
    }

    /// Starts a delivery, blocking this thread while another caller's live lease holds
    /// its id: takes a lease on the id (`lease_ms`, default [`DEFAULT_LEASE_MS`]), records
    /// it `prepared` (or checks the stored one carries the same payload), and says what
    /// to do next. `can_look_up`: the caller has the source's reconciler at hand.
    pub fn begin_delivery(
        &self,
        request: &DeliveryRequest,
        can_look_up: bool,
        lease_ms: Option<u64>,
    ) -> Result<DeliveryStart, PlaneError> {
        let lease = check_begin(request, lease_ms)?;
        let turn = self
            .deliveries
            .acquire_blocking(&request.delivery_id, lease)?;
        self.begin_delivery_turn(turn, request, can_look_up)
    }

    /// The first half of [`TaskPlane::begin_delivery`] for async callers: waits, holding
    /// no thread, until this caller may begin `request` (the id is free, or the lease on
    /// it expired and is taken over). Then call [`TaskPlane::begin_delivery_turn`] where a
    /// store write may block.
    pub async fn delivery_turn(
        &self,
        request: &DeliveryRequest,
        lease_ms: Option<u64>,
    ) -> Result<DeliveryTurn, PlaneError> {
        let lease = check_begin(request, lease_ms)?;
        self.deliveries.acquire(&request.delivery_id, lease).await
    }

    /// The second half of [`TaskPlane::begin_delivery`] (it blocks on one store write):
    /// records the delivery and grants the turn's lease if there is something to do.
    pub fn begin_delivery_turn(
        &self,
        turn: DeliveryTurn,
        request: &DeliveryRequest,
        can_look_up: bool,
    ) -> Result<DeliveryStart, PlaneError> {
        if turn.delivery_id != request.delivery_id {
            return Err(PlaneError::FailedPrecondition(format!(
                "this turn is for delivery {}, not {}; begin each delivery with its own turn",
                turn.delivery_id, request.delivery_id
            )));
        }
        if let Some(expired) = turn.took_over {
            crate::log::warn(
                "delivery_lease_taken_over",
                json!({
                    "deliveryId": request.delivery_id,
                    "leaseMs": expired.as_millis() as u64,
                    "recovery": request.recovery.as_str(),
                }),
            );
        }
        // An error, or nothing to send, drops the turn: the lease ends.
        Ok(match self.begin_leased(request, can_look_up)? {
            Step::Send => DeliveryStart::Send(turn.grant(self.now())),
            Step::Lookup => DeliveryStart::Lookup(turn.grant(self.now())),
            Step::Finished(outcome) => DeliveryStart::Finished(outcome),
        })
    }

    fn begin_leased(
        &self,
        request: &DeliveryRequest,
        can_look_up: bool,
    ) -> Result<Step, PlaneError> {
        let row = self.prepare_delivery(request)?;
        match row.state {
            DeliveryState::Delivered => {
                return Ok(Step::Finished(DeliveryOutcome::Delivered {
                    provider_response_id: row.provider_response_id.unwrap_or_default(),
                    sent_now: false,
                }))
            }
            DeliveryState::Ambiguous => {
                return Ok(Step::Finished(DeliveryOutcome::Ambiguous {
                    detail: row.detail.unwrap_or_default(),
                }))
            }
            DeliveryState::Sending => match request.recovery {
                Recovery::IdempotencyKey => {}
                Recovery::Lookup if can_look_up => return Ok(Step::Lookup),
                Recovery::Lookup => {
                    return self
                        .mark_ambiguous(
                            request,
                            "the delivery was left in sending (the process stopped, or its lease expired), \
                             and no reconciler can look it up: failing closed instead of sending again",
                        )
                        .map(Step::Finished)
                }
                Recovery::Ambiguous => {
                    return self
                        .mark_ambiguous(
                            request,
                            "the delivery was left in sending (the process stopped, or its lease expired), \
                             and the source cannot tell whether the mutation happened",
                        )
                        .map(Step::Finished)
                }
            },
            DeliveryState::Prepared | DeliveryState::Failed => {}
        }
        self.set_delivery_state(request, DeliveryState::Sending, None, None)?;
        Ok(Step::Send)
    }

    /// Takes the reconciler's answer for a `Lookup`, from the holder of `lease`: found →
    /// delivered (no second mutation); not found → send now, under the same lease
    /// (renewed); the lookup failed → ambiguous.
    pub fn resolve_lookup(
        &self,
        request: &DeliveryRequest,
        lease: &str,
        found: Result<Option<String>, String>,
    ) -> Result<DeliveryStart, PlaneError> {
        let turn = self.deliveries.present(&request.delivery_id, lease)?;
        // An error, or a finished delivery, drops the turn: the lease ends.
        Ok(match found {
            Ok(Some(provider_response_id)) => {
                self.set_delivery_state(
                    request,
                    DeliveryState::Delivered,
                    Some(&provider_response_id),
                    None,
                )?;
                DeliveryStart::Finished(DeliveryOutcome::Delivered {
                    provider_response_id,
                    sent_now: false,
                })
            }
            Ok(None) => {
                self.set_delivery_state(request, DeliveryState::Sending, None, None)?;
                DeliveryStart::Send(turn.grant(self.now()))
            }
            Err(err) => DeliveryStart::Finished(
                self.mark_ambiguous(request, &format!("the reconciler's lookup failed: {err}"))?,
            ),
        })
    }

    /// Records how the provider mutation went, from the holder of `lease`, and ends the
    /// lease.
    pub fn finish_delivery(
        &self,
        request: &DeliveryRequest,
        lease: &str,
        result: Result<String, SendFailure>,
    ) -> Result<DeliveryOutcome, PlaneError> {
        let turn = self.deliveries.present(&request.delivery_id, lease)?;
        let outcome = match result {
            Ok(provider_response_id) => self
                .set_delivery_state(
                    request,
                    DeliveryState::Delivered,
                    Some(&provider_response_id),
                    None,
                )
                .map(|_| DeliveryOutcome::Delivered {
                    provider_response_id,
                    sent_now: true,
                }),
            Err(SendFailure::NotSent(detail)) => self
                .set_delivery_state(request, DeliveryState::Failed, None, Some(&detail))
                .map(|_| DeliveryOutcome::NotSent { detail }),
            Err(SendFailure::Unknown(detail)) => self.mark_ambiguous(request, &detail),
        };
        drop(turn);
        outcome
    }

    /// Inserts the delivery as `prepared`, or checks a stored one carries the same payload.
    fn prepare_delivery(&self, request: &DeliveryRequest) -> Result<StoredDelivery, PlaneError> {
        let request = request.clone();
        let now = self.now();
        self.write(move |tx| {
            if let Some((delivery_id, digest)) =
                tx.delivery_by_operation(&request.source, &request.operation_id)?
            {
                if delivery_id != request.delivery_id || digest != request.payload_digest {
                    return Err(PlaneError::DeliveryConflict(format!(
                        "operation id {} of source `{}` was already used for delivery {delivery_id} with payload {digest}; \
                         a reused operation id must carry the same payload",
                        request.operation_id, request.source
                    )));
                }
            }
            if let Some(stored) = tx.delivery_by_id(&request.delivery_id)? {
                if stored.payload_digest != request.payload_digest {
                    return Err(PlaneError::DeliveryConflict(format!(
                        "delivery {} was prepared with payload {}, not {}; a different response needs a new delivery id",
                        request.delivery_id, stored.payload_digest, request.payload_digest
                    )));
                }
                return Ok(stored);
            }
            tx.insert_delivery(&NewDelivery {
                    delivery_id: &request.delivery_id,
                    principal: &request.principal,
                    source: &request.source,
                    task_id: request.task_id.as_deref(),
                    operation_id: &request.operation_id,
                    payload_digest: &request.payload_digest,
                    recovery: request.recovery,
                    now_ms: now,
                },
            )?;
            Ok(StoredDelivery {
                payload_digest: request.payload_digest.clone(),
                state: DeliveryState::Prepared,
                provider_response_id: None,
                detail: None,
                attempts: 0,
            })
        })
    }

    fn set_delivery_state(
        &self,
        request: &DeliveryRequest,
        state: DeliveryState,
        provider_response_id: Option<&str>,
        detail: Option<&str>,
    ) -> Result<(), PlaneError> {
        let delivery_id = request.delivery_id.clone();
        let provider_response_id = provider_response_id.map(str::to_string);
        let detail = detail.map(str::to_string);
        let now = self.now();
        self.write(move |tx| {
            tx.set_delivery_state(
                &delivery_id,
                state,
                provider_response_id.as_deref(),
                detail.as_deref(),
                now,
            )?;
            Ok(())
        })
    }

    fn mark_ambiguous(
        &self,
        request: &DeliveryRequest,
        detail: &str,
    ) -> Result<DeliveryOutcome, PlaneError> {
        let request = request.clone();
        let detail_text = detail.to_string();
        let now = self.now();
        self.write(move |tx| {
            tx.set_delivery_state(
                &request.delivery_id,
                DeliveryState::Ambiguous,
                None,
                Some(&detail_text),
                now,
            )?;
            evidence::insert(
    tx,
    &NewEvidence {
        kind: &EvidenceKind::DeliveryAmbiguous,
        healthy: false,
        task_id: request.task_id.as_deref(),
        activation_id: None,
        locator: &json!({ "deliveryId": request.delivery_id, "operationId": request.operation_id, "source": request.source }),
        content: &json!({
                    "kind": EvidenceKind::DeliveryAmbiguous.as_str(),
                    "deliveryId": request.delivery_id,
                    "payloadDigest": request.payload_digest,
                    "detail": detail_text,
                    "at": now,
                }),
        now_ms: now,
    },
)?;
            Ok(())
        })?;
        Ok(DeliveryOutcome::Ambiguous {
            detail: detail.to_string(),
        })
    }

    /// A delivery's stored state (`prepared`, `sending`, `delivered`, `failed`,
    /// `ambiguous`) and attempt count.
    pub fn delivery_state(&self, delivery_id: &str) -> Result<Option<(String, i64)>, PlaneError> {
        self.read(|tx| {
            Ok(tx
                .delivery_by_id(delivery_id)?
                .map(|d| (d.state.as_str().to_string(), d.attempts)))
        })
    }
}
