//! TLS for the listener (rustls, with `aws-lc-rs`), when a certificate chain and its key are
//! configured (`A2A_TLS_CERT`, `A2A_TLS_KEY`: PEM files). Loaded at start, where a file
//! that cannot be used stops the start with an error naming it; reloaded by
//! [`Tls::reload`] (the resident calls it on SIGHUP), where a file that cannot be used
//! keeps the certificate in use and says why. A reload applies to connections accepted
//! after it; connections already open keep theirs.

use std::io;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::{Arc, RwLock};
use std::task::{Context, Poll};
use std::time::Duration;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::ServerConfig;
use serde_json::json;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio_rustls::TlsAcceptor;

use super::conn::WriteDeadline;

/// A connection's socket: plain, or TLS over it (the write deadline under TLS, so a peer
/// that stops reading is dropped either way).
pub enum Socket {
    Plain(WriteDeadline<TcpStream>),
    Tls(Box<tokio_rustls::server::TlsStream<WriteDeadline<TcpStream>>>),
}

/// The listener's certificate and key, replaceable while it serves.
pub struct Tls {
    cert: PathBuf,
    key: PathBuf,
    /// The ALPN protocols offered (`http/1.1`; `h2` for gRPC).
    alpn: Vec<Vec<u8>>,
    acceptor: RwLock<TlsAcceptor>,
}

impl Tls {
    /// Loads `cert` (the chain, leaf first) and `key`; the error names the file and what to
    /// fix.
    pub fn load(cert: &Path, key: &Path, alpn: &[&[u8]]) -> Result<Tls, String> {
        let alpn: Vec<Vec<u8>> = alpn.iter().map(|p| p.to_vec()).collect();
        let acceptor = acceptor(cert, key, &alpn)?;
        Ok(Tls {
            cert: cert.to_path_buf(),
            key: key.to_path_buf(),
            alpn,
            acceptor: RwLock::new(acceptor),
        })
    }

    /// Reads the files again. On an error the certificate in use stays, and the error says
    /// why.
    pub fn reload(&self) -> Result<(), String> {
        let fresh = acceptor(&self.cert, &self.key, &self.alpn)?;
        *self.acceptor.write().unwrap_or_else(|p| p.into_inner()) = fresh;
        Ok(())
    }

    /// The acceptor for a connection accepted now.
    pub fn acceptor(&self) -> TlsAcceptor {
        self.acceptor
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// The TLS handshake on `stream`, within `timeout`; `None` when it fails or times out.
    /// Scanners and plain-HTTP clients fail it all the time: a debug line, not a warning.
    pub async fn handshake(
        &self,
        stream: WriteDeadline<TcpStream>,
        peer: std::net::SocketAddr,
        timeout: Duration,
    ) -> Option<Socket> {
        let failed = |reason: String| {
            crate::log::event_at(
                tracing::Level::DEBUG,
                "a2a_tls_handshake_failed",
                json!({ "peer": peer.to_string(), "reason": reason }),
            );
            None
        };
        match tokio::time::timeout(timeout, self.acceptor().accept(stream)).await {
            Ok(Ok(stream)) => Some(Socket::Tls(Box::new(stream))),
            Ok(Err(e)) => failed(e.to_string()),
            Err(_) => failed(format!("no handshake within {} ms", timeout.as_millis())),
        }
    }
}

impl AsyncRead for Socket {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Socket::Plain(s) => Pin::new(s).poll_read(cx, buf),
            Socket::Tls(s) => Pin::new(s).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Socket {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Socket::Plain(s) => Pin::new(s).poll_write(cx, buf),
            Socket::Tls(s) => Pin::new(s).poll_write(cx, buf),
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Socket::Plain(s) => Pin::new(s).poll_write_vectored(cx, bufs),
            Socket::Tls(s) => Pin::new(s).poll_write_vectored(cx, bufs),
        }
    }

    fn is_write_vectored(&self) -> bool {
        match self {
            Socket::Plain(s) => s.is_write_vectored(),
            Socket::Tls(s) => s.is_write_vectored(),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Socket::Plain(s) => Pin::new(s).poll_flush(cx),
            Socket::Tls(s) => Pin::new(s).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Socket::Plain(s) => Pin::new(s).poll_shutdown(cx),
            Socket::Tls(s) => Pin::new(s).poll_shutdown(cx),
        }
    }
}

fn acceptor(cert: &Path, key: &Path, alpn: &[Vec<u8>]) -> Result<TlsAcceptor, String> {
    let chain = CertificateDer::pem_file_iter(cert)
        .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
        .map_err(|e| {
            format!(
                "A2A_TLS_CERT: cannot read a PEM certificate chain from {}: {e}; give the server certificate (leaf first, then intermediates) in PEM",
                cert.display()
            )
        })?;
    if chain.is_empty() {
        return Err(format!(
            "A2A_TLS_CERT: {} holds no `-----BEGIN CERTIFICATE-----` block; give the server certificate (leaf first, then intermediates) in PEM",
            cert.display()
        ));
    }
    let private_key = PrivateKeyDer::from_pem_file(key).map_err(|e| {
        format!(
            "A2A_TLS_KEY: cannot read a PEM private key (PKCS#8, PKCS#1 or SEC1) from {}: {e}",
            key.display()
        )
    })?;
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("cannot set up TLS: {e}"))?
        .with_no_client_auth()
        .with_single_cert(chain, private_key)
        .map_err(|e| {
            format!(
                "A2A_TLS_CERT/A2A_TLS_KEY: the key in {} does not serve the certificate in {}: {e}",
                key.display(),
                cert.display()
            )
        })?;
    config.alpn_protocols = alpn.to_vec();
    Ok(TlsAcceptor::from(Arc::new(config)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn self_signed(dir: &Path, name: &str) -> (PathBuf, PathBuf) {
        let cert = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).unwrap();
        let (cert_path, key_path) = (
            dir.join(format!("{name}.crt")),
            dir.join(format!("{name}.key")),
        );
        std::fs::write(&cert_path, cert.cert.pem()).unwrap();
        std::fs::write(&key_path, cert.key_pair.serialize_pem()).unwrap();
        (cert_path, key_path)
    }

    fn temp_dir(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("a2a-tls-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn a_certificate_or_key_that_cannot_be_used_is_refused_naming_its_variable_and_file() {
        let dir = temp_dir("refused");
        let (cert, key) = self_signed(&dir, "a");
        let (_, other_key) = self_signed(&dir, "b");
        let missing = dir.join("missing.pem");
        let err = Tls::load(&missing, &key, &[]).err().unwrap();
        assert!(
            err.starts_with("A2A_TLS_CERT") && err.contains("missing.pem"),
            "{err}"
        );
        let err = Tls::load(&key, &key, &[]).err().unwrap();
        assert!(err.contains("no `-----BEGIN CERTIFICATE-----`"), "{err}");
        let err = Tls::load(&cert, &cert, &[]).err().unwrap();
        assert!(err.starts_with("A2A_TLS_KEY"), "{err}");
        let err = Tls::load(&cert, &other_key, &[]).err().unwrap();
        assert!(err.contains("does not serve the certificate"), "{err}");
        assert!(Tls::load(&cert, &key, &[b"http/1.1"]).is_ok());
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn a_reload_that_fails_keeps_the_certificate_in_use() {
        let dir = temp_dir("reload");
        let (cert, key) = self_signed(&dir, "a");
        let tls = Tls::load(&cert, &key, &[]).unwrap();
        let before = tls.acceptor();
        std::fs::write(&cert, "not a certificate").unwrap();
        assert!(tls.reload().is_err());
        assert!(
            Arc::ptr_eq(before.config(), tls.acceptor().config()),
            "the one in use stays"
        );
        let (fresh_cert, fresh_key) = self_signed(&dir, "b");
        std::fs::rename(fresh_cert, &cert).unwrap();
        std::fs::rename(fresh_key, &key).unwrap();
        tls.reload().unwrap();
        assert!(!Arc::ptr_eq(before.config(), tls.acceptor().config()));
        std::fs::remove_dir_all(dir).unwrap();
    }
}
