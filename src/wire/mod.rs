//! The A2A v1 wire model: prost types generated from `proto/` with exact ProtoJSON serde
//! (pbjson), plus what ProtoJSON needs beyond the generated code.
//!
//! - [`Timestamp`] replaces `google.protobuf.Timestamp` so output is `Z`-normalised.
//! - [`json`] encodes (through serde_json) and decodes: integral numbers without `.0`,
//!   parse errors that name the field, and the binding's always-present
//!   `ListTasksResponse` members.
//! - [`validate`] checks what the proto marks REQUIRED and what a oneof must hold.
//!
//! The stores never hold these types: they are built at the boundary from native records.

mod timestamp;

pub mod convert;
pub mod extensions;
pub mod json;
pub mod validate;

pub use timestamp::Timestamp;

/// Generated from `proto/lf/a2a/v1/a2a.proto` by `build.rs`.
#[allow(clippy::all, clippy::pedantic, missing_docs)]
pub mod a2a {
    include!(concat!(env!("OUT_DIR"), "/lf.a2a.v1.rs"));
    include!(concat!(env!("OUT_DIR"), "/lf.a2a.v1.serde.rs"));
}

pub use a2a::*;

/// The A2A protocol version this server implements (`Major.Minor`).
pub const PROTOCOL_VERSION: &str = "1.0";

/// The largest integer a JSON number (an IEEE double, as in `google.protobuf.Value`)
/// holds exactly and unambiguously: 2^53 − 1. 2^53 is exact too, but 2^53 + 1 reads as
/// the same double, so an integer past this one may not be the number the client wrote.
pub const MAX_EXACT_INTEGER: f64 = 9_007_199_254_740_991.0;

/// The protocol binding this server prefers (listed first in its card).
pub const PROTOCOL_BINDING: &str = "HTTP+JSON";

/// The JSON-RPC 2.0 binding's name in an Agent Card's `supportedInterfaces`.
pub const JSONRPC_BINDING: &str = "JSONRPC";

/// The gRPC binding (the proto's `A2AService`, on its own port).
pub const GRPC_BINDING: &str = "GRPC";
