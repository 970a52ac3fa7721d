//! Server-side TLS with rustls, sans-IO: the HTTP server's TLS transport
//! (`surge.serve.rustls`) hands each read to [`TlsSession::feed`] and each
//! write to [`TlsSession::encrypt`], one native call apiece.
//!
//! Why by hand rather than Python's `ssl` on the event loop: measured on the
//! HTTPS JSON hello, the ssl module's record layer (SSLObject calls and its
//! memory BIOs, driven from the loop's SSL protocol) cost more than half of
//! surge's plain-HTTP speed; here decryption, encryption and the handshake run
//! in one call per read or write with no Python objects in between.

use std::io::{BufRead, Cursor, Write};
use std::ops::DerefMut;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::{Arc, Mutex};

use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList};
use pyo3::{PyTraverseError, PyVisit};
// ring rather than aws-lc-rs: measured on the HTTPS JSON exchange (one ~40-byte
// request record opened, one ~180-byte response record sealed, TLS 1.3
// AES-256-GCM, AES-NI/VAES CPU) through rustls' record layer, interleaved
// medians 542 ns (ring) vs 536 ns (aws-lc-rs), 5.0k vs 5.5k instructions:
// no gain to pay aws-lc-sys's C build (cmake, minutes) for.
use rustls::crypto::ring as provider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use rustls::server::WebPkiClientVerifier;
use rustls::{ConnectionCommon, RootCertStore, ServerConfig, ServerConnection};

create_exception!(
    _core,
    TlsConfigError,
    PyException,
    "A certificate, key or CA file that cannot be used."
);

/// The TLS settings of a listening socket, checked once (`TlsServerConfig(...)`
/// raises `TlsConfigError` with the reason).
#[pyclass(module = "surge._core", frozen)]
pub struct TlsServerConfig {
    config: Arc<ServerConfig>,
}

fn config_error(what: &str, err: impl std::fmt::Display) -> PyErr {
    TlsConfigError::new_err(format!("{what}: {err}"))
}

const ENCRYPTED_BEGIN: &str = "-----BEGIN ENCRYPTED PRIVATE KEY-----";
const ENCRYPTED_END: &str = "-----END ENCRYPTED PRIVATE KEY-----";

/// The private key in the PEM file at `path`: unencrypted (PKCS#8, PKCS#1 or
/// SEC1), or encrypted PKCS#8 opened with `password`. The legacy OpenSSL form
/// ("Proc-Type: 4,ENCRYPTED" headers) is refused with how to convert it: no
/// well-kept Rust crate reads it.
fn load_key(path: &str, password: Option<&str>) -> PyResult<PrivateKeyDer<'static>> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| config_error(&format!("cannot read a private key from {path:?}"), e))?;
    if text.contains("Proc-Type: 4,ENCRYPTED") {
        return Err(TlsConfigError::new_err(format!(
            "the private key in {path:?} is encrypted in the legacy OpenSSL PEM form \
             (\"Proc-Type: 4,ENCRYPTED\"), which the rustls backend cannot read: use \
             --ssl-backend python, or convert it to encrypted PKCS#8 \
             (openssl pkcs8 -topk8 -in OLD.pem -out NEW.pem)"
        )));
    }
    let Some(start) = text.find(ENCRYPTED_BEGIN) else {
        return PrivateKeyDer::from_pem_slice(text.as_bytes())
            .map_err(|e| config_error(&format!("cannot read a private key from {path:?}"), e));
    };
    let Some(password) = password else {
        return Err(TlsConfigError::new_err(format!(
            "the private key in {path:?} is encrypted: give its password \
             (--ssl-keyfile-password)"
        )));
    };
    let bad = |e: &dyn std::fmt::Display| {
        config_error(&format!("bad encrypted private key in {path:?}"), e)
    };
    let end = text[start..]
        .find(ENCRYPTED_END)
        .map(|i| start + i + ENCRYPTED_END.len())
        .ok_or_else(|| bad(&"no END line"))?;
    let (_, der) =
        pkcs8::der::pem::decode_vec(&text.as_bytes()[start..end]).map_err(|e| bad(&e))?;
    let info = pkcs8::EncryptedPrivateKeyInfo::try_from(der.as_slice()).map_err(|e| bad(&e))?;
    let key = info.decrypt(password).map_err(|e| {
        config_error(
            &format!(
                "cannot decrypt the private key in {path:?} (a wrong --ssl-keyfile-password?)"
            ),
            e,
        )
    })?;
    Ok(PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(
        key.as_bytes().to_vec(),
    )))
}

#[pymethods]
impl TlsServerConfig {
    /// `certfile` holds the chain (PEM, leaf first), `keyfile` the private key
    /// (PEM; default: in `certfile`; encrypted PKCS#8 is opened with
    /// `password`). `ca_certs` (PEM) verifies client certificates: `cert_reqs`
    /// 1 asks for one, 2 requires it. ALPN offers `alpn` (default `http/1.1`);
    /// TLS 1.2 and 1.3.
    #[new]
    #[pyo3(signature = (certfile, keyfile=None, ca_certs=None, cert_reqs=0, alpn=None, password=None))]
    fn new(
        certfile: &str,
        keyfile: Option<&str>,
        ca_certs: Option<&str>,
        cert_reqs: u8,
        alpn: Option<Vec<Vec<u8>>>,
        password: Option<&str>,
    ) -> PyResult<Self> {
        let crypto = Arc::new(provider::default_provider());
        let builder = ServerConfig::builder_with_provider(crypto.clone())
            .with_safe_default_protocol_versions()
            .map_err(|e| config_error("TLS versions", e))?;
        let builder = match (ca_certs, cert_reqs) {
            (_, 0) => builder.with_no_client_auth(),
            (None, _) => {
                return Err(TlsConfigError::new_err(
                    "client certificates (cert_reqs 1 or 2) need CA certificates",
                ))
            }
            (Some(path), reqs) => {
                let mut roots = RootCertStore::empty();
                let certs = CertificateDer::pem_file_iter(path).map_err(|e| {
                    config_error(&format!("cannot read the CA certificates {path:?}"), e)
                })?;
                for cert in certs {
                    let cert = cert
                        .map_err(|e| config_error(&format!("bad CA certificate in {path:?}"), e))?;
                    roots
                        .add(cert)
                        .map_err(|e| config_error(&format!("bad CA certificate in {path:?}"), e))?;
                }
                let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), crypto);
                let verifier = if reqs == 1 {
                    verifier.allow_unauthenticated()
                } else {
                    verifier
                };
                let verifier = verifier
                    .build()
                    .map_err(|e| config_error("client certificate verifier", e))?;
                builder.with_client_cert_verifier(verifier)
            }
        };
        let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(certfile)
            .map_err(|e| config_error(&format!("cannot read the certificate {certfile:?}"), e))?
            .collect::<Result<_, _>>()
            .map_err(|e| config_error(&format!("bad certificate in {certfile:?}"), e))?;
        if chain.is_empty() {
            return Err(TlsConfigError::new_err(format!(
                "no certificate in {certfile:?}"
            )));
        }
        let key_path = keyfile.unwrap_or(certfile);
        let key = load_key(key_path, password)?;
        let mut config = builder
            .with_single_cert(chain, key)
            .map_err(|e| config_error("the certificate and key do not go together", e))?;
        config.alpn_protocols = alpn.unwrap_or_else(|| vec![b"http/1.1".to_vec()]);
        Ok(TlsServerConfig {
            config: Arc::new(config),
        })
    }

    /// A session for one accepted connection.
    fn session(&self) -> PyResult<TlsSession> {
        let mut conn = ServerConnection::new(self.config.clone())
            .map_err(|e| config_error("cannot start a TLS session", e))?;
        // The HTTP layer bounds what it writes (its high-water mark); rustls
        // must not refuse part of a write.
        conn.set_buffer_limit(None);
        Ok(TlsSession {
            records: Records::new(conn),
        })
    }
}

/// One connection's TLS state.
#[pyclass(module = "surge._core")]
pub struct TlsSession {
    records: Records<ServerConnection>,
}

/// One connection's record layer, either end (`TlsSession` here,
/// `TlsClientSession` in `tls_client.rs`): the rustls connection and the
/// buffers kept between calls for their capacity.
pub(crate) struct Records<C> {
    pub(crate) conn: C,
    pub(crate) peer_closed: bool,
    /// Decrypted bytes of the read in progress.
    plain: Vec<u8>,
    /// Records of the write in progress.
    sealed: Vec<u8>,
}

/// What a read gave: (plaintext or None, bytes to send or None, error or None).
pub(crate) type FedPy = (Option<Py<PyBytes>>, Option<Py<PyBytes>>, Option<String>);

impl<C, D> Records<C>
where
    C: DerefMut<Target = ConnectionCommon<D>>,
{
    pub(crate) fn new(conn: C) -> Self {
        Records {
            conn,
            peer_closed: false,
            plain: Vec::new(),
            sealed: Vec::new(),
        }
    }

    /// Decrypts a read (see [`feed_records`]); also says whether the peer's
    /// close_notify came in it.
    pub(crate) fn feed(&mut self, py: Python<'_>, data: &[u8]) -> (FedPy, bool) {
        let fed = feed_records(&mut self.conn, data, &mut self.plain);
        let closed = fed.peer_closed;
        self.peer_closed |= closed;
        (fed.into_py(py, &mut self.plain), closed)
    }

    /// What `feed` does, with the plaintext appended to `sink` (a codec's read
    /// buffer) rather than returned as bytes: (bytes to send, error).
    pub(crate) fn feed_into(
        &mut self,
        data: &[u8],
        sink: &mut impl PlainSink,
    ) -> (Vec<u8>, Option<String>) {
        let fed = feed_records(&mut self.conn, data, sink);
        self.peer_closed |= fed.peer_closed;
        (fed.out, fed.error)
    }

    /// The records carrying `data`, as one `bytes` (buffered by rustls until
    /// the handshake is done). They are gathered in `sealed`, whose capacity
    /// is kept, so a write allocates only the `bytes` it returns.
    pub(crate) fn seal<'py>(
        &mut self,
        py: Python<'py>,
        data: &[u8],
    ) -> PyResult<Bound<'py, PyBytes>> {
        self.conn.writer().write_all(data)?;
        self.pending(py)
    }

    /// Every record waiting to be sent (handshake messages, alerts), as one `bytes`.
    pub(crate) fn pending<'py>(&mut self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        while self.conn.wants_write() {
            self.conn.write_tls(&mut self.sealed)?;
        }
        let records = PyBytes::new(py, &self.sealed);
        self.sealed.clear();
        Ok(records)
    }

    /// A close_notify alert to send before closing.
    pub(crate) fn close<'py>(&mut self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        self.conn.send_close_notify();
        self.pending(py)
    }
}

/// The Python methods both ends' sessions share, and then `$own`, the
/// class's own: PyO3 takes one `#[pymethods]` block per class.
macro_rules! session_methods {
    ($class:ident, { $($own:tt)* }) => {
        #[pymethods]
        impl $class {
            /// Takes bytes read from the socket. Returns (plaintext or None,
            /// bytes to send or None, error or None): handshake messages and
            /// alerts to send come back as the second item; after an error (a
            /// message that is not TLS, a failed handshake, a refused
            /// certificate, a bad record) send them, then close.
            fn feed(&mut self, py: Python<'_>, data: &[u8]) -> $crate::tls::FedPy {
                self.records.feed(py, data).0
            }

            /// The TLS records carrying `data` (buffered until the handshake is done).
            fn encrypt<'py>(
                &mut self,
                py: Python<'py>,
                data: &[u8],
            ) -> PyResult<Bound<'py, PyBytes>> {
                self.records.seal(py, data)
            }

            /// A close_notify alert to send before closing.
            fn close<'py>(&mut self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
                self.records.close(py)
            }

            /// True until the handshake has completed.
            #[getter]
            fn handshaking(&self) -> bool {
                self.records.conn.is_handshaking()
            }

            /// True once the peer sent close_notify.
            #[getter]
            fn peer_closed(&self) -> bool {
                self.records.peer_closed
            }

            /// "TLSv1_3" or "TLSv1_2" once agreed.
            #[getter]
            fn version(&self) -> Option<String> {
                self.records.conn.protocol_version().map(|v| format!("{v:?}"))
            }

            $($own)*
        }
    };
}
pub(crate) use session_methods;

/// The record layer's read side, shared by both ends (client sessions in
/// `tls_client.rs`, server sessions here). Why a loop: rustls takes a read in
/// pieces of a few KB and holds at most 16 KB of plaintext, so each piece is
/// decrypted and its plaintext taken before the next.
struct Fed {
    /// Bytes to send (handshake messages, alerts, key updates); may be empty.
    pub out: Vec<u8>,
    /// Why the stream is broken (a message that is not TLS, a failed handshake,
    /// a bad record): send `out`, then close.
    pub error: Option<String>,
    /// The peer sent close_notify.
    pub peer_closed: bool,
}

/// Where [`feed_records`] puts the plaintext: a `Vec` (handed to Python as
/// bytes), or a codec's own read buffer, so that a driver parses the
/// plaintext where it was decrypted to, without a bytes object in between
/// (`PgCodec.feed_tls`: two copies of every read fewer).
pub(crate) trait PlainSink {
    /// Room for `n` more bytes (a hint).
    fn reserve(&mut self, n: usize);
    /// Appends decrypted bytes.
    fn put(&mut self, chunk: &[u8]);
}

impl PlainSink for Vec<u8> {
    fn reserve(&mut self, n: usize) {
        Vec::reserve(self, n);
    }

    fn put(&mut self, chunk: &[u8]) {
        self.extend_from_slice(chunk);
    }
}

/// Decrypts every record in `data` (bytes read from the socket) into `plain`,
/// appended, and takes what rustls wants sent (see [`decrypt_into`]).
fn feed_records<T>(conn: &mut ConnectionCommon<T>, data: &[u8], plain: &mut impl PlainSink) -> Fed {
    let (error, peer_closed) = decrypt_into(conn, data, plain);
    let mut out = Vec::new();
    while conn.wants_write() {
        if conn.write_tls(&mut out).is_err() {
            break;
        }
    }
    Fed {
        out,
        error,
        peer_closed,
    }
}

/// Decrypts every record in `data` into `plain`, appended: room for exactly
/// as many bytes as the records carry, so no growth by doubling and no probe
/// reads (what `read_to_end` did per piece). Returns (why the stream is
/// broken, or None; whether the peer sent close_notify). What rustls wants
/// sent (handshake messages, alerts) stays queued in `conn`: the load
/// generator (`load/engine.rs`) writes it to its socket itself.
pub(crate) fn decrypt_into<T>(
    conn: &mut ConnectionCommon<T>,
    data: &[u8],
    plain: &mut impl PlainSink,
) -> (Option<String>, bool) {
    let mut cursor = Cursor::new(data);
    let mut error = None;
    let mut peer_closed = false;
    loop {
        let took = match conn.read_tls(&mut cursor) {
            Ok(n) => n,
            Err(e) => {
                error = Some(e.to_string());
                break;
            }
        };
        match conn.process_new_packets() {
            Err(e) => {
                error = Some(e.to_string());
                break;
            }
            Ok(state) => {
                // chunk by chunk (BufRead): no zero-filled scratch space to copy into
                let mut n = state.plaintext_bytes_to_read();
                plain.reserve(n);
                let mut reader = conn.reader();
                while n > 0 {
                    match reader.fill_buf() {
                        Ok(chunk) if !chunk.is_empty() => {
                            let k = chunk.len();
                            plain.put(chunk);
                            reader.consume(k);
                            n = n.saturating_sub(k);
                        }
                        Ok(_) => break,
                        Err(e) => {
                            error = Some(e.to_string());
                            break;
                        }
                    }
                }
                if error.is_some() {
                    break;
                }
                peer_closed |= state.peer_has_closed();
            }
        }
        // took 0: after close_notify rustls reads no more (the rest is dropped)
        if took == 0 || cursor.position() as usize >= data.len() {
            break;
        }
    }
    (error, peer_closed)
}

fn some_bytes(py: Python<'_>, data: &[u8]) -> Option<Py<PyBytes>> {
    (!data.is_empty()).then(|| PyBytes::new(py, data).unbind())
}

impl Fed {
    /// (plaintext or None, bytes to send or None, error or None), as the
    /// sessions' `feed` return them; `plain` is emptied (its capacity kept for
    /// the next read).
    fn into_py(self, py: Python<'_>, plain: &mut Vec<u8>) -> FedPy {
        let text = some_bytes(py, plain);
        plain.clear();
        (text, some_bytes(py, &self.out), self.error)
    }
}

session_methods!(TlsSession, {
    /// The protocol ALPN agreed on (e.g. b"http/1.1"), or None.
    #[getter]
    fn alpn_protocol<'py>(&self, py: Python<'py>) -> Option<Bound<'py, PyBytes>> {
        self.records
            .conn
            .alpn_protocol()
            .map(|p| PyBytes::new(py, p))
    }

    /// The cipher suite's name once agreed.
    #[getter]
    fn cipher(&self) -> Option<String> {
        self.records
            .conn
            .negotiated_cipher_suite()
            .map(|s| format!("{:?}", s.suite()))
    }

    /// The client's certificate chain (DER, leaf first), when it sent one.
    #[getter]
    fn peer_certificates<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyList>>> {
        match self.records.conn.peer_certificates() {
            None => Ok(None),
            Some(chain) => Ok(Some(PyList::new(
                py,
                chain.iter().map(|c| PyBytes::new(py, c.as_ref())),
            )?)),
        }
    }
});

/// The write path of a TLS connection as one native call: `writer(data)`
/// encrypts and hands the records to the socket transport's `write`, so the
/// server's responses reach the socket without a Python frame in between.
/// The HTTP connection's native side, given a `TlsWriter` as its `write`,
/// calls [`TlsWriter::send`] directly (no `bytes` of plaintext, no call
/// through Python).
#[pyclass(module = "surge._core", frozen)]
pub struct TlsWriter {
    session: Py<TlsSession>,
    write: PyObject,
    closed: AtomicBool,
}

impl TlsWriter {
    /// Encrypts `data` and writes the records (nothing once closed).
    pub(crate) fn send(&self, py: Python<'_>, data: &[u8]) -> PyResult<()> {
        if self.closed.load(Relaxed) || data.is_empty() {
            return Ok(());
        }
        let records = self.session.borrow_mut(py).records.seal(py, data)?;
        self.write.call1(py, (records,))?;
        Ok(())
    }
}

#[pymethods]
impl TlsWriter {
    #[new]
    fn new(session: Py<TlsSession>, write: PyObject) -> Self {
        TlsWriter {
            session,
            write,
            closed: AtomicBool::new(false),
        }
    }

    fn __call__(&self, py: Python<'_>, data: &[u8]) -> PyResult<()> {
        self.send(py, data)
    }

    /// Drops every later write (the connection is closing).
    fn close(&self) {
        self.closed.store(true, Relaxed);
    }
}

/// The read path of a TLS connection as one native call, for the event loop
/// to call as the protocol's `data_received`: it decrypts the read and, in
/// the common case (the handshake done, nothing to send back, no error, no
/// close_notify), hands the plaintext straight to the HTTP protocol's
/// `data_received` (`deliver`). Everything else (the handshake, alerts,
/// errors, the peer's close) goes to `slow(plain, out, error)` in Python.
/// Measured: the Python frame this replaces was about a third of the TLS
/// path's own cost per request.
#[pyclass(module = "surge._core", frozen)]
pub struct TlsReceiver {
    session: Py<TlsSession>,
    /// The TLS protocol's Python handler for everything but the common case.
    slow: Mutex<Option<PyObject>>,
    /// The HTTP protocol's `data_received` once the handshake is done.
    deliver: Mutex<Option<PyObject>>,
}

/// The object in `cell` (the lock is never held across a call into Python,
/// so it is never poisoned or contended; None after `__clear__`).
fn held(py: Python<'_>, cell: &Mutex<Option<PyObject>>) -> Option<PyObject> {
    cell.lock()
        .ok()
        .and_then(|o| o.as_ref().map(|o| o.clone_ref(py)))
}

#[pymethods]
impl TlsReceiver {
    #[new]
    fn new(session: Py<TlsSession>, slow: PyObject) -> Self {
        TlsReceiver {
            session,
            slow: Mutex::new(Some(slow)),
            deliver: Mutex::new(None),
        }
    }

    fn __call__(&self, py: Python<'_>, data: &[u8]) -> PyResult<()> {
        self.receive(py, data)
    }

    /// What `__call__` does, as a method: the loop calls the bound method
    /// (`receiver.receive`, the TLS protocol's `data_received`) with the
    /// vectorcall protocol, where calling the object itself goes through
    /// `tp_call` and a tuple of arguments made and freed per read.
    fn receive(&self, py: Python<'_>, data: &[u8]) -> PyResult<()> {
        // The session's borrow ends before anything is called: the protocol
        // answers (and so encrypts) within `deliver`.
        let ((plain, out, error), closed) = self.session.borrow_mut(py).records.feed(py, data);
        if out.is_none() && error.is_none() && !closed {
            if let Some(deliver) = held(py, &self.deliver) {
                if let Some(plain) = plain {
                    deliver.call1(py, (plain,))?;
                }
                return Ok(());
            }
        }
        if let Some(slow) = held(py, &self.slow) {
            slow.call1(py, (plain, out, error))?;
        }
        Ok(())
    }

    /// Sets (or, with None, clears) where plaintext goes in the common case.
    fn deliver_to(&self, deliver: Option<PyObject>) {
        // The old object is dropped after the lock (its release may run Python).
        let _old = self
            .deliver
            .lock()
            .map(|mut cell| std::mem::replace(&mut *cell, deliver));
    }

    fn __traverse__(&self, visit: PyVisit<'_>) -> Result<(), PyTraverseError> {
        for cell in [&self.slow, &self.deliver] {
            if let Ok(cell) = cell.try_lock() {
                if let Some(o) = &*cell {
                    visit.call(o)?;
                }
            }
        }
        visit.call(&self.session)
    }

    fn __clear__(&self) {
        for cell in [&self.slow, &self.deliver] {
            let _old = cell.try_lock().map(|mut cell| cell.take());
        }
    }
}
