//! Outbound delivery of a response to a provider (one provider mutation per delivery id):
//! `TaskPlane`'s delivery calls and their inputs and results.

use napi::bindgen_prelude::{AsyncTask, PromiseRaw};
use napi::{Env, Result};
use napi_derive::napi;

use super::plane::TaskPlane;
use super::{invalid_arg, off_libuv_pool, plane_error, PlaneCall};
use crate::plane;

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
    /// `idempotency_key`, `lookup` or `ambiguous`: how a delivery found mid-send after a
    /// crash is recovered.
    pub recovery: String,
}

/// Where a delivery ended.
#[napi(object)]
pub struct DeliveryResult {
    /// `delivered`, `not_sent` or `ambiguous` (final: never retried automatically).
    pub state: String,
    pub provider_response_id: Option<String>,
    /// Whether this call performed the mutation.
    pub sent_now: Option<bool>,
    pub detail: Option<String>,
}

/// What to do next with a delivery.
#[napi(object)]
pub struct DeliveryStep {
    /// `send` (perform the mutation, then `finishDelivery`), `lookup` (ask the reconciler,
    /// then `resolveLookup`) or `finished` (see `outcome`).
    pub next: String,
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

fn delivery_request(input: DeliveryInput) -> Result<plane::DeliveryRequest> {
    let recovery = plane::Recovery::parse(&input.recovery).ok_or_else(|| {
        invalid_arg(format!(
            "invalid `recovery`: `{}`; use idempotency_key, lookup or ambiguous",
            input.recovery
        ))
    })?;
    Ok(plane::DeliveryRequest {
        delivery_id: input.delivery_id,
        principal: input.principal,
        source: input.source,
        task_id: input.task_id,
        operation_id: input.operation_id,
        payload_digest: input.payload_digest,
        recovery,
    })
}

fn delivery_result(outcome: plane::DeliveryOutcome) -> DeliveryResult {
    match outcome {
        plane::DeliveryOutcome::Delivered {
            provider_response_id,
            sent_now,
        } => DeliveryResult {
            state: "delivered".into(),
            provider_response_id: Some(provider_response_id),
            sent_now: Some(sent_now),
            detail: None,
        },
        plane::DeliveryOutcome::NotSent { detail } => DeliveryResult {
            state: "not_sent".into(),
            provider_response_id: None,
            sent_now: Some(false),
            detail: Some(detail),
        },
        plane::DeliveryOutcome::Ambiguous { detail } => DeliveryResult {
            state: "ambiguous".into(),
            provider_response_id: None,
            sent_now: Some(false),
            detail: Some(detail),
        },
    }
}

fn delivery_step(start: plane::DeliveryStart) -> DeliveryStep {
    match start {
        plane::DeliveryStart::Send => DeliveryStep {
            next: "send".into(),
            outcome: None,
        },
        plane::DeliveryStart::Lookup => DeliveryStep {
            next: "lookup".into(),
            outcome: None,
        },
        plane::DeliveryStart::Finished(outcome) => DeliveryStep {
            next: "finished".into(),
            outcome: Some(delivery_result(outcome)),
        },
    }
}

#[napi]
impl TaskPlane {
    /// Starts a delivery. Concurrent calls for the same delivery id wait for each other and
    /// share one outcome. `canLookUp`: you have the source's reconciler for `lookup`.
    #[napi(ts_return_type = "Promise<DeliveryStep>")]
    pub fn begin_delivery<'env>(
        &self,
        env: &'env Env,
        request: DeliveryInput,
        can_look_up: Option<bool>,
    ) -> Result<PromiseRaw<'env, DeliveryStep>> {
        let request = delivery_request(request)?;
        let plane = self.plane.clone();
        // It may wait up to the lease timeout for a concurrent identical delivery: on the
        // addon's runtime's blocking pool, never on libuv's.
        off_libuv_pool(env, move || {
            plane
                .begin_delivery(&request, can_look_up.unwrap_or(false))
                .map(delivery_step)
                .map_err(plane_error)
        })
    }

    /// The reconciler's answer after `lookup`: `{providerResponseId}` found, `{}` not
    /// found (send now), `{error}` the lookup failed (ambiguous).
    #[napi(ts_return_type = "Promise<DeliveryStep>")]
    pub fn resolve_lookup(
        &self,
        request: DeliveryInput,
        provider_response_id: Option<String>,
        error: Option<String>,
    ) -> Result<AsyncTask<PlaneCall<DeliveryStep>>> {
        let request = delivery_request(request)?;
        let found = match error {
            Some(err) => Err(err),
            None => Ok(provider_response_id),
        };
        let plane = self.plane.clone();
        Ok(PlaneCall::new(move || {
            plane
                .resolve_lookup(&request, found)
                .map(delivery_step)
                .map_err(plane_error)
        }))
    }

    /// Records how the mutation went (after `send`) and releases the delivery id.
    #[napi(ts_return_type = "Promise<DeliveryResult>")]
    pub fn finish_delivery(
        &self,
        request: DeliveryInput,
        result: SendResult,
    ) -> Result<AsyncTask<PlaneCall<DeliveryResult>>> {
        let request = delivery_request(request)?;
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
                .finish_delivery(&request, result)
                .map(delivery_result)
                .map_err(plane_error)
        }))
    }
}
