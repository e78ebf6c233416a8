//! The listener under test: a store in a temporary root, the listener on a free loopback
//! port with two principals, and a scripted agent that reacts to each message's text.
//!
//! The scripts, by the first word of the Task's last message: `ask`, `elicit` and `auth`
//! interrupt it with a question; `hold` leaves it SUBMITTED; `work` leaves it WORKING;
//! `reject` rejects it; `gated` waits until the test opens the gate ([`Server::open_gate`]),
//! then works, records a `progress` artifact and completes; `break` is a broken agent;
//! `measure` completes with a `data` artifact of numbers that need all 17 digits;
//! anything else completes with an `answer` artifact echoing the text.

use std::net::SocketAddr;
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use a2a_task_plane::config::ListenerConfig;
use a2a_task_plane::http::Listener;
use a2a_task_plane::plane::{AlwaysTask, Answer, Executor};
use a2a_task_plane::plane::{InterruptKind, PlaneOptions, TaskPlane};
use a2a_task_plane::record::{ArtifactRecord, MessageRecord, PartContent, PartRecord};
use serde_json::{json, Value};

use super::http::{open_stream, request, EventStream, Reply};
use super::{agent, TempRoot};

pub const ALICE: &str = "alice-token-0123456789";
pub const BOB: &str = "bob-token-0123456789ab";

/// How long the `gated` script waits for the test to open its gate.
const GATE_LIMIT: Duration = Duration::from_secs(20);

pub struct Server {
    pub _tmp: TempRoot,
    pub plane: TaskPlane,
    pub listener: Listener,
    agent: Option<ScriptedAgent>,
    /// Opens the gate of one `gated` Task per message (dropped with the agent).
    gate: Option<mpsc::Sender<()>>,
}

impl Server {
    pub fn start() -> Server {
        Server::start_with(Arc::new(AlwaysTask), |_| {})
    }

    pub fn start_with(
        executor: Arc<dyn Executor>,
        tune: impl FnOnce(&mut ListenerConfig),
    ) -> Server {
        Server::start_with_plane(PlaneOptions::default(), executor, tune)
    }

    /// [`Server::start_with`] on a plane opened with `options` (e.g. a manual clock).
    pub fn start_with_plane(
        options: PlaneOptions,
        executor: Arc<dyn Executor>,
        tune: impl FnOnce(&mut ListenerConfig),
    ) -> Server {
        let tmp = TempRoot::new("http");
        let credentials = tmp.path().join("credentials.json");
        std::fs::write(
            &credentials,
            json!({"credentials": [{"token": ALICE, "principal": "alice"}, {"token": BOB, "principal": "bob"}]}).to_string(),
        )
        .unwrap();
        let options = super::on_test_store(&tmp.store(), options);
        let plane = TaskPlane::open(&tmp.store(), options).unwrap();
        let mut config = ListenerConfig::new(credentials);
        config.port = 0;
        config.blocking_timeout_ms = 5_000;
        tune(&mut config);
        let listener = Listener::start(plane.clone(), config, executor).unwrap();
        let (gate, gate_rx) = mpsc::channel();
        let agent = Some(ScriptedAgent::start(plane.clone(), gate_rx));
        Server {
            _tmp: tmp,
            plane,
            listener,
            agent,
            gate: Some(gate),
        }
    }

    pub fn addr(&self) -> SocketAddr {
        self.listener.local_addr()
    }

    pub fn call(
        &self,
        method: &str,
        path: &str,
        token: Option<&str>,
        body: Option<Value>,
    ) -> Reply {
        self.call_with(method, path, token, body, &[])
    }

    pub fn call_with(
        &self,
        method: &str,
        path: &str,
        token: Option<&str>,
        body: Option<Value>,
        extra: &[(&str, &str)],
    ) -> Reply {
        let auth = token.map(|t| format!("Bearer {t}"));
        let mut headers: Vec<(&str, &str)> =
            vec![("A2A-Version", "1.0"), ("Content-Type", "application/json")];
        if let Some(auth) = &auth {
            headers.push(("Authorization", auth));
        }
        headers.extend_from_slice(extra);
        let body = body.map(|b| b.to_string()).unwrap_or_default();
        request(self.addr(), method, path, &headers, body.as_bytes())
    }

    /// Opens a stream (`message:stream`, `tasks/{id}:subscribe`) to be read event by event.
    pub fn stream(
        &self,
        method: &str,
        path: &str,
        token: &str,
        body: Option<Value>,
    ) -> EventStream {
        let auth = format!("Bearer {token}");
        let headers = [
            ("A2A-Version", "1.0"),
            ("Content-Type", "application/json"),
            ("Authorization", auth.as_str()),
        ];
        let body = body.map(|b| b.to_string()).unwrap_or_default();
        open_stream(
            self.addr(),
            method,
            path,
            &headers,
            body.as_bytes(),
            Duration::from_secs(20),
        )
    }

    /// Lets the agent go on with one `gated` Task (the next one it waits on).
    pub fn open_gate(&self) {
        self.gate.as_ref().unwrap().send(()).unwrap();
    }

    /// `message:send` of a text message; returns the reply.
    pub fn send(&self, token: &str, message_id: &str, text: &str, extra: Value) -> Reply {
        let mut message =
            json!({"messageId": message_id, "role": "ROLE_USER", "parts": [{"text": text}]});
        if let Value::Object(extra) = extra {
            for (k, v) in extra {
                message[k] = v;
            }
        }
        self.call(
            "POST",
            "/message:send",
            Some(token),
            Some(json!({ "message": message })),
        )
    }
}

impl Server {
    /// Stops the scripted agent now and returns what went wrong, if anything did (the
    /// drop does this too, and fails the test with it).
    pub fn stop_agent(&mut self) -> Result<(), String> {
        // A `gated` Task still waiting is let go (and reported) rather than waited for.
        self.gate.take();
        self.agent.take().map_or(Ok(()), ScriptedAgent::stop)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        // The agent first (it still uses the plane), and its errors fail the test.
        let agent = self.stop_agent();
        self.listener.close();
        self.plane.close();
        if let Err(failure) = agent {
            if std::thread::panicking() {
                // The test failed already; say what the agent met, which may be why.
                eprintln!("{failure}");
            } else {
                panic!("{failure}");
            }
        }
    }
}

/// The scripted agent: reacts to each accepted Task according to its last message's text.
/// It blocks on the plane's acceptance watch (nothing polls) and ends when the watch is
/// ended. It fails loudly: every error it meets is kept, with the Task and the script, and
/// [`ScriptedAgent::stop`] returns them (the Server's drop fails the test with them), and
/// the Task fails with the error as its status message, so whoever waits on it sees the
/// error at once. Only a Task canceled under it (a test that cancels while the agent
/// works) is not an error.
pub struct ScriptedAgent {
    plane: TaskPlane,
    watch: u64,
    thread: Option<JoinHandle<()>>,
    errors: Arc<Mutex<Vec<String>>>,
}

impl ScriptedAgent {
    /// Starts the agent; each message on `gate` lets one `gated` Task go on.
    pub fn start(plane: TaskPlane, gate: mpsc::Receiver<()>) -> ScriptedAgent {
        // Watched before any message can be sent, so the agent misses none.
        let (watch, accepted) = plane.events().watch_accepted();
        let errors = Arc::new(Mutex::new(Vec::new()));
        let thread = std::thread::Builder::new()
            .name("scripted-agent".into())
            .spawn({
                let (plane, errors) = (plane.clone(), errors.clone());
                move || {
                    // Ends when `stop` ends the watch.
                    while let Ok(event) = accepted.recv() {
                        if let Err(error) = act(&plane, &event.task_id, &gate) {
                            errors.lock().unwrap().push(error);
                        }
                    }
                }
            })
            .unwrap();
        ScriptedAgent {
            plane,
            watch,
            thread: Some(thread),
            errors,
        }
    }

    /// Ends the watch, waits for the agent to finish what it is doing, and returns what
    /// went wrong, if anything did.
    pub fn stop(mut self) -> Result<(), String> {
        self.plane.events().unwatch(self.watch);
        let joined = self.thread.take().map(JoinHandle::join);
        let mut errors = std::mem::take(&mut *self.errors.lock().unwrap());
        if let Some(Err(panic)) = joined {
            let why = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            errors.push(format!("the agent thread panicked: {why}"));
        }
        if errors.is_empty() {
            Ok(())
        } else {
            Err(format!(
                "the scripted agent failed:\n  {}",
                errors.join("\n  ")
            ))
        }
    }
}

impl Drop for ScriptedAgent {
    fn drop(&mut self) {
        self.plane.events().unwatch(self.watch);
    }
}

/// Runs the script for the accepted Task `id`. An error names the Task and the script.
fn act(plane: &TaskPlane, id: &str, gate: &mpsc::Receiver<()>) -> Result<(), String> {
    let task = plane
        .task(id, None, false)
        .map_err(|e| format!("task {id}: reading the accepted task failed: {e}"))?
        .ok_or_else(|| format!("task {id} was accepted but cannot be read"))?;
    let text = match task.history.last().map(|m| &m.parts[0].content) {
        Some(PartContent::Text(t)) => t.clone(),
        _ => String::new(),
    };
    let artifact = |name: &str, text: &str| ArtifactRecord {
        artifact_id: a2a_task_plane::ids::mint(),
        name: Some(name.into()),
        description: None,
        parts: vec![PartRecord::text(text)],
        metadata: None,
        extensions: vec![],
    };
    let result = match text.as_str() {
        t if t.starts_with("ask") => plane.start_work(id).and_then(|_| {
            plane.require_input(id, InterruptKind::InputRequired, agent("which one?"), None)
        }),
        t if t.starts_with("elicit") => plane.start_work(id).and_then(|_| {
            let schema = json!({"type": "object", "properties": {"color": {"type": "string", "enum": ["red", "blue"]}}, "required": ["color"]});
            plane.require_input(
                id,
                InterruptKind::InputRequired,
                agent("which color?"),
                Some(schema),
            )
        }),
        t if t.starts_with("auth") => plane.start_work(id).and_then(|_| {
            plane.require_input(id, InterruptKind::AuthRequired, agent("sign in first"), None)
        }),
        t if t.starts_with("hold") => Ok(()),
        t if t.starts_with("measure") => plane.start_work(id).and_then(|_| {
            let numbers = json!({"x": 51.248178375505404, "y": -93.31137037688033});
            let mut measured = artifact("measured", "");
            measured.parts = vec![PartRecord::data(numbers)];
            plane.complete(id, vec![measured], None)
        }),
        // A broken agent: acts on a Task that does not exist.
        t if t.starts_with("break") => plane.start_work(&format!("{id}-missing")).map(|_| ()),
        t if t.starts_with("work") => plane.start_work(id).map(|_| ()),
        t if t.starts_with("reject") => plane.start_work(id).and_then(|_| {
            plane.finish_unsuccessfully(
                id,
                a2a_task_plane::record::TaskState::Rejected,
                agent("no"),
            )
        }),
        t if t.starts_with("gated") => {
            gate.recv_timeout(GATE_LIMIT).map_err(|e| {
                format!("task {id} (script `{text}`): the test did not open the gate ({e})")
            })?;
            plane
                .start_work(id)
                .and_then(|_| plane.record_artifact(id, artifact("progress", "half way")))
                .and_then(|_| {
                    plane.complete(id, vec![artifact("answer", "all done")], Some(agent("done")))
                })
        }
        _ => plane.start_work(id).and_then(|_| {
            plane.complete(
                id,
                vec![artifact("answer", &format!("echo: {text}"))],
                Some(agent("done")),
            )
        }),
    };
    let Err(error) = result else { return Ok(()) };
    // A Task the test canceled under the agent refuses further work: that is what cancel
    // is for, not a failure of the agent.
    let now = plane
        .task(id, Some(0), false)
        .ok()
        .flatten()
        .map(|t| t.state);
    if now == Some(a2a_task_plane::record::TaskState::Canceled) {
        return Ok(());
    }
    let failure = format!("task {id} (script `{text}`): {error}");
    // The Task fails with the error as its status message, so a client waiting on it sees
    // the error at once instead of a timeout.
    let told = plane.finish_unsuccessfully(
        id,
        a2a_task_plane::record::TaskState::Failed,
        agent(&format!("the scripted agent failed: {failure}")),
    );
    Err(match told {
        Ok(()) => failure,
        Err(also) => format!("{failure} (and failing the task failed too: {also})"),
    })
}

/// Answers `ping` directly with a fresh `pong <id>` (so a duplicate returning the first
/// reply is visible); everything else is a Task. Counts the times it is asked.
#[derive(Default)]
pub struct Direct {
    pub asked: std::sync::atomic::AtomicUsize,
}

impl Executor for Direct {
    fn answer(&self, _principal: &str, message: &MessageRecord) -> Answer {
        self.asked.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let reply = match &message.parts[0].content {
            PartContent::Text(t) if t == "ping" => {
                Some(agent(&format!("pong {}", a2a_task_plane::ids::mint())))
            }
            _ => None,
        };
        Box::pin(std::future::ready(Ok(reply)))
    }
}

/// An executor that misbehaves in one way: never answers, fails, panics, or answers with a
/// message that is not a direct reply (a user message).
pub enum Misbehaving {
    Silent,
    Failing,
    Panicking,
    UserReply,
}

impl Executor for Misbehaving {
    fn answer(&self, _principal: &str, message: &MessageRecord) -> Answer {
        match self {
            Misbehaving::Silent => Box::pin(std::future::pending()),
            Misbehaving::Failing => Box::pin(std::future::ready(Err("the executor broke".into()))),
            Misbehaving::Panicking => Box::pin(async { panic!("the executor panicked") }),
            Misbehaving::UserReply => Box::pin(std::future::ready(Ok(Some(message.clone())))),
        }
    }
}
