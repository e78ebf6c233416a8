//! Bearer-token principals. Tokens come from the credentials file; a presented token is
//! compared with every configured one in constant time (no early exit, no length leak:
//! both sides are hashed first).
//!
//! The set is reloadable while the listener serves ([`Credentials::reload`], on SIGHUP;
//! [`Credentials::reload_if_changed`], when the file changed): a new token works and a
//! removed one is refused from the next request on, and an unusable file keeps the set
//! in use, saying why.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};
use std::time::SystemTime;

use serde::Deserialize;
use serde_json::json;
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
struct Set {
    entries: Vec<([u8; 32], String)>,
}

/// What tells a changed file from an unchanged one without reading it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Stamp {
    modified: Option<SystemTime>,
    len: u64,
    inode: u64,
}

fn stamp(path: &Path) -> Option<Stamp> {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(path).ok().map(|m| Stamp {
        modified: m.modified().ok(),
        len: m.len(),
        inode: m.ino(),
    })
}

/// A reload that took effect.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reloaded {
    /// How many credentials are in use now.
    pub credentials: usize,
    /// What the operator should fix although the file loaded.
    pub warnings: Vec<String>,
}

/// The credentials in use, and the file they come from.
pub struct Credentials {
    path: PathBuf,
    current: RwLock<Arc<Set>>,
    seen: Mutex<Option<Stamp>>,
    /// What the operator should fix although the file loaded at start (it is readable by
    /// others).
    pub warnings: Vec<String>,
}

/// Tokens shorter than this are refused: they could be guessed.
const MIN_TOKEN_LEN: usize = 16;

impl Credentials {
    /// Loads the credentials file; any problem is an error naming the file and what to fix.
    pub fn load(path: &Path) -> Result<Credentials, String> {
        let seen = stamp(path);
        let (set, warnings) = read(path)?;
        Ok(Credentials {
            path: path.to_path_buf(),
            current: RwLock::new(Arc::new(set)),
            seen: Mutex::new(seen),
            warnings,
        })
    }

    /// Reads the file again and puts its set in use. An unusable file changes nothing:
    /// the error says why (and is logged); the set in use stays.
    pub fn reload(&self) -> Result<Reloaded, String> {
        *self.seen.lock().unwrap_or_else(|p| p.into_inner()) = stamp(&self.path);
        match read(&self.path) {
            Ok((set, warnings)) => {
                let credentials = set.entries.len();
                *self.current.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(set);
                crate::log::event(
                    "a2a_credentials_reloaded",
                    json!({ "path": self.path.display().to_string(), "credentials": credentials }),
                );
                Ok(Reloaded {
                    credentials,
                    warnings,
                })
            }
            Err(problem) => {
                crate::log::warn(
                    "a2a_credentials_reload_failed",
                    json!({ "path": self.path.display().to_string(), "error": problem, "kept": "the credentials in use before" }),
                );
                Err(problem)
            }
        }
    }

    /// [`Credentials::reload`] when the file changed (time, size or inode) since it was
    /// last read; `None` when it did not.
    pub fn reload_if_changed(&self) -> Option<Result<Reloaded, String>> {
        let now = stamp(&self.path);
        let changed = *self.seen.lock().unwrap_or_else(|p| p.into_inner()) != now;
        changed.then(|| self.reload())
    }

    /// The principal of an `Authorization` header value, if it is a known bearer token.
    pub fn principal(&self, authorization: Option<&str>) -> Option<String> {
        let set = self
            .current
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        set.principal(authorization).map(str::to_string)
    }
}

/// Reads and checks the credentials file: its set, and what the operator should fix
/// although it is usable.
fn read(path: &Path) -> Result<(Set, Vec<String>), String> {
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
    Ok((Set { entries }, warnings))
}

impl Set {
    /// The principal of an `Authorization` header value, if it is a known bearer token.
    fn principal(&self, authorization: Option<&str>) -> Option<&str> {
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

#[cfg(test)]
mod tests {
    use super::*;

    struct Dir(PathBuf);
    impl Drop for Dir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn write(path: &Path, text: &str) {
        use std::os::unix::fs::PermissionsExt;
        std::fs::write(path, text).unwrap();
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).unwrap();
    }

    fn file(pairs: &[(&str, &str)]) -> String {
        let entries: Vec<_> = pairs
            .iter()
            .map(|(token, principal)| json!({ "token": token, "principal": principal }))
            .collect();
        json!({ "credentials": entries }).to_string()
    }

    const OLD: &str = "Bearer old-token-0123456789";
    const NEW: &str = "Bearer new-token-0123456789-longer";

    #[test]
    fn a_reload_puts_the_new_set_in_use_and_an_unusable_file_keeps_the_previous() {
        let dir = Dir(std::env::temp_dir().join(format!("tp-auth-{}", crate::ids::mint())));
        std::fs::create_dir_all(&dir.0).unwrap();
        let path = dir.0.join("credentials.json");
        write(&path, &file(&[("old-token-0123456789", "alice")]));
        let credentials = Credentials::load(&path).unwrap();
        assert_eq!(credentials.principal(Some(OLD)).as_deref(), Some("alice"));

        write(&path, &file(&[("new-token-0123456789-longer", "bob")]));
        let reloaded = credentials.reload().unwrap();
        assert_eq!(reloaded.credentials, 1);
        assert_eq!(credentials.principal(Some(NEW)).as_deref(), Some("bob"));
        assert_eq!(
            credentials.principal(Some(OLD)),
            None,
            "a removed token is refused at once"
        );

        write(&path, "{\"credentials\": [");
        let problem = credentials.reload().unwrap_err();
        assert!(problem.contains("credentials.json"), "{problem}");
        assert_eq!(
            credentials.principal(Some(NEW)).as_deref(),
            Some("bob"),
            "kept"
        );
        std::fs::remove_file(&path).unwrap();
        assert!(credentials.reload().is_err());
        assert_eq!(
            credentials.principal(Some(NEW)).as_deref(),
            Some("bob"),
            "kept"
        );
    }

    #[test]
    fn only_a_changed_file_is_read_again() {
        let dir = Dir(std::env::temp_dir().join(format!("tp-auth-{}", crate::ids::mint())));
        std::fs::create_dir_all(&dir.0).unwrap();
        let path = dir.0.join("credentials.json");
        write(&path, &file(&[("old-token-0123456789", "alice")]));
        let credentials = Credentials::load(&path).unwrap();
        assert!(credentials.reload_if_changed().is_none(), "unchanged");
        write(&path, &file(&[("new-token-0123456789-longer", "bob")]));
        assert!(matches!(credentials.reload_if_changed(), Some(Ok(_))));
        assert!(
            credentials.reload_if_changed().is_none(),
            "read once per change"
        );
        assert_eq!(credentials.principal(Some(NEW)).as_deref(), Some("bob"));
        write(&path, "not json at all, and longer than before");
        assert!(matches!(credentials.reload_if_changed(), Some(Err(_))));
        assert!(
            credentials.reload_if_changed().is_none(),
            "a broken file is told once"
        );
        assert_eq!(credentials.principal(Some(NEW)).as_deref(), Some("bob"));
    }
}
