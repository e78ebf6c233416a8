//! The listener under test: a store in a temporary root, the listener on a free loopback
//! port with two principals, and a scripted agent that reacts to each message's text.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use a2a_task_plane::config::ListenerConfig;
use a2a_task_plane::http::{AlwaysTask, Executor, Listener};
use a2a_task_plane::plane::{InterruptKind, TaskPlane};
use a2a_task_plane::record::{ArtifactRecord, MessageRecord, PartContent, PartRecord};
use serde_json::{json, Value};

use super::http::{request, Reply};
use super::{agent, open, TempRoot};

pub const ALICE: &str = "alice-token-0123456789";
pub const BOB: &str = "bob-token-0123456789ab";

pub struct Server {
    pub _tmp: TempRoot,
    pub plane: TaskPlane,
    pub listener: Listener,
    pub stop: Arc<AtomicBool>,
    pub agent: Option<std::thread::JoinHandle<()>>,
}

impl Server {
    pub fn start() -> Server {
        Server::start_with(Arc::new(AlwaysTask), |_| {})
    }

    pub fn start_with(
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
        let plane = open(&tmp.store());
        let mut config = ListenerConfig::new(credentials);
        config.port = 0;
        config.blocking_timeout_ms = 5_000;
        tune(&mut config);
        let listener = Listener::start(plane.clone(), config, executor).unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let agent = Some(scripted_agent(plane.clone(), stop.clone()));
        Server {
            _tmp: tmp,
            plane,
            listener,
            stop,
            agent,
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

impl Drop for Server {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(agent) = self.agent.take() {
            let _ = agent.join();
        }
        self.listener.close();
        self.plane.close();
    }
}

/// The scripted agent: reacts to each accepted Task according to the last message's text.
pub fn scripted_agent(plane: TaskPlane, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<()> {
    let mut accepted = plane.events().subscribe_accepted();
    std::thread::spawn(move || {
        while !stop.load(Ordering::SeqCst) {
            let Ok(event) = accepted.try_recv() else {
                std::thread::sleep(Duration::from_millis(2));
                continue;
            };
            let Ok(Some(task)) = plane.task(&event.task_id, None, false) else {
                continue;
            };
            let text = match task.history.last().map(|m| &m.parts[0].content) {
                Some(PartContent::Text(t)) => t.clone(),
                _ => String::new(),
            };
            let id = task.task_id.clone();
            let artifact = |name: &str, text: &str| ArtifactRecord {
                artifact_id: a2a_task_plane::ids::mint(),
                name: Some(name.into()),
                description: None,
                parts: vec![PartRecord::text(text)],
                metadata: None,
                extensions: vec![],
            };
            let result = match text.as_str() {
                t if t.starts_with("ask") => plane.start_work(&id).and_then(|_| {
                    plane.require_input(
                        &id,
                        InterruptKind::InputRequired,
                        agent("which one?"),
                        None,
                    )
                }),
                t if t.starts_with("elicit") => plane.start_work(&id).and_then(|_| {
                    let schema = serde_json::json!({"type": "object", "properties": {"color": {"type": "string", "enum": ["red", "blue"]}}, "required": ["color"]});
                    plane.require_input(&id, InterruptKind::InputRequired, agent("which color?"), Some(schema))
                }),
                t if t.starts_with("auth") => plane.start_work(&id).and_then(|_| {
                    plane.require_input(
                        &id,
                        InterruptKind::AuthRequired,
                        agent("sign in first"),
                        None,
                    )
                }),
                t if t.starts_with("hold") => Ok(()),
                t if t.starts_with("work") => plane.start_work(&id).map(|_| ()),
                t if t.starts_with("reject") => plane.start_work(&id).and_then(|_| {
                    plane.finish_unsuccessfully(
                        &id,
                        a2a_task_plane::record::TaskState::Rejected,
                        agent("no"),
                    )
                }),
                t if t.starts_with("slow") => {
                    std::thread::sleep(Duration::from_millis(300));
                    plane
                        .start_work(&id)
                        .and_then(|_| {
                            std::thread::sleep(Duration::from_millis(50));
                            plane.record_artifact(&id, artifact("progress", "half way"))
                        })
                        .and_then(|_| {
                            plane.complete(
                                &id,
                                vec![artifact("answer", "all done")],
                                Some(agent("done")),
                            )
                        })
                }
                _ => plane.start_work(&id).and_then(|_| {
                    plane.complete(
                        &id,
                        vec![artifact("answer", &format!("echo: {text}"))],
                        Some(agent("done")),
                    )
                }),
            };
            let _ = result;
        }
    })
}

pub struct Direct;

impl Executor for Direct {
    fn respond_directly(&self, _principal: &str, message: &MessageRecord) -> Option<MessageRecord> {
        match &message.parts[0].content {
            PartContent::Text(t) if t == "ping" => {
                Some(agent(&format!("pong {}", a2a_task_plane::ids::mint())))
            }
            _ => None,
        }
    }
}
