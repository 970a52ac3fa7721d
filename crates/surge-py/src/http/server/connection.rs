//! One server connection's native half.
//!
//! `feed()` parses every complete request in the bytes read, routes it, and
//! while nothing is queued ahead of it in Python, calls a sync handler inline
//! and encodes its result into one output buffer, written with a single
//! `transport.write` per read. Anything else (async and threaded handlers,
//! 404/405, unusual return values, raised exceptions, parse errors) is handed
//! back to Python in order, and so is every request after it in that read,
//! because responses must leave in request order.
//!
//! What one `feed()` may take on is bounded (the pipelining memory bound): the
//! caller says how many bytes of responses it may render (`room`: the write
//! high-water mark less what the transport still holds) and how many requests
//! it may hand back (`slots`). Before each new request it checks both; when one
//! runs out it stops, leaves the rest of the input in the parser (`held`), and
//! the caller feeds again (with no new bytes) once the transport has drained.
//! Without that, a client that pipelines thousands of requests for large
//! responses and never reads would have them all rendered in one call.
//!
//! A response whose body is a large shared `bytes` (`response::Body::Shared`,
//! a cached static file) is not copied into the output buffer: its place is
//! recorded (`spliced`) and the write becomes one `writelines` of the buffer's
//! pieces and those bodies, which the transport sends with one `writev`.

use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::Instant;

use bytes::{Bytes, BytesMut};
use pyo3::exceptions::PyStopIteration;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList, PyTuple};
use surge_proto::http1::common::Version;
use surge_proto::http1::server::{Event, Limits, Parser, RequestHead};

use super::access_log::AccessLog;
use super::direct;
use super::head_defaults::HeadDefaults;
use super::proxy::ProxyTrust;
use super::request::{Outcome, Request};
use super::response::{encode_result, write_head, Reply, Spliced, TEXT};
use super::router::{Kind, Match, Router};
use super::stats;
use crate::tls::TlsWriter;

/// A request the stream could not be framed past; Python answers and closes.
#[pyclass(module = "surge._core", frozen)]
pub struct ParseError {
    #[pyo3(get)]
    pub status: u16,
    #[pyo3(get)]
    pub message: &'static str,
    /// The error is in the body of a request whose handler is already
    /// streaming it: the answer belongs to that request.
    #[pyo3(get)]
    pub streaming: bool,
}

#[pymethods]
impl ParseError {
    fn __repr__(&self) -> String {
        format!("<ParseError {} {}>", self.status, self.message)
    }
}

/// A request whose body is still arriving.
struct Pending {
    request: Request,
    body: Option<Bytes>,
    body_buf: BytesMut,
}

#[pyclass(module = "surge._core")]
pub struct HttpConnection {
    parser: Parser,
    router: Py<Router>,
    /// The server's own response headers (the plan's `head_defaults`).
    pub(super) ours: Py<HeadDefaults>,
    write: PyObject,
    /// `write` when it is a TLS connection's native writer: called directly,
    /// with no `bytes` of plaintext made and no call through Python.
    tls_write: Option<Py<TlsWriter>>,
    /// The transport's `writelines`, looked up on the first spliced write.
    writelines: Option<PyObject>,
    /// The transport `write` belongs to, looked up on the first spliced write.
    transport: Option<PyObject>,
    /// The plain socket under it, for sendfile (`Some(None)`: there is none).
    socket_fd: Option<Option<RawFd>>,
    client: Option<PyObject>,
    out: Vec<u8>,
    /// Shared bodies that belong in `out` at their offsets (see the module doc).
    spliced: Spliced,
    /// Their total length.
    spliced_bytes: usize,
    pending: Option<Pending>,
    streaming: Option<Py<Request>>,
    last_active: Instant,
    head_started: Option<Instant>,
    /// While false, every request goes to Python (responses are queued there).
    #[pyo3(get, set)]
    pub(super) fast: bool,
    /// `fast` as the last `feed` began: the connection was idle then (nothing
    /// queued or being written in Python), which the ASGI dispatcher's read
    /// path (`AsgiDispatch.dispatch_read`) reads instead of asking the protocol.
    pub(super) fed_idle: bool,
    /// A request asked to close the connection, or the stream failed: input
    /// after it is ignored.
    #[pyo3(get)]
    pub(super) closing: bool,
    /// Bytes of streamed body not yet taken by the handler.
    #[pyo3(get)]
    stream_buffered: usize,
    /// A request waits for `100 Continue` that could not be sent yet.
    #[pyo3(get, set)]
    pub(super) continue_owed: bool,
    /// The last `feed` stopped on its budget with requests still in the parser:
    /// feed again (with `b""`) when there is room.
    #[pyo3(get)]
    pub(super) held: bool,
    /// The server is shutting down: every response from now on says
    /// `Connection: close` and ends the connection, so a keep-alive client
    /// learns it from the response instead of racing a close.
    #[pyo3(get, set)]
    pub(super) draining: bool,
    /// A `GET` asked to upgrade to WebSocket: nothing after its head is parsed
    /// as HTTP; the bytes are kept for the new protocol (`take_rest`).
    #[pyo3(get)]
    pub(super) upgrade: bool,
    /// Every response the fast path encodes is logged here.
    access_log: Option<Py<AccessLog>>,
    /// Responses encoded by this `feed` and not logged yet: the request, where
    /// the response starts in `out`, where its head ends, where it ends, and
    /// its bytes spliced in after them.
    to_log: Vec<(Py<Request>, usize, usize, usize, usize)>,
    /// The peer is a trusted proxy: requests' forwarding headers are read.
    proxy: Option<Py<ProxyTrust>>,
    scheme: &'static str,
}

/// A `GET` with `Upgrade: websocket` (the WebSocket side checks the rest).
fn wants_websocket(head: &RequestHead) -> bool {
    head.method() == b"GET"
        && head.header(b"upgrade").is_some_and(|v| {
            v.split(|&b| b == b',')
                .any(|t| t.trim_ascii().eq_ignore_ascii_case(b"websocket"))
        })
}

fn reply_for(head: &RequestHead) -> Reply {
    Reply {
        keep_alive: head.keep_alive,
        http10: head.version == Version::Http10,
        head_only: head.method() == b"HEAD",
    }
}

impl HttpConnection {
    /// `feed`, with what is handed back as a `Deferred`.
    pub(crate) fn feed_items<'py>(
        &mut self,
        py: Python<'py>,
        data: &[u8],
        room: i64,
        slots: i64,
    ) -> PyResult<Deferred<'py>> {
        // Negative budgets (the caller's arithmetic) mean none.
        let room = usize::try_from(room).unwrap_or(0);
        let slots = usize::try_from(slots).unwrap_or(0);
        if !data.is_empty() {
            self.last_active = Instant::now();
        }
        let mut deferred = Deferred::Nothing;
        self.held = false;
        self.fed_idle = self.fast;
        if self.upgrade && self.closing {
            // Frames of the protocol being switched to: kept, not parsed.
            self.parser.feed(data);
            return Ok(deferred);
        }
        if self.closing {
            return Ok(deferred);
        }
        self.parser.feed(data);
        loop {
            if self.parser.at_message_start()
                && (self.out.len() + self.spliced_bytes >= room || deferred.len() >= slots)
            {
                // Out of budget before a new request: it stays in the parser.
                self.held = self.parser.buffered() > 0;
                break;
            }
            match self.parser.poll() {
                Ok(None) => break,
                Ok(Some(Event::Head(head))) => self.on_head(py, head, &mut deferred)?,
                Ok(Some(Event::Data(d))) => self.on_data(py, d),
                Ok(Some(Event::End)) => {
                    if let Some(s) = self.streaming.take() {
                        let mut r = s.borrow_mut(py);
                        r.eof = true;
                        if !r.head.keep_alive {
                            self.closing = true;
                        }
                    } else if let Some(p) = self.pending.take() {
                        let mut request = p.request;
                        request.body = match p.body {
                            Some(b) => b,
                            None => p.body_buf.freeze(),
                        };
                        self.complete(py, request, &mut deferred)?;
                    }
                    if self.upgrade {
                        self.closing = true;
                    }
                    if self.closing {
                        break;
                    }
                }
                Err(e) => {
                    stats::PARSE_ERRORS.fetch_add(1, Relaxed);
                    self.closing = true;
                    self.pending = None;
                    self.continue_owed = false;
                    let streaming = self.streaming.take();
                    if let Some(s) = &streaming {
                        // The handler reading this body sees it end early
                        // (never complete: see `Request::body_whole`).
                        let mut r = s.borrow_mut(py);
                        r.eof = true;
                        r.truncated = true;
                    }
                    let err = ParseError {
                        status: e.status(),
                        message: e.message(),
                        streaming: streaming.is_some(),
                    };
                    push(py, &mut deferred, Py::new(py, err)?.into_any())?;
                    break;
                }
            }
        }
        // Held requests are complete heads waiting on the server, not a slow client.
        self.head_started = if self.parser.in_head() && !self.held {
            Some(self.head_started.unwrap_or(self.last_active))
        } else {
            None
        };
        self.flush(py)?;
        if self.closing && deferred.is_none() {
            deferred = Deferred::Many(PyList::empty(py));
        }
        if !deferred.is_none() {
            // Python answers what was deferred; nothing may be answered inline
            // (out of order) until it says the connection is idle again.
            self.fast = false;
        }
        Ok(deferred)
    }

    fn complete<'py>(
        &mut self,
        py: Python<'py>,
        request: Request,
        deferred: &mut Deferred<'py>,
    ) -> PyResult<()> {
        if !request.head.keep_alive || self.draining {
            self.closing = true;
        }
        let router = self.router.bind(py).borrow();
        let fast_route = if self.fast && deferred.is_none() && request.route >= 0 {
            let route = &router.routes[request.route as usize];
            (route.kind != Kind::Deferred).then(|| (route.handler.clone_ref(py), route.kind))
        } else {
            None
        };
        drop(router);
        let Some((handler, kind)) = fast_route else {
            return push(py, deferred, Py::new(py, request)?.into_any());
        };
        let mut reply = reply_for(&request.head);
        reply.keep_alive &= !self.draining;
        let params = request.params.as_ref().map(|p| p.clone_ref(py));
        let req = Py::new(py, request)?;
        let mut result = match params {
            None => handler.call1(py, (req.clone_ref(py),)),
            Some(p) => handler.call(py, (req.clone_ref(py),), Some(p.bind(py))),
        };
        if kind == Kind::Async {
            if let Ok(coro) = &result {
                // Run the coroutine's first step here: most handlers finish
                // without suspending, and then need no task at all.
                match coro.call_method1(py, intern!(py, "send"), (py.None(),)) {
                    Ok(yielded) => {
                        let mut r = req.borrow_mut(py);
                        r.outcome = Outcome::Suspended;
                        r.result = Some(
                            PyTuple::new(py, [coro.clone_ref(py), yielded])?
                                .into_any()
                                .unbind(),
                        );
                        drop(r);
                        return push(py, deferred, req.into_any());
                    }
                    Err(e) if e.is_instance_of::<PyStopIteration>(py) => {
                        result = e.value(py).getattr(intern!(py, "value")).map(Bound::unbind);
                    }
                    Err(e) => result = Err(e),
                }
            }
        }
        let start = self.out.len();
        let spliced_before = self.spliced.len();
        let outcome = match result {
            Ok(value) => {
                let value = value.into_bound(py);
                match encode_result(
                    py,
                    &value,
                    reply,
                    &mut self.out,
                    Some(&mut self.spliced),
                    self.ours.get(),
                ) {
                    Ok(Some(head_len)) => {
                        let extra: usize = self.spliced[spliced_before..]
                            .iter()
                            .map(|(_, b, _)| b.as_bytes(py).len())
                            .sum();
                        self.spliced_bytes += extra;
                        if self.access_log.is_some() {
                            // Logged at the end of `feed`, with one clock read
                            // for the batch (see `log_batch`).
                            self.to_log
                                .push((req, start, start + head_len, self.out.len(), extra));
                        }
                        return Ok(());
                    }
                    Ok(None) => (Outcome::Returned, value.unbind()),
                    Err(e) => (Outcome::Raised, e.into_value(py).into_any()),
                }
            }
            Err(e) => (Outcome::Raised, e.into_value(py).into_any()),
        };
        let mut r = req.borrow_mut(py);
        r.outcome = outcome.0;
        r.result = Some(outcome.1);
        drop(r);
        push(py, deferred, req.into_any())
    }

    fn on_head<'py>(
        &mut self,
        py: Python<'py>,
        head: RequestHead,
        deferred: &mut Deferred<'py>,
    ) -> PyResult<()> {
        stats::REQUESTS.fetch_add(1, Relaxed);
        let router = self.router.bind(py).borrow();
        let client = self.client.as_ref().map(|c| c.clone_ref(py));
        let (mut request, limit, stream) = match router.find(py, head.method(), head.path()) {
            Match::Found(route, id, params) => {
                let (limit, stream) = (route.body_limit, route.stream);
                let mut r = Request::new(head, id as isize, client);
                r.params = params;
                (r, limit, stream)
            }
            Match::NotFound => (
                Request::new(head, -1, client),
                self.parser.limits().max_body,
                false,
            ),
            Match::MethodNotAllowed(allowed) => {
                let names: Vec<String> = allowed
                    .iter()
                    .map(|m| String::from_utf8_lossy(m).into_owned())
                    .collect();
                let mut r = Request::new(head, -2, client);
                r.allowed = Some(names.into_pyobject(py)?.into_any().unbind());
                (r, self.parser.limits().max_body, false)
            }
        };
        drop(router);
        if self.access_log.is_some() {
            // When its bytes arrived (read once per `feed`, not per request).
            request.started = Some(self.last_active);
        }
        request.scheme = self.scheme;
        if let Some(proxy) = &self.proxy {
            let f = proxy.get().resolve(&request.head);
            if let Some((host, port)) = f.client {
                request.client = Some((host, port).into_pyobject(py)?.into_any().unbind());
                request.proxied = true;
            }
            if let Some(scheme) = f.scheme {
                // A WebSocket scheme reported for an HTTP request means its HTTP twin.
                request.scheme = match scheme {
                    "ws" => "http",
                    "wss" => "https",
                    s => s,
                };
                request.proxied = true;
            }
            request.forwarded_host = f.host;
        }
        if wants_websocket(&request.head) {
            self.upgrade = true;
        }
        self.parser.set_body_limit(limit);
        let has_body = request.head.content_length() != Some(0);
        // A declared body over the limit gets its 413 at once (the parser's next
        // step), never a 100 Continue first: the client would send it in vain.
        let fits = request.head.content_length().is_none_or(|n| n <= limit);
        if request.head.expect_continue && has_body && fits && self.parser.buffered() == 0 {
            // The client waits for this before sending the body. Only safe to
            // send when no earlier response is still owed.
            if self.fast && deferred.is_none() {
                self.out.extend_from_slice(b"HTTP/1.1 100 Continue\r\n\r\n");
            } else {
                // Python sends it once the responses owed before it are out.
                self.continue_owed = true;
            }
        }
        if !fits {
            // Never handed to the app: a streaming one (ASGI, WSGI) would read a
            // body cut at once and answer that its own way (a 400 or 500)
            // instead of the server's 413.
            return Ok(());
        }
        if stream {
            request.streaming = true;
            let req = Py::new(py, request)?;
            self.streaming = Some(req.clone_ref(py));
            push(py, deferred, req.into_any())
        } else {
            self.pending = Some(Pending {
                request,
                body: None,
                body_buf: BytesMut::new(),
            });
            Ok(())
        }
    }

    fn on_data(&mut self, py: Python<'_>, data: Bytes) {
        // The client did not wait for 100 Continue: none is owed any more.
        self.continue_owed = false;
        if let Some(s) = &self.streaming {
            let mut r = s.borrow_mut(py);
            r.chunk_bytes += data.len();
            self.stream_buffered = r.chunk_bytes;
            r.chunks.push(data);
        } else if let Some(p) = &mut self.pending {
            match p.body.take() {
                None if p.body_buf.is_empty() => p.body = Some(data),
                first => {
                    if let Some(f) = first {
                        p.body_buf.extend_from_slice(&f);
                    }
                    p.body_buf.extend_from_slice(&data);
                }
            }
        }
    }

    /// Logs the responses this `feed` encoded, as they are about to be written:
    /// one clock read stamps them all (a clock read is not free everywhere:
    /// about 0.6 us in some sandboxes, against ~20 ns on bare Linux).
    fn log_batch(&mut self, py: Python<'_>) {
        if let Some(log) = &self.access_log {
            let mut lines = log.get().lines(py, Instant::now());
            for (req, start, head_end, end, extra) in self.to_log.drain(..) {
                let (head, body) = self.out[start..end].split_at(head_end - start);
                lines.encoded(py, &req.borrow(py), head, body.len() + extra);
            }
        }
    }

    fn flush(&mut self, py: Python<'_>) -> PyResult<()> {
        if !self.to_log.is_empty() {
            self.log_batch(py);
        }
        if !self.spliced.is_empty() {
            return self.flush_spliced(py);
        }
        if !self.out.is_empty() {
            if let Some(tls) = &self.tls_write {
                let sent = tls.get().send(py, &self.out);
                self.out.clear();
                return sent;
            }
            let bytes = PyBytes::new(py, &self.out);
            self.out.clear();
            self.write.call1(py, (bytes,))?;
        }
        Ok(())
    }

    /// Writes `out` with the shared bodies in their places. Bodies backed by a
    /// file (`Response::send_file`) go out with sendfile straight to the socket
    /// (the head before each with `MSG_MORE`), when the transport holds nothing
    /// and is a plain socket: the kernel then takes the file's pages instead of
    /// copying the body from memory, which was a quarter of the CPU time of a
    /// 50 KB static file (benchmarks/files). Whatever the socket does not take
    /// at once, and everything on other transports, goes to `writelines` (one
    /// `writev` on uvloop), or to one `write` per piece on a transport without it.
    fn flush_spliced(&mut self, py: Python<'_>) -> PyResult<()> {
        let spliced = std::mem::take(&mut self.spliced);
        let out = std::mem::take(&mut self.out);
        self.spliced_bytes = 0;
        let mut pieces: Vec<Piece> = Vec::with_capacity(spliced.len() * 2 + 1);
        let mut at = 0;
        let mut files = false;
        for (offset, body, file) in spliced {
            if offset > at {
                pieces.push(Piece::Out(at, offset));
            }
            files |= file.is_some();
            pieces.push(Piece::Body(body, file));
            at = offset;
        }
        if at < out.len() {
            pieces.push(Piece::Out(at, out.len()));
        }
        let transport = self.transport(py);
        let (mut first, mut done) = (0, 0);
        if files {
            if let Some(sock) = self.direct_socket(py, transport.as_ref()) {
                (first, done) = send_direct(py, sock, &out, &pieces);
            }
        }
        let rest = PyList::empty(py);
        for (i, piece) in pieces.iter().enumerate().skip(first) {
            let skip = if i == first { done } else { 0 };
            match piece {
                Piece::Out(a, b) => rest.append(PyBytes::new(py, &out[a + skip..*b]))?,
                Piece::Body(body, _) if skip == 0 => rest.append(body.clone_ref(py))?,
                Piece::Body(body, _) => {
                    rest.append(PyBytes::new(py, &body.as_bytes(py)[skip..]))?
                }
            }
        }
        self.out = out;
        self.out.clear();
        if rest.is_empty() {
            return Ok(());
        }
        if self.writelines.is_none() {
            self.writelines = transport
                .as_ref()
                .and_then(|t| t.bind(py).getattr(intern!(py, "writelines")).ok())
                .map(Bound::unbind);
        }
        match &self.writelines {
            Some(writelines) => {
                writelines.call1(py, (rest,))?;
            }
            None => {
                for piece in rest.iter() {
                    self.write.call1(py, (piece,))?;
                }
            }
        }
        Ok(())
    }

    /// The transport `write` belongs to (looked up once).
    fn transport(&mut self, py: Python<'_>) -> Option<PyObject> {
        if self.transport.is_none() {
            self.transport = self
                .write
                .bind(py)
                .getattr(intern!(py, "__self__"))
                .ok()
                .map(Bound::unbind);
        }
        self.transport.as_ref().map(|t| t.clone_ref(py))
    }

    /// The socket to send to directly: a plain (not TLS) socket's descriptor,
    /// while the transport is open and holds nothing, so bytes written here
    /// cannot overtake its own.
    fn direct_socket(&mut self, py: Python<'_>, transport: Option<&PyObject>) -> Option<RawFd> {
        let transport = transport?.bind(py);
        if self.socket_fd.is_none() {
            self.socket_fd = Some(direct::plain_socket(transport));
        }
        let fd = self.socket_fd.flatten()?;
        let closing = transport.call_method0(intern!(py, "is_closing")).ok()?;
        let buffered = transport
            .call_method0(intern!(py, "get_write_buffer_size"))
            .ok()?;
        (!closing.is_truthy().ok()? && buffered.extract::<usize>().ok()? == 0).then_some(fd)
    }
}

/// A piece of a spliced write: a range of the output buffer, or a shared body
/// (and the file it may be sent from).
enum Piece {
    Out(usize, usize),
    Body(Py<PyBytes>, Option<Arc<OwnedFd>>),
}

/// Sends `pieces` to the socket `sock` until it takes no more: the index of
/// the first piece not sent whole, and how many of its bytes were sent. Any
/// failure (EAGAIN, a reset) stops it: the rest goes through the transport,
/// which then reports the error as it would have.
fn send_direct(py: Python<'_>, sock: RawFd, out: &[u8], pieces: &[Piece]) -> (usize, usize) {
    for (i, piece) in pieces.iter().enumerate() {
        let more = if i + 1 < pieces.len() {
            libc::MSG_MORE
        } else {
            0
        };
        let flags = direct::FLAGS | more;
        let (len, sent) = match piece {
            Piece::Out(a, b) => (b - a, direct::send_bytes(sock, &out[*a..*b], flags)),
            Piece::Body(body, None) => {
                let data = body.as_bytes(py);
                (data.len(), direct::send_bytes(sock, data, flags))
            }
            Piece::Body(body, Some(file)) => {
                let len = body.as_bytes(py).len();
                let mut offset: libc::off_t = 0;
                let mut sent = 0;
                while sent < len {
                    // SAFETY: both descriptors are open (the file's is owned by
                    // `file`, the socket's by the transport, which is open and
                    // idle); `offset` is a valid pointer for the call.
                    let n =
                        unsafe { libc::sendfile(sock, file.as_raw_fd(), &mut offset, len - sent) };
                    if n <= 0 {
                        break; // EAGAIN, an error, or the file shrank: the rest from memory
                    }
                    sent += n as usize;
                }
                (len, sent)
            }
        };
        if sent < len {
            return (i, sent);
        }
    }
    (pieces.len(), 0)
}

fn push<'py>(py: Python<'py>, deferred: &mut Deferred<'py>, item: PyObject) -> PyResult<()> {
    deferred.push(item.into_bound(py))
}

/// What one `feed` hands back to Python, in order: requests, and a trailing
/// `ParseError`. A read usually brings one request, kept as it is here: a
/// list is made only for two or more, or for Python's `feed` (the ASGI
/// reader takes the one request without a list, ~0.3k instructions less per
/// request).
pub(crate) enum Deferred<'py> {
    Nothing,
    One(Bound<'py, PyAny>),
    Many(Bound<'py, PyList>),
}

impl<'py> Deferred<'py> {
    /// Nothing was handed back.
    pub(crate) fn is_none(&self) -> bool {
        matches!(self, Deferred::Nothing)
    }

    fn len(&self) -> usize {
        match self {
            Deferred::Nothing => 0,
            Deferred::One(_) => 1,
            Deferred::Many(list) => list.len(),
        }
    }

    fn push(&mut self, item: Bound<'py, PyAny>) -> PyResult<()> {
        match std::mem::replace(self, Deferred::Nothing) {
            Deferred::Nothing => *self = Deferred::One(item),
            Deferred::One(first) => {
                *self = Deferred::Many(PyList::new(item.py(), [first, item])?);
            }
            Deferred::Many(list) => {
                list.append(item)?;
                *self = Deferred::Many(list);
            }
        }
        Ok(())
    }

    /// As `feed` returns it: None for nothing, else a list.
    pub(crate) fn into_list(self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyList>>> {
        Ok(match self {
            Deferred::Nothing => None,
            Deferred::One(item) => Some(PyList::new(py, [item])?),
            Deferred::Many(list) => Some(list),
        })
    }
}

impl Drop for HttpConnection {
    fn drop(&mut self) {
        stats::CONNECTIONS_CLOSED.fetch_add(1, Relaxed);
    }
}

#[pymethods]
impl HttpConnection {
    /// `write` is the transport's write method; `client` the peer address.
    #[new]
    #[pyo3(signature = (router, write, client=None, max_request_line=None, max_header_line=None, max_headers=None, max_head=None, max_body=None, access_log=None, proxy=None, scheme="http", head_defaults=None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        router: Py<Router>,
        write: PyObject,
        client: Option<PyObject>,
        max_request_line: Option<usize>,
        max_header_line: Option<usize>,
        max_headers: Option<usize>,
        max_head: Option<usize>,
        max_body: Option<u64>,
        access_log: Option<Py<AccessLog>>,
        proxy: Option<Py<ProxyTrust>>,
        scheme: &str,
        head_defaults: Option<Py<HeadDefaults>>,
    ) -> PyResult<Self> {
        let d = Limits::default();
        let limits = Limits {
            max_request_line: max_request_line.unwrap_or(d.max_request_line),
            max_header_line: max_header_line.unwrap_or(d.max_header_line),
            max_headers: max_headers.unwrap_or(d.max_headers),
            max_head: max_head.unwrap_or(d.max_head),
            max_body: max_body.unwrap_or(d.max_body),
            max_chunk_line: d.max_chunk_line,
        };
        stats::CONNECTIONS_OPENED.fetch_add(1, Relaxed);
        // Trust is decided once per connection, by its peer.
        let proxy = proxy.filter(|p| {
            let host = client
                .as_ref()
                .and_then(|c| c.bind(py).get_item(0).ok())
                .and_then(|h| h.extract::<String>().ok())
                .or_else(|| client.as_ref().and_then(|c| c.extract::<String>(py).ok()));
            // A Unix socket peer has no address: trusted only with `*`.
            p.get().trusts(&host.unwrap_or_default())
        });
        let tls_write = write
            .bind(py)
            .downcast::<TlsWriter>()
            .ok()
            .map(|w| w.clone().unbind());
        let ours = match head_defaults {
            Some(ours) => ours,
            None => Py::new(py, HeadDefaults::standard())?,
        };
        Ok(HttpConnection {
            parser: Parser::new(limits),
            router,
            ours,
            write,
            tls_write,
            writelines: None,
            transport: None,
            socket_fd: None,
            client,
            out: Vec::with_capacity(16 * 1024),
            spliced: Vec::new(),
            spliced_bytes: 0,
            pending: None,
            streaming: None,
            last_active: Instant::now(),
            head_started: None,
            fast: true,
            fed_idle: true,
            closing: false,
            stream_buffered: 0,
            continue_owed: false,
            held: false,
            draining: false,
            upgrade: false,
            access_log,
            to_log: Vec::new(),
            proxy,
            scheme: if scheme == "https" { "https" } else { "http" },
        })
    }

    /// Handles received bytes. Returns None when every request was answered
    /// (the answers are already written), else the list of requests (and a
    /// trailing `ParseError`) that Python must answer, in order. No new request
    /// is begun once `room` bytes of responses are rendered or `slots` requests
    /// are handed back (see `held`); the first one always may, if both are > 0.
    #[pyo3(signature = (data, room=i64::MAX, slots=i64::MAX))]
    pub(crate) fn feed<'py>(
        &mut self,
        py: Python<'py>,
        data: &[u8],
        room: i64,
        slots: i64,
    ) -> PyResult<Option<Bound<'py, PyList>>> {
        self.feed_items(py, data, room, slots)?.into_list(py)
    }

    /// Encodes a handler's return value for Python's slow path: bytes, or None
    /// when the value's type is not one the native encoder knows.
    fn render<'py>(
        &self,
        py: Python<'py>,
        request: &Bound<'py, Request>,
        value: &Bound<'py, PyAny>,
    ) -> PyResult<Option<Bound<'py, PyBytes>>> {
        let mut reply = reply_for(&request.borrow().head);
        reply.keep_alive &= !self.draining;
        let mut out = Vec::with_capacity(256);
        if encode_result(py, value, reply, &mut out, None, self.ours.get())?.is_some() {
            Ok(Some(PyBytes::new(py, &out)))
        } else {
            Ok(None)
        }
    }

    /// A plain-text error response; `close` forces `Connection: close`.
    #[pyo3(signature = (status, message, request=None, close=false, headers=None))]
    pub(super) fn render_error<'py>(
        &self,
        py: Python<'py>,
        status: u16,
        message: &str,
        request: Option<&Bound<'py, Request>>,
        close: bool,
        headers: Option<Vec<(String, String)>>,
    ) -> Bound<'py, PyBytes> {
        let mut reply = match request {
            Some(r) => reply_for(&r.borrow().head),
            None => Reply {
                keep_alive: false,
                http10: false,
                head_only: false,
            },
        };
        reply.keep_alive &= !close && !self.draining;
        let mut out = Vec::with_capacity(256);
        let headers = headers.unwrap_or_default();
        let body = message.as_bytes();
        write_head(
            &mut out,
            status,
            Some(TEXT),
            &headers,
            Some(body.len()),
            reply,
            self.ours.get(),
        );
        if !reply.head_only {
            out.extend_from_slice(body);
        }
        PyBytes::new(py, &out)
    }

    /// Seconds since bytes last arrived.
    fn idle_for(&self) -> f64 {
        self.last_active.elapsed().as_secs_f64()
    }

    /// Seconds since a still-incomplete request head began, 0 when none is.
    fn head_for(&self) -> f64 {
        self.head_started.map_or(0.0, |t| t.elapsed().as_secs_f64())
    }

    /// True when no request is partly received.
    #[getter]
    fn idle(&self) -> bool {
        self.parser.is_idle() && self.pending.is_none() && self.streaming.is_none()
    }

    /// Restarts the idle and header clocks (after the server itself paused
    /// reading, so that time does not count against the client).
    fn touch(&mut self) {
        self.last_active = Instant::now();
        if self.head_started.is_some() {
            self.head_started = Some(self.last_active);
        }
    }

    /// The bytes read after an upgrade request's head (see `upgrade`).
    fn take_rest<'py>(&mut self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &self.parser.take_buffered())
    }

    /// Called by a streaming body's reader after taking chunks.
    fn stream_drained(&mut self) {
        self.stream_buffered = 0;
    }
}
