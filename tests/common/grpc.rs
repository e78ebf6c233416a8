//! The gRPC tests' client side: tonic's generated client over a loopback channel, requests
//! with metadata, and the A2A messages and checks the tests share. Included by
//! `tests/grpc*.rs` only (`#[path]`), so no other test builds it.
// Each including test uses a part of them (as with `common`).
#![allow(dead_code)]

use std::time::Duration;

use a2a_task_plane::record::TaskState as PlaneState;
use a2a_task_plane::wire::a2a_service_client::A2aServiceClient;
use a2a_task_plane::wire::{
    part, send_message_response, stream_response, CancelTaskRequest, GetTaskRequest, Message, Part,
    Role, SendMessageConfiguration, SendMessageRequest, StreamResponse, SubscribeToTaskRequest,
    Task, TaskState,
};
use tonic::transport::Channel;
use tonic::{Code, Request, Status, Streaming};
use tonic_types::StatusExt;

use crate::common::server::Server;

pub type Client = A2aServiceClient<Channel>;
/// Extra metadata entries of a request.
pub type Metadata<'a> = [(&'static str, &'a str)];

pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

pub async fn client(server: &Server) -> Client {
    let addr = server.listener.grpc_addr().expect("gRPC is served");
    let channel = tonic::transport::Endpoint::from_shared(format!("http://{addr}"))
        .unwrap()
        .connect()
        .await
        .unwrap();
    A2aServiceClient::new(channel)
}

/// `message` as `token` sends it (none: no `authorization`), with `extra` metadata.
pub fn with<T>(token: Option<&str>, message: T, extra: &[(&'static str, &str)]) -> Request<T> {
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

pub fn req<T>(token: &str, message: T) -> Request<T> {
    with(Some(token), message, &[])
}

/// The status's code and ErrorInfo reason (checked to be A2A's domain).
pub fn code_and_reason(status: &Status) -> (Code, String) {
    assert!(!status.message().is_empty(), "{status:?}");
    let details = status.get_error_details();
    let info = details.error_info().expect("an ErrorInfo detail");
    assert_eq!(info.domain, "a2a-protocol.org");
    (status.code(), info.reason.clone())
}

pub fn text(message_id: &str, text: &str) -> Message {
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

pub fn send(message: Message) -> SendMessageRequest {
    SendMessageRequest {
        message: Some(message),
        ..Default::default()
    }
}

pub fn send_now(message: Message) -> SendMessageRequest {
    SendMessageRequest {
        message: Some(message),
        configuration: Some(SendMessageConfiguration {
            return_immediately: true,
            ..Default::default()
        }),
        ..Default::default()
    }
}

pub fn task_of(response: send_message_response::Payload) -> Task {
    match response {
        send_message_response::Payload::Task(task) => task,
        other => panic!("a Task, not {other:?}"),
    }
}

pub fn state(task: &Task) -> TaskState {
    TaskState::try_from(task.status.as_ref().unwrap().state).unwrap()
}

pub fn frame_state(frame: &StreamResponse) -> Option<TaskState> {
    match frame.payload.as_ref()? {
        stream_response::Payload::Task(task) => Some(state(task)),
        stream_response::Payload::StatusUpdate(update) => {
            TaskState::try_from(update.status.as_ref()?.state).ok()
        }
        _ => None,
    }
}

/// Every frame of `stream` until it ends (bounded by the test's timeout).
pub async fn drain(mut stream: Streaming<StreamResponse>) -> Vec<StreamResponse> {
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
pub async fn working_task(server: &Server, client: &mut Client, token: &str, id: &str) -> String {
    let (watch, activity) = server.plane.events().watch_activity();
    let response = client
        .send_message(req(token, send_now(text(id, "work"))))
        .await
        .unwrap();
    let task = task_of(response.into_inner().payload.unwrap());
    tokio::task::block_in_place(|| {
        crate::common::wait_for_activity(
            &activity,
            &format!("the agent starting {}", task.id),
            |a| a.task_id == task.id && a.state == Some(PlaneState::Working),
        )
    });
    server.plane.events().unwatch(watch);
    task.id
}

pub fn get(id: &str) -> GetTaskRequest {
    GetTaskRequest {
        id: id.into(),
        ..Default::default()
    }
}

pub fn subscribe(id: &str) -> SubscribeToTaskRequest {
    SubscribeToTaskRequest {
        id: id.into(),
        ..Default::default()
    }
}

pub fn cancel(id: &str) -> CancelTaskRequest {
    CancelTaskRequest {
        id: id.into(),
        ..Default::default()
    }
}
