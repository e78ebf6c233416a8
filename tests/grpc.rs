//! A2A's gRPC binding, black-box over a real loopback socket with tonic's client: every
//! RPC, the gRPC code and ErrorInfo of every A2A error we emit, one bearer token on every
//! RPC, principals kept apart, and what a gRPC client may hold (the stream pool, a reader
//! that stops, the message size limit, connections, close).

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use a2a_task_plane::plane::AlwaysTask;
use a2a_task_plane::record::TaskState as PlaneState;
use a2a_task_plane::wire::a2a_service_client::A2aServiceClient;
use a2a_task_plane::wire::{
    part, send_message_response, stream_response, CancelTaskRequest,
    DeleteTaskPushNotificationConfigRequest, GetExtendedAgentCardRequest,
    GetTaskPushNotificationConfigRequest, GetTaskRequest, ListTaskPushNotificationConfigsRequest,
    ListTasksRequest, Message, Part, Role, SendMessageConfiguration, SendMessageRequest,
    StreamResponse, SubscribeToTaskRequest, Task, TaskPushNotificationConfig, TaskState,
};
use common::server::*;
use prost::Message as _;
use tonic::transport::Channel;
use tonic::{Code, Request, Status, Streaming};
use tonic_types::StatusExt;

type Client = A2aServiceClient<Channel>;
/// Extra metadata entries of a request.
type Metadata<'a> = [(&'static str, &'a str)];

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

async fn client(server: &Server) -> Client {
    let addr = server.listener.grpc_addr().expect("gRPC is served");
    let channel = tonic::transport::Endpoint::from_shared(format!("http://{addr}"))
        .unwrap()
        .connect()
        .await
        .unwrap();
    A2aServiceClient::new(channel)
}

/// `message` as `token` sends it (none: no `authorization`), with `extra` metadata.
fn with<T>(token: Option<&str>, message: T, extra: &[(&'static str, &str)]) -> Request<T> {
    let mut request = Request::new(message);
    if let Some(token) = token {
        let value = format!("Bearer {token}").parse().unwrap();
        request.metadata_mut().append("authorization", value);
    }
    for (key, value) in extra {
        request.metadata_mut().append(*key, value.parse().unwrap());
    }
    request
}

fn req<T>(token: &str, message: T) -> Request<T> {
    with(Some(token), message, &[])
}

/// The status's code and ErrorInfo reason (checked to be A2A's domain).
fn code_and_reason(status: &Status) -> (Code, String) {
    assert!(!status.message().is_empty(), "{status:?}");
    let details = status.get_error_details();
    let info = details.error_info().expect("an ErrorInfo detail");
    assert_eq!(info.domain, "a2a-protocol.org");
    (status.code(), info.reason.clone())
}

fn text(message_id: &str, text: &str) -> Message {
    Message {
        message_id: message_id.into(),
        role: Role::User as i32,
        parts: vec![Part {
            content: Some(part::Content::Text(text.into())),
            ..Default::default()
        }],
        ..Default::default()
    }
}

fn send(message: Message) -> SendMessageRequest {
    SendMessageRequest {
        message: Some(message),
        ..Default::default()
    }
}

fn send_now(message: Message) -> SendMessageRequest {
    SendMessageRequest {
        message: Some(message),
        configuration: Some(SendMessageConfiguration {
            return_immediately: true,
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn task_of(response: send_message_response::Payload) -> Task {
    match response {
        send_message_response::Payload::Task(task) => task,
        other => panic!("a Task, not {other:?}"),
    }
}

fn state(task: &Task) -> TaskState {
    TaskState::try_from(task.status.as_ref().unwrap().state).unwrap()
}

fn frame_state(frame: &StreamResponse) -> Option<TaskState> {
    match frame.payload.as_ref()? {
        stream_response::Payload::Task(task) => Some(state(task)),
        stream_response::Payload::StatusUpdate(update) => {
            TaskState::try_from(update.status.as_ref()?.state).ok()
        }
        _ => None,
    }
}

/// Every frame of `stream` until it ends (bounded by the test's timeout).
async fn drain(mut stream: Streaming<StreamResponse>) -> Vec<StreamResponse> {
    let mut frames = Vec::new();
    let read = async {
        while let Some(frame) = stream.message().await.unwrap() {
            frames.push(frame);
        }
    };
    tokio::time::timeout(Duration::from_secs(20), read)
        .await
        .expect("the stream ends");
    frames
}

/// A Task the scripted agent keeps WORKING.
async fn working_task(server: &Server, client: &mut Client, token: &str, id: &str) -> String {
    let (watch, activity) = server.plane.events().watch_activity();
    let response = client
        .send_message(req(token, send_now(text(id, "work"))))
        .await
        .unwrap();
    let task = task_of(response.into_inner().payload.unwrap());
    tokio::task::block_in_place(|| {
        common::wait_for_activity(&activity, &format!("the agent starting {}", task.id), |a| {
            a.task_id == task.id && a.state == Some(PlaneState::Working)
        })
    });
    server.plane.events().unwatch(watch);
    task.id
}

fn get(id: &str) -> GetTaskRequest {
    GetTaskRequest {
        id: id.into(),
        ..Default::default()
    }
}

fn subscribe(id: &str) -> SubscribeToTaskRequest {
    SubscribeToTaskRequest {
        id: id.into(),
        ..Default::default()
    }
}

fn cancel(id: &str) -> CancelTaskRequest {
    CancelTaskRequest {
        id: id.into(),
        ..Default::default()
    }
}

#[test]
fn the_card_lists_grpc_at_its_own_port_and_a2a_grpc_0_turns_it_off() {
    let server = Server::start();
    let card = server
        .call("GET", "/.well-known/agent-card.json", None, None)
        .json();
    let grpc = server.listener.grpc_addr().unwrap();
    assert_ne!(grpc.port(), server.addr().port());
    let interfaces = card["supportedInterfaces"].as_array().unwrap();
    let bindings: Vec<&str> = interfaces
        .iter()
        .map(|i| i["protocolBinding"].as_str().unwrap())
        .collect();
    assert_eq!(bindings, ["HTTP+JSON", "JSONRPC", "GRPC"]);
    assert_eq!(interfaces[2]["url"], format!("127.0.0.1:{}", grpc.port()));
    assert!(interfaces.iter().all(|i| i["protocolVersion"] == "1.0"));

    let off = Server::start_with(Arc::new(AlwaysTask), |c| c.grpc = false);
    assert_eq!(off.listener.grpc_addr(), None);
    let card = off
        .call("GET", "/.well-known/agent-card.json", None, None)
        .json();
    assert!(!card.to_string().contains("GRPC"), "{card}");
}

#[test]
fn every_task_rpc_over_grpc_send_stream_get_list_continue_subscribe_cancel() {
    let server = Server::start();
    runtime().block_on(async {
        let mut c = client(&server).await;
        // Blocking send → COMPLETED; GetTask honours historyLength.
        let response = c
            .send_message(req(ALICE, send(text("g-1", "hello"))))
            .await
            .unwrap();
        let done = task_of(response.into_inner().payload.unwrap());
        assert_eq!(state(&done), TaskState::Completed);
        let mut short = get(&done.id);
        short.history_length = Some(1);
        let got = c.get_task(req(ALICE, short)).await.unwrap().into_inner();
        assert_eq!((got.id.as_str(), got.history.len()), (done.id.as_str(), 1));
        // A stream to the terminal event.
        let frames = drain(
            c.send_streaming_message(req(ALICE, send(text("g-2", "hello"))))
                .await
                .unwrap()
                .into_inner(),
        )
        .await;
        assert_eq!(
            frames.last().and_then(frame_state),
            Some(TaskState::Completed),
            "{frames:?}"
        );
        // ListTasks pages with signed tokens.
        let page = c
            .list_tasks(req(
                ALICE,
                ListTasksRequest {
                    page_size: Some(1),
                    ..Default::default()
                },
            ))
            .await
            .unwrap()
            .into_inner();
        assert_eq!((page.tasks.len(), page.total_size), (1, 2));
        let next = c
            .list_tasks(req(
                ALICE,
                ListTasksRequest {
                    page_size: Some(1),
                    page_token: page.next_page_token.clone(),
                    ..Default::default()
                },
            ))
            .await
            .unwrap()
            .into_inner();
        assert_eq!(next.tasks.len(), 1);
        assert_ne!(next.tasks[0].id, page.tasks[0].id);
        // INPUT_REQUIRED, then continued by its taskId.
        let asked = task_of(
            c.send_message(req(ALICE, send(text("g-3", "ask what colour?"))))
                .await
                .unwrap()
                .into_inner()
                .payload
                .unwrap(),
        );
        assert_eq!(state(&asked), TaskState::InputRequired);
        let mut answer = text("g-4", "blue");
        answer.task_id = asked.id.clone();
        answer.context_id = asked.context_id.clone();
        let continued = task_of(
            c.send_message(req(ALICE, send(answer)))
                .await
                .unwrap()
                .into_inner()
                .payload
                .unwrap(),
        );
        assert_eq!(
            (continued.id.as_str(), state(&continued)),
            (asked.id.as_str(), TaskState::Completed)
        );
        // Subscribe, then cancel: the stream ends with CANCELED.
        let id = working_task(&server, &mut c, ALICE, "g-5").await;
        let mut stream = c
            .subscribe_to_task(req(ALICE, subscribe(&id)))
            .await
            .unwrap()
            .into_inner();
        let first = stream.message().await.unwrap().unwrap();
        assert_eq!(frame_state(&first), Some(TaskState::Working));
        let canceled = c.cancel_task(req(ALICE, cancel(&id))).await.unwrap();
        assert_eq!(state(canceled.get_ref()), TaskState::Canceled);
        let rest = drain(stream).await;
        assert_eq!(rest.last().and_then(frame_state), Some(TaskState::Canceled));
    });
}

#[test]
fn a_direct_message_is_the_result_of_send_message_and_the_one_frame_of_its_stream() {
    let server = Server::start_with(Arc::new(Direct::default()), |_| {});
    runtime().block_on(async {
        let mut c = client(&server).await;
        let answer = c
            .send_message(req(ALICE, send(text("d-1", "ping"))))
            .await
            .unwrap()
            .into_inner();
        assert!(matches!(
            answer.payload,
            Some(send_message_response::Payload::Message(_))
        ));
        let frames = drain(
            c.send_streaming_message(req(ALICE, send(text("d-2", "ping"))))
                .await
                .unwrap()
                .into_inner(),
        )
        .await;
        assert_eq!(frames.len(), 1, "{frames:?}");
        assert!(matches!(
            frames[0].payload,
            Some(stream_response::Payload::Message(_))
        ));
    });
}

#[test]
fn every_a2a_error_has_its_grpc_code_and_error_info() {
    let server = Server::start();
    runtime().block_on(async {
        let mut c = client(&server).await;
        let refused = |result: Result<tonic::Response<Task>, Status>| {
            code_and_reason(&result.expect_err("refused"))
        };
        let fp = Code::FailedPrecondition;
        // A version this server does not speak.
        let status = c
            .get_task(with(Some(ALICE), get("t"), &[("a2a-version", "2.0")]))
            .await
            .unwrap_err();
        assert_eq!(
            code_and_reason(&status),
            (fp, "VERSION_NOT_SUPPORTED".into())
        );
        let info = status.get_error_details().error_info().unwrap().clone();
        assert_eq!(info.metadata["supportedVersions"], "1.0");
        // Unknown Task: NOT_FOUND with its id; terminal Task: not cancelable nor subscribable.
        let status = c
            .get_task(req(ALICE, get("no-such-task")))
            .await
            .unwrap_err();
        assert_eq!(
            code_and_reason(&status),
            (Code::NotFound, "TASK_NOT_FOUND".into())
        );
        let info = status.get_error_details().error_info().unwrap().clone();
        assert_eq!(info.metadata["taskId"], "no-such-task");
        assert_eq!(
            refused(c.cancel_task(req(ALICE, cancel("no-such-task"))).await),
            (Code::NotFound, "TASK_NOT_FOUND".into())
        );
        let done = task_of(
            c.send_message(req(ALICE, send(text("e-1", "hello"))))
                .await
                .unwrap()
                .into_inner()
                .payload
                .unwrap(),
        );
        assert_eq!(
            refused(c.cancel_task(req(ALICE, cancel(&done.id))).await),
            (fp, "TASK_NOT_CANCELABLE".into())
        );
        let status = c
            .subscribe_to_task(req(ALICE, subscribe(&done.id)))
            .await
            .unwrap_err();
        assert_eq!(
            code_and_reason(&status),
            (fp, "UNSUPPORTED_OPERATION".into())
        );
        // A reused messageId: the prior Task, or with other content ALREADY_EXISTS.
        let again = c
            .send_message(req(ALICE, send(text("e-1", "hello"))))
            .await
            .unwrap();
        assert_eq!(task_of(again.into_inner().payload.unwrap()).id, done.id);
        let status = c
            .send_message(req(ALICE, send(text("e-1", "other"))))
            .await
            .unwrap_err();
        assert_eq!(
            code_and_reason(&status),
            (Code::AlreadyExists, "DUPLICATE_MESSAGE_ID".into())
        );
        // A field at fault: INVALID_ARGUMENT with a BadRequest naming it.
        let mut empty = text("e-2", "x");
        empty.parts.clear();
        let status = c.send_message(req(ALICE, send(empty))).await.unwrap_err();
        assert_eq!(
            code_and_reason(&status),
            (Code::InvalidArgument, "INVALID_ARGUMENT".into())
        );
        let details = status.get_error_details();
        assert!(details.bad_request().unwrap().field_violations[0]
            .field
            .contains("parts"));
        let mut negative = get(&done.id);
        negative.history_length = Some(-1);
        assert_eq!(
            refused(c.get_task(req(ALICE, negative)).await),
            (Code::InvalidArgument, "INVALID_ARGUMENT".into())
        );
        let status = c
            .list_tasks(req(
                ALICE,
                ListTasksRequest {
                    page_size: Some(500),
                    ..Default::default()
                },
            ))
            .await
            .unwrap_err();
        assert_eq!(status.code(), Code::InvalidArgument);
        // Push notifications and the extended card are not offered.
        let push = (fp, "PUSH_NOTIFICATION_NOT_SUPPORTED".to_string());
        let config = TaskPushNotificationConfig {
            task_id: done.id.clone(),
            url: "https://example.com/hook".into(),
            ..Default::default()
        };
        let s = c
            .create_task_push_notification_config(req(ALICE, config.clone()))
            .await
            .unwrap_err();
        assert_eq!(code_and_reason(&s), push);
        let s = c
            .get_task_push_notification_config(req(
                ALICE,
                GetTaskPushNotificationConfigRequest::default(),
            ))
            .await
            .unwrap_err();
        assert_eq!(code_and_reason(&s), push);
        let s = c
            .list_task_push_notification_configs(req(
                ALICE,
                ListTaskPushNotificationConfigsRequest::default(),
            ))
            .await
            .unwrap_err();
        assert_eq!(code_and_reason(&s), push);
        let s = c
            .delete_task_push_notification_config(req(
                ALICE,
                DeleteTaskPushNotificationConfigRequest::default(),
            ))
            .await
            .unwrap_err();
        assert_eq!(code_and_reason(&s), push);
        let mut in_send = send(text("e-3", "hi"));
        in_send.configuration = Some(SendMessageConfiguration {
            task_push_notification_config: Some(config),
            ..Default::default()
        });
        let s = c.send_message(req(ALICE, in_send)).await.unwrap_err();
        assert_eq!(code_and_reason(&s), push);
        let s = c
            .get_extended_agent_card(req(ALICE, GetExtendedAgentCardRequest::default()))
            .await
            .unwrap_err();
        assert_eq!(
            code_and_reason(&s),
            (fp, "EXTENDED_AGENT_CARD_NOT_CONFIGURED".into())
        );
    });
}

#[test]
fn activated_extensions_are_echoed_in_response_and_error_metadata() {
    let server = Server::start();
    runtime().block_on(async {
        let mut c = client(&server).await;
        let uri = a2a_task_plane::wire::extensions::ELICITATION_V1;
        let asked = format!("urn:unknown, {uri}");
        let extra = [("a2a-extensions", asked.as_str())];
        let ok = c
            .send_message(with(Some(ALICE), send(text("x-1", "hello")), &extra))
            .await
            .unwrap();
        assert_eq!(ok.metadata().get("a2a-extensions").unwrap(), uri);
        let err = c
            .get_task(with(Some(ALICE), get("none"), &extra))
            .await
            .unwrap_err();
        assert_eq!(err.metadata().get("a2a-extensions").unwrap(), uri);
    });
}

#[test]
fn every_rpc_asks_for_exactly_one_known_bearer_token() {
    let server = Server::start();
    runtime().block_on(async {
        let mut c = client(&server).await;
        let two = [("authorization", "Bearer bob-token-0123456789ab")];
        let callers: [(Option<&str>, &Metadata); 3] = [
            (None, &[]),
            (Some("not-a-known-token-at-all"), &[]),
            (Some(ALICE), &two),
        ];
        for (token, extra) in callers {
            let m = || send(text("a-1", "hi"));
            let codes = [
                c.send_message(with(token, m(), extra)).await.map(|_| ()),
                c.send_streaming_message(with(token, m(), extra))
                    .await
                    .map(|_| ()),
                c.get_task(with(token, get("t"), extra)).await.map(|_| ()),
                c.list_tasks(with(token, ListTasksRequest::default(), extra))
                    .await
                    .map(|_| ()),
                c.cancel_task(with(token, cancel("t"), extra))
                    .await
                    .map(|_| ()),
                c.subscribe_to_task(with(token, subscribe("t"), extra))
                    .await
                    .map(|_| ()),
                c.create_task_push_notification_config(with(
                    token,
                    TaskPushNotificationConfig::default(),
                    extra,
                ))
                .await
                .map(|_| ()),
                c.get_task_push_notification_config(with(
                    token,
                    GetTaskPushNotificationConfigRequest::default(),
                    extra,
                ))
                .await
                .map(|_| ()),
                c.list_task_push_notification_configs(with(
                    token,
                    ListTaskPushNotificationConfigsRequest::default(),
                    extra,
                ))
                .await
                .map(|_| ()),
                c.delete_task_push_notification_config(with(
                    token,
                    DeleteTaskPushNotificationConfigRequest::default(),
                    extra,
                ))
                .await
                .map(|_| ()),
                c.get_extended_agent_card(with(
                    token,
                    GetExtendedAgentCardRequest::default(),
                    extra,
                ))
                .await
                .map(|_| ()),
            ];
            for (n, result) in codes.into_iter().enumerate() {
                let status = result.expect_err("refused");
                assert_eq!(
                    code_and_reason(&status),
                    (Code::Unauthenticated, "UNAUTHENTICATED".into()),
                    "rpc #{n} with {token:?} and {extra:?}"
                );
            }
        }
        let listed = c
            .list_tasks(req(ALICE, ListTasksRequest::default()))
            .await
            .unwrap();
        assert_eq!(listed.into_inner().total_size, 0, "nothing was accepted");
    });
}

#[test]
fn another_callers_task_is_not_found_listed_cancelled_subscribed_to_or_continued() {
    let server = Server::start();
    runtime().block_on(async {
        let mut c = client(&server).await;
        let id = working_task(&server, &mut c, ALICE, "i-1").await;
        let not_found = (Code::NotFound, "TASK_NOT_FOUND".to_string());
        let s = c.get_task(req(BOB, get(&id))).await.unwrap_err();
        assert_eq!(code_and_reason(&s), not_found);
        let s = c.cancel_task(req(BOB, cancel(&id))).await.unwrap_err();
        assert_eq!(code_and_reason(&s), not_found);
        let s = c
            .subscribe_to_task(req(BOB, subscribe(&id)))
            .await
            .unwrap_err();
        assert_eq!(code_and_reason(&s), not_found);
        let listed = c.list_tasks(req(BOB, ListTasksRequest::default())).await;
        assert_eq!(listed.unwrap().into_inner().total_size, 0);
        let mut continuing = text("i-2", "more");
        continuing.task_id = id.clone();
        let s = c
            .send_message(req(BOB, send(continuing.clone())))
            .await
            .unwrap_err();
        assert_eq!(code_and_reason(&s), not_found);
        let s = c
            .send_streaming_message(req(BOB, send(continuing)))
            .await
            .unwrap_err();
        assert_eq!(code_and_reason(&s), not_found);
        let mine = c.get_task(req(ALICE, get(&id))).await.unwrap().into_inner();
        assert_eq!(state(&mine), TaskState::Working);
    });
}

#[test]
fn grpc_streams_take_places_in_the_stream_pool_and_a_full_pool_is_resource_exhausted() {
    let server = Server::start_with(Arc::new(AlwaysTask), |c| {
        c.max_streams = 3;
        c.max_streams_per_principal = 2;
    });
    runtime().block_on(async {
        let mut c = client(&server).await;
        let alices = working_task(&server, &mut c, ALICE, "p-a").await;
        let bobs = working_task(&server, &mut c, BOB, "p-b").await;
        let mut held = Vec::new();
        for _ in 0..2 {
            held.push(
                c.subscribe_to_task(req(ALICE, subscribe(&alices)))
                    .await
                    .unwrap(),
            );
        }
        let s = c
            .subscribe_to_task(req(ALICE, subscribe(&alices)))
            .await
            .unwrap_err();
        assert_eq!(
            code_and_reason(&s),
            (Code::ResourceExhausted, "RESOURCE_EXHAUSTED".into())
        );
        held.push(
            c.subscribe_to_task(req(BOB, subscribe(&bobs)))
                .await
                .unwrap(),
        );
        let s = c
            .send_streaming_message(req(BOB, send(text("p-b2", "hi"))))
            .await
            .unwrap_err();
        assert_eq!(s.code(), Code::ResourceExhausted);
        assert!(s.message().contains("A2A_MAX_STREAMS"), "{s:?}");
        let listed = c.list_tasks(req(BOB, ListTasksRequest::default())).await;
        assert_eq!(
            listed.unwrap().into_inner().total_size,
            1,
            "a refused stream accepted nothing"
        );
        // A stream that ends gives its place back.
        held.clear();
        wait_for_a_place(&mut c, ALICE, &alices).await;
    });
}

/// Subscribes until the pool has a place for `token` again (bounded).
async fn wait_for_a_place(
    c: &mut Client,
    token: &str,
    id: &str,
) -> tonic::Response<Streaming<StreamResponse>> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match c.subscribe_to_task(req(token, subscribe(id))).await {
            Ok(stream) => return stream,
            Err(s) if s.code() == Code::ResourceExhausted && Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Err(s) => panic!("no place came free: {s:?}"),
        }
    }
}

#[test]
fn a_grpc_stream_reader_that_stops_reading_loses_its_place_after_the_write_timeout() {
    let server = Server::start_with(Arc::new(AlwaysTask), |c| {
        c.write_timeout_ms = 300;
        c.max_streams_per_principal = 1;
    });
    runtime().block_on(async {
        let mut c = client(&server).await;
        let id = working_task(&server, &mut c, ALICE, "w-1").await;
        // A bare HTTP/2 client whose stream window is 0 and is never opened: it reads the
        // response head, then no byte of the stream.
        let tcp = tokio::net::TcpStream::connect(server.listener.grpc_addr().unwrap())
            .await
            .unwrap();
        let (h2, connection) = h2::client::Builder::new()
            .initial_window_size(0)
            .handshake::<_, bytes::Bytes>(tcp)
            .await
            .unwrap();
        tokio::spawn(connection);
        let mut h2 = h2.ready().await.unwrap();
        let request = http::Request::post("/lf.a2a.v1.A2AService/SubscribeToTask")
            .header("content-type", "application/grpc")
            .header("te", "trailers")
            .header("authorization", format!("Bearer {ALICE}"))
            .body(())
            .unwrap();
        let (response, mut body) = h2.send_request(request, false).unwrap();
        let message = subscribe(&id).encode_to_vec();
        let mut framed = vec![0u8];
        framed.extend_from_slice(&(message.len() as u32).to_be_bytes());
        framed.extend_from_slice(&message);
        body.send_data(framed.into(), true).unwrap();
        let head = response.await.unwrap();
        assert_eq!(head.status(), 200);
        let _never_read = head.into_body();
        let s = c
            .subscribe_to_task(req(ALICE, subscribe(&id)))
            .await
            .unwrap_err();
        assert_eq!(
            s.code(),
            Code::ResourceExhausted,
            "the stalled stream holds the place"
        );
        tokio::task::block_in_place(|| {
            for n in 0..40 {
                server
                    .plane
                    .record_artifact(&id, common::big_artifact(n))
                    .unwrap();
            }
        });
        wait_for_a_place(&mut c, ALICE, &id).await;
    });
}

#[test]
fn a_message_over_the_body_limit_is_refused_and_accepts_nothing() {
    let server = Server::start_with(Arc::new(AlwaysTask), |c| c.max_body_bytes = 4096);
    runtime().block_on(async {
        let mut c = client(&server).await;
        let big = text("m-1", &"x".repeat(8192));
        let s = c.send_message(req(ALICE, send(big))).await.unwrap_err();
        assert!(
            matches!(s.code(), Code::OutOfRange | Code::ResourceExhausted),
            "{s:?}"
        );
        let listed = c.list_tasks(req(ALICE, ListTasksRequest::default())).await;
        assert_eq!(listed.unwrap().into_inner().total_size, 0);
    });
}

#[test]
fn an_idle_grpc_connection_makes_room_for_a_newcomer_at_the_connection_limit() {
    let server = Server::start_with(Arc::new(AlwaysTask), |c| c.max_connections = 1);
    let rt = runtime();
    let mut c = rt.block_on(client(&server));
    rt.block_on(c.list_tasks(req(ALICE, ListTasksRequest::default())))
        .unwrap();
    // The gRPC connection is idle now: an HTTP caller gets its slot.
    let card = server.call("GET", "/.well-known/agent-card.json", None, None);
    assert_eq!(card.status, 200);
}

#[test]
fn close_ends_open_grpc_streams() {
    let mut server = Server::start();
    let rt = runtime();
    let mut stream = rt.block_on(async {
        let mut c = client(&server).await;
        let id = working_task(&server, &mut c, ALICE, "s-1").await;
        let mut stream = c
            .subscribe_to_task(req(ALICE, subscribe(&id)))
            .await
            .unwrap()
            .into_inner();
        assert!(stream.message().await.unwrap().is_some());
        stream
    });
    server.listener.close();
    let ended = rt.block_on(async {
        tokio::time::timeout(Duration::from_secs(10), async {
            while let Ok(Some(_)) = stream.message().await {}
        })
        .await
    });
    assert!(ended.is_ok(), "the stream ended when the listener closed");
}
