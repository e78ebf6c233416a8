//! `AgentBridge`: the resident agent's durable wake queue, turn authority and its four
//! tools (each checks that its Task is the active turn's).

use std::collections::HashMap;
use std::sync::Mutex;

use napi::bindgen_prelude::{AsyncTask, PromiseRaw};
use napi::threadsafe_function::{ThreadsafeFunction, ThreadsafeFunctionCallMode};
use napi::{Env, Status};
use napi_derive::napi;
use serde_json::Value;

use super::convert::TaskState;
use super::plane::TaskPlane;
use super::{failed_precondition, internal, plane_error, spawn, PlaneCall, Result, Settled};
use crate::config;
use crate::wire;

js_enum! {
    [" How a turn ended: `ended` (the session's turn ran to its end; the Task may or may not"
     " have been settled), `failed` (a model or session error) or `held` (it could not run:"
     " the queue is held)."]
    pub enum TurnOutcome for "outcome" {
        Ended = "ended": " The session's turn ran to its end (the Task may or may not have been settled).",
        Failed = "failed": " The turn failed (model or session error).",
        Held = "held": " The turn could not run (the model's provider refused its credentials); hold the queue first.",
    }
}

js_enum! {
    [" How `a2a_complete_task` settles the Task: `completed` (the outputs, then the response,"
     " as artifacts) or `rejected` (the response is the reason)."]
    pub enum CompletionOutcome for "outcome" {
        Completed = "completed": " The outputs, then the response, as artifacts; COMPLETED.",
        Rejected = "rejected": " REJECTED, the response being the reason.",
    }
}

/// The most characters (Unicode code points, not UTF-16 units: an emoji counts once)
/// `a2a_complete_task`'s `response` may have: a longer one is refused
/// (`INVALID_ARGUMENT`, naming the limit and its length).
#[napi]
pub const RESPONSE_MAX_CHARS: u32 = crate::tools::RESPONSE_MAX_CHARS as u32;

/// A wake handed to the driver: prompt this Task's session now.
#[napi(object)]
pub struct WakeInfo {
    pub activation_id: String,
    pub task_id: String,
    pub context_id: String,
    /// Which consecutive delivery of this activation this is (1-based).
    pub delivery: u32,
}

/// Something that happened to a Task: `state` is `null` for an arrival (a new message),
/// else the state its status moved to, with the status message's text.
#[napi(object)]
pub struct TaskActivity {
    pub task_id: String,
    pub state: Option<TaskState>,
    pub message: Option<String>,
}

impl From<crate::events::Activity> for TaskActivity {
    fn from(a: crate::events::Activity) -> Self {
        TaskActivity {
            task_id: a.task_id,
            state: a.state.map(TaskState::from),
            message: a.message,
        }
    }
}

/// What `readTask` returns: the text for the model, and the A2A Task.
#[napi(object)]
pub struct ReadTaskResult {
    pub text: String,
    pub task: Value,
}

/// One entry of `completeTask`'s `outputs`.
#[napi(object)]
pub struct OutputInput {
    pub output: String,
    pub value: Value,
}

/// The resident-agent bridge: the durable wake queue, turn authority, and the four agent
/// tools (every tool checks that its Task is the active turn's). Start it in
/// `session_start` after opening the plane (`await AgentBridge.start(plane)`); close it in
/// `session_shutdown` first.
///
/// A tool call for a Task that is not the active turn's rejects with `code`
/// `FAILED_PRECONDITION` and changes nothing; other errors carry the codes `TaskPlane`'s do.
#[napi]
pub struct AgentBridge {
    queue: crate::wake::WakeQueue,
    /// The plane, to keep a Task's session when its turn ends (a fleet's).
    plane: crate::plane::TaskPlane,
    tools: crate::tools::AgentTools,
    watch: Mutex<Option<u64>>,
}

#[napi]
impl AgentBridge {
    /// Starts the queue over `plane`: replays eligible activations, then admits new ones
    /// (off the JS thread: a replay that overflows the queue writes). The workflow outputs
    /// come from `A2A_WORKFLOW_MANIFEST` / `A2A_WORKFLOW`.
    #[napi(ts_return_type = "Promise<AgentBridge>")]
    pub fn start(plane: &TaskPlane) -> AsyncTask<PlaneCall<AgentBridge>> {
        let plane = plane.plane.clone();
        // Read here, on the JS thread, where Node changes the environment.
        let outputs = crate::tools::manifest::load(&config::process_env);
        PlaneCall::new(move || {
            let queue = crate::wake::WakeQueue::start(plane.clone()).map_err(plane_error)?;
            Ok(AgentBridge {
                plane,
                tools: crate::tools::AgentTools::new(queue.clone(), outputs),
                queue,
                watch: Mutex::new(None),
            })
        })
    }

    /// The next wake, durably delivered (the Task is WORKING and is now the turn's
    /// authority); `null` after `timeoutMs` (default 1000) or once closed.
    #[napi(ts_return_type = "Promise<WakeInfo | null>")]
    pub fn next_wake<'env>(
        &self,
        env: &'env Env,
        timeout_ms: Option<u32>,
    ) -> Result<PromiseRaw<'env, Settled<Option<WakeInfo>>>> {
        let queue = self.queue.clone();
        let timeout = crate::plane::defaults::wait(timeout_ms);
        // Awaited on the addon's runtime: no thread waits for a wake.
        spawn(env, async move {
            Ok(queue.next_wake_async(timeout).await.map(|w| WakeInfo {
                activation_id: w.activation_id,
                task_id: w.task_id,
                context_id: w.context_id,
                delivery: w.delivery as u32,
            }))
        })
    }

    /// Ends the active turn: `ended` (the session's turn ran to its end) or `failed`, with
    /// `reason` (why it failed: logged, and told to the caller in the Task's status).
    #[napi(catch_unwind, ts_return_type = "Promise<void>")]
    pub fn turn_ended(
        &self,
        task_id: String,
        outcome: TurnOutcome,
        reason: Option<String>,
    ) -> AsyncTask<PlaneCall<()>> {
        let outcome = match outcome {
            TurnOutcome::Ended => crate::wake::TurnOutcome::Ended,
            TurnOutcome::Failed => crate::wake::TurnOutcome::Failed,
            TurnOutcome::Held => crate::wake::TurnOutcome::Held,
        };
        let queue = self.queue.clone();
        let plane = self.plane.clone();
        PlaneCall::new(move || {
            // On a fleet the session is kept first, so whichever node works the Task next
            // (once the turn's end is recorded) finds it. A session that cannot be kept
            // does not keep the turn from ending: it is logged, naming the Task and why.
            if let Err(err) = plane.keep_session(&task_id) {
                crate::log::event_at(
                    tracing::Level::ERROR,
                    "a2a_session_not_kept",
                    serde_json::json!({ "taskId": task_id, "message": err.to_string() }),
                );
            }
            queue
                .turn_ended(&task_id, outcome, reason.as_deref())
                .map_err(plane_error)
        })
    }

    /// Holds the queue while the agent cannot work Tasks (`reason`: why, e.g. no usable
    /// model; each waiting Task's status then says so), or releases it (`null`).
    #[napi(ts_return_type = "Promise<void>")]
    pub fn hold(&self, reason: Option<String>) -> AsyncTask<PlaneCall<()>> {
        let queue = self.queue.clone();
        PlaneCall::new(move || {
            queue.hold(reason);
            Ok(())
        })
    }

    /// Why the queue is held, if it is.
    #[napi(getter)]
    pub fn held(&self) -> Option<String> {
        self.queue.held()
    }

    /// How many wakes wait behind the active turn.
    #[napi(getter)]
    pub fn waiting(&self) -> u32 {
        self.queue.waiting() as u32
    }

    /// Calls `callback` with each batch of Task activity (arrivals and status changes of
    /// every Task, for the person watching the resident), from a thread that ends on
    /// `close()`. The callback never keeps Node's event loop alive. One watcher per bridge:
    /// a second call replaces the first.
    #[napi(
        catch_unwind,
        ts_args_type = "callback: (err: Error | null, batch: TaskActivity[]) => void"
    )]
    pub fn watch_activity(
        &self,
        callback: ThreadsafeFunction<Vec<TaskActivity>, (), Vec<TaskActivity>, Status, true, true>,
    ) -> Result<()> {
        if self.queue.is_closed() {
            return Err(failed_precondition(
                "the agent bridge is closed; start a new one to watch activity",
            ));
        }
        let events = self.queue.plane().events();
        let (id, receiver) = events.watch_activity();
        let previous = self
            .watch
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .replace(id);
        if let Some(previous) = previous {
            events.unwatch(previous);
        }
        std::thread::Builder::new()
            .name("task-plane-activity".into())
            .spawn(move || {
                // Blocks until activity arrives; ends when the watch is dropped (close).
                while let Ok(first) = receiver.recv() {
                    let mut batch = vec![TaskActivity::from(first)];
                    while let Ok(more) = receiver.try_recv() {
                        batch.push(TaskActivity::from(more));
                    }
                    callback.call(Ok(batch), ThreadsafeFunctionCallMode::NonBlocking);
                }
            })
            .map_err(|e| internal(format!("cannot start the activity thread: {e}")))?;
        Ok(())
    }

    /// The Task whose turn is active, if any.
    #[napi(getter)]
    pub fn authority(&self) -> Option<String> {
        self.queue.authority()
    }

    /// The declared outputs (`{name: type}`), or `null` without a manifest; throws the
    /// load error when the manifest failed to load.
    #[napi(catch_unwind)]
    pub fn declared_outputs(&self) -> Result<Option<HashMap<String, String>>> {
        match self.tools.outputs() {
            crate::tools::manifest::Outputs::None => Ok(None),
            crate::tools::manifest::Outputs::Declared(w) => {
                Ok(Some(w.outputs.clone().into_iter().collect()))
            }
            crate::tools::manifest::Outputs::Failed(reason) => {
                Err(failed_precondition(reason.clone()))
            }
        }
    }

    /// `a2a_read_task`.
    #[napi(ts_return_type = "Promise<ReadTaskResult>")]
    pub fn read_task(&self, task_id: String) -> AsyncTask<PlaneCall<ReadTaskResult>> {
        let tools = self.tools.clone();
        PlaneCall::new(move || {
            let (text, task) = tools.read_task(&task_id).map_err(plane_error)?;
            let task =
                serde_json::to_value(wire::convert::task_to_wire(&task)).map_err(internal)?;
            Ok(ReadTaskResult { text, task })
        })
    }

    /// `a2a_complete_task`: `completed` (outputs, then the response, as artifacts) or
    /// `rejected` (the response is the reason). A blank response, or one longer than
    /// `RESPONSE_MAX_CHARS` code points, is refused with `INVALID_ARGUMENT`.
    #[napi(ts_return_type = "Promise<void>")]
    pub fn complete_task(
        &self,
        task_id: String,
        outcome: CompletionOutcome,
        response: String,
        outputs: Option<Vec<OutputInput>>,
    ) -> AsyncTask<PlaneCall<()>> {
        let outcome = match outcome {
            CompletionOutcome::Completed => crate::tools::Outcome::Completed,
            CompletionOutcome::Rejected => crate::tools::Outcome::Rejected,
        };
        let outputs: Vec<(String, Value)> = outputs
            .unwrap_or_default()
            .into_iter()
            .map(|o| (o.output, o.value))
            .collect();
        let tools = self.tools.clone();
        PlaneCall::new(move || {
            tools
                .complete_task(&task_id, outcome, &response, outputs)
                .map_err(plane_error)
        })
    }

    /// `a2a_record_output`: one declared output while the Task is WORKING.
    #[napi(ts_return_type = "Promise<void>")]
    pub fn record_output(
        &self,
        task_id: String,
        output: String,
        value: Value,
    ) -> AsyncTask<PlaneCall<()>> {
        let tools = self.tools.clone();
        PlaneCall::new(move || {
            tools
                .record_output(&task_id, &output, value)
                .map_err(plane_error)
        })
    }

    /// `a2a_require_input`: INPUT_REQUIRED with `question`; an optional MCP elicitation
    /// `requestedSchema`.
    #[napi(ts_return_type = "Promise<void>")]
    pub fn require_input(
        &self,
        task_id: String,
        question: String,
        requested_schema: Option<Value>,
    ) -> AsyncTask<PlaneCall<()>> {
        let tools = self.tools.clone();
        PlaneCall::new(move || {
            tools
                .require_input(&task_id, &question, requested_schema)
                .map_err(plane_error)
        })
    }

    /// Stops the queue: a pending `nextWake` resolves `null`, authority ends, the activity
    /// watcher stops. Idempotent.
    #[napi(catch_unwind)]
    pub fn close(&self) {
        self.queue.close();
        if let Some(id) = self.watch.lock().unwrap_or_else(|p| p.into_inner()).take() {
            self.queue.plane().events().unwatch(id);
        }
    }
}
