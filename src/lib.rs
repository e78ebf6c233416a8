//! An A2A v1 task plane for a resident coding agent.
//!
//! # Layout
//!
//! - [`store`]: the durable SQLite store: one writer thread (group commit), read
//!   connections, schema migrations, the store-root lock, failure injection for tests.
//! - [`plane`]: the trusted intake and every rule of the contract's Task and conversation
//!   semantics (contexts, continuation, idempotency, acceptance, retention, delivery).
//! - [`events`]: per-Task broadcast of updates after commit, and acceptances for agent drivers.
//! - [`http`]: the A2A HTTP+JSON listener (hyper, own router): auth, negotiation, errors,
//!   SSE, the Agent Card, signed page tokens, and what a client may hold (connection and
//!   stream pools, write deadlines; see `docs/reliability.md`).
//! - [`log`]: structured JSON log lines with stable event names.
//! - [`wake`]: the durable wake queue and turn authority.
//! - [`tools`]: the four agent tools' rules, the workflow manifest, elicitation schemas.
//! - [`record`]: the native records the store keeps (not wire types).
//! - [`ids`]: the identifier pattern, locator bounds, server-minted ids.
//! - [`clock`]: injectable time.
//! - [`config`]: environment → configuration, with errors that name the variable.
//! - [`wire`]: the A2A v1 wire model (prost + pbjson from `proto/`): exact ProtoJSON in and
//!   out, REQUIRED-member checks, errors that name the field.
//! - [`binding`]: the napi surface of the Node addon; conversions at the JS boundary,
//!   no rules.

pub mod clock;
pub mod config;
pub mod digest;
pub mod events;
pub mod field_error;
pub mod http;
pub mod ids;
pub mod log;
pub mod plane;
pub mod record;
pub mod store;
pub mod tools;
pub mod wake;
pub mod wire;

pub mod binding;
