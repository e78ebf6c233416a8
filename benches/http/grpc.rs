//! The gRPC mode of `benches/http.rs`: the same work as the HTTP+JSON cases (a blocking
//! send, a stream to the terminal event, a GET of a Task, a page of 50) as the
//! `A2AService` RPCs `SendMessage`, `SendStreamingMessage`, `GetTask` and `ListTasks`,
//! through the tonic client generated in the crate, at the `GRPC` interface the server's
//! Agent Card lists. Cases `grpc-send`, `grpc-stream`, `grpc-get` and `grpc-list`; and
//! `--grpc-pairs N`: gRPC against HTTP+JSON on one server.
//!
//! The same concurrency as the HTTP cases (`--conns` callers, each one call at a time),
//! multiplexed over `--h2-conns` HTTP/2 connections (default 4): a gRPC client shares a
//! few connections among many calls, where an HTTP/1.1 client needs one per call.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use a2a_task_plane::wire::a2a_service_client::A2aServiceClient;
use a2a_task_plane::wire::{
    part, send_message_response, GetTaskRequest, ListTasksRequest, Message, Part, Role,
    SendMessageConfiguration, SendMessageRequest, TaskState,
};
use tonic::metadata::{AsciiMetadataValue, MetadataValue};
use tonic::transport::{Channel, Endpoint};
use tonic::Request;

use super::jsonrpc::agent_card;
use super::{Outcome, Target};

/// A server's gRPC interface: a client per HTTP/2 connection, and the caller's token.
pub struct Grpc {
    clients: Vec<A2aServiceClient<Channel>>,
    authorization: Option<AsciiMetadataValue>,
}

/// The gRPC interface of the server `t` serves HTTP+JSON for (the `GRPC` interface of its
/// Agent Card, `host:port` or a URL), dialled `h2_conns` times, with `t`'s token.
pub async fn discover(t: &Target, h2_conns: usize) -> Grpc {
    let card = agent_card(t).await;
    let target = card["supportedInterfaces"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|i| i["protocolBinding"] == "GRPC")
        .and_then(|i| i["url"].as_str())
        .unwrap_or_else(|| panic!("the Agent Card lists no GRPC interface: {card}"));
    let url = match target.split_once("://") {
        Some((_, rest)) => format!("http://{rest}"),
        None => format!("http://{target}"),
    };
    let mut clients = Vec::new();
    for _ in 0..h2_conns.max(1) {
        let channel = Endpoint::from_shared(url.clone())
            .expect("a gRPC URL")
            .tcp_nodelay(true)
            .connect()
            .await
            .unwrap_or_else(|e| panic!("gRPC connect to {url}: {e}"));
        clients.push(A2aServiceClient::new(channel));
    }
    println!(
        "gRPC at {url}: {} HTTP/2 connection(s) shared by the callers",
        clients.len()
    );
    Grpc {
        clients,
        authorization: (!t.token.is_empty()).then(|| {
            format!("Bearer {}", t.token)
                .parse()
                .expect("an ASCII token")
        }),
    }
}

impl Grpc {
    /// `message` with the caller's metadata: its token, and the A2A version the HTTP cases
    /// send too.
    fn request<T>(&self, message: T) -> Request<T> {
        let mut request = Request::new(message);
        let metadata = request.metadata_mut();
        if let Some(value) = &self.authorization {
            metadata.insert("authorization", value.clone());
        }
        metadata.insert("a2a-version", MetadataValue::from_static("1.0"));
        request
    }
}

/// What a case calls: the four RPCs, with the same messages (tagged) and the same Tasks
/// read as the HTTP+JSON cases.
#[derive(Clone)]
enum Call {
    Send(&'static str),
    Stream(&'static str),
    Get(Arc<Vec<String>>),
    List,
}

/// The request of message `i` tagged `tag`: [`super::send_body`]'s message, as a message.
fn send_request(tag: &str, i: usize) -> SendMessageRequest {
    SendMessageRequest {
        message: Some(Message {
            message_id: format!("{tag}-{i}-{}", std::process::id()),
            role: Role::User as i32,
            parts: vec![Part {
                content: Some(part::Content::Text("please summarise the report".into())),
                ..Default::default()
            }],
            ..Default::default()
        }),
        configuration: Some(SendMessageConfiguration::default()),
        ..Default::default()
    }
}

/// Call `i` of `call` on `client`; a blocking send gives the id of its Task, which must
/// be COMPLETED. Any error status ends the run (as an HTTP error does the HTTP cases').
async fn one(
    g: &Grpc,
    client: &mut A2aServiceClient<Channel>,
    call: &Call,
    i: usize,
) -> Option<String> {
    let fail = |what: &str, status: tonic::Status| -> ! {
        panic!("gRPC {what}: {:?}: {}", status.code(), status.message())
    };
    match call {
        Call::Send(tag) => {
            let reply = client
                .send_message(g.request(send_request(tag, i)))
                .await
                .unwrap_or_else(|s| fail("SendMessage", s))
                .into_inner();
            match reply.payload {
                Some(send_message_response::Payload::Task(task)) => {
                    let state = task.status.as_ref().map(|s| s.state);
                    assert_eq!(
                        state,
                        Some(TaskState::Completed as i32),
                        "SendMessage (blocking) answered a Task that is not COMPLETED: {task:?}"
                    );
                    Some(task.id)
                }
                other => panic!("SendMessage answered {other:?}, not a Task"),
            }
        }
        Call::Stream(tag) => {
            let mut stream = client
                .send_streaming_message(g.request(send_request(tag, i)))
                .await
                .unwrap_or_else(|s| fail("SendStreamingMessage", s))
                .into_inner();
            let mut frames = 0;
            while let Some(_frame) = stream
                .message()
                .await
                .unwrap_or_else(|s| fail("SendStreamingMessage (a frame)", s))
            {
                frames += 1;
            }
            assert!(frames > 0, "SendStreamingMessage ended without a frame");
            None
        }
        Call::Get(ids) => {
            let id = ids[i % ids.len()].clone();
            client
                .get_task(g.request(GetTaskRequest {
                    id,
                    ..Default::default()
                }))
                .await
                .unwrap_or_else(|s| fail("GetTask", s));
            None
        }
        Call::List => {
            client
                .list_tasks(g.request(ListTasksRequest {
                    page_size: Some(50),
                    ..Default::default()
                }))
                .await
                .unwrap_or_else(|s| fail("ListTasks", s));
            None
        }
    }
}

/// Runs `callers` concurrent callers (one call at a time each, over the connections in
/// turn) until `duration` passes.
async fn load(g: &Arc<Grpc>, callers: usize, duration: Duration, call: Call) -> Outcome {
    let start = Instant::now();
    let counter = Arc::new(AtomicUsize::new(0));
    let handles: Vec<_> = (0..callers)
        .map(|c| {
            let (g, call, counter) = (g.clone(), call.clone(), counter.clone());
            tokio::spawn(async move {
                let mut client = g.clients[c % g.clients.len()].clone();
                let (mut latencies, mut ids) = (Vec::new(), Vec::new());
                while start.elapsed() < duration && latencies.len() < 200_000 {
                    let i = counter.fetch_add(1, Ordering::Relaxed);
                    let began = Instant::now();
                    let id = one(&g, &mut client, &call, i).await;
                    latencies.push(began.elapsed());
                    if let Some(id) = id.filter(|_| ids.len() < 64) {
                        ids.push(id.into_bytes());
                    }
                }
                (latencies, ids)
            })
        })
        .collect();
    let (mut all, mut ids) = (Vec::new(), Vec::new());
    for h in handles {
        let (l, i) = h.await.unwrap();
        all.extend(l);
        ids.extend(i);
    }
    (all.len() as f64 / start.elapsed().as_secs_f64(), all, ids)
}

fn ids_of(outcome: &Outcome) -> Vec<String> {
    outcome
        .2
        .iter()
        .map(|id| String::from_utf8_lossy(id).into_owned())
        .collect()
}

/// The gRPC cases `wanted` picks, in a fixed order (send, stream, get, list), each
/// reported through `case(label, key, outcome)`. The GET case reads the Tasks the send
/// case made, so the send case runs when either does.
pub async fn cases(
    g: &Arc<Grpc>,
    callers: usize,
    duration: Duration,
    send_duration: Duration,
    wanted: &impl Fn(&str) -> bool,
    case: &impl Fn(&'static str, &'static str, Outcome),
) {
    let mut ids = Arc::new(Vec::new());
    if wanted("grpc-send") || wanted("grpc-get") {
        let sends = load(g, callers, send_duration, Call::Send("grpcsend")).await;
        ids = Arc::new(ids_of(&sends));
        case("gRPC SendMessage (blocking)", "grpc-send", sends);
    }
    if wanted("grpc-stream") {
        let outcome = load(g, callers, duration, Call::Stream("grpcstream")).await;
        case(
            "gRPC SendStreamingMessage (to the end)",
            "grpc-stream",
            outcome,
        );
    }
    if wanted("grpc-get") {
        let outcome = load(g, callers, duration, Call::Get(ids)).await;
        case("gRPC GetTask", "grpc-get", outcome);
    }
    if wanted("grpc-list") {
        let outcome = load(g, callers, duration, Call::List).await;
        case("gRPC ListTasks (pageSize 50)", "grpc-list", outcome);
    }
}

/// One `window`-long run of case `case` (send, stream, get, list) over gRPC, as
/// `--grpc-pairs` pairs it with HTTP+JSON ([`pairs::binding_pairs`](super::pairs::binding_pairs)):
/// its messages tagged `tag`, the GET case reading the Tasks `ids`.
pub async fn paired_case(
    g: &Arc<Grpc>,
    callers: usize,
    window: Duration,
    case: &str,
    tag: &'static str,
    ids: Arc<Vec<String>>,
) -> Outcome {
    let call = match case {
        "send" => Call::Send(tag),
        "stream" => Call::Stream(tag),
        "get" => Call::Get(ids),
        _ => Call::List,
    };
    load(g, callers, window, call).await
}
