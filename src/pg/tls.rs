//! TLS to PostgreSQL as libpq users expect it from the URL's `sslmode` and `sslrootcert`
//! ([`crate::config::SslMode`]), on rustls (the same version and aws-lc-rs provider as the
//! listener's own TLS) through `tokio-postgres-rustls`. One connector serves the pool and
//! the LISTEN connection.
//!
//! - `disable`: no TLS.
//! - `prefer` (the default, as libpq's) and `require`: TLS (`prefer`: when the server
//!   offers it); with a `sslrootcert` the server's certificate must chain to it (libpq does
//!   the same when it has a root certificate), without one it is not checked: encrypted,
//!   not authenticated.
//! - `verify-ca`: the certificate must chain to the CA in `sslrootcert`, for any name.
//! - `verify-full`: it must chain to the CA and be issued for the host in the URL.
//!
//! Without `sslrootcert`, `verify-ca` and `verify-full` use libpq's default file,
//! `~/.postgresql/root.crt`, when it exists.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{
    CertificateError, ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme,
};
use tokio_postgres_rustls::MakeRustlsConnect;

use crate::config::{PostgresUrl, SslMode};
use crate::store::StoreError;

/// The connector every connection of a store makes TLS with (or, under `disable`, never
/// uses), and the client's `sslmode` for it.
pub fn connector(
    url: &PostgresUrl,
) -> Result<(MakeRustlsConnect, postgres::config::SslMode), StoreError> {
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let mode = url.ssl_mode();
    let roots = match (mode, url.ssl_root_cert()) {
        (SslMode::Disable, _) => None,
        (_, Some(file)) => Some(load_roots(file, mode)?),
        (SslMode::VerifyCa | SslMode::VerifyFull, None) => match default_root_cert() {
            Some(file) => Some(load_roots(&file, mode)?),
            None => {
                return Err(tls_error(format!(
                    "sslmode={} in A2A_STORE_URL checks the server's certificate against a CA, \
                     and none is given: add sslrootcert=/path/to/ca.pem (the CA certificate \
                     the server's is signed by) to the URL",
                    mode.as_str()
                )))
            }
        },
        (SslMode::Prefer | SslMode::Require, None) => None,
    };
    let verifier: Arc<dyn ServerCertVerifier> = match roots {
        None => Arc::new(Unchecked(provider.clone())),
        Some(roots) => {
            let webpki =
                WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider.clone())
                    .build()
                    .map_err(|e| {
                        tls_error(format!(
                            "the CA certificates in sslrootcert cannot be used: {e}"
                        ))
                    })?;
            match mode {
                SslMode::VerifyFull => webpki,
                _ => Arc::new(AnyName(webpki)),
            }
        }
    };
    let config = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| tls_error(format!("no TLS version to offer: {e}")))?
        .dangerous()
        .with_custom_certificate_verifier(verifier)
        .with_no_client_auth();
    let client_mode = match mode {
        SslMode::Disable => postgres::config::SslMode::Disable,
        SslMode::Prefer => postgres::config::SslMode::Prefer,
        SslMode::Require | SslMode::VerifyCa | SslMode::VerifyFull => {
            postgres::config::SslMode::Require
        }
    };
    Ok((MakeRustlsConnect::new(config), client_mode))
}

/// What a failed connection's error (`described`, [`super::describe`]) means for TLS, in
/// words a person can act on; `None` when it is not about TLS.
pub fn explain(url: &PostgresUrl, described: &str) -> Option<String> {
    let mode = url.ssl_mode().as_str();
    if described.contains("server does not support TLS") {
        return Some(format!(
            "the server does not accept TLS connections, and sslmode={mode} in A2A_STORE_URL \
             requires TLS: turn TLS on in the server (ssl = on, ssl_cert_file, ssl_key_file in \
             postgresql.conf), or set sslmode=prefer or sslmode=disable in the URL to connect \
             without encryption"
        ));
    }
    if described.contains("invalid peer certificate") {
        let ca = match url.ssl_root_cert() {
            Some(file) => format!("the CA in sslrootcert `{}`", file.display()),
            None => "the CA in ~/.postgresql/root.crt".into(),
        };
        let name =
            if described.contains("not valid for name") || described.contains("NotValidForName") {
                "was not issued for the host in the URL (connect by a name the certificate holds, \
             or use sslmode=verify-ca to check the CA only)"
                    .to_string()
            } else {
                format!("is not signed by {ca} (or has expired): give the CA that signed it")
            };
        return Some(format!(
            "the server's TLS certificate {name}; under sslmode={mode} the connection is refused"
        ));
    }
    None
}

fn tls_error(message: String) -> StoreError {
    StoreError::Database {
        backend: super::BACKEND,
        message,
    }
}

/// libpq's default root certificate file, when it exists.
fn default_root_cert() -> Option<PathBuf> {
    let home = std::env::var_os("HOME")?;
    let file = Path::new(&home).join(".postgresql/root.crt");
    file.is_file().then_some(file)
}

/// The CA certificates in the PEM file `file`.
fn load_roots(file: &Path, mode: SslMode) -> Result<RootCertStore, StoreError> {
    let bad = |why: String| {
        tls_error(format!(
            "the CA certificate file `{}` (sslrootcert in A2A_STORE_URL, sslmode={}) {why}",
            file.display(),
            mode.as_str()
        ))
    };
    let certs = CertificateDer::pem_file_iter(file)
        .map_err(|e| bad(format!("cannot be read: {e}")))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| bad(format!("is not PEM: {e}")))?;
    if certs.is_empty() {
        return Err(bad(
            "holds no certificate: give a PEM file with -----BEGIN CERTIFICATE----- blocks".into(),
        ));
    }
    let mut roots = RootCertStore::empty();
    for cert in certs {
        roots
            .add(cert)
            .map_err(|e| bad(format!("holds a certificate that cannot be a CA: {e}")))?;
    }
    Ok(roots)
}

/// `prefer` / `require` without a CA: the server's certificate is not checked (its
/// handshake signature still is), as libpq does without a root certificate.
#[derive(Debug)]
struct Unchecked(Arc<CryptoProvider>);

impl ServerCertVerifier for Unchecked {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// `verify-ca` (and `prefer` / `require` with a CA): the chain is checked, the name is not.
#[derive(Debug)]
struct AnyName(Arc<WebPkiServerVerifier>);

impl ServerCertVerifier for AnyName {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        // webpki checks the name only once the chain holds.
        match self
            .0
            .verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now)
        {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}
