//! Outbound delivery of a response to a provider, at most one provider mutation per
//! delivery.
//!
//! - Serialized per delivery id: concurrent identical responses wait for one another, so
//!   they share one durable transition and one provider mutation; the later callers get
//!   the first one's outcome.
//! - A delivery id (or operation id) reused with a different payload digest is refused.
//! - Recovery of a delivery found in `sending` (the process died mid-send) follows its
//!   declared policy: an idempotency key makes resending safe; `lookup` asks the source's
//!   reconciler whether the mutation happened, and without one fails closed as
//!   `ambiguous`; the ambiguous policy goes straight to `ambiguous`.
//! - `ambiguous` is final: recorded with unhealthy evidence, never retried automatically.

use std::collections::HashSet;
use std::sync::{Condvar, Mutex};

use serde_json::json;

use super::{PlaneError, TaskPlane};
use crate::field_error::FieldError;
use crate::ids::check_identifier;
use crate::record::{DeliveryState, EvidenceKind, Recovery};
use crate::store::deliveries::{self, NewDelivery, StoredDelivery};
use crate::store::evidence::{self, NewEvidence};

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

/// Deliveries in progress in this process (one process per store root): a delivery id is
/// leased from `begin_delivery` until `finish_delivery`, and a second caller waits.
#[derive(Default)]
pub(super) struct InFlight {
    leased: Mutex<HashSet<String>>,
    released: Condvar,
}

impl InFlight {
    /// Leases `delivery_id`, waiting up to [`LEASE_WAIT`] for another caller to finish.
    fn acquire(&self, delivery_id: &str) -> Result<(), PlaneError> {
        let deadline = std::time::Instant::now() + LEASE_WAIT;
        let mut leased = self.leased.lock().unwrap_or_else(|p| p.into_inner());
        while leased.contains(delivery_id) {
            let now = std::time::Instant::now();
            if now >= deadline {
                return Err(PlaneError::FailedPrecondition(format!(
                    "delivery {delivery_id} has been in progress in this process for over {}s; \
                     finish it (finishDelivery) before starting it again",
                    LEASE_WAIT.as_secs()
                )));
            }
            leased = self
                .released
                .wait_timeout(leased, deadline - now)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
        leased.insert(delivery_id.to_string());
        Ok(())
    }

    fn is_leased(&self, delivery_id: &str) -> bool {
        self.leased
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .contains(delivery_id)
    }

    fn release(&self, delivery_id: &str) -> bool {
        let removed = self
            .leased
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(delivery_id);
        self.released.notify_all();
        removed
    }
}

/// How long a second caller waits for a delivery id another caller holds.
const LEASE_WAIT: std::time::Duration = std::time::Duration::from_secs(30);

/// What the caller of `begin_delivery` must do next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DeliveryStart {
    /// Perform the provider mutation now, then call `finish_delivery`.
    Send,
    /// Ask the source's reconciler whether the mutation happened, then call
    /// `resolve_lookup`.
    Lookup,
    /// Nothing to send: this is the delivery's outcome.
    Finished(DeliveryOutcome),
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
    pub fn deliver(
        &self,
        request: DeliveryRequest,
        reconciler: Option<&dyn Reconciler>,
        send: impl FnOnce() -> Result<String, SendFailure>,
    ) -> Result<DeliveryOutcome, PlaneError> {
        let mut next = self.begin_delivery(&request, reconciler.is_some())?;
        if next == DeliveryStart::Lookup {
            let found = reconciler.map(|r| r.lookup(&request)).unwrap_or(Ok(None));
            next = self.resolve_lookup(&request, found)?;
        }
        match next {
            DeliveryStart::Finished(outcome) => Ok(outcome),
            DeliveryStart::Lookup => unreachable!("a lookup is resolved above"),
            DeliveryStart::Send => {
                // Released even if `send` panics, so other callers are not stuck.
                struct Lease<'a>(&'a TaskPlane, &'a str, bool);
                impl Drop for Lease<'_> {
                    fn drop(&mut self) {
                        if self.2 {
                            self.0.deliveries.release(self.1);
                        }
                    }
                }
                let mut lease = Lease(self, &request.delivery_id, true);
                let result = send();
                lease.2 = false;
                drop(lease);
                self.finish_delivery(&request, result)
            }
        }
    }

    /// Starts a delivery: leases its id (waiting while another caller holds it), records
    /// it `prepared` (or checks the stored one carries the same payload), and says what to
    /// do next. `can_look_up`: the caller has the source's reconciler at hand.
    pub fn begin_delivery(
        &self,
        request: &DeliveryRequest,
        can_look_up: bool,
    ) -> Result<DeliveryStart, PlaneError> {
        check_request(request)?;
        self.deliveries.acquire(&request.delivery_id)?;
        let next = self.begin_leased(request, can_look_up);
        if !matches!(next, Ok(DeliveryStart::Send) | Ok(DeliveryStart::Lookup)) {
            self.deliveries.release(&request.delivery_id);
        }
        next
    }

    fn begin_leased(
        &self,
        request: &DeliveryRequest,
        can_look_up: bool,
    ) -> Result<DeliveryStart, PlaneError> {
        let row = self.prepare_delivery(request)?;
        match row.state {
            DeliveryState::Delivered => {
                return Ok(DeliveryStart::Finished(DeliveryOutcome::Delivered {
                    provider_response_id: row.provider_response_id.unwrap_or_default(),
                    sent_now: false,
                }))
            }
            DeliveryState::Ambiguous => {
                return Ok(DeliveryStart::Finished(DeliveryOutcome::Ambiguous {
                    detail: row.detail.unwrap_or_default(),
                }))
            }
            DeliveryState::Sending => match request.recovery {
                Recovery::IdempotencyKey => {}
                Recovery::Lookup if can_look_up => return Ok(DeliveryStart::Lookup),
                Recovery::Lookup => {
                    return self
                        .mark_ambiguous(
                            request,
                            "the process stopped while sending, and no reconciler can look the delivery up: \
                             failing closed instead of sending again",
                        )
                        .map(DeliveryStart::Finished)
                }
                Recovery::Ambiguous => {
                    return self
                        .mark_ambiguous(
                            request,
                            "the process stopped while sending and the source cannot tell whether the mutation happened",
                        )
                        .map(DeliveryStart::Finished)
                }
            },
            DeliveryState::Prepared | DeliveryState::Failed => {}
        }
        self.set_delivery_state(request, DeliveryState::Sending, None, None)?;
        Ok(DeliveryStart::Send)
    }

    /// Takes the reconciler's answer for a `Lookup`: found → delivered (no second
    /// mutation); not found → send now; the lookup failed → ambiguous.
    pub fn resolve_lookup(
        &self,
        request: &DeliveryRequest,
        found: Result<Option<String>, String>,
    ) -> Result<DeliveryStart, PlaneError> {
        let next = match found {
            Ok(Some(provider_response_id)) => self
                .set_delivery_state(
                    request,
                    DeliveryState::Delivered,
                    Some(&provider_response_id),
                    None,
                )
                .map(|_| {
                    DeliveryStart::Finished(DeliveryOutcome::Delivered {
                        provider_response_id,
                        sent_now: false,
                    })
                }),
            Ok(None) => self
                .set_delivery_state(request, DeliveryState::Sending, None, None)
                .map(|_| DeliveryStart::Send),
            Err(err) => self
                .mark_ambiguous(request, &format!("the reconciler's lookup failed: {err}"))
                .map(DeliveryStart::Finished),
        };
        if !matches!(next, Ok(DeliveryStart::Send)) {
            self.deliveries.release(&request.delivery_id);
        }
        next
    }

    /// Records how the provider mutation went and releases the delivery id.
    pub fn finish_delivery(
        &self,
        request: &DeliveryRequest,
        result: Result<String, SendFailure>,
    ) -> Result<DeliveryOutcome, PlaneError> {
        if !self.deliveries.is_leased(&request.delivery_id) {
            return Err(PlaneError::FailedPrecondition(format!(
                "delivery {} was not begun in this process; call beginDelivery first",
                request.delivery_id
            )));
        }
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
        self.deliveries.release(&request.delivery_id);
        outcome
    }

    /// Inserts the delivery as `prepared`, or checks a stored one carries the same payload.
    fn prepare_delivery(&self, request: &DeliveryRequest) -> Result<StoredDelivery, PlaneError> {
        let request = request.clone();
        let now = self.now();
        self.write(move |tx| {
            let conn = tx.conn();
            if let Some((delivery_id, digest)) =
                deliveries::by_operation(conn, &request.source, &request.operation_id)?
            {
                if delivery_id != request.delivery_id || digest != request.payload_digest {
                    return Err(PlaneError::DeliveryConflict(format!(
                        "operation id {} of source `{}` was already used for delivery {delivery_id} with payload {digest}; \
                         a reused operation id must carry the same payload",
                        request.operation_id, request.source
                    )));
                }
            }
            if let Some(stored) = deliveries::by_id(conn, &request.delivery_id)? {
                if stored.payload_digest != request.payload_digest {
                    return Err(PlaneError::DeliveryConflict(format!(
                        "delivery {} was prepared with payload {}, not {}; a different response needs a new delivery id",
                        request.delivery_id, stored.payload_digest, request.payload_digest
                    )));
                }
                return Ok(stored);
            }
            deliveries::insert_prepared(
                conn,
                &NewDelivery {
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
                payload_digest: request.payload_digest,
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
            deliveries::set_state(
                tx.conn(),
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
            let conn = tx.conn();
            deliveries::set_state(
                conn,
                &request.delivery_id,
                DeliveryState::Ambiguous,
                None,
                Some(&detail_text),
                now,
            )?;
            evidence::insert(
    conn,
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
        self.read(|conn| {
            Ok(deliveries::by_id(conn, delivery_id)?
                .map(|d| (d.state.as_str().to_string(), d.attempts)))
        })
    }
}
