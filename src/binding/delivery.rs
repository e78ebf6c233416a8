//! Outbound delivery of a response to a provider (one provider mutation per delivery id):
//! `TaskPlane`'s delivery calls and their inputs and results.

use napi::bindgen_prelude::{AsyncTask, PromiseRaw};
use napi::Env;
use napi_derive::napi;

use super::plane::TaskPlane;
use super::{invalid_arg, on_blocking_pool, plane_error, spawn, PlaneCall, Result, Settled};
use crate::plane;

js_enum! {
    [" How a delivery found mid-send after a crash is recovered: `idempotency_key` (the"
     " provider deduplicates on the operation id: send again), `lookup` (ask the reconciler)"
     " or `ambiguous` (final, recorded with unhealthy evidence)."]
    pub enum Recovery for "recovery" {
        IdempotencyKey = "idempotency_key": " The provider deduplicates on the operation id: resending is safe.",
        Lookup = "lookup": " The provider can be asked whether the mutation happened (needs a reconciler).",
        Ambiguous = "ambiguous": " Neither: mark ambiguous, record evidence, report unhealthy.",
    }
}

impl From<Recovery> for plane::Recovery {
    fn from(name: Recovery) -> Self {
        match name {
            Recovery::IdempotencyKey => plane::Recovery::IdempotencyKey,
            Recovery::Lookup => plane::Recovery::Lookup,
            Recovery::Ambiguous => plane::Recovery::Ambiguous,
        }
    }
}

js_enum! {
    [" Where a delivery ended (final: never retried automatically): `delivered`, `not_sent`"
     " (certainly not sent) or `ambiguous` (it may or may not have been sent)."]
    pub enum DeliveryState for "state" {
        Delivered = "delivered": " The provider has it.",
        NotSent = "not_sent": " It certainly was not sent.",
        Ambiguous = "ambiguous": " It may or may not have been sent.",
    }
}

js_enum! {
    [" What to do next with a delivery: `send` (perform the mutation, then `finishDelivery`),"
     " `lookup` (ask the reconciler, then `resolveLookup`) or `finished` (see `outcome`)."]
    pub enum DeliveryNext for "next" {
        Send = "send": " Perform the mutation, then `finishDelivery`.",
        Lookup = "lookup": " Ask the reconciler, then `resolveLookup`.",
        Finished = "finished": " Nothing: see `outcome`.",
    }
}

/// One outbound response to deliver to a provider.
#[napi(object)]
pub struct DeliveryInput {
    pub delivery_id: String,
    pub principal: String,
    pub source: String,
    pub task_id: Option<String>,
    /// The provider-side idempotency key of the mutation.
    pub operation_id: String,
    /// `sha256:<hex>` of the payload.
    pub payload_digest: String,
    /// How a delivery found mid-send after a crash is recovered.
    pub recovery: Recovery,
}

/// Where a delivery ended.
#[napi(object)]
pub struct DeliveryResult {
    pub state: DeliveryState,
    pub provider_response_id: Option<String>,
    /// Whether this call performed the mutation.
    pub sent_now: Option<bool>,
    pub detail: Option<String>,
}

/// What to do next with a delivery.
#[napi(object)]
pub struct DeliveryStep {
    pub next: DeliveryNext,
    /// With `send` and `lookup`: your lease on the delivery, to present to `resolveLookup`
    /// and `finishDelivery`. Opaque; nobody else can finish the delivery while you hold it.
    pub lease: Option<String>,
    /// With `lease`: when it expires (Unix ms). Until then concurrent callers wait; after
    /// it another caller may take the delivery over (it then refuses your lease).
    pub lease_expires_at: Option<i64>,
    /// With `finished`: where the delivery ended.
    pub outcome: Option<DeliveryResult>,
}

/// How the provider mutation went: exactly one member.
#[napi(object)]
pub struct SendResult {
    /// It happened; the provider's response id.
    pub provider_response_id: Option<String>,
    /// It certainly did not happen (a later call may retry).
    pub not_sent: Option<String>,
    /// It may or may not have happened (the delivery becomes ambiguous).
    pub unknown: Option<String>,
}

fn delivery_request(input: DeliveryInput) -> plane::DeliveryRequest {
    plane::DeliveryRequest {
        delivery_id: input.delivery_id,
        principal: input.principal,
        source: input.source,
        task_id: input.task_id,
        operation_id: input.operation_id,
        payload_digest: input.payload_digest,
        recovery: input.recovery.into(),
    }
}

fn delivery_result(outcome: plane::DeliveryOutcome) -> DeliveryResult {
    match outcome {
        plane::DeliveryOutcome::Delivered {
            provider_response_id,
            sent_now,
        } => DeliveryResult {
            state: DeliveryState::Delivered,
            provider_response_id: Some(provider_response_id),
            sent_now: Some(sent_now),
            detail: None,
        },
        plane::DeliveryOutcome::NotSent { detail } => DeliveryResult {
            state: DeliveryState::NotSent,
            provider_response_id: None,
            sent_now: Some(false),
            detail: Some(detail),
        },
        plane::DeliveryOutcome::Ambiguous { detail } => DeliveryResult {
            state: DeliveryState::Ambiguous,
            provider_response_id: None,
            sent_now: Some(false),
            detail: Some(detail),
        },
    }
}

fn delivery_step(start: plane::DeliveryStart) -> DeliveryStep {
    let leased = |next, lease: plane::DeliveryLease| DeliveryStep {
        next,
        lease: Some(lease.token),
        lease_expires_at: Some(lease.expires_at_ms),
        outcome: None,
    };
    match start {
        plane::DeliveryStart::Send(lease) => leased(DeliveryNext::Send, lease),
        plane::DeliveryStart::Lookup(lease) => leased(DeliveryNext::Lookup, lease),
        plane::DeliveryStart::Finished(outcome) => DeliveryStep {
            next: DeliveryNext::Finished,
            lease: None,
            lease_expires_at: None,
            outcome: Some(delivery_result(outcome)),
        },
    }
}

#[napi]
impl TaskPlane {
    /// Starts a delivery and, unless it is `finished`, grants you a lease on it for
    /// `leaseMs` (default 30000, 100..=600000). While another caller's lease on the same
    /// delivery id is live this waits (holding no thread) until that caller finishes, and
    /// then shares its outcome, or its lease expires, and then takes the delivery over
    /// through its `recovery`. `canLookUp`: you have the source's reconciler for `lookup`.
    #[napi(ts_return_type = "Promise<DeliveryStep>")]
    pub fn begin_delivery<'env>(
        &self,
        env: &'env Env,
        request: DeliveryInput,
        can_look_up: Option<bool>,
        lease_ms: Option<u32>,
    ) -> Result<PromiseRaw<'env, Settled<DeliveryStep>>> {
        let request = delivery_request(request);
        let lease_ms = lease_ms.map(u64::from);
        // A bad leaseMs throws here, at the call.
        plane::lease_duration(lease_ms).map_err(plane_error)?;
        let plane = self.plane.clone();
        spawn(env, async move {
            // The wait for another caller's lease is awaited on the addon's runtime: no
            // thread waits. Only the store write goes to that runtime's blocking pool.
            let turn = plane
                .delivery_turn(&request, lease_ms)
                .await
                .map_err(plane_error)?;
            on_blocking_pool(move || {
                plane
                    .begin_delivery_turn(turn, &request, can_look_up.unwrap_or(false))
                    .map(delivery_step)
                    .map_err(plane_error)
            })
            .await
        })
    }

    /// The reconciler's answer after `lookup`, with the step's `lease`:
    /// `{providerResponseId}` found, `{}` not found (send now: the step keeps the lease,
    /// renewed), `{error}` the lookup failed (ambiguous). A lease that is not yours, or
    /// that expired and was taken over, is refused (`FAILED_PRECONDITION`).
    #[napi(ts_return_type = "Promise<DeliveryStep>")]
    pub fn resolve_lookup(
        &self,
        request: DeliveryInput,
        lease: String,
        provider_response_id: Option<String>,
        error: Option<String>,
    ) -> AsyncTask<PlaneCall<DeliveryStep>> {
        let request = delivery_request(request);
        let found = match error {
            Some(err) => Err(err),
            None => Ok(provider_response_id),
        };
        let plane = self.plane.clone();
        PlaneCall::new(move || {
            plane
                .resolve_lookup(&request, &lease, found)
                .map(delivery_step)
                .map_err(plane_error)
        })
    }

    /// Records how the mutation went (after `send`), with the step's `lease`, and ends the
    /// lease. A lease that is not yours, or that expired and was taken over, is refused
    /// (`FAILED_PRECONDITION`): another caller owns the delivery now.
    #[napi(ts_return_type = "Promise<DeliveryResult>")]
    pub fn finish_delivery(
        &self,
        request: DeliveryInput,
        lease: String,
        result: SendResult,
    ) -> Result<AsyncTask<PlaneCall<DeliveryResult>>> {
        let request = delivery_request(request);
        let result =
            match (result.provider_response_id, result.not_sent, result.unknown) {
                (Some(id), None, None) => Ok(id),
                (None, Some(detail), None) => Err(plane::SendFailure::NotSent(detail)),
                (None, None, Some(detail)) => Err(plane::SendFailure::Unknown(detail)),
                _ => return Err(invalid_arg(
                    "invalid `result`: give exactly one of providerResponseId, notSent or unknown",
                )),
            };
        let plane = self.plane.clone();
        Ok(PlaneCall::new(move || {
            plane
                .finish_delivery(&request, &lease, result)
                .map(delivery_result)
                .map_err(plane_error)
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_recovery_is_named_as_the_plane_parses_it() {
        for name in Recovery::ALL {
            assert_eq!(
                plane::Recovery::parse(name.as_str()),
                Some(plane::Recovery::from(*name))
            );
        }
    }
}
