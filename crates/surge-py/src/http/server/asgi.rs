//! The native half of one ASGI HTTP request/response cycle (`surge.asgi.cycle`).
//!
//! An ASGI app calls `receive()` and `send(message)` a few times per request;
//! as Python coroutines each call costs a frame, a coroutine object and the
//! message handling in bytecode, which measured as most of the server's own
//! Python time per request on a hello-world app. Here they are native and
//! return awaitables that complete without suspending whenever they can: the
//! body had arrived whole (`receive`), the response head is only encoded
//! (`http.response.start`), or the body goes straight to the transport with no
//! write back-pressure (`http.response.body`). Only when they must wait (a body
//! still streaming in, a high-water mark's worth kept before the response's
//! turn, a transport over its mark, a file to send) do they hand over to the
//! Python methods of the subclass `surge.asgi.cycle.HttpCycle`, which also owns
//! the connection's side (`begin`/`write`) and the app's task.
//!
//! The head is encoded and checked here (status line, `date` and `server`
//! unless the app gave them, the framing: content-length, chunked, HEAD,
//! 1xx/204/304, HTTP/1.0 close-delimited, `connection`) and held back to leave
//! with the first body bytes in one write.

use pyo3::exceptions::{PyKeyError, PyRuntimeError, PyTypeError};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::sync::GILOnceCell;
use pyo3::types::{PyByteArray, PyBytes, PyDict, PyList, PyString, PyTuple};
use surge_proto::http1::common::Version;
use surge_proto::http1::server::write_status_line;

use super::asgi_head;
use super::batch::BatchedTransport;
use super::connection::HttpConnection;
use super::ready::{done, ready_error, ready_value};
use super::request::Request;

static CLIENT_DISCONNECTED: GILOnceCell<PyObject> = GILOnceCell::new();
/// The whole body's `http.request` message; `receive` returns copies.
static REQUEST_MESSAGE: GILOnceCell<Py<PyDict>> = GILOnceCell::new();

/// How the response body is framed, chosen at `http.response.start`.
const NONE: u8 = 0;
const LENGTH: u8 = 1;
const CHUNKED: u8 = 2;
const UNTIL_CLOSE: u8 = 3;

/// Bytes a header name may not hold (RFC 9110 token), as a table: checked for
/// every byte of every response header name (a `contains` over the delimiters
/// cost a memchr call per byte, ~1.7k instructions per hello response).
static BAD_NAME_BYTE: [bool; 256] = {
    let mut table = [false; 256];
    let mut b = 0;
    while b < 256 {
        table[b] = b <= b' ' as usize || b >= 0x7f;
        b += 1;
    }
    let delimiters = b"()<>@,;:\\\"/[]?={}";
    let mut i = 0;
    while i < delimiters.len() {
        table[delimiters[i] as usize] = true;
        i += 1;
    }
    table
};

fn bad_name_byte(b: u8) -> bool {
    BAD_NAME_BYTE[b as usize]
}

/// Whether `bad` holds for a byte of `bytes`. Without an early exit: every
/// header name and value of every response is checked and is almost never
/// bad, and the branch-free loop is cheaper (~20 instructions less per header
/// of a hello response than `iter().any`, callgrind).
fn any_byte(bytes: &[u8], bad: impl Fn(u8) -> bool) -> bool {
    bytes.iter().fold(false, |found, &b| found | bad(b))
}

fn client_disconnected(py: Python<'_>) -> PyErr {
    match CLIENT_DISCONNECTED.get_or_try_init(py, || {
        Ok::<_, PyErr>(
            py.import("surge.http.errors")?
                .getattr("ClientDisconnected")?
                .unbind(),
        )
    }) {
        Ok(cls) => match cls.call1(py, ("the client went away",)) {
            Ok(exc) => PyErr::from_value(exc.into_bound(py)),
            Err(e) => e,
        },
        Err(e) => e,
    }
}

/// What every cycle of one connection takes from it, looked up once per
/// connection by the dispatcher (four attribute lookups per request otherwise),
/// and what the dispatcher's read path asks of the connection.
#[pyclass(module = "surge._core", frozen)]
pub struct ConnParts {
    pub(crate) native: Py<HttpConnection>,
    transport: PyObject,
    raw_transport: PyObject,
    access_log: Option<PyObject>,
    /// The connection's event loop and its `Server` (for `closing`).
    pub(crate) event_loop: PyObject,
    pub(crate) server: PyObject,
}

impl ConnParts {
    /// The parts of `conn` (an `HttpProtocol`).
    pub(crate) fn of(conn: &Bound<'_, PyAny>) -> PyResult<Self> {
        let py = conn.py();
        let native = conn
            .getattr(intern!(py, "_conn"))?
            .downcast_into::<HttpConnection>()?
            .unbind();
        let transport = conn.getattr(intern!(py, "_transport"))?;
        let raw_transport = match transport.getattr(intern!(py, "transport")) {
            Ok(raw) => raw.unbind(),
            Err(_) => transport.clone().unbind(),
        };
        let access_log = Some(conn.getattr(intern!(py, "access_log"))?)
            .filter(|l| !l.is_none())
            .map(Bound::unbind);
        Ok(ConnParts {
            native,
            transport: transport.unbind(),
            raw_transport,
            access_log,
            event_loop: conn.getattr(intern!(py, "_loop"))?.unbind(),
            server: conn.getattr(intern!(py, "_server"))?.unbind(),
        })
    }
}

#[pymethods]
impl ConnParts {
    fn __traverse__(&self, visit: pyo3::PyVisit<'_>) -> Result<(), pyo3::PyTraverseError> {
        visit.call(&self.native)?;
        visit.call(&self.transport)?;
        visit.call(&self.raw_transport)?;
        if let Some(l) = &self.access_log {
            visit.call(l)?;
        }
        visit.call(&self.event_loop)?;
        visit.call(&self.server)?;
        Ok(())
    }
}

/// The state of one cycle; see the module docs. Fields the Python subclass
/// reads or changes on its slow paths are exposed under their Python names.
#[pyclass(module = "surge._core", subclass)]
pub struct AsgiCycle {
    #[pyo3(get, name = "_request")]
    request: Py<Request>,
    #[pyo3(get, name = "_conn")]
    conn: PyObject,
    /// The connection's native parts, shared by its cycles (one reference
    /// rather than four to take and drop per request).
    parts: Py<ConnParts>,
    #[pyo3(get, name = "_stream")]
    stream: Option<PyObject>,
    #[pyo3(get, name = "_high_water")]
    high_water: usize,
    http10: bool,
    head_only: bool,
    #[pyo3(get, set, name = "_keep_alive")]
    keep_alive: bool,
    #[pyo3(get, set, name = "_started")]
    started: bool,
    #[pyo3(get, set, name = "_complete")]
    complete: bool,
    /// The response cannot be framed for keep-alive.
    #[pyo3(get, set, name = "_closing")]
    closing: bool,
    #[pyo3(get, set)]
    failed: bool,
    #[pyo3(get, set, name = "_body_done")]
    body_done: bool,
    /// Its turn came: writes go straight to the transport.
    #[pyo3(get, set, name = "_active")]
    active: bool,
    /// The connection waits for `writer_done`.
    #[pyo3(get, set, name = "_waiting")]
    waiting: bool,
    #[pyo3(get, set, name = "_receiving")]
    receiving: bool,
    #[pyo3(get, set, name = "_framing")]
    framing: u8,
    #[pyo3(get, set, name = "_remaining")]
    remaining: i64,
    /// The encoded head, held back until the first body bytes.
    head: Option<Vec<u8>>,
    /// For the access log: status, body bytes sent and the head.
    #[pyo3(get, name = "_sent_head")]
    sent_head: Option<Py<PyBytes>>,
    #[pyo3(get, set, name = "_status")]
    status: u16,
    #[pyo3(get, name = "_sent")]
    sent: u64,
    /// What the app sent before its turn.
    pending: Vec<u8>,
    #[pyo3(get, set, name = "_space")]
    space: Option<PyObject>,
    #[pyo3(get, set, name = "_writer")]
    writer: Option<PyObject>,
    #[pyo3(get, set, name = "_gone")]
    gone: Option<PyObject>,
    #[pyo3(get, set, name = "_task")]
    task: Option<PyObject>,
    /// The app's first step runs in the dispatcher's call, on a connection it
    /// saw open: no I/O can happen before the step ends (nothing it sends is
    /// written before `begin`), so `send` need not ask whether the client left
    /// (two attribute lookups and a call per message).
    open_step: bool,
}

/// What a response header is, for framing.
#[derive(PartialEq, Clone, Copy)]
enum Kind {
    Other,
    Length,
    TransferEncoding,
    Connection,
    Server,
    Date,
}

fn kind_of(name: &[u8]) -> Kind {
    let is = |n: &[u8]| name.eq_ignore_ascii_case(n);
    match name.len() {
        14 if is(b"content-length") => Kind::Length,
        17 if is(b"transfer-encoding") => Kind::TransferEncoding,
        10 if is(b"connection") => Kind::Connection,
        6 if is(b"server") => Kind::Server,
        4 if is(b"date") => Kind::Date,
        _ => Kind::Other,
    }
}

/// The bytes of a header name or value or a body chunk (bytes, bytearray or
/// anything `bytes()` takes), appended to `out` by `f`.
fn with_bytes<R>(obj: &Bound<'_, PyAny>, f: impl FnOnce(&[u8]) -> R) -> PyResult<R> {
    if let Ok(b) = obj.downcast::<PyBytes>() {
        Ok(f(b.as_bytes()))
    } else if let Ok(b) = obj.downcast::<PyByteArray>() {
        Ok(f(&b.to_vec()))
    } else if obj.is_instance_of::<PyString>() {
        Err(PyTypeError::new_err(format!(
            "ASGI wants bytes here, got str {obj:?}"
        )))
    } else {
        let b = obj.py().get_type::<PyBytes>().call1((obj,))?;
        Ok(f(b.downcast::<PyBytes>()?.as_bytes()))
    }
}

fn parse_length(value: &[u8]) -> Option<i64> {
    let v = value.trim_ascii();
    if v.is_empty() || v.len() > 18 || !v.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(v).ok()?.parse().ok()
}

impl AsgiCycle {
    /// The app sent its whole response (or it failed).
    pub(crate) fn is_complete(&self) -> bool {
        self.complete
    }

    /// The app's first step starts (true) or ends (false) on a connection seen
    /// open (see `open_step`).
    pub(crate) fn set_open_step(&mut self, open: bool) {
        self.open_step = open;
    }

    /// The cycle `new` makes (the dispatcher makes its subclass's instances
    /// from it without a Python call).
    pub(crate) fn create(
        py: Python<'_>,
        request: Bound<'_, Request>,
        stream: Option<PyObject>,
        conn: Bound<'_, PyAny>,
        high_water: usize,
        parts: Option<&Bound<'_, ConnParts>>,
    ) -> PyResult<Self> {
        let (http10, head_only, keep_alive) = {
            let r = request.borrow();
            (
                r.head.version == Version::Http10,
                r.head.method() == b"HEAD",
                r.head.keep_alive,
            )
        };
        let parts = match parts {
            Some(p) => p.clone().unbind(),
            None => Py::new(py, ConnParts::of(&conn)?)?,
        };
        Ok(AsgiCycle {
            request: request.unbind(),
            conn: conn.unbind(),
            parts,
            stream: stream.filter(|s| !s.is_none(py)),
            high_water,
            http10,
            head_only,
            keep_alive,
            started: false,
            complete: false,
            closing: false,
            failed: false,
            body_done: false,
            active: false,
            waiting: false,
            receiving: false,
            framing: NONE,
            remaining: 0,
            head: None,
            sent_head: None,
            status: 0,
            sent: 0,
            pending: Vec::new(),
            space: None,
            writer: None,
            gone: None,
            task: None,
            open_step: false,
        })
    }

    /// `begin`; `open`: the caller has just seen the connection open (its
    /// `_closed` is not asked again).
    pub(crate) fn begin_open(
        slf: &Bound<'_, Self>,
        conn: &Bound<'_, PyAny>,
        open: bool,
    ) -> PyResult<Option<bool>> {
        let py = slf.py();
        let (pending, space, transport) = {
            let mut this = slf.borrow_mut();
            this.active = true;
            let pending = if this.pending.is_empty() {
                None
            } else {
                Some(std::mem::take(&mut this.pending))
            };
            (
                pending,
                this.space.as_ref().map(|s| s.clone_ref(py)),
                // Bound, not a `Py` clone: released with a plain decref.
                this.parts.get().transport.bind(py).clone(),
            )
        };
        if let Some(data) = pending {
            if open || !conn.getattr(intern!(py, "_closed"))?.is_truthy()? {
                write_to(&transport, &data)?;
            }
        }
        if let Some(space) = space {
            resolve(py, &space)?;
        }
        let keep_alive = {
            let mut this = slf.borrow_mut();
            if !this.complete {
                this.waiting = true;
                return Ok(None);
            }
            if this.failed || this.closing || !this.keep_alive {
                Some(false)
            } else if this.stream.is_none() || this.request.borrow(py).eof {
                Some(true)
            } else {
                None
            }
        };
        match keep_alive {
            Some(k) => Ok(Some(k)),
            // The body was not all read: Python's side decides (and may read it away).
            None => {
                let k = slf.call_method0(intern!(py, "_keep_alive_after"))?;
                Ok(if k.is_none() {
                    None
                } else {
                    Some(k.is_truthy()?)
                })
            }
        }
    }

    /// Encodes the head of `http.response.start` into `self.head`.
    fn start(&mut self, py: Python<'_>, message: &Bound<'_, PyAny>) -> PyResult<()> {
        let status = match message.downcast::<PyDict>() {
            Ok(d) => d
                .get_item(intern!(py, "status"))?
                .ok_or_else(|| PyKeyError::new_err("status"))?,
            Err(_) => message.get_item(intern!(py, "status"))?,
        };
        let status = match status.extract::<u16>() {
            Ok(s)
                if (100..=999).contains(&s) && !status.is_instance_of::<pyo3::types::PyBool>() =>
            {
                s
            }
            _ => {
                return Err(PyRuntimeError::new_err(format!(
                    "invalid HTTP status {status:?}"
                )))
            }
        };
        let ours = {
            let native = self.parts.get().native.borrow(py);
            if native.draining {
                // The server is shutting down: this is the last response.
                self.keep_alive = false;
            }
            native.ours.clone_ref(py)
        };
        let ours = ours.get();
        let mut head = Vec::with_capacity(256);
        write_status_line(&mut head, status);
        // The server's own headers go in first and come out again in the rare
        // case the app gave its own (inserting them after the app's headers
        // cost a splice and a second buffer, ~1k instructions per response).
        let ours_at = ours.write(&mut head);
        let mut length: Option<i64> = None;
        let (mut app_chunked, mut has_connection) = (false, false);
        let mut replaced = 0u64;
        let headers = match message.downcast::<PyDict>() {
            Ok(d) => d.get_item(intern!(py, "headers"))?,
            Err(_) => Some(message.call_method1(intern!(py, "get"), (intern!(py, "headers"),))?),
        };
        if let Some(headers) = headers.filter(|h| !h.is_none()) {
            let list = headers.downcast_exact::<PyList>().ok();
            if let Some(learnt) = list.and_then(|l| asgi_head::lookup(l, &mut head, ours.serial)) {
                length = learnt.length;
                replaced = learnt.replaced;
            } else {
                // Whether the headers may be cached (see `asgi_head`): exact
                // tuples of exact bytes, none whose effect depends on the request.
                let mut cacheable = list.is_some();
                let lines_at = head.len();
                let mut spans = Vec::new();
                let mut one = |name: &Bound<'_, PyAny>,
                               value: &Bound<'_, PyAny>|
                 -> PyResult<bool> {
                    let exact = name.is_exact_instance_of::<PyBytes>()
                        && value.is_exact_instance_of::<PyBytes>();
                    with_bytes(name, |n| -> PyResult<bool> {
                        if n.is_empty() || any_byte(n, bad_name_byte) {
                            return Err(PyRuntimeError::new_err(format!(
                                "invalid HTTP header name {:?}",
                                String::from_utf8_lossy(n)
                            )));
                        }
                        with_bytes(value, |v| -> PyResult<bool> {
                            if any_byte(v, |b| b == b'\r' || b == b'\n' || b == 0) {
                                return Err(PyRuntimeError::new_err(format!(
                                    "invalid HTTP header value for {:?}",
                                    String::from_utf8_lossy(n)
                                )));
                            }
                            let mut skip = false;
                            let kind = kind_of(n);
                            match kind {
                                Kind::Other => replaced |= ours.which_known(n, false),
                                Kind::Length => match parse_length(v) {
                                    Some(l) => length = Some(l),
                                    None => {
                                        return Err(PyRuntimeError::new_err(format!(
                                            "invalid content-length {:?}",
                                            String::from_utf8_lossy(v)
                                        )))
                                    }
                                },
                                Kind::TransferEncoding => {
                                    if !v.to_ascii_lowercase().windows(7).any(|w| w == b"chunked") {
                                        return Err(PyRuntimeError::new_err(format!(
                                            "unsupported transfer-encoding {:?}",
                                            String::from_utf8_lossy(v)
                                        )));
                                    }
                                    app_chunked = true;
                                    // An HTTP/1.0 client cannot read chunks: close-delimited.
                                    skip = self.http10;
                                }
                                Kind::Connection => {
                                    has_connection = true;
                                    if v.eq_ignore_ascii_case(b"close") {
                                        self.keep_alive = false;
                                    }
                                }
                                Kind::Server | Kind::Date => replaced |= ours.which_known(n, true),
                            }
                            if !skip {
                                let name = head.len() - lines_at;
                                head.extend_from_slice(n);
                                head.extend_from_slice(b": ");
                                let value = head.len() - lines_at;
                                head.extend_from_slice(v);
                                let end = head.len() - lines_at;
                                head.extend_from_slice(b"\r\n");
                                spans.push(asgi_head::Span { name, value, end });
                            }
                            Ok(exact && kind != Kind::TransferEncoding && kind != Kind::Connection)
                        })?
                    })?
                };
                let mut each = |pair: Bound<'_, PyAny>| -> PyResult<bool> {
                    // The usual (name, value) tuple without a generic item lookup each.
                    match pair.downcast::<PyTuple>() {
                        Ok(t) if t.len() == 2 => {
                            let (name, value) = (t.get_borrowed_item(0)?, t.get_borrowed_item(1)?);
                            Ok(one(&name, &value)? && pair.is_exact_instance_of::<PyTuple>())
                        }
                        _ => one(&pair.get_item(0)?, &pair.get_item(1)?).map(|_| false),
                    }
                };
                if let Ok(list) = headers.downcast::<PyList>() {
                    // The usual list by index: no iterator object per response. (Its
                    // length is read each time: `bytes()` of an odd item runs Python.)
                    let mut i = 0;
                    while i < list.len() {
                        cacheable &= each(list.get_item(i)?)?;
                        i += 1;
                    }
                } else {
                    for pair in headers.try_iter()? {
                        each(pair?)?;
                    }
                }
                if let (Some(list), true) = (list, cacheable) {
                    let learnt = asgi_head::Learnt { length, replaced };
                    asgi_head::remember(list, &head[lines_at..], &spans, learnt, ours.serial);
                }
            }
        }
        if replaced != 0 {
            ours.remove(&mut head, ours_at, replaced);
        }
        if self.head_only || status < 200 || status == 204 || status == 304 {
            self.framing = NONE;
        } else if let (Some(l), false) = (length, app_chunked) {
            self.framing = LENGTH;
            self.remaining = l;
        } else if !self.http10 {
            self.framing = CHUNKED;
            if !app_chunked {
                head.extend_from_slice(b"transfer-encoding: chunked\r\n");
            }
        } else {
            self.framing = UNTIL_CLOSE;
            self.keep_alive = false;
        }
        if !has_connection {
            if !self.keep_alive {
                head.extend_from_slice(b"connection: close\r\n");
            } else if self.http10 {
                head.extend_from_slice(b"connection: keep-alive\r\n");
            }
        }
        head.extend_from_slice(b"\r\n");
        if self.parts.get().access_log.is_some() {
            self.sent_head = Some(PyBytes::new(py, &head).unbind());
        }
        self.head = Some(head);
        self.status = status;
        // Only now: a head that failed its checks left nothing, so the app's
        // error still gets an honest 500.
        self.started = true;
        Ok(())
    }

    /// Frames one body chunk; returns the bytes to write (head included once).
    fn frame(&mut self, body: &[u8], more: bool) -> PyResult<Vec<u8>> {
        let mut data = self.head.take().unwrap_or_default();
        match self.framing {
            CHUNKED => {
                if !body.is_empty() {
                    data.extend_from_slice(format!("{:x}\r\n", body.len()).as_bytes());
                    data.extend_from_slice(body);
                    data.extend_from_slice(b"\r\n");
                }
                if !more {
                    data.extend_from_slice(b"0\r\n\r\n");
                }
            }
            LENGTH => {
                self.remaining -= body.len() as i64;
                if self.remaining < 0 {
                    return Err(PyRuntimeError::new_err(
                        "response content longer than its content-length",
                    ));
                }
                data.extend_from_slice(body);
            }
            UNTIL_CLOSE => data.extend_from_slice(body),
            _ => {}
        }
        if self.framing != NONE {
            self.sent += body.len() as u64;
        }
        Ok(data)
    }
}

/// Writes `data` to the connection's transport: straight into its write batch
/// (`BatchedTransport`, no Python call) when it has one, as it does for ASGI.
fn write_to(transport: &Bound<'_, PyAny>, data: &[u8]) -> PyResult<()> {
    match transport.downcast::<BatchedTransport>() {
        Ok(batched) => BatchedTransport::write_bytes(batched, data),
        Err(_) => {
            let py = transport.py();
            transport.call_method1(intern!(py, "write"), (PyBytes::new(py, data),))?;
            Ok(())
        }
    }
}

/// Resolves `future` with None unless it is done.
fn resolve(py: Python<'_>, future: &PyObject) -> PyResult<()> {
    let f = future.bind(py);
    if !f.call_method0(intern!(py, "done"))?.is_truthy()? {
        f.call_method1(intern!(py, "set_result"), (py.None(),))?;
    }
    Ok(())
}

/// `http.response.body`: frames and writes (or keeps) the chunk; the
/// awaitable to return, None when it completes at once.
fn body(
    slf: &Bound<'_, AsgiCycle>,
    message: &Bound<'_, PyAny>,
    dict: Option<&Bound<'_, PyDict>>,
) -> PyResult<Option<PyObject>> {
    let py = slf.py();
    let (chunk, more) = match dict {
        Some(d) => (
            d.get_item(intern!(py, "body"))?,
            d.get_item(intern!(py, "more_body"))?,
        ),
        None => (
            Some(message.call_method1(intern!(py, "get"), (intern!(py, "body"),))?),
            Some(message.call_method1(intern!(py, "get"), (intern!(py, "more_body"),))?),
        ),
    };
    let more = match more {
        Some(m) => m.is_truthy()?,
        None => false,
    };
    let mut this = slf.borrow_mut();
    let data = match chunk {
        Some(c) if !c.is_none() => with_bytes(&c, |b| this.frame(b, more))??,
        _ => this.frame(b"", more)?,
    };
    let mut log = None;
    let mut short = false;
    if !more {
        this.complete = true;
        log = this
            .parts
            .get()
            .access_log
            .as_ref()
            .map(|l| l.bind(py).clone());
        if this.framing == LENGTH && this.remaining > 0 {
            // Shorter than its content-length: only closing tells the client.
            this.closing = true;
            short = true;
        }
    }
    let active = this.active;
    let mut write = None;
    if !data.is_empty() {
        if active {
            write = Some(data);
        } else if this.pending.is_empty() {
            this.pending = data; // the usual whole response: kept as it is, no copy
        } else {
            this.pending.extend_from_slice(&data);
        }
    }
    let over = this.pending.len() >= this.high_water;
    // Bound, not `Py` clones: released with a plain decref.
    let (conn, transport) = (
        this.conn.bind(py).clone(),
        this.parts.get().transport.bind(py).clone(),
    );
    let gone = if more { None } else { this.gone.take() };
    let logged = log.as_ref().map(|_| {
        (
            this.request.clone_ref(py),
            this.status,
            this.sent,
            this.sent_head.as_ref().map(|h| h.clone_ref(py)),
        )
    });
    drop(this);
    if let Some(data) = write {
        if !conn.getattr(intern!(py, "_closed"))?.is_truthy()? {
            write_to(&transport, &data)?;
        }
    }
    if let (Some(log), Some(args)) = (log, logged) {
        log.call_method1(intern!(py, "log"), args)?;
    }
    if short {
        slf.call_method0(intern!(py, "_log_short"))?;
    }
    if !more {
        if let Some(g) = gone {
            resolve(py, &g)?;
        }
        wake_writer(slf)?;
        return Ok(None);
    }
    if active {
        // Write back-pressure: wait only when the transport is over its mark.
        if conn.getattr(intern!(py, "_paused_writing"))?.is_truthy()?
            || conn.getattr(intern!(py, "closed"))?.is_truthy()?
        {
            return Ok(Some(conn.call_method0(intern!(py, "drain"))?.unbind()));
        }
        return Ok(None);
    }
    if over {
        // Not its turn yet and a high-water mark's worth kept: wait for it.
        return Ok(Some(slf.call_method0(intern!(py, "_wait_turn"))?.unbind()));
    }
    Ok(None)
}

/// The response is complete (or failed): tells the connection, if it waits.
fn wake_writer(slf: &Bound<'_, AsgiCycle>) -> PyResult<()> {
    let py = slf.py();
    let mut this = slf.borrow_mut();
    if this.waiting {
        this.waiting = false;
        let keep_alive = if this.failed || this.closing || !this.keep_alive {
            Some(false)
        } else if this.stream.is_none() || this.request.borrow(py).eof {
            Some(true)
        } else {
            None // the rest of the body must be read away first: Python's side
        };
        let conn = this.conn.clone_ref(py);
        drop(this);
        let keep_alive = match keep_alive {
            Some(k) => k,
            None => {
                let k = slf.call_method0(intern!(py, "_keep_alive_after"))?;
                if k.is_none() {
                    return Ok(());
                }
                k.is_truthy()?
            }
        };
        conn.call_method1(py, intern!(py, "writer_done"), (keep_alive,))?;
    } else if let Some(w) = this.writer.as_ref().map(|w| w.clone_ref(py)) {
        drop(this);
        resolve(py, &w)?;
    }
    Ok(())
}

#[pymethods]
impl AsgiCycle {
    /// The cycle of `request` on the connection `conn` (an `HttpProtocol`);
    /// `stream` is its body's `BodyStream`, None when the body had all arrived.
    /// `parts` is what the dispatcher keeps per connection (`ConnParts`), so that
    /// nothing is looked up on `conn` per request.
    #[new]
    #[pyo3(signature = (request, stream, conn, high_water, parts=None))]
    fn new(
        py: Python<'_>,
        request: Bound<'_, Request>,
        stream: Option<PyObject>,
        conn: Bound<'_, PyAny>,
        high_water: usize,
        parts: Option<Bound<'_, ConnParts>>,
    ) -> PyResult<Self> {
        Self::create(py, request, stream, conn, high_water, parts.as_ref())
    }

    /// The ASGI `receive`: the body (in one message when it had all arrived),
    /// then `http.disconnect` once the client is gone or the response is done.
    fn receive(slf: &Bound<'_, Self>) -> PyResult<PyObject> {
        let py = slf.py();
        let mut this = slf.borrow_mut();
        if this.body_done || this.complete || this.stream.is_some() {
            drop(this);
            // Waiting for body bytes or for the client to leave: Python's side.
            return Ok(slf.call_method0(intern!(py, "_receive_slow"))?.unbind());
        }
        this.body_done = true;
        let body = {
            let mut r = this.request.borrow_mut(py);
            if !r.chunks.is_empty() {
                let mut whole = Vec::with_capacity(r.chunk_bytes);
                for c in r.chunks.drain(..) {
                    whole.extend_from_slice(&c);
                }
                r.chunk_bytes = 0;
                Some(PyBytes::new(py, &whole))
            } else if r.route < 0 && !r.body.is_empty() {
                // No route framed it (an `OPTIONS *` target): the parser read it whole.
                Some(PyBytes::new(py, &r.body))
            } else {
                None // no body: the template's b"" stays
            }
        };
        drop(this);
        // A copy of one template with the body set: cheaper than a new dict and
        // three insertions.
        let message = REQUEST_MESSAGE
            .get_or_try_init(py, || -> PyResult<Py<PyDict>> {
                let m = PyDict::new(py);
                m.set_item(intern!(py, "type"), intern!(py, "http.request"))?;
                m.set_item(intern!(py, "body"), PyBytes::new(py, b""))?;
                m.set_item(intern!(py, "more_body"), false)?;
                Ok(m.unbind())
            })?
            .bind(py)
            .copy()?;
        if let Some(body) = body {
            message.set_item(intern!(py, "body"), body)?;
        }
        // Awaited without a StopIteration (see `ReadyValue`).
        ready_value(message.into_any())
    }

    /// The ASGI `send`: `http.response.start`, then `http.response.body`
    /// messages (or one `http.response.pathsend`). Errors surface when the
    /// result is awaited, as with a coroutine.
    fn send(slf: &Bound<'_, Self>, message: &Bound<'_, PyAny>) -> PyResult<PyObject> {
        let py = slf.py();
        match send(slf, message) {
            Ok(Some(awaitable)) => Ok(awaitable),
            Ok(None) => done(py),
            Err(e) => ready_error(py, e),
        }
    }

    /// `WriterResponse.begin`: the response's turn came (every earlier one has
    /// left). Writes what the app sent before, lets it write directly from now
    /// on, and returns whether the connection may stay open when the response is
    /// complete already; None when the connection must wait for `writer_done`
    /// (the app still sending, or the rest of the request body to read away).
    /// Native because an app that answered in its first step (`surge.asgi.eager`)
    /// comes here once per request.
    pub(crate) fn begin(slf: &Bound<'_, Self>, conn: &Bound<'_, PyAny>) -> PyResult<Option<bool>> {
        Self::begin_open(slf, conn, false)
    }

    /// Takes what the app sent before its turn (None when nothing).
    fn _take_pending<'py>(&mut self, py: Python<'py>) -> Option<Bound<'py, PyBytes>> {
        if self.pending.is_empty() {
            return None;
        }
        let data = PyBytes::new(py, &self.pending);
        self.pending = Vec::new();
        Some(data)
    }

    /// Replaces what is pending with `data` (an answer of the server's own).
    fn _set_pending(&mut self, data: &[u8]) {
        self.pending.clear();
        self.pending.extend_from_slice(data);
    }

    /// Bytes pending.
    #[getter]
    fn _pending_size(&self) -> usize {
        self.pending.len()
    }

    /// The head held back for the first body bytes (None once it left).
    #[getter]
    fn _head<'py>(&self, py: Python<'py>) -> Option<Bound<'py, PyBytes>> {
        self.head.as_ref().map(|h| PyBytes::new(py, h))
    }

    #[setter(_head)]
    fn set_head(&mut self, head: Option<Vec<u8>>) {
        self.head = head;
    }

    /// Marks the response complete and wakes the connection if it waits.
    fn _wake_writer(slf: &Bound<'_, Self>) -> PyResult<()> {
        wake_writer(slf)
    }
}

fn send(slf: &Bound<'_, AsgiCycle>, message: &Bound<'_, PyAny>) -> PyResult<Option<PyObject>> {
    let py = slf.py();
    let kind = match message.downcast::<PyDict>() {
        Ok(d) => d
            .get_item(intern!(py, "type"))?
            .ok_or_else(|| PyKeyError::new_err("type"))?,
        Err(_) => message.get_item(intern!(py, "type"))?,
    };
    {
        let this = slf.borrow();
        let conn = this.conn.bind(py);
        if this.failed
            || (!this.open_step
                && (conn.getattr(intern!(py, "_closed"))?.is_truthy()?
                    || this
                        .parts
                        .get()
                        .raw_transport
                        .call_method0(py, intern!(py, "is_closing"))?
                        .is_truthy(py)?))
        {
            return Err(client_disconnected(py));
        }
    }
    let dict = message.downcast::<PyDict>().ok();
    // Matched on the text: an app's "http.response.start" is rarely the interned
    // object (dots keep the compiler from interning it), and a rich comparison
    // per candidate cost ~0.5k instructions per request.
    let name = kind
        .downcast::<PyString>()
        .ok()
        .and_then(|k| k.to_str().ok());
    if name == Some("http.response.body") {
        {
            let this = slf.borrow();
            if !this.started {
                return Err(PyRuntimeError::new_err(
                    "'http.response.body' sent before 'http.response.start'",
                ));
            }
            if this.complete {
                return Err(PyRuntimeError::new_err(
                    "'http.response.body' sent after the response completed",
                ));
            }
        }
        body(slf, message, dict)
    } else if name == Some("http.response.start") {
        let mut this = slf.borrow_mut();
        if this.started {
            return Err(PyRuntimeError::new_err("'http.response.start' sent twice"));
        }
        this.start(py, message)?;
        Ok(None)
    } else if name == Some("http.response.pathsend") {
        {
            let this = slf.borrow();
            if !this.started {
                return Err(PyRuntimeError::new_err(
                    "'http.response.pathsend' sent before 'http.response.start'",
                ));
            }
            if this.complete {
                return Err(PyRuntimeError::new_err(
                    "'http.response.pathsend' sent after the response completed",
                ));
            }
        }
        let path = message.get_item(intern!(py, "path"))?;
        Ok(Some(
            slf.call_method1(intern!(py, "_pathsend"), (path,))?
                .unbind(),
        ))
    } else {
        Err(PyRuntimeError::new_err(format!(
            "unexpected ASGI message type {kind:?} for an HTTP request"
        )))
    }
}
