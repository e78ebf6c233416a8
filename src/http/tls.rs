//! TLS for the listener (rustls, with `ring`), when a certificate chain and its key are
//! configured (`A2A_TLS_CERT`, `A2A_TLS_KEY`: PEM files). Loaded at start, where a file
//! that cannot be used stops the start with an error naming it; reloaded by
//! [`Tls::reload`] (the resident calls it on SIGHUP), where a file that cannot be used
//! keeps the certificate in use and says why. A reload applies to connections accepted
//! after it; connections already open keep theirs.

use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::ServerConfig;
use tokio_rustls::TlsAcceptor;

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
