//! WebSocket for the server: the opening handshake and a per-connection codec
//! over `surge_proto::websocket`.
//!
//! One `feed` per read decodes every whole message in it and returns them as
//! one list, so the GIL-holding work per read is one call whatever the number
//! of frames. Data messages come back as `str` (text) and `bytes` (binary);
//! control frames and failures as small tuples whose first item is the opcode
//! (`PING`, `PONG`, `CLOSE`) or `ERROR`. Encoders return bytes ready for
//! `transport.write`, and `encode_many` frames a batch of messages into one.

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList, PyString, PyTuple};
use pyo3::BoundObject;
use surge_proto::websocket::{
    negotiate, validate_request, write_rejection, write_response, CloseFrame, Decoder,
    DeflateConfig, DeflateOffer, Encoder, Message, Role, Status, DEFAULT_COMPRESSION_LEVEL,
    DEFAULT_MAX_MESSAGE_SIZE,
};

/// Event tags: the opcodes of the control frames, and 0 for a protocol error.
pub const ERROR: u8 = 0;
pub const CLOSE: u8 = 8;
pub const PING: u8 = 9;
pub const PONG: u8 = 10;

/// The server's compression window unless told otherwise: 2^12 bytes.
const DEFAULT_SERVER_WINDOW_BITS: u8 = 12;

/// Close code reported when the peer's close frame carried none (RFC 6455 7.1.5).
const NO_STATUS: u16 = 1005;

/// The bytes of a header name or value given as `bytes` or `str`.
fn raw(obj: &Bound<'_, PyAny>) -> PyResult<Vec<u8>> {
    if let Ok(b) = obj.downcast::<PyBytes>() {
        return Ok(b.as_bytes().to_vec());
    }
    if let Ok(s) = obj.downcast::<PyString>() {
        return Ok(s.to_str()?.as_bytes().to_vec());
    }
    Err(PyValueError::new_err(
        "header names and values must be bytes or str",
    ))
}

/// An upgrade request, checked: either refused (`ok` false, with the status and
/// the whole response in `rejection`) or ready to be accepted.
#[pyclass(module = "surge._core", frozen)]
pub struct WebSocketHandshake {
    /// True when the request is a valid WebSocket upgrade.
    #[pyo3(get)]
    ok: bool,
    /// The refusal's status (0 when `ok`).
    #[pyo3(get)]
    status: u16,
    /// Why it was refused ("" when `ok`).
    #[pyo3(get)]
    reason: &'static str,
    rejection: Vec<u8>,
    key: Vec<u8>,
    /// The subprotocols the client offered, in its order.
    #[pyo3(get)]
    subprotocols: Vec<String>,
    offers: Vec<DeflateOffer>,
}

#[pymethods]
impl WebSocketHandshake {
    /// Checks `method` and the request's header fields (pairs of bytes or str).
    #[new]
    fn new(method: &[u8], headers: &Bound<'_, PyAny>) -> PyResult<Self> {
        let mut owned = Vec::new();
        for item in headers.try_iter()? {
            let item = item?;
            let pair = item.downcast::<PyTuple>()?;
            owned.push((raw(&pair.get_item(0)?)?, raw(&pair.get_item(1)?)?));
        }
        let fields = owned.iter().map(|(n, v)| (n.as_slice(), v.as_slice()));
        Ok(match validate_request(method, fields) {
            Ok(req) => WebSocketHandshake {
                ok: true,
                status: 0,
                reason: "",
                rejection: Vec::new(),
                key: req.key.to_vec(),
                subprotocols: req.protocols.iter().map(|p| p.to_string()).collect(),
                offers: req.deflate_offers,
            },
            Err(e) => {
                let mut rejection = Vec::with_capacity(256);
                write_rejection(&mut rejection, e);
                WebSocketHandshake {
                    ok: false,
                    status: e.status(),
                    reason: e.message(),
                    rejection,
                    key: Vec::new(),
                    subprotocols: Vec::new(),
                    offers: Vec::new(),
                }
            }
        })
    }

    /// The whole HTTP response refusing the upgrade (for a request not `ok`).
    fn rejection<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &self.rejection)
    }

    /// True when the client offered a permessage-deflate the server can accept.
    #[getter]
    fn compression_offered(&self) -> bool {
        !self.offers.is_empty()
    }

    /// Accepts: the `101` response bytes and the connection's codec.
    /// `subprotocol` must be one the client offered; `headers` are extra
    /// (name, value) pairs; `compress` agrees to permessage-deflate if offered,
    /// compressing with a window of `server_max_window_bits` (default 12, 4 KiB,
    /// as the websockets library: the compressor's memory per connection is
    /// dominated by its window, and small messages gain nothing from 32 KiB).
    #[allow(clippy::too_many_arguments)]
    #[pyo3(signature = (subprotocol=None, headers=None, compress=true, max_message_size=DEFAULT_MAX_MESSAGE_SIZE, compression_level=DEFAULT_COMPRESSION_LEVEL, server_max_window_bits=DEFAULT_SERVER_WINDOW_BITS))]
    fn accept<'py>(
        &self,
        py: Python<'py>,
        subprotocol: Option<&str>,
        headers: Option<&Bound<'py, PyAny>>,
        compress: bool,
        max_message_size: usize,
        compression_level: u32,
        server_max_window_bits: u8,
    ) -> PyResult<(Bound<'py, PyBytes>, WebSocketCodec)> {
        if !(9..=15).contains(&server_max_window_bits) {
            return Err(PyValueError::new_err(
                "server_max_window_bits must be 9..=15",
            ));
        }
        if !self.ok {
            return Err(PyValueError::new_err("cannot accept a refused handshake"));
        }
        if let Some(p) = subprotocol {
            if !self.subprotocols.iter().any(|o| o == p) {
                return Err(PyValueError::new_err(format!(
                    "subprotocol {p:?} was not offered by the client"
                )));
            }
        }
        let mut extra = Vec::new();
        if let Some(h) = headers {
            for item in h.try_iter()? {
                let item = item?;
                let pair = item.downcast::<PyTuple>()?;
                let (name, value) = (raw(&pair.get_item(0)?)?, raw(&pair.get_item(1)?)?);
                if name
                    .iter()
                    .chain(value.iter())
                    .any(|&b| b == b'\r' || b == b'\n')
                {
                    return Err(PyValueError::new_err("CR or LF in a response header"));
                }
                extra.push((name, value));
            }
        }
        let deflate = if compress {
            negotiate(
                &self.offers,
                &DeflateConfig {
                    server_max_window_bits,
                    ..DeflateConfig::default()
                },
            )
        } else {
            None
        };
        let mut out = Vec::with_capacity(256);
        let extra: Vec<(&[u8], &[u8])> = extra
            .iter()
            .map(|(n, v)| (n.as_slice(), v.as_slice()))
            .collect();
        write_response(&mut out, &self.key, subprotocol, deflate.as_ref(), &extra);
        let codec = WebSocketCodec {
            decoder: Decoder::new(Role::Server, deflate).with_max_message_size(max_message_size),
            encoder: Encoder::server(deflate).with_compression_level(compression_level),
            compressed: deflate.is_some(),
            failed: false,
        };
        Ok((PyBytes::new(py, &out), codec))
    }
}

/// One server connection's frames: `feed` what is read, encode what is sent.
#[pyclass(module = "surge._core")]
pub struct WebSocketCodec {
    decoder: Decoder,
    encoder: Encoder,
    /// permessage-deflate was agreed.
    #[pyo3(get)]
    compressed: bool,
    failed: bool,
}

fn event<'py, T>(py: Python<'py>, items: T) -> PyResult<Bound<'py, PyAny>>
where
    T: pyo3::IntoPyObject<'py>,
{
    Ok(items
        .into_pyobject(py)
        .map_err(Into::into)?
        .into_any()
        .into_bound())
}

#[pymethods]
impl WebSocketCodec {
    /// Decodes every whole message in `data` (and what was held before): a
    /// list of `str` (text), `bytes` (binary), `(PING, payload)`,
    /// `(PONG, payload)`, `(CLOSE, code, reason)` (1005 when the peer gave no
    /// code), or last `(ERROR, code, reason)`: send that close and end the
    /// connection. Nothing is decoded after a close or an error.
    fn feed<'py>(&mut self, py: Python<'py>, data: &[u8]) -> PyResult<Bound<'py, PyList>> {
        let out = PyList::empty(py);
        if self.failed {
            return Ok(out);
        }
        self.decoder.feed(data);
        loop {
            match self.decoder.poll() {
                Ok(Status::Partial) => break,
                Ok(Status::Complete(m)) => match m {
                    Message::Text(t) => out.append(PyString::new(py, t))?,
                    Message::Binary(b) => out.append(PyBytes::new(py, b))?,
                    Message::Ping(p) => out.append(event(py, (PING, PyBytes::new(py, p)))?)?,
                    Message::Pong(p) => out.append(event(py, (PONG, PyBytes::new(py, p)))?)?,
                    Message::Close(c) => {
                        let (code, reason) = c.map_or((NO_STATUS, ""), |c| (c.code, c.reason));
                        out.append(event(py, (CLOSE, code, reason))?)?;
                        break;
                    }
                },
                Err(e) => {
                    self.failed = true;
                    out.append(event(py, (ERROR, e.close_code(), e.message()))?)?;
                    break;
                }
            }
        }
        Ok(out)
    }

    /// Bytes fed and not decoded yet (a partial frame).
    #[getter]
    fn buffered(&self) -> usize {
        self.decoder.buffered()
    }

    /// True while a fragmented message has begun and not ended.
    #[getter]
    fn in_message(&self) -> bool {
        self.decoder.in_message()
    }

    /// A text message frame (compressed when agreed).
    fn text<'py>(&mut self, py: Python<'py>, text: &str) -> Bound<'py, PyBytes> {
        let mut buf = Vec::with_capacity(text.len() + 14);
        self.encoder.text(&mut buf, text);
        PyBytes::new(py, &buf)
    }

    /// A binary message frame (compressed when agreed).
    fn binary<'py>(&mut self, py: Python<'py>, data: &[u8]) -> Bound<'py, PyBytes> {
        let mut buf = Vec::with_capacity(data.len() + 14);
        self.encoder.binary(&mut buf, data);
        PyBytes::new(py, &buf)
    }

    /// Several messages (`str` as text, bytes-like as binary) in one buffer.
    fn encode_many<'py>(
        &mut self,
        py: Python<'py>,
        messages: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyBytes>> {
        let mut buf = Vec::new();
        for m in messages.try_iter()? {
            let m = m?;
            if let Ok(s) = m.downcast::<PyString>() {
                self.encoder.text(&mut buf, s.to_str()?);
            } else if let Ok(b) = m.downcast::<PyBytes>() {
                self.encoder.binary(&mut buf, b.as_bytes());
            } else {
                let b: Vec<u8> = m.extract()?;
                self.encoder.binary(&mut buf, &b);
            }
        }
        Ok(PyBytes::new(py, &buf))
    }

    /// A ping frame (payload at most 125 bytes).
    #[pyo3(signature = (payload=b"".as_slice()))]
    fn ping<'py>(&mut self, py: Python<'py>, payload: &[u8]) -> PyResult<Bound<'py, PyBytes>> {
        let mut buf = Vec::with_capacity(payload.len() + 2);
        self.encoder
            .ping(&mut buf, payload)
            .map_err(|e| PyValueError::new_err(e.to_string()))?;
        Ok(PyBytes::new(py, &buf))
    }

    /// A pong frame (payload at most 125 bytes).
    #[pyo3(signature = (payload=b"".as_slice()))]
    fn pong<'py>(&mut self, py: Python<'py>, payload: &[u8]) -> PyResult<Bound<'py, PyBytes>> {
        let mut buf = Vec::with_capacity(payload.len() + 2);
        self.encoder
            .pong(&mut buf, payload)
            .map_err(|e| PyValueError::new_err(e.to_string()))?;
        Ok(PyBytes::new(py, &buf))
    }

    /// A close frame: a code that may be sent (1000-1003, 1007-1014,
    /// 3000-4999) and a reason of at most 123 bytes (cut at a character
    /// boundary if longer), or no payload for code 1005.
    #[pyo3(signature = (code=1000, reason=""))]
    fn close<'py>(
        &mut self,
        py: Python<'py>,
        code: u16,
        reason: &str,
    ) -> PyResult<Bound<'py, PyBytes>> {
        let mut end = reason.len().min(surge_proto::websocket::MAX_CLOSE_REASON);
        while !reason.is_char_boundary(end) {
            end -= 1;
        }
        let frame = (code != NO_STATUS).then_some(CloseFrame {
            code,
            reason: &reason[..end],
        });
        let mut buf = Vec::with_capacity(end + 4);
        self.encoder
            .close(&mut buf, frame)
            .map_err(|e| PyValueError::new_err(e.to_string()))?;
        Ok(PyBytes::new(py, &buf))
    }
}
