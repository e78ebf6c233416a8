//! The activation journal: `claims` (one per (principal, dedupe key), the dedupe
//! authority) and each claim's state records in `claim_states` (ACCEPTED, WOKEN,
//! WAKE_DELIVERED n, WAKE_FAILED, QUARANTINED; see [`ClaimState`]).

use std::sync::LazyLock;

use rusqlite::{params, Connection, OptionalExtension};

use super::tasks::{awaits_caller_sql, live_states_sql};
use super::writer::{SqliteWriteTx, Statements};
use super::{sql_list, StoreError};
use crate::record::{ClaimRoute, ClaimState, MessageRecord};

/// The claim states `keep` selects, as an SQL list.
pub fn states_sql(keep: impl Fn(ClaimState) -> bool) -> String {
    sql_list(
        ClaimState::ALL
            .into_iter()
            .filter(|s| keep(*s))
            .map(ClaimState::as_str),
    )
}

fn parse_state(activation_id: &str, state: &str) -> Result<ClaimState, StoreError> {
    ClaimState::parse(state).ok_or_else(|| {
        StoreError::Corrupt(format!("claim {activation_id}: unknown state `{state}`"))
    })
}

/// What an earlier acceptance of the same (principal, dedupe key) recorded.
#[derive(Debug, Clone)]
pub struct PriorClaim {
    pub activation_id: String,
    /// `None` for a direct Message outcome.
    pub task_id: Option<String>,
    pub context_id: String,
    /// Content address of the payload accepted then.
    pub digest: String,
    pub requested_context_id: Option<String>,
    pub requested_task_id: Option<String>,
    /// The direct Message outcome, verbatim.
    pub direct_reply: Option<MessageRecord>,
}

/// The claim of (principal, dedupe key), if one was accepted.
pub fn by_dedupe_key(
    on: &impl Statements,
    principal: &str,
    dedupe_key: &str,
) -> Result<Option<PriorClaim>, StoreError> {
    let row = on.statement(
        "SELECT activation_id, task_id, context_id, digest, requested_context_id, requested_task_id, direct_reply \
         FROM claims WHERE principal = ?1 AND dedupe_key = ?2",
        |s| {
            s.query_row(params![principal, dedupe_key], |r| {
            Ok((
                PriorClaim {
                    activation_id: r.get(0)?,
                    task_id: r.get(1)?,
                    context_id: r.get(2)?,
                    digest: r.get(3)?,
                    requested_context_id: r.get(4)?,
                    requested_task_id: r.get(5)?,
                    direct_reply: None,
                },
                r.get::<_, Option<String>>(6)?,
            ))
            })
            .optional()
        },
    )?;
    row.map(|(mut claim, direct_reply)| {
        claim.direct_reply = direct_reply
            .map(|m| serde_json::from_str::<MessageRecord>(&m))
            .transpose()?;
        Ok(claim)
    })
    .transpose()
}

/// The current state of the claim a source's event made for a principal, if it was
/// accepted.
pub fn state_of_event(
    conn: &Connection,
    principal: &str,
    source: &str,
    event_id: &str,
) -> Result<Option<ClaimState>, StoreError> {
    let found: Option<(String, String)> = conn
        .prepare_cached(
            "SELECT activation_id, state FROM claims WHERE principal = ?1 AND dedupe_key = ?2 AND source = ?3",
        )?
        .query_row(params![principal, event_id, source], |r| {
            Ok((r.get(0)?, r.get(1)?))
        })
        .optional()?;
    found
        .map(|(activation_id, state)| parse_state(&activation_id, &state))
        .transpose()
}

/// A claim to record (its state is ACCEPTED).
pub struct NewClaim<'a> {
    pub activation_id: &'a str,
    pub principal: &'a str,
    pub dedupe_key: &'a str,
    pub source: &'a str,
    pub route: ClaimRoute,
    pub task_id: Option<&'a str>,
    pub context_id: &'a str,
    pub digest: &'a str,
    pub requested_context_id: Option<&'a str>,
    pub requested_task_id: Option<&'a str>,
    pub direct_reply: Option<&'a MessageRecord>,
    pub now_ms: i64,
}

/// Inserts a claim, ACCEPTED. Its first state record is [`record_accepted`].
pub fn insert(tx: &SqliteWriteTx<'_, '_>, claim: &NewClaim<'_>) -> Result<(), StoreError> {
    let direct_reply = claim.direct_reply.map(serde_json::to_string).transpose()?;
    tx.with_statement(
        "INSERT INTO claims (activation_id, principal, dedupe_key, source, route, task_id, context_id, digest, \
         requested_context_id, requested_task_id, direct_reply, state, claimed_ms) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)",
        |s| {
            s.execute(params![
                claim.activation_id,
                claim.principal,
                claim.dedupe_key,
                claim.source,
                claim.route.as_str(),
                claim.task_id,
                claim.context_id,
                claim.digest,
                claim.requested_context_id,
                claim.requested_task_id,
                direct_reply,
                ClaimState::Accepted.as_str(),
                claim.now_ms
            ])
        },
    )?;
    Ok(())
}

/// The claim's first state record, ACCEPTED: the durable wake record.
pub fn record_accepted(
    tx: &SqliteWriteTx<'_, '_>,
    activation_id: &str,
    now_ms: i64,
) -> Result<(), StoreError> {
    tx.with_statement(
        "INSERT INTO claim_states (activation_id, n, kind, count, at_ms, detail) VALUES (?1, 0, ?2, NULL, ?3, NULL)",
        |s| s.execute(params![activation_id, ClaimState::Accepted.as_str(), now_ms]),
    )?;
    Ok(())
}

/// Appends a state record to a claim (the claim's current state is unchanged).
fn append_record(
    conn: &Connection,
    activation_id: &str,
    kind: ClaimState,
    count: Option<i64>,
    detail: Option<&str>,
    now_ms: i64,
) -> Result<(), StoreError> {
    conn.prepare_cached(
        "INSERT INTO claim_states (activation_id, n, kind, count, at_ms, detail) \
         VALUES (?1, (SELECT COUNT(*) FROM claim_states WHERE activation_id = ?1), ?2, ?3, ?4, ?5)",
    )?
    .execute(params![activation_id, kind.as_str(), count, now_ms, detail])?;
    Ok(())
}

/// Appends `state` to a claim's records and makes it the claim's current state.
pub fn push_state(
    conn: &Connection,
    activation_id: &str,
    state: ClaimState,
    detail: Option<&str>,
    now_ms: i64,
) -> Result<(), StoreError> {
    append_record(conn, activation_id, state, None, detail, now_ms)?;
    conn.prepare_cached("UPDATE claims SET state = ?2 WHERE activation_id = ?1")?
        .execute(params![activation_id, state.as_str()])?;
    Ok(())
}

/// Records delivery `n` of a claim's wake: its count, and a WAKE_DELIVERED n record.
pub fn record_delivery(
    conn: &Connection,
    activation_id: &str,
    n: i64,
    now_ms: i64,
) -> Result<(), StoreError> {
    conn.prepare_cached("UPDATE claims SET deliveries = ?2 WHERE activation_id = ?1")?
        .execute(params![activation_id, n])?;
    append_record(
        conn,
        activation_id,
        ClaimState::WakeDelivered,
        Some(n),
        None,
        now_ms,
    )
}

/// Where the wake of a claim stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WakeClaim {
    pub state: ClaimState,
    /// Deliveries so far.
    pub deliveries: i64,
}

/// The claim `activation_id` made for Task `task_id`, if there is one.
pub fn wake_claim(
    conn: &Connection,
    activation_id: &str,
    task_id: &str,
) -> Result<Option<WakeClaim>, StoreError> {
    let found: Option<(String, i64)> = conn
        .prepare_cached(
            "SELECT state, deliveries FROM claims WHERE activation_id = ?1 AND task_id = ?2",
        )?
        .query_row([activation_id, task_id], |r| Ok((r.get(0)?, r.get(1)?)))
        .optional()?;
    found
        .map(|(state, deliveries)| {
            Ok(WakeClaim {
                state: parse_state(activation_id, &state)?,
                deliveries,
            })
        })
        .transpose()
}

/// The newest activation of Task `task_id` (ids are time-ordered UUIDs).
pub fn newest_for_task(conn: &Connection, task_id: &str) -> Result<Option<String>, StoreError> {
    Ok(conn
        .prepare_cached("SELECT MAX(activation_id) FROM claims WHERE task_id = ?1")?
        .query_row([task_id], |r| r.get(0))?)
}

/// What taking a wake's lease came to ([`super::WriteTx::take_wake_lease`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WakeLease {
    /// This node holds the lease now (it was free, expired, or already this node's).
    Taken,
    /// Another node holds a live lease on this claim or another of its Task: `owner` (its
    /// node id), for `remaining_ms` more
    /// (measured on the database's clock).
    HeldBy { owner: String, remaining_ms: i64 },
    /// Another transaction has the claim's row locked right now (a node delivering or
    /// ending a turn of it): it is not waited for (`SKIP LOCKED`).
    Busy,
    /// There is no claim `activation_id`.
    Missing,
}

/// An activation the wake queue may be offered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Deliverable {
    pub activation_id: String,
    pub task_id: String,
    pub context_id: String,
}

/// For each live Task that does not wait for its caller, its newest activation when that
/// one is still deliverable ([`ClaimState::is_deliverable`]), oldest first.
pub fn newest_deliverable(conn: &Connection) -> Result<Vec<Deliverable>, StoreError> {
    // From the live Tasks (an index range), each one's newest claim: the cost follows the
    // open work, not every claim ever kept.
    static SQL: LazyLock<String> = LazyLock::new(|| {
        format!(
            "SELECT c.activation_id, c.task_id, c.context_id FROM tasks t JOIN claims c \
             ON c.activation_id = (SELECT MAX(c2.activation_id) FROM claims c2 WHERE c2.task_id = t.task_id) \
             WHERE t.state IN {} \
             AND c.state IN {} \
             AND NOT {} \
             ORDER BY c.activation_id",
            live_states_sql(),
            states_sql(ClaimState::is_deliverable),
            awaits_caller_sql("t"),
        )
    });
    let mut stmt = conn.prepare(&SQL)?;
    let rows = stmt
        .query_map([], |r| {
            Ok(Deliverable {
                activation_id: r.get(0)?,
                task_id: r.get(1)?,
                context_id: r.get(2)?,
            })
        })?
        .collect::<Result<Vec<_>, _>>()?;
    Ok(rows)
}
