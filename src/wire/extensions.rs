//! The A2A extensions this server declares, and the `outfitter-task/v1` task locator.
//!
//! A2A task ids are server-scoped: two servers may mint the same id. Cross-server identity
//! is the locator (interface URL + binding + version + tenant + taskId), carried in
//! metadata under the `outfitter-task/v1` URI when the caller activated that extension.

use serde_json::{json, Value};

use super::{PROTOCOL_BINDING, PROTOCOL_VERSION};

/// `outfitter-task/v1`: typed task metadata (the `$id` of its JSON schema).
pub const OUTFITTER_TASK_V1: &str =
    "https://github.com/ai-outfitter/channels/a2a-extensions/outfitter-task/v1";
/// The metadata key under which `outfitter-task/v1` payloads travel (a Task's locator, an
/// artifact's declared output).
pub const OUTFITTER_TASK_KEY: &str = "outfitter-task/v1";
/// `elicitation/v1`: MCP-compatible structured questions, sibling of `outfitter-task/v1`.
pub const ELICITATION_V1: &str =
    "https://github.com/ai-outfitter/channels/a2a-extensions/elicitation/v1";

/// The fully scoped identity of a Task.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct TaskLocator {
    pub agent_interface: String,
    pub protocol_binding: String,
    pub protocol_version: String,
    pub tenant: Option<String>,
    pub task_id: String,
}

impl TaskLocator {
    /// The locator of `task_id` served by this server at `interface_url`.
    pub fn served_by(interface_url: &str, tenant: Option<&str>, task_id: &str) -> Self {
        TaskLocator {
            agent_interface: interface_url.to_string(),
            protocol_binding: PROTOCOL_BINDING.to_string(),
            protocol_version: PROTOCOL_VERSION.to_string(),
            tenant: tenant.filter(|t| !t.is_empty()).map(str::to_string),
            task_id: task_id.to_string(),
        }
    }

    /// The schema's `taskLocator` object.
    pub fn to_json(&self) -> Value {
        let mut value = json!({
            "agentInterface": self.agent_interface,
            "protocolBinding": self.protocol_binding,
            "protocolVersion": self.protocol_version,
            "taskId": self.task_id,
        });
        if let Some(tenant) = &self.tenant {
            value["tenant"] = json!(tenant);
        }
        value
    }
}
