//! ProtoJSON encoding and decoding of the wire types.
//!
//! The generated pbjson serde does the field work; this module adds what the binding
//! needs on top:
//! - decoding reports the path of the offending field (`message.parts[0].text`) and then
//!   checks the REQUIRED members ([`Validate`]);
//! - encoding is serde_json's compact text, with integral `google.protobuf.Value` numbers
//!   written without `.0` (`42`, not `42.0`, by [`ProtoJsonNumbers`]), so clients that
//!   compare text or types see what they sent;
//! - [`ListTasksResponseJson`] always writes `tasks`, `nextPageToken`, `pageSize` and
//!   `totalSize`, which the binding requires even at their default values.

use std::fmt;
use std::io;

use serde::de::DeserializeOwned;
use serde::ser::SerializeStruct;
use serde::Serialize;
use serde_json::ser::{CompactFormatter, Formatter};

use super::validate::{At, Validate};
use super::{ListTasksResponse, MAX_EXACT_INTEGER};
use crate::field_error::FieldError;

/// Why a ProtoJSON document was refused: what was being decoded, and which field was
/// wrong with what (dereferences to that [`FieldError`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WireError {
    /// What was being decoded, e.g. `SendMessageRequest`.
    pub what: &'static str,
    /// The offending member (`message.parts[0].text`; empty for the document) and what
    /// was wrong with it.
    pub error: FieldError,
}

impl std::ops::Deref for WireError {
    type Target = FieldError;

    fn deref(&self) -> &FieldError {
        &self.error
    }
}

impl fmt::Display for WireError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.field.is_empty() {
            write!(f, "invalid {}: {}", self.what, self.message)
        } else {
            write!(
                f,
                "invalid {}: field `{}`: {}",
                self.what, self.field, self.message
            )
        }
    }
}

impl std::error::Error for WireError {}

impl WireError {
    fn new(what: &'static str, field: impl Into<String>, message: impl Into<String>) -> Self {
        WireError {
            what,
            error: FieldError::new(field, message),
        }
    }
}

/// Decodes a ProtoJSON document into `T` and checks its REQUIRED members.
///
/// `what` names the document in the error (`"SendMessageRequest"`). Unknown fields, wrong
/// types, unknown enum names and two members of one oneof are refused by the generated
/// serde; trailing data after the document is refused here.
pub fn decode<T: DeserializeOwned + Validate>(
    what: &'static str,
    bytes: &[u8],
) -> Result<T, WireError> {
    let value: T = decode_unchecked(what, bytes)?;
    value
        .validate(&At::Root)
        .map_err(|error| WireError { what, error })?;
    Ok(value)
}

/// Decodes without the REQUIRED checks (for partial documents such as a cancel body).
pub fn decode_unchecked<T: DeserializeOwned>(
    what: &'static str,
    bytes: &[u8],
) -> Result<T, WireError> {
    // Most documents are valid: decode them without tracking where the decoder is (a
    // third of a request body's decoding time), and decode again, tracking, only to say
    // which field a refused document got wrong.
    if let Ok(value) = serde_json::from_slice(bytes) {
        return Ok(value);
    }
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let value = serde_path_to_error::deserialize(&mut de).map_err(|err| path_error(what, err))?;
    de.end()
        .map_err(|err| WireError::new(what, "", err.to_string()))?;
    Ok(value)
}

/// [`decode`] from an already-parsed JSON value (objects handed over from JavaScript).
pub fn decode_value<T: DeserializeOwned + Validate>(
    what: &'static str,
    value: serde_json::Value,
) -> Result<T, WireError> {
    let decoded: T = decode_value_unchecked(what, value)?;
    decoded
        .validate(&At::Root)
        .map_err(|error| WireError { what, error })?;
    Ok(decoded)
}

/// [`decode_value`] without the REQUIRED checks.
pub fn decode_value_unchecked<T: DeserializeOwned>(
    what: &'static str,
    value: serde_json::Value,
) -> Result<T, WireError> {
    serde_path_to_error::deserialize(value).map_err(|err| path_error(what, err))
}

fn path_error(what: &'static str, err: serde_path_to_error::Error<serde_json::Error>) -> WireError {
    let field = err.path().to_string();
    // `.` is the top level and `?` a position the parser never reached: both are the body.
    let field = match field.as_str() {
        "." | "?" => String::new(),
        _ => field,
    };
    let inner = err.into_inner();
    let message = if field.is_empty() && (inner.is_syntax() || inner.is_eof()) {
        format!("the body is not valid JSON: {inner}")
    } else {
        inner.to_string()
    };
    WireError::new(what, field, message)
}

/// Encodes `value` as compact ProtoJSON text.
pub fn encode<T: Serialize + ?Sized>(value: &T) -> String {
    // A Task with its history is ~600 bytes: one allocation for most responses.
    let mut out = Vec::with_capacity(1024);
    encode_into(&mut out, value);
    // serde_json writes only valid UTF-8.
    String::from_utf8(out).expect("serde_json's output is UTF-8")
}

/// Appends the compact ProtoJSON encoding of `value` to `out`.
pub fn encode_into<T: Serialize + ?Sized>(out: &mut Vec<u8>, value: &T) {
    // The wire types serialise infallibly: no maps with non-string keys, and every
    // Timestamp the server writes comes from its own clock (in range).
    value
        .serialize(&mut serde_json::Serializer::with_formatter(
            out,
            ProtoJsonNumbers,
        ))
        .expect("wire types always serialise to JSON");
}

/// serde_json's compact formatter, writing doubles as ProtoJSON wants them: integral values
/// within ±[`MAX_EXACT_INTEGER`] without `.0` (`42`, not `42.0`), others as serde_json
/// writes them (serde_json writes NaN and infinities as `null` before asking for this).
struct ProtoJsonNumbers;

impl Formatter for ProtoJsonNumbers {
    fn write_f64<W: ?Sized + io::Write>(&mut self, writer: &mut W, value: f64) -> io::Result<()> {
        if value.fract() == 0.0 && value.abs() <= MAX_EXACT_INTEGER {
            CompactFormatter.write_i64(writer, value as i64)
        } else {
            CompactFormatter.write_f64(writer, value)
        }
    }
}

/// A `ListTasksResponse` with every member present, as the binding requires.
pub struct ListTasksResponseJson<'a>(pub &'a ListTasksResponse);

impl Serialize for ListTasksResponseJson<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut s = serializer.serialize_struct("ListTasksResponse", 4)?;
        s.serialize_field("tasks", &self.0.tasks)?;
        s.serialize_field("nextPageToken", &self.0.next_page_token)?;
        s.serialize_field("pageSize", &self.0.page_size)?;
        s.serialize_field("totalSize", &self.0.total_size)?;
        s.end()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubles_follow_the_protojson_number_rule() {
        let cases = [
            (0.0, "0"),
            (-0.0, "0"),
            (42.0, "42"),
            (-7.0, "-7"),
            (1.5, "1.5"),
            (MAX_EXACT_INTEGER, "9007199254740991"),
            (-MAX_EXACT_INTEGER, "-9007199254740991"),
            (MAX_EXACT_INTEGER + 1.0, "9007199254740992.0"),
            (f64::NAN, "null"),
            (f64::NEG_INFINITY, "null"),
        ];
        for (value, written) in cases {
            assert_eq!(encode(&value), written, "{value}");
        }
        for value in [1e300, -2.5e-300, 0.1, 1.0 / 3.0, f64::MAX] {
            assert_eq!(encode(&value), serde_json::to_string(&value).unwrap());
        }
        let number = pbjson_types::Value {
            kind: Some(pbjson_types::value::Kind::NumberValue(42.0)),
        };
        assert_eq!(encode(&number), "42");
    }
}
