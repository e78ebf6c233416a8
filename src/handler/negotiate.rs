//! Protocol version and extension negotiation, as every binding reads them (an HTTP
//! header, a query parameter, gRPC metadata: the same names, `a2a-version` and
//! `a2a-extensions`).

use hyper::StatusCode;

use super::error::ApiError;
use crate::wire::extensions::{ELICITATION_V1, OUTFITTER_TASK_V1};
use crate::wire::PROTOCOL_VERSION;

/// The header (metadata key) naming the protocol version a request speaks.
pub const VERSION_HEADER: &str = "a2a-version";
/// The header (metadata key) listing extension URIs (request: asked for; response:
/// activated).
pub const EXTENSIONS_HEADER: &str = "a2a-extensions";

/// The extensions this server supports.
pub const SUPPORTED_EXTENSIONS: [&str; 2] = [OUTFITTER_TASK_V1, ELICITATION_V1];

/// The version a request asks for: absent (or empty) means 1.0; any other `Major.Minor`
/// than 1.0 is `VERSION_NOT_SUPPORTED`. A patch component is ignored.
pub fn check_version(requested: Option<&str>) -> Result<(), ApiError> {
    let Some(requested) = requested.map(str::trim).filter(|v| !v.is_empty()) else {
        return Ok(());
    };
    let mut parts = requested.split('.');
    let major_minor = match (parts.next(), parts.next(), parts.next(), parts.next()) {
        (Some(major), Some(minor), _, None) => format!("{major}.{minor}"),
        _ => String::new(),
    };
    if major_minor == PROTOCOL_VERSION {
        return Ok(());
    }
    Err(ApiError::new(
        StatusCode::BAD_REQUEST,
        "VERSION_NOT_SUPPORTED",
        format!("A2A version {requested} is not supported; this agent speaks {PROTOCOL_VERSION} (send `A2A-Version: {PROTOCOL_VERSION}`)"),
    )
    .with_metadata("requestedVersion", requested)
    .with_metadata("supportedVersions", PROTOCOL_VERSION))
}

/// The supported extension URIs a request activates: each value a comma-separated list
/// (repeated values merged, in order); unsupported URIs are ignored.
pub fn activated_extensions<'a>(values: impl Iterator<Item = &'a str>) -> Vec<String> {
    let mut activated: Vec<String> = Vec::new();
    for text in values {
        for uri in text.split(',').map(str::trim) {
            if SUPPORTED_EXTENSIONS.contains(&uri) && !activated.iter().any(|a| a == uri) {
                activated.push(uri.to_string());
            }
        }
    }
    activated
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_without_a_version_speaks_1_0_and_a_patch_is_ignored() {
        assert!(check_version(None).is_ok());
        assert!(check_version(Some(" ")).is_ok());
        assert!(check_version(Some("1.0")).is_ok());
        assert!(check_version(Some("1.0.7")).is_ok());
        for other in ["0.3", "2.0", "1", "1.0.0.0", "x"] {
            let err = check_version(Some(other)).unwrap_err();
            assert_eq!(err.reason, "VERSION_NOT_SUPPORTED", "{other}");
        }
    }

    #[test]
    fn only_supported_extensions_are_activated_once_each_in_order() {
        let values = [
            format!("urn:other, {ELICITATION_V1}"),
            format!("{OUTFITTER_TASK_V1},{ELICITATION_V1}"),
        ];
        assert_eq!(
            activated_extensions(values.iter().map(String::as_str)),
            vec![ELICITATION_V1.to_string(), OUTFITTER_TASK_V1.to_string()]
        );
    }
}
