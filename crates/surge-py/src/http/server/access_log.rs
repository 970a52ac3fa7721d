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
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use base64::Engine;
use pyo3::exceptions::{PyOSError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyString, PyTuple};
use surge_proto::http1::common::Version;
use surge_proto::http1::server::RequestHead;

use super::request::{percent_decode_bytes, Request};

/// Bytes of formatted lines kept while the writer thread catches up; past it
/// lines are dropped (and counted).
pub const DEFAULT_BUFFER: usize = 1 << 20;
/// How long the writer thread lets lines gather before writing them.
const FLUSH_INTERVAL: Duration = Duration::from_millis(10);
/// gunicorn's default `access_log_format`.
pub const DEFAULT_FORMAT: &str = r#"%(h)s %(l)s %(u)s %(t)s "%(r)s" %(s)s %(b)s "%(f)s" "%(a)s""#;

/// One piece of a compiled format.
enum Atom {
    Literal(Vec<u8>),
    RemoteAddr,
    Dash,
    User,
    Time,
    RequestLine,
    Method,
    Path,
    Query,
    Protocol,
    Status,
    /// `%(b)s`: the body bytes sent.
    BodyBytes,
    Referer,
    UserAgent,
    Seconds,
    Millis,
    Micros,
    DecimalSeconds,
    Pid,
    RequestHeader(Vec<u8>),
    ResponseHeader(Vec<u8>),
}

fn atom(name: &str) -> PyResult<Atom> {
    Ok(match name {
        "h" => Atom::RemoteAddr,
        "l" => Atom::Dash,
        "u" => Atom::User,
        "t" => Atom::Time,
        "r" => Atom::RequestLine,
        "m" => Atom::Method,
        "U" => Atom::Path,
        "q" => Atom::Query,
        "H" => Atom::Protocol,
        "s" => Atom::Status,
        "b" | "B" => Atom::BodyBytes,
        "f" => Atom::Referer,
        "a" => Atom::UserAgent,
        "T" => Atom::Seconds,
        "M" => Atom::Millis,
        "D" => Atom::Micros,
        "L" => Atom::DecimalSeconds,
        "p" => Atom::Pid,
        _ if name.len() > 3 && name.starts_with('{') && name.ends_with("}i") => {
            Atom::RequestHeader(name[1..name.len() - 2].to_ascii_lowercase().into_bytes())
        }
        _ if name.len() > 3 && name.starts_with('{') && name.ends_with("}o") => {
            Atom::ResponseHeader(name[1..name.len() - 2].to_ascii_lowercase().into_bytes())
        }
        _ => {
            return Err(PyValueError::new_err(format!(
                "unknown access log atom %({name})s (known: h l u t r m U q H s b B f a T M D \
                 L p, {{header}}i, {{header}}o)"
            )))
        }
    })
}

/// Compiles a gunicorn-style format: `%(name)s` atoms, `%%` for a percent sign.
fn compile(format: &str) -> PyResult<Vec<Atom>> {
    let mut atoms = Vec::new();
    let mut lit = Vec::new();
    let mut rest = format;
    while let Some(i) = rest.find('%') {
        lit.extend_from_slice(&rest.as_bytes()[..i]);
        let after = &rest[i + 1..];
        if let Some(r) = after.strip_prefix('%') {
            lit.push(b'%');
            rest = r;
            continue;
        }
        let Some(body) = after.strip_prefix('(') else {
            return Err(PyValueError::new_err(format!(
                "access log format: '%' must start %(name)s or %%, at {:?}",
                &rest[i..]
            )));
        };
        let Some(end) = body.find(")s") else {
            return Err(PyValueError::new_err(format!(
                "access log format: unterminated atom at {:?}",
                &rest[i..]
            )));
        };
        if !lit.is_empty() {
            atoms.push(Atom::Literal(std::mem::take(&mut lit)));
        }
        atoms.push(atom(&body[..end])?);
        rest = &body[end + 2..];
    }
    lit.extend_from_slice(rest.as_bytes());
    if !lit.is_empty() {
        atoms.push(Atom::Literal(lit));
    }
    Ok(atoms)
}

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
    /// When the response was complete (the line's time stamp).
    now: Instant,
}

struct State {
    buf: Vec<u8>,
    dropped: u64,
    /// The writer was told there is something to write and has not taken it yet.
    woken: bool,
    closed: bool,
    /// The writer thread has exited.
    finished: bool,
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
    /// The wall clock is derived from the monotonic reading each line takes
    /// anyway (one clock read per line, not two), re-anchored every
    /// `REANCHOR` so that a wall clock step shows within seconds.
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
    json: bool,
    pid: Vec<u8>,
    capacity: usize,
    shared: Arc<Shared>,
    clock: Mutex<Clock>,
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

fn needs_escape(b: u8) -> bool {
    b < 0x20 || b == 0x7f || b == b'"' || b == b'\\'
}

fn escape_into(out: &mut Vec<u8>, mut value: &[u8]) {
    // Quotes, backslashes and control bytes are escaped as \xHH (as nginx
    // does), so a client cannot forge a line or break the quoting. Clean runs
    // are copied whole: almost every value is one.
    while let Some(i) = value.iter().position(|&b| needs_escape(b)) {
        out.extend_from_slice(&value[..i]);
        let b = value[i];
        out.extend_from_slice(&[b'\\', b'x', HEX[(b >> 4) as usize], HEX[(b & 15) as usize]]);
        value = &value[i + 1..];
    }
    out.extend_from_slice(value);
}

const HEX: &[u8; 16] = b"0123456789abcdef";

fn json_string(out: &mut Vec<u8>, value: &[u8]) {
    // Invalid UTF-8 becomes U+FFFD (a log line must stay valid JSON); clean
    // runs are copied whole.
    let text = String::from_utf8_lossy(value);
    let mut rest = text.as_bytes();
    out.push(b'"');
    while let Some(i) = rest
        .iter()
        .position(|&b| b < 0x20 || b == 0x7f || b == b'"' || b == b'\\')
    {
        out.extend_from_slice(&rest[..i]);
        match rest[i] {
            b'"' => out.extend_from_slice(b"\\\""),
            b'\\' => out.extend_from_slice(b"\\\\"),
            c => out.extend_from_slice(&[
                b'\\',
                b'u',
                b'0',
                b'0',
                HEX[(c >> 4) as usize],
                HEX[(c & 15) as usize],
            ]),
        }
        rest = &rest[i + 1..];
    }
    out.extend_from_slice(rest);
    out.push(b'"');
}

fn json_opt(out: &mut Vec<u8>, value: Option<&[u8]>) {
    match value {
        Some(v) => json_string(out, v),
        None => out.extend_from_slice(b"null"),
    }
}

fn push_int(out: &mut Vec<u8>, n: impl itoa::Integer) {
    out.extend_from_slice(itoa::Buffer::new().format(n).as_bytes());
}

/// The user name of a `Basic` Authorization header (gunicorn's `%(u)s`).
fn basic_user(head: &RequestHead) -> Option<Vec<u8>> {
    let value = head.header(b"authorization")?;
    let (scheme, creds) = value.split_at(value.iter().position(|&b| b == b' ')?);
    if !scheme.eq_ignore_ascii_case(b"basic") {
        return None;
    }
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(creds.trim_ascii())
        .ok()?;
    let end = decoded
        .iter()
        .position(|&b| b == b':')
        .unwrap_or(decoded.len());
    Some(decoded[..end].to_vec())
}

/// A header of an encoded response head, by lowercase name.
fn response_header<'a>(head: &'a [u8], name: &[u8]) -> Option<&'a [u8]> {
    let mut lines = head.split(|&b| b == b'\n').skip(1);
    lines.find_map(|line| {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        let colon = line.iter().position(|&b| b == b':')?;
        line[..colon]
            .eq_ignore_ascii_case(name)
            .then(|| line[colon + 1..].trim_ascii())
    })
}

fn protocol(head: &RequestHead) -> &'static [u8] {
    match head.version {
        Version::Http11 => b"HTTP/1.1",
        Version::Http10 => b"HTTP/1.0",
    }
}

/// Status and body length of an encoded response (its head is surge's own).
fn parse_response(data: &[u8]) -> (u16, u64, &[u8]) {
    let status = data
        .get(9..12)
        .and_then(|s| std::str::from_utf8(s).ok())
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    match memchr::memmem::find(data, b"\r\n\r\n") {
        Some(i) => (status, (data.len() - i - 4) as u64, &data[..i + 2]),
        None => (status, 0, data),
    }
}

impl AccessLog {
    /// Writes the client's host (the first item of its address) to `out`;
    /// false when there is none (a Unix socket peer).
    fn write_host(client: Option<&Bound<'_, PyAny>>, out: &mut Vec<u8>, json: bool) -> bool {
        let Some(client) = client else {
            return false;
        };
        let item;
        let host = match client.downcast::<PyTuple>() {
            Ok(t) => match t.get_item(0) {
                Ok(h) => {
                    item = h;
                    &item
                }
                Err(_) => return false,
            },
            Err(_) => client,
        };
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
    }

    fn time(&self, py: Python<'_>, now: Instant, out: &mut Vec<u8>) {
        let mut clock = self.clock.lock().unwrap_or_else(|e| e.into_inner());
        let secs = clock.wall_secs(now);
        if clock.second != secs || clock.text.is_empty() {
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
            clock.second = secs;
            clock.text = text.into_bytes();
        }
        out.extend_from_slice(&clock.text);
    }

    fn format_line(&self, py: Python<'_>, e: &Entry<'_, '_>, out: &mut Vec<u8>) {
        let head = e.head;
        let header = |name: &[u8]| head.and_then(|h| h.header(name));
        let micros = e.elapsed.as_micros() as u64;
        if self.json {
            out.extend_from_slice(b"{\"time\":\"");
            self.time(py, e.now, out);
            out.extend_from_slice(b"\",\"client\":");
            if !Self::write_host(e.client, out, true) {
                out.extend_from_slice(b"null");
            }
            out.extend_from_slice(b",\"user\":");
            json_opt(out, head.and_then(basic_user).as_deref());
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
            push_int(out, micros);
            out.extend_from_slice(b",\"referer\":");
            json_opt(out, header(b"referer"));
            out.extend_from_slice(b",\"user_agent\":");
            json_opt(out, header(b"user-agent"));
            out.extend_from_slice(b",\"request_id\":");
            json_opt(out, header(b"x-request-id"));
            out.extend_from_slice(b",\"pid\":");
            out.extend_from_slice(&self.pid);
            out.extend_from_slice(b"}\n");
            return;
        }
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
                Atom::User => or_dash(out, head.and_then(basic_user).as_deref()),
                Atom::Time => self.time(py, e.now, out),
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
                Atom::Referer => or_dash(out, header(b"referer")),
                Atom::UserAgent => or_dash(out, header(b"user-agent")),
                Atom::Seconds => push_int(out, e.elapsed.as_secs()),
                Atom::Millis => push_int(out, micros / 1000),
                Atom::Micros => push_int(out, micros),
                Atom::DecimalSeconds => {
                    push_int(out, micros / 1_000_000);
                    out.push(b'.');
                    let frac = itoa::Buffer::new().format(micros % 1_000_000).to_owned();
                    out.extend(std::iter::repeat_n(b'0', 6 - frac.len()));
                    out.extend_from_slice(frac.as_bytes());
                }
                Atom::Pid => {
                    out.push(b'<');
                    out.extend_from_slice(&self.pid);
                    out.push(b'>');
                }
                Atom::RequestHeader(name) => or_dash(out, header(name)),
                Atom::ResponseHeader(name) => or_dash(out, response_header(e.response_head, name)),
            }
        }
        out.push(b'\n');
    }

    /// Formats the line straight into the shared buffer (no copy per line); a
    /// line that does not fit is taken back out and counted as dropped.
    fn record(&self, py: Python<'_>, e: &Entry<'_, '_>) {
        let mut s = self.shared.state.lock().unwrap_or_else(|e| e.into_inner());
        if s.closed {
            s.dropped += 1;
            return;
        }
        let start = s.buf.len();
        self.format_line(py, e, &mut s.buf);
        if s.buf.len() > self.capacity {
            s.buf.truncate(start);
            s.dropped += 1;
            return;
        }
        if !s.woken {
            s.woken = true;
            self.shared.wake.notify_one();
        }
    }

    /// Logs a response the native side encoded (`data`: head and body, less
    /// `spliced` bytes of body written from a shared buffer after it).
    pub fn log_encoded(
        &self,
        py: Python<'_>,
        request: &Request,
        data: &[u8],
        spliced: usize,
        now: Instant,
    ) {
        let (status, sent, response_head) = parse_response(data);
        let sent = sent + spliced as u64;
        let client = request.client.as_ref().map(|c| c.bind(py));
        self.record(
            py,
            &Entry {
                head: Some(&request.head),
                client,
                status,
                sent,
                response_head,
                elapsed: request.started.map_or(Duration::ZERO, |t| now - t),
                now,
            },
        );
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
        let atoms = compile(format.unwrap_or(DEFAULT_FORMAT))?;
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
            json,
            pid: std::process::id().to_string().into_bytes(),
            capacity: buffer,
            shared,
            clock: Mutex::new(Clock {
                anchor: Instant::now(),
                anchor_wall: wall_now(),
                second: 0,
                text: Vec::new(),
            }),
            writer: Mutex::new(Some(handle)),
        })
    }

    /// Logs a response rendered whole (`data`: the bytes written for it).
    fn log_rendered(&self, py: Python<'_>, request: &Bound<'_, Request>, data: &[u8]) {
        self.log_encoded(py, &request.borrow(), data, 0, Instant::now());
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
                now,
            },
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
                elapsed: r.started.map_or(Duration::ZERO, |t| now - t),
                now,
            },
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
