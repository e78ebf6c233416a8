//! The `deliveries` table: each outbound response the plane delivers to a provider, its
//! payload digest, recovery policy and state ([`DeliveryState`]).

use rusqlite::{params, Connection, OptionalExtension};

use super::StoreError;
use crate::record::{DeliveryState, Recovery};

/// A delivery as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredDelivery {
    pub payload_digest: String,
    pub state: DeliveryState,
    pub provider_response_id: Option<String>,
    pub detail: Option<String>,
    /// How many times it entered `sending`.
    pub attempts: i64,
}

/// The delivery `delivery_id`, if it was prepared.
pub fn by_id(conn: &Connection, delivery_id: &str) -> Result<Option<StoredDelivery>, StoreError> {
    conn.prepare_cached(
        "SELECT payload_digest, state, provider_response_id, detail, attempts FROM deliveries WHERE delivery_id = ?1",
    )?
    .query_row([delivery_id], |r| {
        let state: String = r.get(1)?;
        Ok(match DeliveryState::parse(&state) {
            Some(state) => Ok(StoredDelivery {
                payload_digest: r.get(0)?,
                state,
                provider_response_id: r.get(2)?,
                detail: r.get(3)?,
                attempts: r.get(4)?,
            }),
            None => Err(StoreError::Corrupt(format!(
                "delivery {delivery_id}: unknown state `{state}`"
            ))),
        })
    })
    .optional()?
    .transpose()
}

/// The delivery that used `operation_id` on `source`, and its payload digest.
pub fn by_operation(
    conn: &Connection,
    source: &str,
    operation_id: &str,
) -> Result<Option<(String, String)>, StoreError> {
    Ok(conn
        .prepare_cached(
            "SELECT delivery_id, payload_digest FROM deliveries WHERE source = ?1 AND operation_id = ?2",
        )?
        .query_row(params![source, operation_id], |r| Ok((r.get(0)?, r.get(1)?)))
        .optional()?)
}

/// Whether the plane delivered `provider_response_id` on `source` for Task `task_id`.
pub fn delivered_response(
    conn: &Connection,
    task_id: &str,
    source: &str,
    provider_response_id: &str,
) -> Result<bool, StoreError> {
    let found: Option<String> = conn
        .prepare_cached(
            "SELECT delivery_id FROM deliveries WHERE task_id = ?1 AND source = ?2 \
             AND provider_response_id = ?3 AND state = ?4",
        )?
        .query_row(
            params![
                task_id,
                source,
                provider_response_id,
                DeliveryState::Delivered.as_str()
            ],
            |r| r.get(0),
        )
        .optional()?;
    Ok(found.is_some())
}

/// A delivery to record, `prepared`.
pub struct NewDelivery<'a> {
    pub delivery_id: &'a str,
    pub principal: &'a str,
    pub source: &'a str,
    pub task_id: Option<&'a str>,
    pub operation_id: &'a str,
    pub payload_digest: &'a str,
    pub recovery: Recovery,
    pub now_ms: i64,
}

/// Inserts a delivery in state `prepared`.
pub fn insert_prepared(conn: &Connection, delivery: &NewDelivery<'_>) -> Result<(), StoreError> {
    conn.prepare_cached(
        "INSERT INTO deliveries (delivery_id, principal, source, task_id, operation_id, payload_digest, recovery, \
         state, created_ms, updated_ms) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?9)",
    )?
    .execute(params![
        delivery.delivery_id,
        delivery.principal,
        delivery.source,
        delivery.task_id,
        delivery.operation_id,
        delivery.payload_digest,
        delivery.recovery.as_str(),
        DeliveryState::Prepared.as_str(),
        delivery.now_ms
    ])?;
    Ok(())
}

/// Moves a delivery to `state` with `detail` (a provider response id, once known, is
/// kept); entering `sending` counts an attempt.
pub fn set_state(
    conn: &Connection,
    delivery_id: &str,
    state: DeliveryState,
    provider_response_id: Option<&str>,
    detail: Option<&str>,
    now_ms: i64,
) -> Result<(), StoreError> {
    conn.prepare_cached(
        "UPDATE deliveries SET state = ?2, provider_response_id = COALESCE(?3, provider_response_id), \
         detail = ?4, attempts = attempts + ?6, updated_ms = ?5 WHERE delivery_id = ?1",
    )?
    .execute(params![
        delivery_id,
        state.as_str(),
        provider_response_id,
        detail,
        now_ms,
        i64::from(state == DeliveryState::Sending)
    ])?;
    Ok(())
}
