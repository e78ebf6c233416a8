//! What an operator watches of a running task plane: Prometheus metrics (`GET /metrics`)
//! and the health summary (`GET /healthz`). One [`Metrics`] per open plane (made with it,
//! dropped with it; never a global): the plane counts messages and settled Tasks, the wake
//! queue counts turns and overflows and lends a view of its state, and every binding
//! counts its requests through [`Metrics::request`]. Metric names are documented in
//! `docs/operations.md`.
//!
//! Nothing here carries caller data: counts, states, routes and status codes only.

use std::sync::{Mutex, Weak};
use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;
use serde_json::{json, Value};

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Outcome {
    outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct State {
    state: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Request {
    binding: &'static str,
    route: &'static str,
    status: u16,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Route {
    binding: &'static str,
    route: &'static str,
}

type Latency = Family<Route, Histogram, fn() -> Histogram>;

/// Latency buckets from 1 ms to about 65 s (a blocking send waits up to a minute).
fn latency_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.001, 2.0, 17))
}

/// What the wake queue lends for a scrape or a health check.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct QueueState {
    /// Wakes waiting behind the active turn.
    pub waiting: usize,
    /// Whether a turn is active.
    pub working: bool,
    /// Why the queue is held, if it is.
    pub held: Option<String>,
}

/// Something that can report the queue's state (the wake queue, held weakly: the plane
/// never keeps a closed queue alive).
pub trait QueueView: Send + Sync {
    /// `None` once the queue is closed.
    fn queue_state(&self) -> Option<QueueState>;
}

/// What is read from outside this module at scrape time.
#[derive(Debug, Clone, Copy, Default)]
pub struct Sampled {
    pub live_streams: usize,
    pub store_bytes: u64,
    pub store_open: bool,
}

/// The metrics and health of one open plane.
pub struct Metrics {
    registry: Registry,
    messages: Family<Outcome, Counter>,
    settled: Family<State, Counter>,
    turns: Family<Outcome, Counter>,
    wake_overflows: Counter,
    fleet_update_reads: Counter,
    requests: Family<Request, Counter>,
    latency: Latency,
    queue_depth: Gauge,
    queue_held: Gauge,
    live_streams: Gauge,
    store_bytes: Gauge,
    queue: Mutex<Option<Weak<dyn QueueView>>>,
    /// Start-up problems by name (e.g. `workflow_manifest`), which make health `degraded`.
    problems: Mutex<Vec<(String, String)>>,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    pub fn new() -> Metrics {
        let mut registry = Registry::with_prefix("a2a");
        let messages = Family::<Outcome, Counter>::default();
        registry.register(
            "messages",
            "Messages taken in, by outcome (accepted: new work; continued: resumed a waiting Task; duplicate: a repeat answered with its first outcome)",
            messages.clone(),
        );
        let settled = Family::<State, Counter>::default();
        registry.register(
            "tasks_settled",
            "Tasks that reached a terminal or interrupted state, by state",
            settled.clone(),
        );
        let turns = Family::<Outcome, Counter>::default();
        registry.register(
            "turns",
            "Agent turns, by outcome (started, failed, held: the queue was held)",
            turns.clone(),
        );
        let wake_overflows = Counter::default();
        registry.register(
            "wake_overflows",
            "Activations given up because the wake queue was full",
            wake_overflows.clone(),
        );
        let fleet_update_reads = Counter::default();
        registry.register(
            "fleet_update_reads",
            "Reads of Task changes other nodes wrote, for the subscribers and waiters on this node (a fleet on PostgreSQL)",
            fleet_update_reads.clone(),
        );
        let requests = Family::<Request, Counter>::default();
        registry.register(
            "requests",
            "Requests answered, by binding, route and HTTP status",
            requests.clone(),
        );
        let latency: Latency = Family::new_with_constructor(latency_histogram);
        registry.register(
            "request_duration_seconds",
            "Time to the response head (a stream's first bytes), by binding and route",
            latency.clone(),
        );
        let queue_depth = Gauge::default();
        registry.register(
            "queue_depth",
            "Wakes waiting behind the active turn",
            queue_depth.clone(),
        );
        let queue_held = Gauge::default();
        registry.register(
            "queue_held",
            "1 while the queue is held (nothing is delivered), else 0",
            queue_held.clone(),
        );
        let live_streams = Gauge::default();
        registry.register("live_streams", "Open SSE streams", live_streams.clone());
        let store_bytes = Gauge::default();
        registry.register(
            "store_bytes",
            "Size of the store's database files (with its WAL)",
            store_bytes.clone(),
        );
        Metrics {
            registry,
            messages,
            settled,
            turns,
            wake_overflows,
            fleet_update_reads,
            requests,
            latency,
            queue_depth,
            queue_held,
            live_streams,
            store_bytes,
            queue: Mutex::new(None),
            problems: Mutex::new(Vec::new()),
        }
    }

    /// A message taken in: `accepted`, `continued` or `duplicate`.
    pub fn message(&self, outcome: &'static str) {
        self.messages.get_or_create(&Outcome { outcome }).inc();
    }

    /// A Task reached `state` (a settled one).
    pub fn settled(&self, state: &'static str) {
        self.settled.get_or_create(&State { state }).inc();
    }

    /// A turn `started`, `failed`, or `held` (the queue stopped delivering).
    pub fn turn(&self, outcome: &'static str) {
        self.turns.get_or_create(&Outcome { outcome }).inc();
    }

    pub fn wake_overflow(&self) {
        self.wake_overflows.inc();
    }

    /// One read of the changes another node made to a Task listened to here.
    pub fn fleet_update_read(&self) {
        self.fleet_update_reads.inc();
    }

    /// How many such reads this node made.
    pub fn fleet_update_reads(&self) -> u64 {
        self.fleet_update_reads.get()
    }

    /// One answered request of any binding (`http_json`, `jsonrpc`, `grpc`...): its route,
    /// its status and how long it took to its response head. Every binding calls this.
    pub fn request(&self, binding: &'static str, route: &'static str, status: u16, took: Duration) {
        self.requests
            .get_or_create(&Request {
                binding,
                route,
                status,
            })
            .inc();
        self.latency
            .get_or_create(&Route { binding, route })
            .observe(took.as_secs_f64());
    }

    /// The wake queue now reporting (it replaces any earlier one).
    pub fn set_queue(&self, queue: Weak<dyn QueueView>) {
        *self.queue.lock().unwrap_or_else(|p| p.into_inner()) = Some(queue);
    }

    /// The queue's state, if a live queue reports it.
    pub fn queue_state(&self) -> Option<QueueState> {
        let queue = self.queue.lock().unwrap_or_else(|p| p.into_inner()).clone();
        queue
            .and_then(|q| q.upgrade())
            .and_then(|q| q.queue_state())
    }

    /// Records (`Some`) or clears (`None`) a start-up problem named `name` (for example
    /// `workflow_manifest`): health reads `degraded` while any is recorded.
    pub fn set_problem(&self, name: &str, problem: Option<String>) {
        let mut problems = self.problems.lock().unwrap_or_else(|p| p.into_inner());
        problems.retain(|(n, _)| n != name);
        if let Some(problem) = problem {
            problems.push((name.to_string(), problem));
        }
    }

    /// The recorded start-up problems' names.
    pub fn problems(&self) -> Vec<String> {
        let problems = self.problems.lock().unwrap_or_else(|p| p.into_inner());
        problems.iter().map(|(n, _)| n.clone()).collect()
    }

    /// The Prometheus text exposition, with the gauges read now.
    pub fn encode(&self, sampled: Sampled) -> String {
        let queue = self.queue_state().unwrap_or_default();
        self.queue_depth.set(queue.waiting as i64);
        self.queue_held.set(i64::from(queue.held.is_some()));
        self.live_streams.set(sampled.live_streams as i64);
        self.store_bytes.set(sampled.store_bytes as i64);
        let mut text = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut text, &self.registry);
        text
    }

    /// The health summary `GET /healthz` answers (see [`health`]).
    pub fn health(&self, sampled: Sampled) -> Value {
        health(self.queue_state(), &self.problems(), sampled)
    }
}

/// The category of a hold reason, which `/healthz` shows instead of the reason itself:
/// `credentials` (a provider's key or login is missing or refused), `model` (no usable
/// model), else `other`.
pub fn hold_category(reason: &str) -> &'static str {
    let reason = reason.to_ascii_lowercase();
    if ["key", "credential", "login", "auth"]
        .iter()
        .any(|w| reason.contains(w))
    {
        "credentials"
    } else if reason.contains("model") {
        "model"
    } else {
        "other"
    }
}

/// The health rule: `degraded` when the store is closed or a start-up problem is recorded;
/// else `held` (with the reason's category) while the queue is held; else `ok`. Without a
/// wake queue (an embedder that works Tasks its own way) `queue` is `null`. Counts, states
/// and category names only: never a caller's data.
pub fn health(queue: Option<QueueState>, problems: &[String], sampled: Sampled) -> Value {
    let held = queue
        .as_ref()
        .and_then(|q| q.held.as_deref())
        .map(hold_category);
    let status = if !sampled.store_open || !problems.is_empty() {
        "degraded"
    } else if held.is_some() {
        "held"
    } else {
        "ok"
    };
    let mut body = json!({
        "status": status,
        "queue": queue.as_ref().map_or(Value::Null, |q| json!({ "waiting": q.waiting, "working": q.working, "held": q.held.is_some() })),
        "store": { "state": if sampled.store_open { "open" } else { "closed" }, "bytes": sampled.store_bytes },
        "liveStreams": sampled.live_streams,
        "problems": problems,
    });
    if let Some(category) = held {
        body["held"] = json!(category);
    }
    body
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    struct Fixed(QueueState);
    impl QueueView for Fixed {
        fn queue_state(&self) -> Option<QueueState> {
            Some(self.0.clone())
        }
    }

    fn open() -> Sampled {
        Sampled {
            live_streams: 0,
            store_bytes: 4096,
            store_open: true,
        }
    }

    #[test]
    fn health_is_ok_held_with_its_category_or_degraded() {
        let idle = QueueState::default();
        assert_eq!(health(Some(idle.clone()), &[], open())["status"], "ok");
        let held = QueueState {
            held: Some("no API key for provider anthropic: set ANTHROPIC_API_KEY".into()),
            ..idle.clone()
        };
        let body = health(Some(held), &[], open());
        assert_eq!(body["status"], "held");
        assert_eq!(body["held"], "credentials");
        assert!(!body.to_string().contains("ANTHROPIC"), "{body}");
        let embedder = health(None, &[], open());
        assert_eq!(embedder["status"], "ok");
        assert_eq!(embedder["queue"], Value::Null);
        let closed = Sampled {
            store_open: false,
            ..open()
        };
        assert_eq!(
            health(Some(idle.clone()), &[], closed)["status"],
            "degraded"
        );
        let manifest = ["workflow_manifest".to_string()];
        let body = health(Some(idle), &manifest, open());
        assert_eq!(body["status"], "degraded");
        assert_eq!(body["problems"][0], "workflow_manifest");
    }

    #[test]
    fn hold_reasons_are_told_by_category() {
        assert_eq!(hold_category("no usable model: select one"), "model");
        assert_eq!(
            hold_category("provider openai refused the key"),
            "credentials"
        );
        assert_eq!(hold_category("paused by the operator"), "other");
    }

    #[test]
    fn the_exposition_names_every_metric_and_reads_the_queue_now() {
        let metrics = Metrics::new();
        metrics.message("accepted");
        metrics.settled("completed");
        metrics.turn("started");
        metrics.request("http_json", "send", 200, Duration::from_millis(3));
        let queue: Arc<dyn QueueView> = Arc::new(Fixed(QueueState {
            waiting: 3,
            working: true,
            held: Some("no usable model".into()),
        }));
        metrics.set_queue(Arc::downgrade(&queue));
        let text = metrics.encode(open());
        for line in [
            "a2a_messages_total{outcome=\"accepted\"} 1",
            "a2a_tasks_settled_total{state=\"completed\"} 1",
            "a2a_turns_total{outcome=\"started\"} 1",
            "a2a_requests_total{binding=\"http_json\",route=\"send\",status=\"200\"} 1",
            "a2a_request_duration_seconds_count{binding=\"http_json\",route=\"send\"} 1",
            "a2a_queue_depth 3",
            "a2a_queue_held 1",
            "a2a_store_bytes 4096",
            "a2a_wake_overflows_total 0",
            "a2a_live_streams 0",
        ] {
            assert!(text.contains(line), "missing {line} in\n{text}");
        }
        drop(queue);
        assert!(metrics.encode(open()).contains("a2a_queue_depth 0"));
    }
}
