//! A2A's gRPC binding, black-box over a real loopback socket with tonic's client: every
//! RPC, the gRPC code and ErrorInfo of every A2A error we emit, one bearer token on every
//! RPC, and principals kept apart. What a gRPC client may hold: `grpc_availability.rs`.

mod common;
#[path = "common/grpc.rs"]
mod grpc_client;

use std::sync::Arc;

use a2a_task_plane::plane::AlwaysTask;
use a2a_task_plane::wire::{
    send_message_response, stream_response, DeleteTaskPushNotificationConfigRequest,
    GetExtendedAgentCardRequest, GetTaskPushNotificationConfigRequest,
    ListTaskPushNotificationConfigsRequest, ListTasksRequest, SendMessageConfiguration, Task,
    TaskPushNotificationConfig, TaskState,
};
use common::server::*;
use grpc_client::*;
use tonic::{Code, Status};
use tonic_types::StatusExt;

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
