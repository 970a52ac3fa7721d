//! The per-request state of a WSGI response and its common path, native: the
//! base class of `surge.wsgi.cycle.WsgiCycle` (see that module for the theory
//! of operation), and `WsgiWakeups`, which hands cycles back to the loop.
//!
//! Why native: in Python the cycle cost about a dozen frames per request
//! (`__init__` setting ~30 attributes, `_start_response`, `_send`, `_finish`,
//! the wake-up's `add` and `_run`, `_wake`, `begin`), each taking a
//! `threading.Lock` for the state shared by the app's thread and the loop.
//! Here the state is one Rust struct, and the GIL is the lock: the methods
//! below run no Python code while they hold a borrow of it (every call out —
//! an `Event`, `call_soon_threadsafe`, the protocol's `writer_done` — comes
//! after the borrow is dropped), so each is atomic for the other thread. The
//! response's bytes (head, framed chunks) are gathered in one buffer and
//! written into the connection's batched transport without a bytes object.
//! The rare paths (a file to sendfile, waiting for room or for the transport,
//! a body to read away, errors) stay in Python, over the helpers below.

use pyo3::exceptions::{PyAssertionError, PyRuntimeError, PyTypeError};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{IntoPyDict, PyByteArray, PyBytes, PyDict, PyMemoryView};
use pyo3::{PyTraverseError, PyVisit};

use super::batch::BatchedTransport;
use super::connection::HttpConnection;
use super::request::Request;
use super::wsgi::{encode_head, Head, FRAMING_CHUNKED, FRAMING_LENGTH, FRAMING_NONE};

pyo3::create_exception!(
    _core,
    WsgiGone,
    pyo3::exceptions::PyException,
    "The client of a WSGI response left: the app's iteration stops (internal)."
);

/// One WSGI request's response, shared by the app's thread and the loop.
#[pyclass(module = "surge._core", subclass)]
pub struct WsgiCycle {
    #[pyo3(get)]
    _app: PyObject,
    #[pyo3(get)]
    _environ: Py<PyDict>,
    /// The `HttpProtocol`, its native `HttpConnection` and its (batched) transport.
    #[pyo3(get)]
    _conn: PyObject,
    native: Py<HttpConnection>,
    transport: PyObject,
    #[pyo3(get)]
    _request: Py<Request>,
    /// The request's `BodyStream`, or None when its body had all arrived.
    #[pyo3(get)]
    _stream: PyObject,
    #[pyo3(get)]
    _wakeups: Py<WsgiWakeups>,
    http10: bool,
    head_only: bool,
    keep_alive: bool,
    high_water: usize,
    // The response, as the thread builds it.
    /// The status code once `start_response` was called, else 0.
    status: u16,
    head: Vec<u8>,
    #[pyo3(get)]
    _head_sent: bool,
    framing: u8,
    remaining: u64,
    /// The head allows the connection to stay open after this response.
    reuse: bool,
    /// Body bytes sent, for the access log.
    sent: u64,
    // Shared with the loop.
    /// Framed bytes not yet written.
    queue: Vec<u8>,
    notified: bool,
    done: bool,
    /// The response is cut short: close after what was sent.
    failed: bool,
    /// Complete, but not framed for keep-alive.
    closing: bool,
    gone: bool,
    /// A `threading.Event` the thread waits on while a high-water mark's worth is queued.
    gate: Option<PyObject>,
    /// A file for the loop to sendfile: (file, offset, count, bytes after it).
    #[pyo3(get)]
    _file: Option<PyObject>,
    /// Set once the file is sent, or will never be.
    file_sent: Option<PyObject>,
    // The loop's own.
    /// Its turn has come: the loop writes from `_wake`, without a task.
    #[pyo3(get, set)]
    _pumping: bool,
    /// `_on_lost` is registered on the connection's `lost()` future.
    #[pyo3(get, set)]
    _watching: bool,
    /// The future `write` waits on for the thread's next batch.
    #[pyo3(get, set)]
    _wakeup: Option<PyObject>,
}

/// The bytes before a file's part, its count, and the bytes after it.
type FileFrame<'py> = (Bound<'py, PyBytes>, u64, Bound<'py, PyBytes>);

/// What a thread-side method asks of its caller once the borrow is dropped.
struct After {
    notify: bool,
    wait: Option<PyObject>,
}

impl WsgiCycle {
    /// The server's own answer to a request whose body broke its rules (over
    /// the limit, bad chunk framing: `wsgi.input` raised), in place of the
    /// app's: frameworks turn that error into their own 500 (Flask does). The
    /// whole answer is the "head", framed as bodiless, so the app's body is
    /// dropped, and the connection closes after it (as h11 and nginx).
    fn refusal(slf: &Bound<'_, Self>) -> PyResult<Head> {
        let py = slf.py();
        let this = slf.borrow();
        let error = this._conn.bind(py).getattr(intern!(py, "_stream_error"))?;
        let (status, message): (u16, String) = if error.is_none() {
            (400, "request body ended early".into())
        } else {
            (
                error.getattr(intern!(py, "status"))?.extract()?,
                error.getattr(intern!(py, "message"))?.extract()?,
            )
        };
        let answer = this
            .native
            .borrow(py)
            .render_error(py, status, &message, None, true, None);
        Ok(Head {
            bytes: answer.as_bytes().to_vec(),
            framing: FRAMING_NONE,
            length: 0,
            keep_alive: false,
            status,
        })
    }

    /// Queues framed bytes (from the thread); blocks while a high-water mark's
    /// worth waits. `frame` turns the state into the bytes to queue.
    fn queue_out(
        slf: &Bound<'_, Self>,
        room_for: usize,
        frame: impl FnOnce(&mut Self),
    ) -> PyResult<()> {
        let py = slf.py();
        // An Event is made (Python code: the other thread may run meanwhile)
        // before the state is touched, when this write may reach the mark.
        let event_type = {
            let this = slf.borrow();
            (this.queue.len() + room_for >= this.high_water)
                .then(|| this._wakeups.borrow(py).event_type.clone_ref(py))
        };
        // (Called with no borrow held: the loop's thread may run in the call.)
        let event = match event_type {
            Some(t) => Some(t.call0(py)?),
            None => None,
        };
        let after = {
            let mut this = slf.borrow_mut();
            if this.gone {
                return Err(WsgiGone::new_err(()));
            }
            frame(&mut this);
            let wait = if this.queue.len() >= this.high_water {
                this.gate = event.as_ref().map(|e| e.clone_ref(py));
                event
            } else {
                None
            };
            After {
                notify: !std::mem::replace(&mut this.notified, true),
                wait,
            }
        };
        Self::after(slf, after)
    }

    fn after(slf: &Bound<'_, Self>, after: After) -> PyResult<()> {
        let py = slf.py();
        if after.notify {
            let wakeups = slf.borrow()._wakeups.clone_ref(py);
            WsgiWakeups::add(wakeups.bind(py), slf)?;
        }
        if let Some(gate) = after.wait {
            gate.call_method0(py, intern!(py, "wait"))?;
            if slf.borrow().gone {
                return Err(WsgiGone::new_err(()));
            }
        }
        Ok(())
    }

    fn reusable(&self) -> bool {
        self.reuse && self.keep_alive && !(self.failed || self.closing)
    }

    /// The loop's side of a wake-up: the common case (complete, its turn, no
    /// file) here; the rest in Python (`_wake_slow`).
    fn wake(slf: &Bound<'_, Self>) -> PyResult<()> {
        let py = slf.py();
        let (last, queue, done) = {
            let mut this = slf.borrow_mut();
            this.notified = false;
            let done = this.done;
            let last = done && this._pumping && this._file.is_none();
            let queue = if last {
                std::mem::take(&mut this.queue)
            } else {
                Vec::new()
            };
            (last, queue, done)
        };
        if !last {
            return slf
                .call_method1(intern!(py, "_wake_slow"), (done,))
                .map(drop);
        }
        let (conn, transport, reusable, body_left, watching) = {
            let this = slf.borrow();
            let body_left = !this._stream.is_none(py) && !this._request.borrow(py).eof;
            (
                this._conn.clone_ref(py),
                this.transport.clone_ref(py),
                this.reusable(),
                body_left,
                this._watching,
            )
        };
        let conn = conn.bind(py);
        Self::write_to(conn, transport.bind(py), &queue)?;
        if reusable && body_left {
            // The rest of the body is to be read away first: `_pump` hands that on.
            return slf
                .call_method1(intern!(py, "_wake_slow"), (true,))
                .map(drop);
        }
        slf.borrow_mut()._pumping = false;
        if watching {
            slf.call_method0(intern!(py, "_unwatch"))?;
        }
        conn.call_method1(intern!(py, "writer_done"), (reusable,))?;
        Ok(())
    }

    /// `HttpProtocol.write`: dropped once the connection is closed.
    fn write_to(
        conn: &Bound<'_, PyAny>,
        transport: &Bound<'_, PyAny>,
        data: &[u8],
    ) -> PyResult<()> {
        let py = conn.py();
        if data.is_empty() || conn.getattr(intern!(py, "_closed"))?.is_truthy()? {
            return Ok(());
        }
        match transport.downcast::<BatchedTransport>() {
            Ok(batched) => BatchedTransport::write_bytes(batched, data),
            Err(_) => transport
                .call_method1(intern!(py, "write"), (PyBytes::new(py, data),))
                .map(drop),
        }
    }

    fn log_error(py: Python<'_>, message: &str) -> PyResult<()> {
        py.import("logging")?
            .call_method1("getLogger", ("surge.wsgi",))?
            .call_method1("error", (message,))?;
        Ok(())
    }
}

#[pymethods]
impl WsgiCycle {
    /// The cycle of `request` (on the `HttpProtocol` `conn`) for the WSGI
    /// callable `app` with `environ`; `stream` is the request's `BodyStream`,
    /// or None when its body has all arrived; `high_water` bounds the bytes
    /// queued and not written (the thread waits beyond it).
    #[new]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        app: PyObject,
        environ: Py<PyDict>,
        request: Py<Request>,
        stream: PyObject,
        conn: &Bound<'_, PyAny>,
        wakeups: Py<WsgiWakeups>,
        high_water: usize,
    ) -> PyResult<Self> {
        let native = conn
            .getattr(intern!(py, "_conn"))?
            .downcast_into::<HttpConnection>()?
            .unbind();
        let transport = conn.getattr(intern!(py, "_transport"))?.unbind();
        let (http10, head_only, keep_alive) = {
            let r = request.borrow(py);
            (
                r.head.version == surge_proto::http1::common::Version::Http10,
                r.head.method() == b"HEAD",
                r.head.keep_alive,
            )
        };
        Ok(WsgiCycle {
            _app: app,
            _environ: environ,
            _conn: conn.clone().unbind(),
            native,
            transport,
            _request: request,
            _stream: stream,
            _wakeups: wakeups,
            http10,
            head_only,
            keep_alive,
            high_water,
            status: 0,
            head: Vec::new(),
            _head_sent: false,
            framing: FRAMING_NONE,
            remaining: 0,
            reuse: false,
            sent: 0,
            queue: Vec::new(),
            notified: false,
            done: false,
            failed: false,
            closing: false,
            gone: false,
            gate: None,
            _file: None,
            file_sent: None,
            _pumping: false,
            _watching: false,
            _wakeup: None,
        })
    }

    // The thread's side -------------------------------------------------------

    /// PEP 3333's start_response: checks and encodes the head; returns the
    /// `write` callable (`_send`).
    #[pyo3(signature = (status, headers, exc_info=None))]
    fn start_response<'py>(
        slf: &Bound<'py, Self>,
        status: &Bound<'py, PyAny>,
        headers: &Bound<'py, PyAny>,
        exc_info: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let py = slf.py();
        match exc_info {
            Some(info) if !info.is_none() => {
                if slf.borrow()._head_sent {
                    let value = info.get_item(1)?;
                    let value = value.call_method1("with_traceback", (info.get_item(2)?,))?;
                    return Err(PyErr::from_value(value));
                }
            }
            _ => {
                if slf.borrow().status != 0 {
                    return Err(PyAssertionError::new_err(
                        "start_response() called again without exc_info",
                    ));
                }
            }
        }
        let (head_only, http10, keep_alive, ours, refused) = {
            let this = slf.borrow();
            let native = this.native.borrow(py);
            // The server shutting down: this response is the connection's last.
            let keep_alive = this.keep_alive && !native.draining;
            let refused = this._request.borrow(py).truncated;
            let ours = native.ours.clone_ref(py);
            (this.head_only, this.http10, keep_alive, ours, refused)
        };
        let head = if refused {
            Self::refusal(slf)?
        } else {
            encode_head(status, headers, head_only, http10, keep_alive, ours.get())?
        };
        {
            let mut this = slf.borrow_mut();
            this.head = head.bytes;
            this.framing = head.framing;
            this.remaining = head.length;
            this.reuse = head.keep_alive;
            this.status = head.status;
        }
        slf.getattr(intern!(py, "_send"))
    }

    /// The `write` callable, and each chunk of the iterable: framed and queued.
    fn _send(slf: &Bound<'_, Self>, data: &Bound<'_, PyAny>) -> PyResult<()> {
        let py = slf.py();
        if slf.borrow().status == 0 {
            return Err(PyAssertionError::new_err(
                "response body sent before start_response()",
            ));
        }
        let converted;
        let data = match data.downcast_exact::<PyBytes>() {
            Ok(b) => b,
            Err(_) => {
                if !(data.is_instance_of::<PyByteArray>() || data.is_instance_of::<PyMemoryView>())
                {
                    return Err(PyTypeError::new_err(format!(
                        "WSGI response chunks must be bytes, got {}",
                        data.get_type().name()?
                    )));
                }
                converted = py.get_type::<PyBytes>().call1((data,))?;
                converted.downcast::<PyBytes>()?
            }
        };
        let data = data.as_bytes();
        let room_for = {
            let this = slf.borrow();
            if data.is_empty() || (this.framing == FRAMING_NONE && this._head_sent) {
                return Ok(()); // nothing to queue (a HEAD response's body is not sent)
            }
            data.len() + this.head.len() + 20
        };
        Self::queue_out(slf, room_for, |this| {
            this.queue.reserve(room_for);
            if !this._head_sent {
                this._head_sent = true;
                this.queue.extend_from_slice(&this.head);
            }
            match this.framing {
                FRAMING_LENGTH => {
                    // More than Content-Length promised: the rest cannot be framed.
                    let n = data
                        .len()
                        .min(usize::try_from(this.remaining).unwrap_or(usize::MAX));
                    this.remaining -= n as u64;
                    this.sent += n as u64;
                    this.queue.extend_from_slice(&data[..n]);
                }
                FRAMING_CHUNKED => {
                    this.sent += data.len() as u64;
                    this.queue
                        .extend_from_slice(format!("{:x}\r\n", data.len()).as_bytes());
                    this.queue.extend_from_slice(data);
                    this.queue.extend_from_slice(b"\r\n");
                }
                FRAMING_NONE => {}
                _ => {
                    this.sent += data.len() as u64;
                    this.queue.extend_from_slice(data);
                }
            }
        })
    }

    /// Queues `data` as it is (already framed); blocks while a high-water
    /// mark's worth waits.
    fn _put(slf: &Bound<'_, Self>, data: &[u8]) -> PyResult<()> {
        Self::queue_out(slf, data.len(), |this| this.queue.extend_from_slice(data))
    }

    /// The app's iterable is exhausted: the last bytes, the access log, done.
    fn _finish(slf: &Bound<'_, Self>) -> PyResult<()> {
        let py = slf.py();
        let (short, status, sent, request, conn) = {
            let mut guard = slf.borrow_mut();
            let this = &mut *guard;
            if this.status == 0 {
                return Err(PyAssertionError::new_err(
                    "the WSGI application returned without calling start_response()",
                ));
            }
            if !this._head_sent {
                this._head_sent = true;
                this.queue.extend_from_slice(&this.head);
            }
            if this.framing == FRAMING_CHUNKED {
                this.queue.extend_from_slice(b"0\r\n\r\n");
            }
            let short = this.framing == FRAMING_LENGTH && this.remaining > 0;
            if short {
                this.closing = true;
            }
            (
                short,
                this.status,
                this.sent,
                this._request.clone_ref(py),
                this._conn.clone_ref(py),
            )
        };
        if short {
            Self::log_error(
                py,
                "WSGI response shorter than its Content-Length: closing the connection",
            )?;
        }
        let access_log = conn.getattr(py, intern!(py, "access_log"))?;
        if !access_log.is_none(py) {
            let head = PyBytes::new(py, &slf.borrow().head);
            access_log.call_method1(py, intern!(py, "log"), (request, status, sent, head))?;
        }
        let after = {
            let mut this = slf.borrow_mut();
            this.done = true;
            After {
                notify: !std::mem::replace(&mut this.notified, true),
                wait: None,
            }
        };
        Self::after(slf, after)
    }

    /// Queues the last bytes and marks the response complete; `failed`: cut
    /// short (the connection closes after what was sent); `closing`: complete
    /// but the connection closes after it.
    #[pyo3(signature = (data, failed=false, closing=false))]
    fn _end(slf: &Bound<'_, Self>, data: &[u8], failed: bool, closing: bool) -> PyResult<()> {
        let after = {
            let mut this = slf.borrow_mut();
            this.queue.extend_from_slice(data);
            this.failed = failed;
            this.closing |= closing;
            this.done = true;
            After {
                notify: !std::mem::replace(&mut this.notified, true),
                wait: None,
            }
        };
        Self::after(slf, after)
    }

    /// For a `wsgi.file_wrapper` of `size` bytes left: marks the head sent and
    /// frames the file's part. None when there is no head (an app error);
    /// else (bytes to queue before the file, bytes of the file to send, bytes
    /// after it); a count of 0: nothing of the file is to be sent.
    fn _frame_file<'py>(slf: &Bound<'py, Self>, size: u64) -> PyResult<Option<FileFrame<'py>>> {
        let py = slf.py();
        let mut this = slf.borrow_mut();
        if this.status == 0 {
            return Ok(None);
        }
        let mut before = if this._head_sent {
            Vec::new()
        } else {
            this.head.clone()
        };
        this._head_sent = true;
        let empty = PyBytes::new(py, b"");
        if this.framing == FRAMING_NONE {
            return Ok(Some((PyBytes::new(py, &before), 0, empty)));
        }
        let count = if this.framing == FRAMING_LENGTH {
            let count = size.min(this.remaining);
            this.remaining -= count;
            count
        } else {
            size
        };
        this.sent += count;
        if count == 0 {
            return Ok(Some((PyBytes::new(py, &before), 0, empty)));
        }
        let tail = if this.framing == FRAMING_CHUNKED {
            before.extend_from_slice(format!("{count:x}\r\n").as_bytes());
            PyBytes::new(py, b"\r\n")
        } else {
            empty
        };
        Ok(Some((PyBytes::new(py, &before), count, tail)))
    }

    /// Hands the loop `file` (file, offset, count, tail) to send; `sent` (an
    /// Event) is set once it is sent or never will be. Raises WsgiGone.
    fn _hand_file(slf: &Bound<'_, Self>, file: PyObject, sent: PyObject) -> PyResult<()> {
        let after = {
            let mut this = slf.borrow_mut();
            if this.gone {
                return Err(WsgiGone::new_err(()));
            }
            this._file = Some(file);
            this.file_sent = Some(sent);
            After {
                notify: !std::mem::replace(&mut this.notified, true),
                wait: None,
            }
        };
        Self::after(slf, after)
    }

    /// After the file's Event was set: True when it was all sent.
    fn _file_taken(&self) -> bool {
        !self.gone && self._file.is_none()
    }

    // The loop's side ---------------------------------------------------------

    /// What is queued (None when nothing), whether the response is complete,
    /// and the file to send (or None), taken together.
    fn _take<'py>(slf: &Bound<'py, Self>) -> (Option<Bound<'py, PyBytes>>, bool, Option<PyObject>) {
        let py = slf.py();
        let mut this = slf.borrow_mut();
        let data = if this.queue.is_empty() {
            None
        } else {
            let data = PyBytes::new(py, &this.queue);
            this.queue.clear();
            Some(data)
        };
        let file = this._file.as_ref().map(|f| f.clone_ref(py));
        (data, this.done, file)
    }

    /// A thread waiting for room may go on.
    fn _open_gate(slf: &Bound<'_, Self>) -> PyResult<()> {
        let py = slf.py();
        let gate = slf.borrow_mut().gate.take();
        if let Some(gate) = gate {
            gate.call_method0(py, intern!(py, "set"))?;
        }
        Ok(())
    }

    /// Opens the gate; True when nothing is queued, complete or to send (the
    /// loop then waits for the thread's next wake-up).
    fn _idle_after_drain(slf: &Bound<'_, Self>) -> PyResult<bool> {
        Self::_open_gate(slf)?;
        let this = slf.borrow();
        Ok(this.queue.is_empty() && !this.done && this._file.is_none())
    }

    /// The file was sent: the thread goes on.
    fn _file_done(slf: &Bound<'_, Self>) -> PyResult<()> {
        let py = slf.py();
        let sent = {
            let mut this = slf.borrow_mut();
            this._file = None;
            this.file_sent.as_ref().map(|s| s.clone_ref(py))
        };
        if let Some(sent) = sent {
            sent.call_method0(py, intern!(py, "set"))?;
        }
        Ok(())
    }

    /// The client left: the thread stops at its next write (or wait).
    #[pyo3(signature = (_lost=None))]
    fn _on_lost(slf: &Bound<'_, Self>, _lost: Option<&Bound<'_, PyAny>>) -> PyResult<()> {
        let py = slf.py();
        let sent = {
            let mut this = slf.borrow_mut();
            this.gone = true;
            this.file_sent.as_ref().map(|s| s.clone_ref(py))
        };
        Self::_open_gate(slf)?;
        if let Some(sent) = sent {
            sent.call_method0(py, intern!(py, "set"))?;
        }
        Ok(())
    }

    /// Whether the connection may stay open after this (complete) response.
    fn _reusable(&self) -> bool {
        self.reusable()
    }

    /// A wake-up from the thread (see `WsgiWakeups`).
    fn _wake(slf: &Bound<'_, Self>) -> PyResult<()> {
        Self::wake(slf)
    }

    /// Its turn came (`WriterResponse.begin`): None while the app runs (the
    /// usual case); else what `_pump` returns.
    pub(crate) fn begin(slf: &Bound<'_, Self>, _conn: &Bound<'_, PyAny>) -> PyResult<PyObject> {
        let py = slf.py();
        {
            let mut this = slf.borrow_mut();
            this._pumping = true;
            // Should the thread queue something right after, its wake-up
            // (pending, or to come) runs `_wake`, which pumps it.
            if this.queue.is_empty() && !this.done && this._file.is_none() {
                return Ok(py.None());
            }
        }
        Ok(slf.call_method0(intern!(py, "_pump"))?.unbind())
    }

    fn __traverse__(&self, visit: PyVisit<'_>) -> Result<(), PyTraverseError> {
        visit.call(&self._app)?;
        visit.call(&self._environ)?;
        visit.call(&self._conn)?;
        visit.call(&self.native)?;
        visit.call(&self.transport)?;
        visit.call(&self._request)?;
        visit.call(&self._stream)?;
        visit.call(&self._wakeups)?;
        for obj in [&self.gate, &self._file, &self.file_sent, &self._wakeup]
            .into_iter()
            .flatten()
        {
            visit.call(obj)?;
        }
        Ok(())
    }

    fn __clear__(&mut self) {
        self.gate = None;
        self._file = None;
        self.file_sent = None;
        self._wakeup = None;
    }
}

/// Cycles ready for the loop's attention, handed over with batched pokes: a
/// thread adds its cycle and pokes the loop (`call_soon_threadsafe`) only if
/// no poke is pending, so cycles finishing while the loop is busy share one.
#[pyclass(module = "surge._core")]
pub struct WsgiWakeups {
    /// The event loop served.
    #[pyo3(get, name = "loop")]
    loop_: PyObject,
    /// `threading.Event`, for the gates.
    event_type: PyObject,
    ready: Vec<Py<WsgiCycle>>,
    pending: bool,
}

impl WsgiWakeups {
    /// From a thread: `cycle`'s `_wake` runs soon on the loop.
    fn add(slf: &Bound<'_, Self>, cycle: &Bound<'_, WsgiCycle>) -> PyResult<()> {
        let py = slf.py();
        let event_loop = {
            let mut this = slf.borrow_mut();
            this.ready.push(cycle.clone().unbind());
            if std::mem::replace(&mut this.pending, true) {
                // The pending `_run` takes it (it clears the flag before it looks).
                return Ok(());
            }
            this.loop_.clone_ref(py)
        };
        let run = slf.getattr(intern!(py, "_run"))?;
        match event_loop.call_method1(py, intern!(py, "call_soon_threadsafe"), (run,)) {
            Ok(_) => Ok(()),
            Err(e) if e.is_instance_of::<PyRuntimeError>(py) => {
                // The loop is closed: nobody is left to write.
                let ready = {
                    let mut this = slf.borrow_mut();
                    this.pending = false;
                    std::mem::take(&mut this.ready)
                };
                for c in ready {
                    WsgiCycle::_on_lost(c.bind(py), None)?;
                }
                Ok(())
            }
            Err(e) => Err(e),
        }
    }
}

#[pymethods]
impl WsgiWakeups {
    #[new]
    fn new(py: Python<'_>, event_loop: PyObject) -> PyResult<Self> {
        Ok(WsgiWakeups {
            loop_: event_loop,
            event_type: py.import("threading")?.getattr("Event")?.unbind(),
            ready: Vec::new(),
            pending: false,
        })
    }

    /// On the loop: each ready cycle's `_wake`.
    fn _run(slf: &Bound<'_, Self>) -> PyResult<()> {
        let py = slf.py();
        let ready = {
            let mut this = slf.borrow_mut();
            this.pending = false;
            std::mem::take(&mut this.ready)
        };
        for cycle in ready {
            if let Err(e) = WsgiCycle::wake(cycle.bind(py)) {
                // One cycle's bug must not strand the others.
                let kwargs = [("exc_info", e.into_value(py))].into_py_dict(py)?;
                py.import("logging")?
                    .call_method1("getLogger", ("surge.wsgi",))?
                    .call_method(
                        "error",
                        ("internal error while writing a WSGI response",),
                        Some(&kwargs),
                    )?;
            }
        }
        Ok(())
    }

    fn __traverse__(&self, visit: PyVisit<'_>) -> Result<(), PyTraverseError> {
        visit.call(&self.loop_)?;
        for c in &self.ready {
            visit.call(c)?;
        }
        Ok(())
    }

    fn __clear__(&mut self) {
        self.ready.clear();
    }
}
