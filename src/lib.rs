//! An A2A v1 task plane for a resident coding agent.
//!
//! # Layout
//!
//! - [`wire`]: the A2A v1 wire model (prost + pbjson from `proto/`): exact ProtoJSON in and
//!   out, REQUIRED-member checks, errors that name the field.
//! - [`binding`]: the napi surface of the Node addon; conversions at the JS boundary,
//!   no rules.

pub mod wire;

pub mod binding;
