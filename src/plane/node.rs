//! This node's identity and its leases on wakes (docs/fleet.md, "Wakes across residents").
//!
//! Each open plane is one node: [`mint_node_id`] names it (host name, pid, a random
//! suffix) when the store opens; the id is logged (`a2a_node_started`) and is what the
//! store records as the owner of a wake's lease. On PostgreSQL a lease keeps other nodes
//! off a Task while this node works it; on SQLite (one process per root) a lease is always
//! this node's and nothing is stored (see `store::sqlite`).

use super::{PlaneError, TaskPlane};
use crate::events::Accepted;

pub use crate::ids::mint_node_id;

impl TaskPlane {
    /// This node's id (minted when the plane opened).
    pub fn node_id(&self) -> &str {
        &self.node
    }

    /// Whether other nodes may share this store (PostgreSQL). On SQLite (one process per
    /// root) a lease is always this node's and nothing is stored, so the lease calls that
    /// are a transaction of their own are not made at all (no write for nothing).
    pub fn shares_store(&self) -> bool {
        crate::pg::of(&self.store).is_some()
    }

    /// How long this node's lease on a wake lasts unless renewed, in ms.
    pub fn wake_lease_ms(&self) -> i64 {
        self.wake_lease_ms
    }

    /// Moves every wake lease this node holds on by a full lease (database clock); returns
    /// how many it holds. The wake queue calls it every lease/3 while a turn runs.
    pub fn renew_wake_leases(&self) -> Result<u64, PlaneError> {
        if !self.shares_store() {
            return Ok(0);
        }
        let (node, lease_ms) = (self.node.clone(), self.wake_lease_ms);
        self.write(move |tx| Ok(tx.renew_wake_leases(&node, lease_ms)?))
    }

    /// Ends this node's lease on the wake of `activation_id`, if it holds it (a turn that
    /// ended without writing its outcome in a transaction of its own).
    pub fn release_wake_lease(&self, activation_id: &str) -> Result<bool, PlaneError> {
        if !self.shares_store() {
            return Ok(false);
        }
        let (node, activation_id) = (self.node.clone(), activation_id.to_string());
        self.write(move |tx| Ok(tx.release_wake_lease(&activation_id, &node)?))
    }

    /// Ends every lease this node holds (the plane is closing): its Tasks are free for
    /// the other nodes at once. Returns how many it held.
    pub fn release_node_wake_leases(&self) -> Result<u64, PlaneError> {
        if !self.shares_store() || self.is_closed() {
            return Ok(0);
        }
        let node = self.node.clone();
        self.write(move |tx| Ok(tx.release_node_wake_leases(&node)?))
    }

    /// What this node's wake queue may be offered now: [`TaskPlane::wakes_to_replay`]
    /// without the wakes other nodes hold a live lease on, and how long until the earliest
    /// of those leases expires (ms, database clock; `None`: no other node holds one).
    pub fn wakes_for_this_node(&self) -> Result<(Vec<Accepted>, Option<i64>), PlaneError> {
        let node = self.node.clone();
        self.read(|tx| {
            let wakes = super::wakes::deliverable_for(tx, &node)?;
            Ok((wakes, tx.earliest_foreign_lease_ms(&node)?))
        })
    }
}
