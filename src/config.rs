//! Configuration from the environment, with errors that name the variable. A variable that
//! is set but unusable is an error, never a silent fallback.

use std::path::PathBuf;

/// A configuration error: which variable, what is wrong, what to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    pub variable: String,
    pub message: String,
}

impl std::fmt::Display for ConfigError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.variable, self.message)
    }
}

impl std::error::Error for ConfigError {}

/// Reads a variable; an empty value counts as unset.
pub fn var(env: &dyn Fn(&str) -> Option<String>, name: &str) -> Option<String> {
    env(name).filter(|v| !v.is_empty())
}

fn absolute(name: &str, value: String) -> Result<PathBuf, ConfigError> {
    let path = PathBuf::from(&value);
    if path.is_absolute() {
        Ok(path)
    } else {
        Err(ConfigError {
            variable: name.to_string(),
            message: format!(
                "`{value}` is not an absolute path; set it to one (or unset it to use the default)"
            ),
        })
    }
}

/// The task-plane store root: `CHANNELS_TASK_STORE_PATH`, else
/// `${XDG_DATA_HOME:-$HOME/.local/share}/outfitter/channels/task-plane`.
pub fn store_root(env: &dyn Fn(&str) -> Option<String>) -> Result<PathBuf, ConfigError> {
    if let Some(path) = var(env, "CHANNELS_TASK_STORE_PATH") {
        return absolute("CHANNELS_TASK_STORE_PATH", path);
    }
    let data_home = match var(env, "XDG_DATA_HOME") {
        Some(dir) => absolute("XDG_DATA_HOME", dir)?,
        None => {
            let home = var(env, "HOME").ok_or_else(|| ConfigError {
                variable: "HOME".into(),
                message: "is not set, so the default store root cannot be found; set CHANNELS_TASK_STORE_PATH".into(),
            })?;
            absolute("HOME", home)?.join(".local/share")
        }
    };
    Ok(data_home.join("outfitter/channels/task-plane"))
}

/// The process environment, for the functions above.
pub fn process_env(name: &str) -> Option<String> {
    std::env::var(name).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn env(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let map: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |name| map.get(name).cloned()
    }

    #[test]
    fn store_root_prefers_the_explicit_variable_then_xdg_then_home() {
        let e = env(&[
            ("CHANNELS_TASK_STORE_PATH", "/srv/tp"),
            ("XDG_DATA_HOME", "/x"),
            ("HOME", "/h"),
        ]);
        assert_eq!(store_root(&e).unwrap(), PathBuf::from("/srv/tp"));
        let e = env(&[("XDG_DATA_HOME", "/x"), ("HOME", "/h")]);
        assert_eq!(
            store_root(&e).unwrap(),
            PathBuf::from("/x/outfitter/channels/task-plane")
        );
        let e = env(&[("HOME", "/h"), ("XDG_DATA_HOME", "")]);
        assert_eq!(
            store_root(&e).unwrap(),
            PathBuf::from("/h/.local/share/outfitter/channels/task-plane")
        );
    }

    #[test]
    fn an_unusable_store_root_names_the_variable() {
        let err = store_root(&env(&[("CHANNELS_TASK_STORE_PATH", "relative/dir")])).unwrap_err();
        assert_eq!(err.variable, "CHANNELS_TASK_STORE_PATH");
        let err = store_root(&env(&[("XDG_DATA_HOME", "rel"), ("HOME", "/h")])).unwrap_err();
        assert_eq!(err.variable, "XDG_DATA_HOME");
        let err = store_root(&env(&[])).unwrap_err();
        assert!(
            err.to_string().contains("CHANNELS_TASK_STORE_PATH"),
            "{err}"
        );
    }
}
