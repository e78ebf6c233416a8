//! The Node addon surface. Conversions only: every rule lives in the plain Rust modules.
//! Nothing here is a static: whatever the addon opens is owned by a handle JS holds.

use napi::{Error, Result, Status};
use napi_derive::napi;

use crate::wire;

fn invalid_arg(err: impl std::fmt::Display) -> Error {
    Error::new(Status::InvalidArg, err.to_string())
}

/// The A2A protocol version the task plane serves (`"1.0"`).
#[napi(catch_unwind)]
pub fn protocol_version() -> String {
    wire::PROTOCOL_VERSION.to_string()
}

/// Parses an A2A `Message` in ProtoJSON, checks its REQUIRED members, and returns it
/// re-encoded in canonical ProtoJSON (camelCase, defaults omitted). Throws an error that
/// names the offending field when the text is not a valid Message.
#[napi(catch_unwind)]
pub fn normalize_message(json: String) -> Result<String> {
    let message: wire::Message =
        wire::json::decode("Message", json.as_bytes()).map_err(invalid_arg)?;
    Ok(wire::json::encode(&message))
}

/// Same as `normalizeMessage` for a `SendMessageRequest` (the body of `message:send`).
#[napi(catch_unwind)]
pub fn normalize_send_message_request(json: String) -> Result<String> {
    let request: wire::SendMessageRequest =
        wire::json::decode("SendMessageRequest", json.as_bytes()).map_err(invalid_arg)?;
    Ok(wire::json::encode(&request))
}
