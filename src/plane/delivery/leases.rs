//! The lease table on delivery ids, in memory: who holds each id and until when, who waits
//! for it (blocking on a Condvar, or awaiting a watch channel), the take-over of an expired
//! lease, and why a call presenting a lease that is no longer held is refused. The rules
//! it serves are in the parent module's docs; who waits on what is in
//! `docs/architecture.md`, "Delivery leases".

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use tokio::sync::watch;

use crate::field_error::FieldError;
use crate::plane::PlaneError;
use crate::store::StoreError;

/// A lease's length when the caller names none.
pub const DEFAULT_LEASE_MS: u64 = 30_000;
/// The shortest lease a caller may ask for.
pub const MIN_LEASE_MS: u64 = 100;
/// The longest lease a caller may ask for.
pub const MAX_LEASE_MS: u64 = 600_000;
/// How many taken-over leases are remembered, so their holders' late calls are told why
/// they are refused (the rest are told the lease is unknown).
const TAKEN_OVER_KEPT: usize = 1024;

/// A lease on a delivery id: whoever presents `token` alone may resolve or finish the
/// delivery.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeliveryLease {
    /// Opaque and unguessable: 128 random bits as 32 hex digits.
    pub token: String,
    /// When the lease expires, by the plane's clock (Unix ms).
    pub expires_at_ms: i64,
    /// The same moment on the monotonic clock, which is the one that decides.
    pub expires_at: Instant,
}

/// The leases on delivery ids in this process (one process per store root). Who waits on
/// what is in `docs/architecture.md`, "Delivery leases".
#[derive(Default)]
pub(in crate::plane) struct Leases {
    table: Mutex<LeaseTable>,
    /// Signalled on every change, for callers that wait blocking.
    changed: Condvar,
}

#[derive(Default)]
struct LeaseTable {
    held: HashMap<String, Held>,
    /// Leases that expired and were taken over, newest last (the last [`TAKEN_OVER_KEPT`]).
    taken_over: VecDeque<TakenOver>,
    closed: bool,
}

struct Held {
    token: String,
    lease: Duration,
    /// When it expires; `None` while the call that grants it (the begin) or a call that
    /// presented it is being recorded.
    expires: Option<Instant>,
    /// Wakes async waiters on a change; dropped with the lease, which wakes them too.
    changed: watch::Sender<()>,
}

struct TakenOver {
    delivery_id: String,
    token: String,
    lease: Duration,
}

/// A caller's turn at a delivery id: its lease, pinned (it cannot expire) while the call
/// is recorded. Dropped without being granted, it ends the lease: a failed or panicking
/// call leaves no lease behind.
pub struct DeliveryTurn {
    leases: Arc<Leases>,
    pub(super) delivery_id: String,
    token: String,
    lease: Duration,
    /// The expired lease this turn took over, if it did.
    pub(super) took_over: Option<Duration>,
    /// Whether dropping the turn ends the lease.
    ends_on_drop: bool,
}

impl DeliveryTurn {
    /// Keeps the lease, now expiring `lease` from now: the caller holds it.
    pub(super) fn grant(mut self, now_ms: i64) -> DeliveryLease {
        self.ends_on_drop = false;
        let expires_at = Instant::now() + self.lease;
        let mut table = self.leases.lock();
        if let Some(held) = table.held.get_mut(&self.delivery_id) {
            if held.token == self.token {
                held.expires = Some(expires_at);
                held.changed.send_replace(());
            }
        }
        drop(table);
        self.leases.changed.notify_all();
        DeliveryLease {
            token: self.token.clone(),
            expires_at_ms: now_ms.saturating_add(self.lease.as_millis() as i64),
            expires_at,
        }
    }
}

impl Drop for DeliveryTurn {
    fn drop(&mut self) {
        if self.ends_on_drop {
            self.leases.release(&self.delivery_id, &self.token);
        }
    }
}

/// What a caller of [`Leases::try_acquire`] gets: its turn, or the lease to wait out.
enum Acquire {
    Turn(DeliveryTurn),
    /// Another caller holds the id until then (`None`: its call is being recorded).
    Wait(Option<Instant>),
}

impl Leases {
    fn lock(&self) -> MutexGuard<'_, LeaseTable> {
        self.table.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A turn at `delivery_id` if it is free or its lease expired (taken over), else what
    /// to wait for. Decided under the table's lock, which the caller holds.
    fn try_acquire(
        self: &Arc<Self>,
        table: &mut LeaseTable,
        delivery_id: &str,
        lease: Duration,
    ) -> Result<Acquire, PlaneError> {
        if table.closed {
            return Err(PlaneError::Store(StoreError::Closed));
        }
        let mut took_over = None;
        if let Some(held) = table.held.get(delivery_id) {
            match held.expires {
                Some(at) if at <= Instant::now() => {
                    took_over = Some(held.lease);
                    table.taken_over.push_back(TakenOver {
                        delivery_id: delivery_id.to_string(),
                        token: held.token.clone(),
                        lease: held.lease,
                    });
                    if table.taken_over.len() > TAKEN_OVER_KEPT {
                        table.taken_over.pop_front();
                    }
                }
                until => return Ok(Acquire::Wait(until)),
            }
        }
        let token = crate::ids::lease_token();
        // Replacing an expired lease drops its sender: its other waiters wake and now wait
        // for this one.
        table.held.insert(
            delivery_id.to_string(),
            Held {
                token: token.clone(),
                lease,
                expires: None,
                changed: watch::channel(()).0,
            },
        );
        Ok(Acquire::Turn(DeliveryTurn {
            leases: self.clone(),
            delivery_id: delivery_id.to_string(),
            token,
            lease,
            took_over,
            ends_on_drop: true,
        }))
    }

    /// A turn at `delivery_id`, blocking this thread while another caller's live lease
    /// holds it.
    pub(super) fn acquire_blocking(
        self: &Arc<Self>,
        delivery_id: &str,
        lease: Duration,
    ) -> Result<DeliveryTurn, PlaneError> {
        let mut table = self.lock();
        loop {
            table = match self.try_acquire(&mut table, delivery_id, lease)? {
                Acquire::Turn(turn) => return Ok(turn),
                Acquire::Wait(Some(until)) => {
                    let wait = until.saturating_duration_since(Instant::now());
                    self.changed
                        .wait_timeout(table, wait)
                        .unwrap_or_else(|p| p.into_inner())
                        .0
                }
                Acquire::Wait(None) => self.changed.wait(table).unwrap_or_else(|p| p.into_inner()),
            };
        }
    }

    /// A turn at `delivery_id`, awaited: no thread waits while another caller's live lease
    /// holds it.
    pub(super) async fn acquire(
        self: &Arc<Self>,
        delivery_id: &str,
        lease: Duration,
    ) -> Result<DeliveryTurn, PlaneError> {
        loop {
            // Subscribed under the lock that decided to wait, so no change is missed.
            let (until, mut changed) = {
                let mut table = self.lock();
                match self.try_acquire(&mut table, delivery_id, lease)? {
                    Acquire::Turn(turn) => return Ok(turn),
                    Acquire::Wait(until) => match table.held.get(delivery_id) {
                        Some(held) => (until, held.changed.subscribe()),
                        None => continue,
                    },
                }
            };
            match until {
                Some(at) => {
                    let _ = tokio::time::timeout_at(at.into(), changed.changed()).await;
                }
                None => {
                    let _ = changed.changed().await;
                }
            }
        }
    }

    /// The holder's turn for a call that presents `token`, or why it is refused.
    pub(super) fn present(
        self: &Arc<Self>,
        delivery_id: &str,
        token: &str,
    ) -> Result<DeliveryTurn, PlaneError> {
        let mut table = self.lock();
        if table.closed {
            return Err(PlaneError::Store(StoreError::Closed));
        }
        match table.held.get_mut(delivery_id) {
            Some(held) if held.token == token => {
                if held.expires.is_none() {
                    return Err(PlaneError::FailedPrecondition(format!(
                        "delivery {delivery_id}: another call that presented this lease is still being recorded; \
                         a lease takes one resolveLookup or finishDelivery at a time"
                    )));
                }
                held.expires = None;
                Ok(DeliveryTurn {
                    leases: self.clone(),
                    delivery_id: delivery_id.to_string(),
                    token: token.to_string(),
                    lease: held.lease,
                    took_over: None,
                    ends_on_drop: true,
                })
            }
            _ => Err(refused(&table, delivery_id, token)),
        }
    }

    /// Ends `token`'s lease on `delivery_id`, if it is still the one held.
    pub(super) fn release(&self, delivery_id: &str, token: &str) {
        let mut table = self.lock();
        if table
            .held
            .get(delivery_id)
            .is_some_and(|h| h.token == token)
        {
            // Dropping its sender wakes the async waiters.
            table.held.remove(delivery_id);
        }
        drop(table);
        self.changed.notify_all();
    }

    /// Ends every lease and wakes every waiter: the plane is closed.
    pub(in crate::plane) fn close(&self) {
        let mut table = self.lock();
        table.closed = true;
        table.held.clear();
        drop(table);
        self.changed.notify_all();
    }
}

/// Why a call presenting `token` for `delivery_id` is refused, for people.
fn refused(table: &LeaseTable, delivery_id: &str, token: &str) -> PlaneError {
    let taken_over = table
        .taken_over
        .iter()
        .rev()
        .find(|t| t.delivery_id == delivery_id && t.token == token);
    PlaneError::FailedPrecondition(match taken_over {
        Some(t) => format!(
            "delivery {delivery_id}: this lease expired after {} ms and was taken over by another caller, \
             who now owns the delivery and recovers it by its policy; record nothing with this lease: \
             call beginDelivery again to learn the outcome, with a longer leaseMs if the provider call takes that long",
            t.lease.as_millis()
        ),
        None => format!(
            "delivery {delivery_id} was not begun with this lease in this process: the lease was never granted \
             for it here (leases do not survive a restart) or it already ended (finishDelivery, or a resolveLookup \
             that finished the delivery); call beginDelivery and present the lease it returns"
        ),
    })
}

/// The lease a caller asked for (`None`: the default), checked.
pub fn lease_duration(lease_ms: Option<u64>) -> Result<Duration, PlaneError> {
    let ms = lease_ms.unwrap_or(DEFAULT_LEASE_MS);
    if !(MIN_LEASE_MS..=MAX_LEASE_MS).contains(&ms) {
        return Err(PlaneError::Invalid(FieldError::new(
            "leaseMs",
            format!(
                "must be {MIN_LEASE_MS}..={MAX_LEASE_MS} milliseconds (100 ms to 10 min), got {ms}"
            ),
        )));
    }
    Ok(Duration::from_millis(ms))
}
