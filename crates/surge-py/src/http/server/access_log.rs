//! The access log: one line per response, in gunicorn's format atoms or JSON,
//! formatted on the event loop's thread and written by a thread of its own.
//!
//! Written natively because it runs once per request on the fast path, where
//! the response never becomes a Python object: the line is formatted straight
//! from the parsed head and the encoded response, appended to a bounded
//! buffer under an uncontended mutex, and a writer thread drains the buffer to
//! the file descriptor (blocking writes are fine there: the loop never waits
//! for them). The writer is woken at most once per `FLUSH_INTERVAL`, so the
//! loop pays one futex wake per batch, not per line. When the sink stalls (a
//! full pipe, a slow disk), the buffer fills up to its capacity and further
//! lines are dropped and counted (`dropped`): memory stays bounded and the
//! server never waits for its log.

use std::fs::File;
use std::io::Write;
use std::os::fd::{BorrowedFd, RawFd};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use pyo3::exceptions::{PyOSError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyString, PyTuple};
use surge_proto::http1::server::RequestHead;

use super::log_format::{
    basic_user, compile, escape_into, head_status, json_opt, json_string, parse_response, protocol,
    push_decimal_seconds, push_int, response_header, Atom, Wanted, JSON_AUTHORIZATION,
    JSON_REFERER, JSON_REQUEST_ID, JSON_USER_AGENT,
};
use super::request::{percent_decode_bytes, Request};

/// Bytes of formatted lines kept while the writer thread catches up; past it
/// lines are dropped (and counted).
pub const DEFAULT_BUFFER: usize = 1 << 20;
/// How long the writer thread lets lines gather before writing them.
const FLUSH_INTERVAL: Duration = Duration::from_millis(10);
/// gunicorn's default `access_log_format`.
pub const DEFAULT_FORMAT: &str = r#"%(h)s %(l)s %(u)s %(t)s "%(r)s" %(s)s %(b)s "%(f)s" "%(a)s""#;

/// What a line is made of.
struct Entry<'a, 'py> {
    /// None for a request that could not be parsed (its atoms are logged as `-`).
    head: Option<&'a RequestHead>,
    client: Option<&'a Bound<'py, PyAny>>,
    status: u16,
    sent: u64,
    /// The encoded response head (status line to the empty line), when known.
    response_head: &'a [u8],
    elapsed: Duration,
}

struct State {
    buf: Vec<u8>,
    dropped: u64,
    /// The writer was told there is something to write and has not taken it yet.
    woken: bool,
    closed: bool,
    /// The writer thread has exited.
    finished: bool,
    /// Kept under the same lock as `buf`: a line takes one lock, not two.
    clock: Clock,
}

struct Shared {
    state: Mutex<State>,
    wake: Condvar,
    /// Signalled by the writer thread as it exits.
    done: Condvar,
}

/// The per-second time stamp, formatted by Python's `time.strftime` (local
/// time with its offset, as gunicorn writes it).
struct Clock {
    /// The wall clock is derived from the monotonic reading each batch of
    /// lines takes anyway (one clock read per batch, not two), re-anchored
    /// every `REANCHOR` so that a wall clock step shows within seconds.
    anchor: Instant,
    anchor_wall: Duration,
    second: u64,
    text: Vec<u8>,
}

const REANCHOR: Duration = Duration::from_secs(10);

fn wall_now() -> Duration {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or(Duration::ZERO)
}

impl Clock {
    fn wall_secs(&mut self, now: Instant) -> u64 {
        match now.checked_duration_since(self.anchor) {
            Some(d) if d < REANCHOR => (self.anchor_wall + d).as_secs(),
            _ => {
                self.anchor = Instant::now();
                self.anchor_wall = wall_now();
                self.anchor_wall.as_secs()
            }
        }
    }
}

/// A running access log (see the module docstring). Made in each worker,
/// after the fork: its writer thread does not survive one.
#[pyclass(module = "surge._core", frozen, weakref)]
pub struct AccessLog {
    atoms: Vec<Atom>,
    wanted: Wanted,
    json: bool,
    /// The lines carry a time stamp (`%(t)s`, or JSON's "time").
    uses_time: bool,
    pid: Vec<u8>,
    capacity: usize,
    shared: Arc<Shared>,
    writer: Mutex<Option<JoinHandle<()>>>,
}

fn writer_loop(shared: Arc<Shared>, file: File) {
    write_batches(&shared, file);
    let mut s = shared.state.lock().unwrap_or_else(|e| e.into_inner());
    s.finished = true;
    shared.done.notify_all();
}

fn write_batches(shared: &Shared, mut file: File) {
    let mut out = Vec::new();
    loop {
        {
            let mut s = shared.state.lock().unwrap_or_else(|e| e.into_inner());
            while s.buf.is_empty() && !s.closed {
                s = shared.wake.wait(s).unwrap_or_else(|e| e.into_inner());
            }
            if s.buf.is_empty() {
                return; // closed and flushed
            }
            if !s.closed {
                // Let the batch grow: one write for what FLUSH_INTERVAL brings.
                drop(s);
                std::thread::sleep(FLUSH_INTERVAL);
                s = shared.state.lock().unwrap_or_else(|e| e.into_inner());
            }
            std::mem::swap(&mut s.buf, &mut out);
            s.woken = false;
        }
        // A failing sink (closed pipe, full disk) loses these lines; the server
        // goes on, as it would with its log gone.
        let _ = file.write_all(&out);
        out.clear();
    }
}

impl AccessLog {
    /// Writes the client's host (the first item of its address) to `out`;
    /// false when there is none (a Unix socket peer).
    fn write_host(client: Option<&Bound<'_, PyAny>>, out: &mut Vec<u8>, json: bool) -> bool {
        let Some(client) = client else {
            return false;
        };
        let write = |host: &Bound<'_, PyAny>, out: &mut Vec<u8>| {
            let Ok(host) = host.downcast::<PyString>() else {
                return false;
            };
            match host.to_str() {
                Ok(h) if !h.is_empty() => {
                    if json {
                        json_string(out, h.as_bytes());
                    } else {
                        escape_into(out, h.as_bytes());
                    }
                    true
                }
                _ => false,
            }
        };
        match client.downcast::<PyTuple>() {
            Ok(t) => match t.get_borrowed_item(0) {
                Ok(h) => write(&h, out),
                Err(_) => false,
            },
            Err(_) => write(client, out),
        }
    }

    /// The time stamp for `now`, formatted again only when the second changed.
    /// Python is called with no lock held (it may let another thread run,
    /// which may log).
    fn stamp<'s>(
        &'s self,
        py: Python<'_>,
        mut s: MutexGuard<'s, State>,
        now: Instant,
    ) -> MutexGuard<'s, State> {
        let secs = s.clock.wall_secs(now);
        if s.clock.second == secs && !s.clock.text.is_empty() {
            return s;
        }
        drop(s);
        let fmt = if self.json {
            "%Y-%m-%dT%H:%M:%S%z"
        } else {
            "[%d/%b/%Y:%H:%M:%S %z]"
        };
        let text = py
            .import("time")
            .and_then(|t| {
                let local = t.call_method1("localtime", (secs,))?;
                t.call_method1("strftime", (fmt, local))?
                    .extract::<String>()
            })
            .unwrap_or_else(|_| "-".to_owned());
        let mut s = self.shared.state.lock().unwrap_or_else(|e| e.into_inner());
        s.clock.second = secs;
        s.clock.text = text.into_bytes();
        s
    }

    fn format_json(&self, e: &Entry<'_, '_>, time: &[u8], out: &mut Vec<u8>) {
        let head = e.head;
        let found = self.wanted.find(head);
        let header = |slot| self.wanted.value(head, &found, slot);
        out.extend_from_slice(b"{\"time\":\"");
        out.extend_from_slice(time);
        out.extend_from_slice(b"\",\"client\":");
        if !Self::write_host(e.client, out, true) {
            out.extend_from_slice(b"null");
        }
        out.extend_from_slice(b",\"user\":");
        json_opt(
            out,
            header(JSON_AUTHORIZATION).and_then(basic_user).as_deref(),
        );
        out.extend_from_slice(b",\"method\":");
        json_opt(out, head.map(RequestHead::method));
        out.extend_from_slice(b",\"target\":");
        json_opt(out, head.map(RequestHead::target));
        out.extend_from_slice(b",\"protocol\":");
        json_opt(out, head.map(protocol));
        out.extend_from_slice(b",\"status\":");
        push_int(out, e.status);
        out.extend_from_slice(b",\"bytes\":");
        push_int(out, e.sent);
        out.extend_from_slice(b",\"duration_us\":");
        push_int(out, e.elapsed.as_micros() as u64);
        out.extend_from_slice(b",\"referer\":");
        json_opt(out, header(JSON_REFERER));
        out.extend_from_slice(b",\"user_agent\":");
        json_opt(out, header(JSON_USER_AGENT));
        out.extend_from_slice(b",\"request_id\":");
        json_opt(out, header(JSON_REQUEST_ID));
        out.extend_from_slice(b",\"pid\":");
        out.extend_from_slice(&self.pid);
        out.extend_from_slice(b"}\n");
    }

    fn format_line(&self, e: &Entry<'_, '_>, time: &[u8], out: &mut Vec<u8>) {
        if self.json {
            return self.format_json(e, time, out);
        }
        let head = e.head;
        let found = self.wanted.find(head);
        let header = |slot| self.wanted.value(head, &found, slot);
        let micros = e.elapsed.as_micros() as u64;
        let or_dash = |out: &mut Vec<u8>, v: Option<&[u8]>| match v {
            Some(v) => escape_into(out, v),
            None => out.push(b'-'),
        };
        for a in &self.atoms {
            match a {
                Atom::Literal(l) => out.extend_from_slice(l),
                Atom::RemoteAddr => {
                    if !Self::write_host(e.client, out, false) {
                        out.push(b'-');
                    }
                }
                Atom::Dash => out.push(b'-'),
                Atom::User(slot) => or_dash(out, header(*slot).and_then(basic_user).as_deref()),
                Atom::Time => out.extend_from_slice(time),
                Atom::RequestLine => match head {
                    Some(head) => {
                        escape_into(out, head.method());
                        out.push(b' ');
                        escape_into(out, head.target());
                        out.push(b' ');
                        out.extend_from_slice(protocol(head));
                    }
                    None => out.push(b'-'),
                },
                Atom::Method => or_dash(out, head.map(RequestHead::method)),
                // Decoded, as gunicorn logs PATH_INFO; escaped like every atom.
                Atom::Path => match head {
                    Some(head) => escape_into(out, &percent_decode_bytes(head.path())),
                    None => out.push(b'-'),
                },
                Atom::Query => escape_into(out, head.map_or(&[][..], RequestHead::query)),
                Atom::Protocol => or_dash(out, head.map(protocol)),
                Atom::Status => push_int(out, e.status),
                Atom::BodyBytes => push_int(out, e.sent),
                Atom::Seconds => push_int(out, e.elapsed.as_secs()),
                Atom::Millis => push_int(out, micros / 1000),
                Atom::Micros => push_int(out, micros),
                Atom::DecimalSeconds => push_decimal_seconds(out, micros),
                Atom::Pid => {
                    out.push(b'<');
                    out.extend_from_slice(&self.pid);
                    out.push(b'>');
                }
                Atom::RequestHeader(slot) => or_dash(out, header(*slot)),
                Atom::ResponseHeader(name) => or_dash(out, response_header(e.response_head, name)),
            }
        }
        out.push(b'\n');
    }

    /// Opens a batch of lines stamped `now` (one clock read for the batch).
    pub(crate) fn lines<'l>(&'l self, py: Python<'_>, now: Instant) -> Lines<'l> {
        let mut s = self.shared.state.lock().unwrap_or_else(|e| e.into_inner());
        if self.uses_time && !s.closed {
            s = self.stamp(py, s, now);
        }
        Lines {
            log: self,
            state: s,
            now,
        }
    }

    /// Logs one line now.
    fn record(&self, py: Python<'_>, e: &Entry<'_, '_>, now: Instant) {
        self.lines(py, now).push(e);
    }
}

/// Lines formatted straight into the shared buffer (no copy per line), all
/// under one lock; the writer is woken, if it must be, when the batch ends.
pub struct Lines<'l> {
    log: &'l AccessLog,
    state: MutexGuard<'l, State>,
    now: Instant,
}

impl Lines<'_> {
    /// Appends `e`'s line; a line that does not fit is taken back out and
    /// counted as dropped.
    fn push(&mut self, e: &Entry<'_, '_>) {
        let s = &mut *self.state;
        if s.closed {
            s.dropped += 1;
            return;
        }
        let start = s.buf.len();
        self.log.format_line(e, &s.clock.text, &mut s.buf);
        if s.buf.len() > self.log.capacity {
            s.buf.truncate(start);
            s.dropped += 1;
        }
    }

    /// Logs a response the native side encoded: `head` is its encoded head
    /// (surge's own: `HTTP/1.x NNN ...`, to the empty line) and `sent` the
    /// bytes of body that follow it.
    pub fn encoded(&mut self, py: Python<'_>, request: &Request, head: &[u8], sent: usize) {
        let client = request.client.as_ref().map(|c| c.bind(py));
        self.push(&Entry {
            head: Some(&request.head),
            client,
            status: head_status(head),
            sent: sent as u64,
            // Without the empty line, as `parse_response` gives it.
            response_head: head.get(..head.len().saturating_sub(2)).unwrap_or(head),
            elapsed: request
                .started
                .map_or(Duration::ZERO, |t| self.now.saturating_duration_since(t)),
        });
    }
}

impl Drop for Lines<'_> {
    fn drop(&mut self) {
        let s = &mut *self.state;
        if !s.woken && !s.buf.is_empty() {
            s.woken = true;
            self.log.shared.wake.notify_one();
        }
    }
}

#[pymethods]
impl AccessLog {
    /// Logs to the file descriptor `fd` (duplicated: the caller keeps its own).
    /// `format` takes gunicorn's atoms (default: gunicorn's format); `json`
    /// writes one JSON object per line instead. At most `buffer` bytes of lines
    /// wait for the writer thread; more are dropped and counted.
    #[new]
    #[pyo3(signature = (fd, format=None, json=false, buffer=DEFAULT_BUFFER))]
    fn new(fd: RawFd, format: Option<&str>, json: bool, buffer: usize) -> PyResult<Self> {
        if fd < 0 {
            return Err(PyValueError::new_err("fd must be a file descriptor (>= 0)"));
        }
        if buffer == 0 {
            return Err(PyValueError::new_err("buffer must be > 0"));
        }
        let mut wanted = Wanted::default();
        let atoms = compile(format.unwrap_or(DEFAULT_FORMAT), &mut wanted)?;
        let uses_time = json || atoms.iter().any(|a| matches!(a, Atom::Time));
        if json {
            // The slots JSON_REFERER.. name, in their order.
            wanted = Wanted::default();
            for name in [
                &b"referer"[..],
                b"user-agent",
                b"x-request-id",
                b"authorization",
            ] {
                wanted.slot(name);
            }
        }
        // SAFETY: `fd` is only borrowed for the duration of the dup below; an
        // invalid descriptor makes the dup fail with EBADF, which is returned.
        let owned = unsafe { BorrowedFd::borrow_raw(fd) }
            .try_clone_to_owned()
            .map_err(|e| PyOSError::new_err(format!("access log: cannot use fd {fd}: {e}")))?;
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                buf: Vec::new(),
                dropped: 0,
                woken: false,
                closed: false,
                finished: false,
                clock: Clock {
                    anchor: Instant::now(),
                    anchor_wall: wall_now(),
                    second: 0,
                    text: Vec::new(),
                },
            }),
            wake: Condvar::new(),
            done: Condvar::new(),
        });
        let file = File::from(owned);
        let thread_shared = Arc::clone(&shared);
        let handle = std::thread::Builder::new()
            .name("surge-access-log".into())
            .spawn(move || writer_loop(thread_shared, file))
            .map_err(|e| PyOSError::new_err(format!("access log: no writer thread: {e}")))?;
        Ok(AccessLog {
            atoms,
            wanted,
            json,
            uses_time,
            pid: std::process::id().to_string().into_bytes(),
            capacity: buffer,
            shared,
            writer: Mutex::new(Some(handle)),
        })
    }

    /// Logs a response rendered whole (`data`: the bytes written for it).
    fn log_rendered(&self, py: Python<'_>, request: &Bound<'_, Request>, data: &[u8]) {
        let (status, sent, response_head) = parse_response(data);
        let r = request.borrow();
        let now = Instant::now();
        self.record(
            py,
            &Entry {
                head: Some(&r.head),
                client: r.client.as_ref().map(|c| c.bind(py)),
                status,
                sent,
                response_head,
                elapsed: r
                    .started
                    .map_or(Duration::ZERO, |t| now.saturating_duration_since(t)),
            },
            now,
        );
    }

    /// Logs the answer `data` (head and body) to bytes that could not be parsed
    /// as a request (a 400, 413, 431, ...) from `client`: the request's atoms
    /// are `-`, as nginx logs such a line.
    fn log_unparsed(&self, py: Python<'_>, client: Option<&Bound<'_, PyAny>>, data: &[u8]) {
        let (status, sent, response_head) = parse_response(data);
        let now = Instant::now();
        self.record(
            py,
            &Entry {
                head: None,
                client,
                status,
                sent,
                response_head,
                elapsed: Duration::ZERO,
            },
            now,
        );
    }

    /// Logs a streamed response: its `status`, the body bytes `sent` and, for
    /// `%({name})o` atoms, its encoded head.
    #[pyo3(signature = (request, status, sent, head=None))]
    fn log(
        &self,
        py: Python<'_>,
        request: &Bound<'_, Request>,
        status: u16,
        sent: u64,
        head: Option<&Bound<'_, PyBytes>>,
    ) {
        let now = Instant::now();
        let r = request.borrow();
        let client = r.client.as_ref().map(|c| c.bind(py));
        self.record(
            py,
            &Entry {
                head: Some(&r.head),
                client,
                status,
                sent,
                response_head: head.map_or(&[][..], |h| h.as_bytes()),
                elapsed: r
                    .started
                    .map_or(Duration::ZERO, |t| now.saturating_duration_since(t)),
            },
            now,
        );
    }

    /// Lines dropped because the buffer was full (the sink too slow) or closed.
    #[getter]
    fn dropped(&self) -> u64 {
        self.shared
            .state
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .dropped
    }

    /// Writes what is buffered and stops the writer thread, waiting at most
    /// `timeout` seconds for it (a sink that stays stalled must not keep a
    /// worker from exiting); later lines are dropped. True if all was written.
    #[pyo3(signature = (timeout=2.0))]
    fn close(&self, py: Python<'_>, timeout: f64) -> bool {
        {
            let mut s = self.shared.state.lock().unwrap_or_else(|e| e.into_inner());
            s.closed = true;
        }
        self.shared.wake.notify_one();
        let handle = self.writer.lock().unwrap_or_else(|e| e.into_inner()).take();
        let wait = Duration::from_secs_f64(if timeout.is_finite() {
            timeout.clamp(0.0, 3600.0)
        } else {
            3600.0
        });
        let shared = Arc::clone(&self.shared);
        let finished = py.allow_threads(move || {
            let s = shared.state.lock().unwrap_or_else(|e| e.into_inner());
            let (s, _) = shared
                .done
                .wait_timeout_while(s, wait, |s| !s.finished)
                .unwrap_or_else(|e| e.into_inner());
            s.finished
        });
        if finished {
            if let Some(h) = handle {
                let _ = h.join();
            }
        }
        // Else the thread stays blocked in its write, detached.
        finished
    }
}
