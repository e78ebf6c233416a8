//! TLS on every binding, black-box over real loopback sockets with a test CA (rcgen): the
//! HTTP+JSON and JSON-RPC port and the gRPC port serve TLS when a certificate and key are
//! configured, refuse plain text there, and a reload puts a new certificate in use for the
//! next connection while a broken file keeps the one in use.

mod common;
#[path = "common/grpc.rs"]
mod grpc_client;

use std::future::Future;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use a2a_task_plane::config::{ListenerConfig, TlsFiles};
use a2a_task_plane::http::Listener;
use a2a_task_plane::plane::{AlwaysTask, PlaneOptions, TaskPlane};
use a2a_task_plane::wire::a2a_service_client::A2aServiceClient;
use common::server::*;
use common::TempRoot;
use grpc_client::*;
use rustls::pki_types::{CertificateDer, ServerName};
use serde_json::{json, Value};

/// A CA and the server certificate it signed for `localhost` and `127.0.0.1`, in PEM.
struct TestCa {
    ca_pem: String,
    cert_pem: String,
    key_pem: String,
}

impl TestCa {
    fn new() -> TestCa {
        let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        let ca_key = rcgen::KeyPair::generate().unwrap();
        let ca = ca_params.self_signed(&ca_key).unwrap();
        let params =
            rcgen::CertificateParams::new(vec!["localhost".into(), "127.0.0.1".into()]).unwrap();
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = params.signed_by(&key, &ca, &ca_key).unwrap();
        TestCa {
            ca_pem: ca.pem(),
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
        }
    }

    /// Writes the server's certificate and key as `cert.pem` and `key.pem` in `dir`.
    fn install(&self, dir: &Path) -> TlsFiles {
        let files = TlsFiles {
            cert: dir.join("cert.pem"),
            key: dir.join("key.pem"),
        };
        std::fs::write(&files.cert, &self.cert_pem).unwrap();
        std::fs::write(&files.key, &self.key_pem).unwrap();
        files
    }

    /// A client configuration trusting this CA only, offering `alpn`.
    fn client(&self, alpn: &[u8]) -> Arc<rustls::ClientConfig> {
        let mut roots = rustls::RootCertStore::empty();
        use rustls::pki_types::pem::PemObject;
        roots
            .add(CertificateDer::from_pem_slice(self.ca_pem.as_bytes()).unwrap())
            .unwrap();
        let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        let mut config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth();
        config.alpn_protocols = vec![alpn.to_vec()];
        Arc::new(config)
    }
}

/// A server with TLS from `ca` (files in `dir`).
fn tls_server(ca: &TestCa, dir: &TempRoot) -> Server {
    let files = ca.install(dir.path());
    Server::start_with(Arc::new(AlwaysTask), |c| c.tls = Some(files))
}

/// One HTTP/1.1 request over TLS trusting `ca`: the status and body, or the TLS error.
fn https(
    addr: SocketAddr,
    ca: &TestCa,
    method: &str,
    path: &str,
    body: Option<Value>,
) -> Result<(u16, Value), String> {
    let name = ServerName::try_from("localhost").unwrap();
    let conn = rustls::ClientConnection::new(ca.client(b"http/1.1"), name).unwrap();
    let tcp = TcpStream::connect(addr).unwrap();
    tcp.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let mut tls = rustls::StreamOwned::new(conn, tcp);
    let body = body.map(|b| b.to_string()).unwrap_or_default();
    let head = format!(
        "{method} {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\nA2A-Version: 1.0\r\nAuthorization: Bearer {ALICE}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    tls.write_all(head.as_bytes())
        .and_then(|_| tls.write_all(body.as_bytes()))
        .map_err(|e| e.to_string())?;
    let mut raw = Vec::new();
    if let Err(e) = tls.read_to_end(&mut raw) {
        // A peer that closes without close_notify still sent the whole response.
        if raw.is_empty() || e.kind() != std::io::ErrorKind::UnexpectedEof {
            return Err(e.to_string());
        }
    }
    let text = String::from_utf8(raw).unwrap();
    let (head, body) = text.split_once("\r\n\r\n").expect("a response head");
    let status = head.split_whitespace().nth(1).unwrap().parse().unwrap();
    let body = if head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        dechunk(body)
    } else {
        body.to_string()
    };
    Ok((status, serde_json::from_str(&body).unwrap_or(Value::Null)))
}

fn dechunk(mut body: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = body.split_once("\r\n") {
        let n = usize::from_str_radix(size.trim(), 16).unwrap();
        if n == 0 {
            break;
        }
        out.push_str(&rest[..n]);
        body = &rest[n + 2..];
    }
    out
}

fn message(id: &str, text: &str) -> Value {
    json!({"message": {"messageId": id, "role": "ROLE_USER", "parts": [{"text": text}]}})
}

#[test]
fn http_json_and_json_rpc_are_served_over_tls_and_the_card_says_https() {
    let (ca, dir) = (TestCa::new(), TempRoot::new("tls-http"));
    let server = tls_server(&ca, &dir);
    assert_eq!(server.listener.url(), format!("https://{}", server.addr()));

    let (status, card) = https(
        server.addr(),
        &ca,
        "GET",
        "/.well-known/agent-card.json",
        None,
    )
    .unwrap();
    assert_eq!(status, 200);
    assert_eq!(
        card["supportedInterfaces"][0]["url"],
        format!("https://{}", server.addr())
    );

    let (status, sent) = https(
        server.addr(),
        &ca,
        "POST",
        "/message:send",
        Some(message("tls-rest", "hello")),
    )
    .unwrap();
    assert_eq!(status, 200, "{sent}");
    assert_eq!(
        sent["task"]["status"]["state"], "TASK_STATE_COMPLETED",
        "{sent}"
    );

    let rpc = json!({"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": message("tls-rpc", "hello")});
    let (status, answer) = https(server.addr(), &ca, "POST", "/", Some(rpc)).unwrap();
    assert_eq!(status, 200, "{answer}");
    assert_eq!(
        answer["result"]["task"]["status"]["state"], "TASK_STATE_COMPLETED",
        "{answer}"
    );
}

#[test]
fn a_public_url_still_names_the_interface_with_tls() {
    let (ca, dir) = (TestCa::new(), TempRoot::new("tls-public"));
    let files = ca.install(dir.path());
    let server = Server::start_with(Arc::new(AlwaysTask), |c| {
        c.tls = Some(files);
        c.public_url = Some("https://agent.example/a2a".into());
    });
    assert_eq!(server.listener.url(), "https://agent.example/a2a");
}

#[test]
fn plain_text_to_a_tls_port_gets_no_http_answer_and_the_port_keeps_serving() {
    let (ca, dir) = (TestCa::new(), TempRoot::new("tls-plain"));
    let server = tls_server(&ca, &dir);
    for addr in [server.addr(), server.listener.grpc_addr().unwrap()] {
        let mut plain = TcpStream::connect(addr).unwrap();
        plain
            .set_read_timeout(Some(Duration::from_secs(20)))
            .unwrap();
        plain
            .write_all(b"GET /.well-known/agent-card.json HTTP/1.1\r\nHost: x\r\n\r\n")
            .unwrap();
        let mut answer = Vec::new();
        let _ = plain.read_to_end(&mut answer);
        assert!(
            !answer.starts_with(b"HTTP/"),
            "{}",
            String::from_utf8_lossy(&answer)
        );
    }
    let (status, _) = https(
        server.addr(),
        &ca,
        "GET",
        "/.well-known/agent-card.json",
        None,
    )
    .unwrap();
    assert_eq!(status, 200);
}

#[test]
fn a_reload_serves_the_new_certificate_to_the_next_connection_and_a_broken_file_keeps_it() {
    let (old, new, dir) = (TestCa::new(), TestCa::new(), TempRoot::new("tls-reload"));
    let server = tls_server(&old, &dir);
    let card = |ca: &TestCa| {
        https(
            server.addr(),
            ca,
            "GET",
            "/.well-known/agent-card.json",
            None,
        )
    };
    assert_eq!(card(&old).unwrap().0, 200);
    assert!(card(&new).is_err(), "not yet the new certificate");

    new.install(dir.path());
    assert_eq!(server.listener.reload_tls(), Ok(true));
    assert_eq!(card(&new).unwrap().0, 200);
    let refused = card(&old).unwrap_err();
    assert!(refused.to_lowercase().contains("certificate"), "{refused}");

    std::fs::write(dir.path().join("key.pem"), "not a key").unwrap();
    let err = server.listener.reload_tls().unwrap_err();
    assert!(
        err.starts_with("A2A_TLS_KEY") && err.contains("key.pem"),
        "{err}"
    );
    assert_eq!(card(&new).unwrap().0, 200, "the certificate in use stays");

    let plain = Server::start();
    assert_eq!(
        plain.listener.reload_tls(),
        Ok(false),
        "no TLS, nothing to reload"
    );
}

#[test]
fn an_unusable_certificate_file_stops_the_start_naming_it() {
    let tmp = TempRoot::new("tls-start");
    let credentials = tmp.path().join("credentials.json");
    std::fs::write(
        &credentials,
        json!({"credentials": [{"token": ALICE, "principal": "alice"}]}).to_string(),
    )
    .unwrap();
    let plane = TaskPlane::open(&tmp.store(), PlaneOptions::default()).unwrap();
    let mut config = ListenerConfig::new(credentials);
    config.port = 0;
    config.tls = Some(TlsFiles {
        cert: tmp.path().join("absent.pem"),
        key: tmp.path().join("absent.key"),
    });
    let err = Listener::start(plane, config, Arc::new(AlwaysTask))
        .err()
        .unwrap();
    assert!(
        err.starts_with("A2A_TLS_CERT") && err.contains("absent.pem"),
        "{err}"
    );

    let env = |name: &str| {
        (name == "A2A_CREDENTIALS_PATH" || name == "A2A_TLS_CERT").then(|| "/x.pem".to_string())
    };
    let err = ListenerConfig::from_env(&env).unwrap_err();
    assert_eq!(err.variable, "A2A_TLS_KEY");
}

/// Dials TLS (trusting the test CA, ALPN `h2`) for tonic's channel.
#[derive(Clone)]
struct TlsConnector(tokio_rustls::TlsConnector);

impl tonic::codegen::Service<http::Uri> for TlsConnector {
    type Response = hyper_util::rt::TokioIo<tokio_rustls::client::TlsStream<tokio::net::TcpStream>>;
    type Error = std::io::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Self::Error>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, uri: http::Uri) -> Self::Future {
        let connector = self.0.clone();
        Box::pin(async move {
            let authority = uri.authority().unwrap().as_str().to_string();
            let tcp = tokio::net::TcpStream::connect(authority).await?;
            let name = ServerName::try_from("localhost").unwrap();
            Ok(hyper_util::rt::TokioIo::new(
                connector.connect(name, tcp).await?,
            ))
        })
    }
}

#[test]
fn grpc_is_served_over_tls_with_h2() {
    let (ca, dir) = (TestCa::new(), TempRoot::new("tls-grpc"));
    let server = tls_server(&ca, &dir);
    let addr = server.listener.grpc_addr().unwrap();
    let connector = TlsConnector(tokio_rustls::TlsConnector::from(ca.client(b"h2")));
    runtime().block_on(async {
        let channel = tonic::transport::Endpoint::from_shared(format!("http://{addr}"))
            .unwrap()
            .connect_with_connector(connector)
            .await
            .unwrap();
        let mut client = A2aServiceClient::new(channel);
        let response = client
            .send_message(req(ALICE, send(text("tls-grpc", "hello"))))
            .await
            .unwrap()
            .into_inner();
        let task = task_of(response.payload.unwrap());
        assert_eq!(state(&task), a2a_task_plane::wire::TaskState::Completed);
    });
}

#[test]
fn a_client_that_stalls_its_handshake_holds_only_its_own_connection_for_the_idle_timeout() {
    let (ca, dir) = (TestCa::new(), TempRoot::new("tls-stall"));
    let files = ca.install(dir.path());
    let server = Server::start_with(Arc::new(AlwaysTask), |c| {
        c.tls = Some(files);
        c.idle_timeout_ms = 300;
    });
    let mut stalled = TcpStream::connect(server.addr()).unwrap();
    stalled
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let (status, _) = https(
        server.addr(),
        &ca,
        "GET",
        "/.well-known/agent-card.json",
        None,
    )
    .unwrap();
    assert_eq!(status, 200, "served beside the stalled handshake");
    let mut rest = Vec::new();
    assert!(
        matches!(stalled.read_to_end(&mut rest), Ok(0)),
        "closed after the idle timeout, not by the read timeout"
    );
}
