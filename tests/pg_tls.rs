//! TLS to PostgreSQL, against real throwaway servers with a test CA (rcgen): the URL's
//! `sslmode` and `sslrootcert` as libpq users expect them. verify-full with the server's
//! CA writes and reads over TLS (the LISTEN connection too), verify-ca checks the CA and
//! not the name, a CA that did not sign the server's certificate, a missing or empty CA
//! file and `require` against a server without TLS are refused in words that say what to
//! do, and `disable` connects without TLS.

mod common;

use std::sync::{mpsc, Arc};
use std::time::Duration;

use a2a_task_plane::config::{store_backend, PostgresUrl, StoreBackend};
use a2a_task_plane::pg::listen::Heard;
use a2a_task_plane::pg::{PgOptions, PgStore};
use a2a_task_plane::store::{Store, StoreError};
use common::postgres::{TestDatabase, TestPostgres, USER};
use common::TempRoot;

fn url(text: &str) -> PostgresUrl {
    let env = |name: &str| (name == "A2A_STORE_URL").then(|| text.to_string());
    match store_backend(&env) {
        Ok(StoreBackend::Postgres(url)) => url,
        other => panic!("{text}: {other:?}"),
    }
}

/// A CA, and a server certificate it signed for `names`.
struct TestCa {
    ca_pem: String,
    cert_pem: String,
    key_pem: String,
}

impl TestCa {
    fn new(names: &[&str]) -> TestCa {
        let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        let ca_key = rcgen::KeyPair::generate().unwrap();
        let ca = ca_params.self_signed(&ca_key).unwrap();
        let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
        let params = rcgen::CertificateParams::new(names).unwrap();
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = params.signed_by(&key, &ca, &ca_key).unwrap();
        TestCa {
            ca_pem: ca.pem(),
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
        }
    }
}

/// A server with TLS whose certificate `ca` signed for 127.0.0.1 and localhost, and the
/// CA's file in `root`.
fn tls_server(root: &TempRoot) -> (TestPostgres, std::path::PathBuf) {
    let ca = TestCa::new(&["127.0.0.1", "localhost"]);
    let server = TestPostgres::start_with_tls(&ca.cert_pem, &ca.key_pem);
    let ca_file = root.path().join("ca.pem");
    std::fs::write(&ca_file, &ca.ca_pem).unwrap();
    (server, ca_file)
}

/// `server`'s `postgres` database at `host` (127.0.0.1 underneath) with `query`.
fn url_at(server: &TestPostgres, host: &str, query: &str) -> String {
    format!(
        "postgres://{USER}:{}@{host}:{}/postgres?hostaddr=127.0.0.1&{query}",
        server.password(),
        server.port()
    )
}

fn open(text: &str, root: &TempRoot) -> Result<Store, StoreError> {
    let pg = PgStore::open(&url(text), &root.store(), PgOptions::default())?;
    Ok(Store::with_backend(Arc::new(pg), None))
}

/// How many of the plane's connections to `server` are (`true`) or are not over TLS.
fn plane_connections(server: &TestPostgres, tls: bool) -> u32 {
    server
        .psql(
            "postgres",
            &format!(
                "SELECT count(*) FROM pg_stat_ssl s JOIN pg_stat_activity a USING (pid) \
                 WHERE a.application_name = 'a2a-task-plane' AND s.ssl = {tls}"
            ),
        )
        .parse()
        .unwrap()
}

fn write_and_read(store: &Store, context: &'static str) {
    store
        .write(move |tx| tx.insert_fresh_context(context, "alice", "a2a", 1))
        .unwrap();
    let owner = store.read(move |tx| tx.context_owner(context)).unwrap();
    assert_eq!(owner.as_deref(), Some("alice"));
}

#[test]
fn verify_full_with_the_servers_ca_writes_and_reads_over_tls_and_listens_over_it_too() {
    let root = TempRoot::new("pg-tls");
    let (server, ca_file) = tls_server(&root);
    let text = url_at(
        &server,
        "127.0.0.1",
        &format!("sslmode=verify-full&sslrootcert={}", ca_file.display()),
    );
    let store = open(&text, &root).unwrap();
    write_and_read(&store, "c-1");
    let pg = a2a_task_plane::pg::of(&store).unwrap();
    let (heard, hearing) = mpsc::channel();
    let listener = pg
        .listen(
            &["a2a_test"],
            Box::new(move |event| {
                if event == Heard::Connected {
                    let _ = heard.send(());
                }
            }),
        )
        .unwrap();
    hearing.recv_timeout(Duration::from_secs(10)).unwrap();
    assert!(
        plane_connections(&server, true) >= 2,
        "the writer's and the listener's"
    );
    assert_eq!(plane_connections(&server, false), 0);
    listener.close();
    store.close();
}

#[test]
fn verify_ca_checks_the_ca_and_not_the_name_and_verify_full_checks_both() {
    let root = TempRoot::new("pg-tls");
    let (server, ca_file) = tls_server(&root);
    let query = |mode: &str| format!("sslmode={mode}&sslrootcert={}", ca_file.display());
    // `db.example` (connected through hostaddr=127.0.0.1) is not a name the certificate holds.
    let store = open(&url_at(&server, "db.example", &query("verify-ca")), &root).unwrap();
    write_and_read(&store, "c-2");
    store.close();
    let err = open(&url_at(&server, "db.example", &query("verify-full")), &root)
        .err()
        .unwrap()
        .to_string();
    assert!(err.contains("was not issued for the host"), "{err}");
    assert!(err.contains("sslmode=verify-full"), "{err}");
    assert!(!err.contains(server.password()), "{err}");
}

#[test]
fn verify_full_with_a_ca_that_did_not_sign_the_servers_certificate_is_refused_naming_the_file() {
    let root = TempRoot::new("pg-tls");
    let (server, _) = tls_server(&root);
    let other = root.path().join("other-ca.pem");
    std::fs::write(&other, TestCa::new(&["127.0.0.1"]).ca_pem).unwrap();
    let text = url_at(
        &server,
        "127.0.0.1",
        &format!("sslmode=verify-full&sslrootcert={}", other.display()),
    );
    let err = open(&text, &root).err().unwrap().to_string();
    assert!(
        err.contains("is not signed by the CA in sslrootcert"),
        "{err}"
    );
    assert!(err.contains(&other.display().to_string()), "{err}");
    assert!(!err.contains(server.password()), "{err}");
}

#[test]
fn a_ca_file_that_is_missing_or_holds_no_certificate_is_refused_naming_the_file() {
    let root = TempRoot::new("pg-tls");
    let db = TestDatabase::new();
    let missing = root.path().join("missing-ca.pem");
    let text = format!(
        "{}?sslmode=verify-full&sslrootcert={}",
        db.url(),
        missing.display()
    );
    let err = open(&text, &root).err().unwrap().to_string();
    assert!(err.contains(&format!("`{}`", missing.display())), "{err}");
    assert!(err.contains("cannot be read"), "{err}");
    let empty = root.path().join("empty-ca.pem");
    std::fs::write(&empty, "not a certificate\n").unwrap();
    let text = format!(
        "{}?sslmode=verify-ca&sslrootcert={}",
        db.url(),
        empty.display()
    );
    let err = open(&text, &root).err().unwrap().to_string();
    assert!(err.contains(&format!("`{}`", empty.display())), "{err}");
    assert!(err.contains("holds no certificate"), "{err}");
}

#[test]
fn require_against_a_server_without_tls_is_refused_saying_to_turn_tls_on_or_lower_sslmode() {
    let root = TempRoot::new("pg-tls");
    let db = TestDatabase::new();
    let err = open(&format!("{}?sslmode=require", db.url()), &root)
        .err()
        .unwrap()
        .to_string();
    assert!(err.contains("does not accept TLS connections"), "{err}");
    assert!(err.contains("sslmode=require"), "{err}");
    assert!(err.contains("ssl = on"), "{err}");
    assert!(!err.contains(db.cluster.password()), "{err}");
    // The default (prefer) connects to it without TLS, as libpq does.
    let store = open(&db.url(), &root).unwrap();
    write_and_read(&store, "c-3");
}

#[test]
fn disable_connects_without_tls_to_a_server_that_offers_it() {
    let root = TempRoot::new("pg-tls");
    let (server, _) = tls_server(&root);
    let store = open(&url_at(&server, "127.0.0.1", "sslmode=disable"), &root).unwrap();
    write_and_read(&store, "c-4");
    assert!(plane_connections(&server, false) >= 1);
    assert_eq!(plane_connections(&server, true), 0);
    store.close();
    // prefer (the default) takes TLS when offered, the certificate unchecked without a CA.
    let store = open(
        &url_at(&server, "127.0.0.1", "application_name=a2a-task-plane"),
        &root,
    )
    .unwrap();
    write_and_read(&store, "c-5");
    assert!(plane_connections(&server, true) >= 1);
}
