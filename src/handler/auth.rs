//! Bearer-token principals. Tokens come from the credentials file; a presented token is
//! compared with every configured one in constant time (no early exit, no length leak:
//! both sides are hashed first).

use std::path::Path;

use serde::Deserialize;
use sha2::{Digest, Sha256};

use crate::ids::check_identifier;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    credentials: Vec<Entry>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Entry {
    token: String,
    principal: String,
}

/// The configured tokens, as digests, with their principals.
pub struct Credentials {
    entries: Vec<([u8; 32], String)>,
    /// What the operator should fix although the file loaded (it is readable by others).
    pub warnings: Vec<String>,
}

/// Tokens shorter than this are refused at startup: they could be guessed.
const MIN_TOKEN_LEN: usize = 16;

impl Credentials {
    /// Loads the credentials file; any problem is an error naming the file and what to fix.
    pub fn load(path: &Path) -> Result<Credentials, String> {
        let shown = path.display();
        let mut warnings = Vec::new();
        let text = std::fs::read_to_string(path)
            .map_err(|e| {
                format!(
                    "A2A_CREDENTIALS_PATH: cannot read {shown}: {e}; create it (mode 0600) as {{\"credentials\": [{{\"token\": \"<16+ characters>\", \"principal\": \"<name>\"}}]}}, or unset A2A_CREDENTIALS_PATH and let tools/run.sh create one"
                )
            })?;
        if let Ok(meta) = std::fs::metadata(path) {
            use std::os::unix::fs::PermissionsExt;
            let mode = meta.permissions().mode() & 0o777;
            if mode & 0o077 != 0 {
                warnings.push(format!(
                    "the credentials file {shown} is readable by other users (mode {mode:o}); its tokens let anyone who reads it act as its principals: chmod 600 {shown}"
                ));
                crate::log::warn(
                    "a2a_credentials_readable_by_others",
                    serde_json::json!({ "path": shown.to_string(), "mode": format!("{mode:o}"), "fix": format!("chmod 600 {shown}") }),
                );
            }
        }
        let file: File = serde_json::from_str(&text).map_err(|e| {
            format!("A2A_CREDENTIALS_PATH: {shown} is not {{\"credentials\": [{{\"token\", \"principal\"}}]}}: {e}")
        })?;
        if file.credentials.is_empty() {
            return Err(format!(
                "A2A_CREDENTIALS_PATH: {shown} lists no credentials"
            ));
        }
        let mut entries = Vec::with_capacity(file.credentials.len());
        for (i, entry) in file.credentials.into_iter().enumerate() {
            if entry.token.len() < MIN_TOKEN_LEN || entry.token.chars().any(char::is_whitespace) {
                return Err(format!(
                    "A2A_CREDENTIALS_PATH: {shown}: credentials[{i}].token must be at least {MIN_TOKEN_LEN} characters without spaces"
                ));
            }
            check_identifier("principal", &entry.principal)
                .map_err(|e| format!("A2A_CREDENTIALS_PATH: {shown}: credentials[{i}]: {e}"))?;
            let digest: [u8; 32] = Sha256::digest(entry.token.as_bytes()).into();
            if entries.iter().any(|(d, _)| *d == digest) {
                return Err(format!(
                    "A2A_CREDENTIALS_PATH: {shown}: credentials[{i}] repeats a token"
                ));
            }
            entries.push((digest, entry.principal));
        }
        Ok(Credentials { entries, warnings })
    }

    /// The principal of an `Authorization` header value, if it is a known bearer token.
    pub fn principal(&self, authorization: Option<&str>) -> Option<&str> {
        let header = authorization?;
        let (scheme, token) = header.split_once(' ')?;
        if !scheme.eq_ignore_ascii_case("bearer") {
            return None;
        }
        let presented: [u8; 32] = Sha256::digest(token.trim().as_bytes()).into();
        let mut found: Option<&str> = None;
        for (digest, principal) in &self.entries {
            let diff = digest
                .iter()
                .zip(presented.iter())
                .fold(0u8, |acc, (a, b)| acc | (a ^ b));
            if diff == 0 {
                found = Some(principal);
            }
        }
        found
    }
}
