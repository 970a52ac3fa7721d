//! Client-side TLS with rustls, sans-IO: the drivers' pipelined connections
//! (`surge.endpoint`) hand each read to [`TlsClientSession::feed`] and each
//! write to [`TlsClientSession::encrypt`], one native call apiece.
//!
//! Why not the event loop's `start_tls`: measured on the PostgreSQL pool of 10
//! (SELECT 1, uvloop), the loop's SSL protocol (Python's `ssl.SSLObject` and its
//! memory BIOs, a few Python calls per read and per write) added ~20 us of
//! client CPU per query, doubling it; the cipher itself was 2-3 % of it. Here the
//! record layer runs in one call per read or write, with no Python objects in
//! between.

use std::sync::Arc;

use pyo3::prelude::*;
use pyo3::types::PyBytes;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::crypto::{ring as provider, CryptoProvider};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{
    CertificateError, ClientConfig, ClientConnection, DigitallySignedStruct, RootCertStore,
    SignatureScheme,
};

use crate::tls::{session_methods, PlainSink, Records, TlsConfigError};

fn config_error(what: &str, err: impl std::fmt::Display) -> PyErr {
    TlsConfigError::new_err(format!("{what}: {err}"))
}

/// Checks the server's certificate as libpq's sslmodes ask: the whole chain and
/// the name (verify-full), the chain only (verify-ca, and require/prefer with a
/// root certificate), or nothing (require/prefer without one). Handshake
/// signatures are always checked.
#[derive(Debug)]
struct Verifier {
    chain: Option<Arc<WebPkiServerVerifier>>,
    check_name: bool,
    provider: Arc<CryptoProvider>,
}

impl ServerCertVerifier for Verifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let Some(chain) = &self.chain else {
            return Ok(ServerCertVerified::assertion());
        };
        match chain.verify_server_cert(end_entity, intermediates, server_name, ocsp, now) {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) if !self.check_name => Ok(ServerCertVerified::assertion()),
            other => other,
        }
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
            &self.provider.signature_verification_algorithms,
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
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}

/// The TLS settings of a client connection, checked once
/// (`TlsClientConfig(...)` raises `TlsConfigError` with the reason).
#[pyclass(module = "surge._core", frozen)]
pub struct TlsClientConfig {
    /// Also the load generator's (`load/mod.rs`), with ALPN added.
    pub(crate) config: Arc<ClientConfig>,
}

fn read_certs(path: &str, what: &str) -> PyResult<Vec<CertificateDer<'static>>> {
    CertificateDer::pem_file_iter(path)
        .map_err(|e| config_error(&format!("cannot read the {what} {path:?}"), e))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| config_error(&format!("bad certificate in {path:?}"), e))
}

#[pymethods]
impl TlsClientConfig {
    /// `cafile` (PEM): the roots the server's chain must lead to (None: the
    /// chain is not checked); `check_name`: the certificate must name the host.
    /// `certfile`/`keyfile` (PEM, unencrypted key): a client certificate for
    /// servers that ask. TLS 1.2 and 1.3.
    #[new]
    #[pyo3(signature = (cafile=None, check_name=true, certfile=None, keyfile=None))]
    fn new(
        cafile: Option<&str>,
        check_name: bool,
        certfile: Option<&str>,
        keyfile: Option<&str>,
    ) -> PyResult<Self> {
        let crypto = Arc::new(provider::default_provider());
        let chain = match cafile {
            None => None,
            Some(path) => {
                let mut roots = RootCertStore::empty();
                for cert in read_certs(path, "root certificates")? {
                    roots.add(cert).map_err(|e| {
                        config_error(&format!("bad root certificate in {path:?}"), e)
                    })?;
                }
                let v =
                    WebPkiServerVerifier::builder_with_provider(Arc::new(roots), crypto.clone())
                        .build()
                        .map_err(|e| config_error("certificate verifier", e))?;
                Some(v)
            }
        };
        if chain.is_none() && check_name {
            return Err(TlsConfigError::new_err(
                "checking the server's name needs root certificates",
            ));
        }
        let verifier = Arc::new(Verifier {
            chain,
            check_name,
            provider: crypto.clone(),
        });
        let builder = ClientConfig::builder_with_provider(crypto)
            .with_safe_default_protocol_versions()
            .map_err(|e| config_error("TLS versions", e))?
            .dangerous()
            .with_custom_certificate_verifier(verifier);
        let config = match certfile {
            None => builder.with_no_client_auth(),
            Some(cert) => {
                let chain = read_certs(cert, "client certificate")?;
                let key_path = keyfile.unwrap_or(cert);
                let key = PrivateKeyDer::from_pem_file(key_path).map_err(|e| {
                    config_error(&format!("cannot read a private key from {key_path:?}"), e)
                })?;
                builder
                    .with_client_auth_cert(chain, key)
                    .map_err(|e| config_error("the client certificate and key", e))?
            }
        };
        Ok(TlsClientConfig {
            config: Arc::new(config),
        })
    }

    /// A session for one connection to `server_name` (a host name or an IP
    /// address: what the certificate must name).
    fn session(&self, server_name: &str) -> PyResult<TlsClientSession> {
        let name = ServerName::try_from(server_name.to_owned())
            .map_err(|e| config_error(&format!("bad server name {server_name:?}"), e))?;
        let mut conn = ClientConnection::new(self.config.clone(), name)
            .map_err(|e| config_error("cannot start a TLS session", e))?;
        // The engine bounds what it buffers; rustls must not refuse part of a write.
        conn.set_buffer_limit(None);
        Ok(TlsClientSession {
            records: Records::new(conn),
        })
    }
}

/// One connection's TLS state, client side.
#[pyclass(module = "surge._core")]
pub struct TlsClientSession {
    records: Records<ClientConnection>,
}

impl TlsClientSession {
    /// What `feed` does, with the plaintext appended to `sink` (a codec's read
    /// buffer) rather than returned as bytes: (bytes to send, error).
    pub(crate) fn feed_into(
        &mut self,
        data: &[u8],
        sink: &mut impl PlainSink,
    ) -> (Vec<u8>, Option<String>) {
        self.records.feed_into(data, sink)
    }
}

session_methods!(TlsClientSession, {
    /// The bytes to send first (the ClientHello).
    fn start<'py>(&mut self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        self.records.pending(py)
    }

    /// The server's certificate (DER), once the handshake has shown it.
    #[getter]
    fn peer_certificate<'py>(&self, py: Python<'py>) -> Option<Bound<'py, PyBytes>> {
        self.records
            .conn
            .peer_certificates()
            .and_then(|chain| chain.first())
            .map(|c| PyBytes::new(py, c.as_ref()))
    }
});
