//! The workflow manifest: which outputs the agent may record. `A2A_WORKFLOW_MANIFEST` points
//! to an exported `workflow-composition.json`: a `workflows` array whose entries have an
//! `id` and an `outputs` object mapping each output name to `{"type": "<label>"}` (other
//! fields are ignored). `A2A_WORKFLOW` picks the workflow when there are several.

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::Value;

use crate::config::{var, ConfigError};

/// The declared outputs of the selected workflow: name → resolved type label.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Workflow {
    pub id: String,
    pub outputs: BTreeMap<String, String>,
}

/// What the agent may record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outputs {
    /// No manifest configured: no outputs are declared.
    None,
    Declared(Workflow),
    /// The manifest failed to load (logged as `a2a_workflow_manifest_load_failed`); every
    /// output is refused with this reason.
    Failed(String),
}

impl Outputs {
    /// What is wrong for the operator (the start-up line, `/a2a`, a health check): the
    /// manifest that did not load and why; `None` when nothing is.
    pub fn problem(&self) -> Option<String> {
        match self {
            Outputs::Failed(reason) => Some(format!(
                "the workflow manifest (A2A_WORKFLOW_MANIFEST) did not load, so every declared output is refused: {reason}"
            )),
            Outputs::None | Outputs::Declared(_) => None,
        }
    }
}

/// `^[a-z][a-z0-9]*(?:[._-][a-z0-9]+)*$`: output names and type labels.
pub fn is_output_name(name: &str) -> bool {
    let mut chars = name.chars().peekable();
    if !chars.next().is_some_and(|c| c.is_ascii_lowercase()) {
        return false;
    }
    let mut after_separator = false;
    for c in chars {
        match c {
            'a'..='z' | '0'..='9' => after_separator = false,
            '.' | '_' | '-' if !after_separator => after_separator = true,
            _ => return false,
        }
    }
    !after_separator
}

/// Reads the manifest the environment names.
pub fn load(env: &dyn Fn(&str) -> Option<String>) -> Outputs {
    let Some(path) = var(env, "A2A_WORKFLOW_MANIFEST") else {
        return Outputs::None;
    };
    match load_file(Path::new(&path), var(env, "A2A_WORKFLOW").as_deref()) {
        Ok(workflow) => Outputs::Declared(workflow),
        Err(err) => {
            let reason = err.to_string();
            crate::log::warn(
                "a2a_workflow_manifest_load_failed",
                serde_json::json!({ "path": path, "reason": reason }),
            );
            Outputs::Failed(reason)
        }
    }
}

fn error(variable: &str, message: String) -> ConfigError {
    ConfigError {
        variable: variable.into(),
        message,
    }
}

/// Loads `path` and selects `chosen` (required when it holds several workflows).
pub fn load_file(path: &Path, chosen: Option<&str>) -> Result<Workflow, ConfigError> {
    let shown = path.display();
    const M: &str = "A2A_WORKFLOW_MANIFEST";
    let text =
        std::fs::read_to_string(path).map_err(|e| error(M, format!("cannot read {shown}: {e}")))?;
    let doc: Value =
        serde_json::from_str(&text).map_err(|e| error(M, format!("{shown} is not JSON: {e}")))?;
    let workflows = doc
        .get("workflows")
        .and_then(Value::as_array)
        .ok_or_else(|| error(M, format!("{shown} has no `workflows` array")))?;
    let ids: Vec<&str> = workflows
        .iter()
        .filter_map(|w| w.get("id").and_then(Value::as_str))
        .collect();
    let entry = match chosen {
        Some(id) => workflows
            .iter()
            .find(|w| w.get("id").and_then(Value::as_str) == Some(id))
            .ok_or_else(|| {
                error(
                    "A2A_WORKFLOW",
                    format!(
                        "`{id}` is not a workflow of {shown} (it has: {})",
                        ids.join(", ")
                    ),
                )
            })?,
        None => match workflows.as_slice() {
            [only] => only,
            [] => return Err(error(M, format!("{shown} declares no workflows"))),
            _ => {
                return Err(error(
                    "A2A_WORKFLOW",
                    format!(
                        "{shown} declares several workflows ({}); set A2A_WORKFLOW to one of them",
                        ids.join(", ")
                    ),
                ))
            }
        },
    };
    let id = entry
        .get("id")
        .and_then(Value::as_str)
        .ok_or_else(|| error(M, format!("{shown}: a workflow has no `id`")))?
        .to_string();
    let declared = entry
        .get("outputs")
        .and_then(Value::as_object)
        .ok_or_else(|| {
            error(
                M,
                format!("{shown}: workflow `{id}` has no `outputs` object"),
            )
        })?;
    let mut outputs = BTreeMap::new();
    for (name, spec) in declared {
        if !is_output_name(name) {
            return Err(error(M, format!("{shown}: workflow `{id}`: output name `{name}` does not match ^[a-z][a-z0-9]*(?:[._-][a-z0-9]+)*$")));
        }
        let kind = spec.get("type").and_then(Value::as_str).ok_or_else(|| {
            error(
                M,
                format!("{shown}: workflow `{id}`: output `{name}` has no `type`"),
            )
        })?;
        if !is_output_name(kind) {
            return Err(error(M, format!("{shown}: workflow `{id}`: output `{name}` has type `{kind}`, which does not match ^[a-z][a-z0-9]*(?:[._-][a-z0-9]+)*$")));
        }
        outputs.insert(name.clone(), kind.to_string());
    }
    Ok(Workflow { id, outputs })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn output_names_follow_the_pattern() {
        for ok in ["pr", "pull-request", "a.b_c-d", "v2"] {
            assert!(is_output_name(ok), "{ok}");
        }
        for bad in ["", "Pr", "1pr", "pr-", "a..b", "a b", "pr/x"] {
            assert!(!is_output_name(bad), "{bad}");
        }
    }
}
