//! What a gRPC client may hold, over a real loopback socket: a place in the stream pool
//! (overall and per principal), a stream it stops reading (freed after the write timeout),
//! a message within the body limit, a connection slot while busy; and `close()` ends its
//! streams.

mod common;
#[path = "common/grpc.rs"]
mod grpc_client;

use std::sync::Arc;
use std::time::{Duration, Instant};

use a2a_task_plane::plane::AlwaysTask;
use a2a_task_plane::wire::ListTasksRequest;
use a2a_task_plane::wire::StreamResponse;
use common::server::*;
use grpc_client::*;
use prost::Message as _;
use tonic::{Code, Streaming};

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
