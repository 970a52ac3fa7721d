//! `RespCodec`: one Redis connection's buffers for the shared engine
//! (`surge.engine.PipelinedConnection`).
//!
//! Commands are encoded straight into the write buffer and numbered; Redis
//! answers in order, so each reply goes to the oldest command still waiting.
//! `feed` returns the engine's `(id, ok, value)` triples:
//!
//! - a command: `(id, True, value)`, or `(id, False, exception)` for an error reply
//!   (`command_ok`: a status reply such as `+OK` comes as `True`);
//! - a pipeline (`pipeline()`): one entry for all its commands, `(id, True, [values])`
//!   once the last reply is in (error replies stay in the list as exceptions);
//! - a push (RESP3 `>`, or on a `pubsub=True` codec a RESP2 pub/sub array):
//!   out of band, `(None, True, [kind, ...])`. A pub/sub command sent with
//!   `pubsub_command(n, ...)` is answered by its n confirmations, which are also
//!   passed on out of band: `(id, True, None)` follows the n-th.
//!
//! Bytes that are not RESP set `failed`: the replies before them are returned
//! as usual, the oldest command still waiting gets `(id, False, error)` (an
//! instance of `protocol_error`), and the driver must drop the connection, as
//! replies behind them can no longer be matched.

use std::collections::VecDeque;

use pyo3::create_exception;
use pyo3::exceptions::{PyException, PyTypeError};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyBytes, PyList, PyString, PyTuple, PyType};
use surge_proto::resp::{self, Scanner, Status};

use super::args::{write_arg, write_command};
use super::reply::Builder;

use crate::wire::{ReadBuf, ReplyParser, WriteBuf};

create_exception!(
    _core,
    RespProtocolError,
    PyException,
    "The byte stream from the server is not valid RESP."
);

/// Pub/sub message kinds that a subscribed RESP2 connection sends unasked.
const PUBSUB_KINDS: &[&[u8]] = &[
    b"message",
    b"pmessage",
    b"smessage",
    b"subscribe",
    b"psubscribe",
    b"ssubscribe",
    b"unsubscribe",
    b"punsubscribe",
    b"sunsubscribe",
];

/// A routed reply: the command's id (None: out of band), whether it is a
/// result (false: an error), the value.
type Routed<'py> = (Option<u64>, bool, Bound<'py, PyAny>);

/// What a command waits for.
struct Waiting {
    id: u64,
    /// Replies still owed (a pipeline owes one per command).
    owed: usize,
    /// A pipeline's replies so far.
    collected: Option<Vec<PyObject>>,
    /// Pub/sub confirmations still owed (0: an ordinary reply answers it).
    confirms: usize,
    /// A status reply (`+OK`, `+PONG`) answers True (redis-py's convention),
    /// saving the driver a Python conversion per SET.
    status_true: bool,
    /// Bulk strings stay bytes even under decode_responses (DUMP's payload is
    /// binary: redis-py never decodes it either).
    raw: bool,
    /// A cluster command's arguments (`RespLane.routed`): a redirection
    /// (MOVED, ASK, TRYAGAIN, CLUSTERDOWN) is not this command's reply but goes
    /// out of band as `("redirect", id, error, args, status_true)`, its future
    /// left for the cluster to resolve from the node that serves the slot.
    redirect: Option<PyObject>,
}

/// Error replies that say where (or when) to send a cluster command again: the
/// command did not run.
const REDIRECTIONS: &[&[u8]] = &[b"-MOVED ", b"-ASK ", b"-TRYAGAIN", b"-CLUSTERDOWN"];

#[pyclass(module = "surge._core")]
pub struct RespCodec {
    wbuf: WriteBuf,
    rbuf: ReadBuf,
    scanner: Scanner,
    next_id: u64,
    waiting: VecDeque<Waiting>,
    decode: bool,
    pubsub: bool,
    error_factory: PyObject,
    data_error: Py<PyType>,
    protocol_error: Py<PyType>,
    /// A reply did not parse: the connection must be dropped.
    #[pyo3(get)]
    failed: bool,
    /// Commands encoded since the write buffer was last taken (`RespLane`'s
    /// early-flush rule: all of them unanswered means the server is idle).
    encoded: usize,
}

impl RespCodec {
    fn push_waiting(&mut self, owed: usize, collect: bool, confirms: usize) -> u64 {
        self.next_id += 1;
        self.encoded += 1;
        self.waiting.push_back(Waiting {
            id: self.next_id,
            owed,
            collected: collect.then(Vec::new),
            confirms,
            status_true: false,
            raw: false,
            redirect: None,
        });
        self.next_id
    }

    /// A pub/sub push's kind when `v` is one (`[kind, ...]` with a known kind).
    fn push_kind(v: &Bound<'_, PyAny>) -> Option<Vec<u8>> {
        let l = v.downcast::<PyList>().ok()?;
        let first = l.get_item(0).ok()?;
        let kind: Vec<u8> = if let Ok(b) = first.downcast::<PyBytes>() {
            b.as_bytes().to_ascii_lowercase()
        } else if let Ok(s) = first.downcast::<PyString>() {
            s.to_str().ok()?.as_bytes().to_ascii_lowercase()
        } else {
            return None;
        };
        Some(kind)
    }

    /// Route one whole reply to its command, or out of band.
    fn route<'py>(
        &mut self,
        py: Python<'py>,
        out: &mut Vec<Routed<'py>>,
        value: PyResult<(Bound<'py, PyAny>, bool)>,
        push: bool,
        status: bool,
        redirection: bool,
    ) -> PyResult<()> {
        let (value, is_error) = match value {
            Ok(v) => v,
            // A reply that parsed but cannot be a Python value (bytes that are
            // not UTF-8 under decode_responses) fails its own command only.
            Err(e) => (e.into_value(py).into_bound(py).into_any(), true),
        };
        let kind = if push || (self.pubsub && !is_error) {
            Self::push_kind(&value)
        } else {
            None
        };
        let is_pubsub_kind = kind.as_deref().is_some_and(|k| PUBSUB_KINDS.contains(&k));
        if push || is_pubsub_kind {
            out.push((None, true, value.clone()));
            let confirm = kind.as_deref().is_some_and(|k| k.ends_with(b"subscribe"));
            if confirm {
                if let Some(front) = self.waiting.front_mut() {
                    if front.confirms > 0 {
                        front.confirms -= 1;
                        if front.confirms == 0 {
                            let w = self.waiting.pop_front().expect("front exists");
                            out.push((Some(w.id), true, py.None().into_bound(py)));
                        }
                    }
                }
            }
            return Ok(());
        }
        let Some(front) = self.waiting.front_mut() else {
            // Nobody asked: pass it on rather than guess.
            out.push((None, true, value));
            return Ok(());
        };
        match &mut front.collected {
            None => {
                let w = self.waiting.pop_front().expect("front exists");
                if let Some(args) = w.redirect.filter(|_| redirection && is_error) {
                    let note = (
                        pyo3::intern!(py, "redirect"),
                        w.id,
                        value,
                        args,
                        w.status_true,
                    );
                    out.push((None, true, note.into_pyobject(py)?.into_any()));
                } else if w.status_true && status {
                    out.push((
                        Some(w.id),
                        true,
                        PyBool::new(py, true).to_owned().into_any(),
                    ));
                } else {
                    out.push((Some(w.id), !is_error, value));
                }
            }
            Some(items) => {
                items.push(value.unbind());
                front.owed -= 1;
                if front.owed == 0 {
                    let w = self.waiting.pop_front().expect("front exists");
                    let items = PyList::new(py, w.collected.unwrap_or_default())?;
                    out.push((Some(w.id), true, items.into_any()));
                }
            }
        }
        Ok(())
    }
}

#[pymethods]
impl RespCodec {
    /// `decode_responses`: bulk strings as str; `pubsub`: this connection is
    /// subscribed (RESP2 pub/sub arrays are pushes); `error_factory(text)` makes
    /// the exception for an error reply; `data_error` is raised for bad arguments.
    #[new]
    #[pyo3(signature = (
        decode_responses=false, pubsub=false, error_factory=None, data_error=None,
        protocol_error=None
    ))]
    fn new(
        py: Python<'_>,
        decode_responses: bool,
        pubsub: bool,
        error_factory: Option<PyObject>,
        data_error: Option<Py<PyType>>,
        protocol_error: Option<Py<PyType>>,
    ) -> Self {
        let default_error = py.get_type::<PyException>().into_any().unbind();
        RespCodec {
            wbuf: WriteBuf::new(),
            rbuf: ReadBuf::default(),
            scanner: Scanner::new(),
            next_id: 0,
            waiting: VecDeque::new(),
            decode: decode_responses,
            pubsub,
            error_factory: error_factory.unwrap_or(default_error),
            data_error: data_error.unwrap_or_else(|| py.get_type::<PyTypeError>().unbind()),
            protocol_error: protocol_error
                .unwrap_or_else(|| py.get_type::<RespProtocolError>().unbind()),
            failed: false,
            encoded: 0,
        }
    }

    /// Forget everything about the previous connection.
    fn reset(&mut self) {
        self.wbuf.clear();
        self.rbuf.clear();
        self.scanner.reset();
        self.waiting.clear();
        self.failed = false;
        self.encoded = 0;
    }

    /// Bytes waiting in the write buffer.
    fn pending(&self) -> usize {
        self.wbuf.len()
    }

    /// Commands sent (or buffered) whose replies have not all arrived.
    fn waiting(&self) -> usize {
        self.waiting.len()
    }

    /// The write buffer's contents as bytes, leaving it empty.
    fn take<'py>(&mut self, py: Python<'py>) -> Bound<'py, PyBytes> {
        self.encoded = 0;
        self.wbuf.take(py)
    }

    /// Encode one command (`"SET", "k", b"v"`); returns its id. A bad argument
    /// raises `data_error` and leaves nothing in the buffer.
    #[pyo3(signature = (*args))]
    fn command(&mut self, py: Python<'_>, args: &Bound<'_, PyTuple>) -> PyResult<u64> {
        write_command(&mut self.wbuf, args, self.data_error.bind(py))?;
        Ok(self.push_waiting(1, false, 0))
    }

    /// Like `command`, but a status reply (`+OK`) answers True; nil stays None.
    #[pyo3(signature = (*args))]
    fn command_ok(&mut self, py: Python<'_>, args: &Bound<'_, PyTuple>) -> PyResult<u64> {
        let id = self.command(py, args)?;
        if let Some(w) = self.waiting.back_mut() {
            w.status_true = true;
        }
        Ok(id)
    }

    /// Like `command` (`command_ok` when `status_true`), for a cluster node: a
    /// redirection (MOVED, ASK, TRYAGAIN, CLUSTERDOWN) comes out of band as
    /// `("redirect", id, error, args, status_true)` instead of answering it.
    #[pyo3(signature = (status_true, *args))]
    fn command_routed(
        &mut self,
        py: Python<'_>,
        status_true: bool,
        args: &Bound<'_, PyTuple>,
    ) -> PyResult<u64> {
        let id = self.encode_args(py, args, status_true)?;
        self.redirect_last(args);
        Ok(id)
    }

    /// Like `command`, but the reply's bulk strings stay bytes whatever
    /// `decode_responses` says (binary payloads: DUMP, FUNCTION DUMP).
    #[pyo3(signature = (*args))]
    fn command_raw(&mut self, py: Python<'_>, args: &Bound<'_, PyTuple>) -> PyResult<u64> {
        let id = self.command(py, args)?;
        if let Some(w) = self.waiting.back_mut() {
            w.raw = true;
        }
        Ok(id)
    }

    /// Encode a batch of commands answered together as one list, wrapped in
    /// MULTI/EXEC when `transaction` (the list then holds MULTI's and each
    /// command's QUEUED reply and, last, EXEC's). Returns its id.
    #[pyo3(signature = (commands, transaction=false))]
    fn pipeline(
        &mut self,
        py: Python<'_>,
        commands: &Bound<'_, PyList>,
        transaction: bool,
    ) -> PyResult<u64> {
        let err = self.data_error.bind(py);
        let mark = self.wbuf.len();
        if transaction {
            resp::encode_command(&mut self.wbuf, &[b"MULTI"]);
        }
        for cmd in commands.iter() {
            let r = cmd
                .downcast::<PyTuple>()
                .map_err(|_| PyErr::from_type(err.clone(), "each pipeline command is a tuple"))
                .and_then(|t| write_command(&mut self.wbuf, t, err));
            if let Err(e) = r {
                self.wbuf.truncate(mark);
                return Err(e);
            }
        }
        if transaction {
            resp::encode_command(&mut self.wbuf, &[b"EXEC"]);
        }
        let owed = commands.len() + if transaction { 2 } else { 0 };
        if owed == 0 {
            return Err(PyErr::from_type(err.clone(), "an empty pipeline"));
        }
        Ok(self.push_waiting(owed, true, 0))
    }

    /// Encode a (P|S)(UN)SUBSCRIBE answered by `confirms` confirmations.
    #[pyo3(signature = (confirms, *args))]
    fn pubsub_command(
        &mut self,
        py: Python<'_>,
        confirms: usize,
        args: &Bound<'_, PyTuple>,
    ) -> PyResult<u64> {
        write_command(&mut self.wbuf, args, self.data_error.bind(py))?;
        Ok(self.push_waiting(1, false, confirms.max(1)))
    }

    /// Parse every complete reply in `data` (plus what was buffered).
    fn feed<'py>(&mut self, py: Python<'py>, data: &[u8]) -> PyResult<Bound<'py, PyList>> {
        let routed = self.parse(py, data)?;
        let out = PyList::empty(py);
        for (id, ok, value) in routed {
            out.append((id, ok, value))?;
        }
        Ok(out)
    }
}

impl ReplyParser for RespCodec {
    fn parse_replies<'py>(
        &mut self,
        py: Python<'py>,
        data: &[u8],
    ) -> (Vec<Routed<'py>>, PyResult<()>) {
        match self.parse(py, data) {
            Ok(routed) => (routed, Ok(())),
            Err(e) => (Vec::new(), Err(e)),
        }
    }

    fn batch_hook_due(&self) -> bool {
        self.failed
    }
}

impl RespCodec {
    /// Bytes in the write buffer and commands encoded since it was last taken.
    pub(super) fn buffered(&self) -> (usize, usize) {
        (self.wbuf.len(), self.encoded)
    }

    /// Encode `name` with `args` (`RespLane`'s fast path); `status_true` as
    /// `command_ok`. A bad argument leaves the buffer as it was.
    pub(super) fn encode_named(
        &mut self,
        py: Python<'_>,
        name: &[u8],
        args: &[&Bound<'_, PyAny>],
        status_true: bool,
    ) -> PyResult<u64> {
        let mark = self.wbuf.len();
        resp::write_array_len(&mut self.wbuf, 1 + args.len());
        resp::write_arg(&mut self.wbuf, name);
        for (i, a) in args.iter().enumerate() {
            if let Err(e) = write_arg(&mut self.wbuf, a, i + 1, self.data_error.bind(py)) {
                self.wbuf.truncate(mark);
                return Err(e);
            }
        }
        let id = self.push_waiting(1, false, 0);
        if let Some(w) = self.waiting.back_mut() {
            w.status_true = status_true;
        }
        Ok(id)
    }

    /// Marks the command encoded last as a cluster command sent with `args`
    /// (see `Waiting::redirect`).
    pub(super) fn redirect_last(&mut self, args: &Bound<'_, PyTuple>) {
        if let Some(w) = self.waiting.back_mut() {
            w.redirect = Some(args.clone().into_any().unbind());
        }
    }

    /// Encode a whole command (`RespLane`'s generic path); `status_true` as
    /// `command_ok`. A bad argument leaves the buffer as it was.
    pub(super) fn encode_args(
        &mut self,
        py: Python<'_>,
        args: &Bound<'_, PyTuple>,
        status_true: bool,
    ) -> PyResult<u64> {
        write_command(&mut self.wbuf, args, self.data_error.bind(py))?;
        let id = self.push_waiting(1, false, 0);
        if let Some(w) = self.waiting.back_mut() {
            w.status_true = status_true;
        }
        Ok(id)
    }

    /// Every complete reply in `data` (plus what was buffered), routed.
    fn parse<'py>(&mut self, py: Python<'py>, data: &[u8]) -> PyResult<Vec<Routed<'py>>> {
        let mut out = Vec::new();
        if self.failed {
            return Ok(out);
        }
        self.rbuf.extend(data);
        let factory = self.error_factory.bind(py).clone();
        loop {
            let n = match self.scanner.scan(self.rbuf.unread()) {
                Ok(Status::Complete(n)) => n,
                Ok(Status::Partial) => break,
                Err(e) => {
                    self.failed = true;
                    let err = PyErr::from_type(self.protocol_error.bind(py).clone(), e.to_string());
                    let id = self.waiting.pop_front().map(|w| w.id);
                    out.push((id, false, err.into_value(py).into_bound(py).into_any()));
                    break;
                }
            };
            let start = self.rbuf.pos();
            self.rbuf.advance(n);
            let push = Builder::is_push(self.rbuf.bytes(), start);
            let raw = !push && self.waiting.front().is_some_and(|w| w.raw);
            let builder = Builder {
                py,
                decode: self.decode && !raw,
                error_factory: &factory,
            };
            let bytes = self.rbuf.bytes();
            let status = bytes[start] == b'+';
            let redirection = bytes[start] == b'-'
                && self.waiting.front().is_some_and(|w| w.redirect.is_some())
                && REDIRECTIONS.iter().any(|r| bytes[start..].starts_with(r));
            let value = if status
                && self
                    .waiting
                    .front()
                    .is_some_and(|w| w.status_true && w.collected.is_none())
            {
                // +OK to a command that answers True (every plain SET): the
                // status text is never seen, so no str is made for it.
                Ok((PyBool::new(py, true).to_owned().into_any(), false))
            } else {
                let mut pos = start;
                builder.build(&bytes[..start + n], &mut pos)
            };
            self.route(py, &mut out, value, push, status, redirection)?;
        }
        self.rbuf.compact();
        Ok(out)
    }
}
