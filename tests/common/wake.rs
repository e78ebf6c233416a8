//! What the wake-queue and agent-tool tests (`wake_queue.rs`, `wake_status_messages.rs`,
//! `agent_tools.rs`) share: waits, the claim states of an activation, quick retries, and
//! the tools with a declared workflow.

use std::collections::BTreeMap;
use std::time::Duration;

use a2a_task_plane::plane::TaskPlane;
use a2a_task_plane::tools::manifest::{Outputs, Workflow};
use a2a_task_plane::tools::AgentTools;
use a2a_task_plane::wake::{QueueOptions, WakeQueue};

/// How long a test waits for something that must not happen.
pub const SHORT: Duration = Duration::from_millis(50);
/// How long a test waits for a wake that must come.
pub const LONG: Duration = Duration::from_secs(5);

/// The claim states an activation went through, in order (`WAKE_DELIVERED 1`: with its
/// count).
pub fn claim_states(plane: &TaskPlane, activation: &str) -> Vec<String> {
    super::text_rows_in(
        plane,
        &format!(
            "SELECT kind || COALESCE(' ' || count, '') FROM claim_states \
             WHERE activation_id = '{activation}' ORDER BY n"
        ),
    )
}

/// Retries after 20 ms, so tests need not wait for the real delays.
pub fn quick_retries() -> QueueOptions {
    QueueOptions {
        retry_delays: vec![Duration::from_millis(20)],
    }
}

/// The agent tools over `queue`, with a workflow that declares one output.
pub fn tools(queue: &WakeQueue) -> AgentTools {
    let workflow = Workflow {
        id: "review".into(),
        outputs: BTreeMap::from([("pull-request".to_string(), "forge.pull-request".to_string())]),
    };
    AgentTools::new(queue.clone(), Outputs::Declared(workflow))
}
