//! The byte buffers every driver codec keeps: requests encoded back to back until
//! the engine takes them (one `transport.write` per loop iteration), and replies
//! received but not yet decoded. One type each, shared by the Redis, Tarantool,
//! PostgreSQL and HTTP client codecs.

use std::ops::{Deref, DerefMut};

use pyo3::ffi;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList, PyType};

/// Room reserved for a batch of requests (most batches fit; larger ones grow it).
const WRITE_CAPACITY: usize = 64 * 1024;
/// Decoded bytes at the front of a read buffer are dropped once they pass this
/// (or at once when everything was decoded): the copy is paid rarely, and a long
/// pipelined stream cannot grow the buffer without bound.
const READ_COMPACT_THRESHOLD: usize = 64 * 1024;

/// Encoded requests waiting for the engine's next flush. Encoders write into it
/// as a `Vec<u8>` (it derefs to one); a request that fails half-encoded is cut
/// off again with `truncate(mark)` where `mark` is the length before it.
pub struct WriteBuf(Vec<u8>);

impl WriteBuf {
    pub fn new() -> Self {
        Self(Vec::with_capacity(WRITE_CAPACITY))
    }

    /// The buffered requests as one bytes object, leaving the buffer empty.
    pub fn take<'py>(&mut self, py: Python<'py>) -> Bound<'py, PyBytes> {
        let b = PyBytes::new(py, &self.0);
        self.0.clear();
        b
    }
}

impl Default for WriteBuf {
    fn default() -> Self {
        Self::new()
    }
}

impl Deref for WriteBuf {
    type Target = Vec<u8>;
    fn deref(&self) -> &Vec<u8> {
        &self.0
    }
}

impl DerefMut for WriteBuf {
    fn deref_mut(&mut self) -> &mut Vec<u8> {
        &mut self.0
    }
}

/// Received bytes and how far they have been decoded.
#[derive(Default)]
pub struct ReadBuf {
    buf: Vec<u8>,
    pos: usize,
}

impl ReadBuf {
    /// Appends received bytes.
    pub fn extend(&mut self, data: &[u8]) {
        self.buf.extend_from_slice(data);
    }

    /// The bytes not decoded yet.
    pub fn unread(&self) -> &[u8] {
        &self.buf[self.pos..]
    }

    /// Whether everything received has been decoded.
    pub fn is_drained(&self) -> bool {
        self.pos == self.buf.len()
    }

    /// The whole buffer, decoded prefix included (for decoders that take
    /// absolute positions).
    pub fn bytes(&self) -> &[u8] {
        &self.buf
    }

    /// Where decoding stands, as an index into `bytes()`.
    pub fn pos(&self) -> usize {
        self.pos
    }

    /// Marks `n` more bytes decoded.
    pub fn advance(&mut self, n: usize) {
        self.set_pos(self.pos + n);
    }

    /// Marks everything before `pos` decoded.
    pub fn set_pos(&mut self, pos: usize) {
        debug_assert!(pos <= self.buf.len());
        self.pos = pos;
    }

    /// Drops the decoded prefix when it is all there is, or large (see
    /// `READ_COMPACT_THRESHOLD`); call once per feed, after decoding.
    pub fn compact(&mut self) {
        if self.pos == self.buf.len() {
            self.buf.clear();
            self.pos = 0;
        } else if self.pos >= READ_COMPACT_THRESHOLD {
            self.buf.drain(..self.pos);
            self.pos = 0;
        }
    }

    /// Forgets everything (a new connection).
    pub fn clear(&mut self) {
        self.buf.clear();
        self.pos = 0;
    }
}

/// One parsed reply: `(id, ok, value)`, id None for an out-of-band message.
pub type Reply<'py> = (Option<u64>, bool, Bound<'py, PyAny>);

/// A codec that parses replies: what `feed_resolve` and the engine's native read
/// path (`crate::engine_reader::EngineReader`) need of it.
pub trait ReplyParser {
    /// Every complete reply in `data` (plus what was buffered), in order, as
    /// `(id, ok, value)` (id None: out of band); on a bad stream, the replies
    /// before it and the error.
    fn parse_replies<'py>(
        &mut self,
        py: Python<'py>,
        data: &[u8],
    ) -> (Vec<Reply<'py>>, PyResult<()>);

    /// Whether the driver's per-read hook (the engine's ``on_batch``) has
    /// anything to do after a read; false lets the engine's native read path
    /// skip the Python call.
    fn batch_hook_due(&self) -> bool {
        true
    }
}

/// What a read's replies are resolved against: the engine's `_pending` (id ->
/// future) and `_deadline_of` (id -> deadline) tables, which always go together.
#[derive(Clone, Copy)]
pub struct EngineTables<'a, 'py> {
    pub pending: &'a Bound<'py, PyDict>,
    pub deadlines: &'a Bound<'py, PyDict>,
}

/// What resolving a read gives: (futures resolved, the replies left for the engine).
pub type Resolved<'py> = PyResult<(usize, Bound<'py, PyList>)>;

/// A codec's read resolved (`EngineReader`, `EngineReader.feed_resolve`): `parse_replies` then
/// `resolve_replies`; a bad stream raises after the replies before it were
/// resolved.
pub fn feed_resolve<'py, C: ReplyParser>(
    codec: &mut C,
    data: &[u8],
    tables: EngineTables<'_, 'py>,
) -> Resolved<'py> {
    let (replies, result) = codec.parse_replies(tables.pending.py(), data);
    let out = resolve_replies(replies, tables)?;
    result?;
    Ok(out)
}

/// `set_result(fut, value)`, the future's type's unbound method: through
/// `PyObject_CallFunctionObjArgs`, which hands the arguments to the method's
/// vectorcall from the C stack, where `call1` packs them into a new tuple per
/// reply (~130 instructions of a Tarantool select's ~19k; the abi3 build has no
/// `PyObject_Vectorcall` before 3.12). A failure (InvalidStateError: the future
/// is done already) drops the reply, as it drops one nobody waits for.
fn call_set_result(method: &Bound<'_, PyAny>, fut: &Bound<'_, PyAny>, value: &Bound<'_, PyAny>) {
    // SAFETY: three live objects borrowed for the call, the argument list ended
    // by NULL as the variadic function wants; the result is a new reference
    // or NULL with an exception set, both released here.
    unsafe {
        let r = ffi::PyObject_CallFunctionObjArgs(
            method.as_ptr(),
            fut.as_ptr(),
            value.as_ptr(),
            std::ptr::null_mut::<ffi::PyObject>(),
        );
        if r.is_null() {
            ffi::PyErr_Clear();
        } else {
            ffi::Py_DECREF(r);
        }
    }
}

/// The resolving half of a codec's `feed_resolve` (the engine's hot path: one
/// native call per read instead of a Python loop over `(id, ok, value)`
/// triples), shared by the Redis, Tarantool and PostgreSQL codecs. Each successful reply to a
/// request in `pending` (id -> future) pops it (and its entry in `deadlines`, when
/// that is not empty) and sets its result; a future already done (cancelled, timed
/// out) drops its reply, and so does a reply nobody waits for. From the first
/// reply that is not a plain result (no id, or an error) on, the rest goes back
/// as triples, in order, for the engine to handle as `feed` would have. Returns
/// (futures resolved, the rest).
pub fn resolve_replies<'py>(
    replies: impl IntoIterator<Item = Reply<'py>>,
    tables: EngineTables<'_, 'py>,
) -> Resolved<'py> {
    let EngineTables { pending, deadlines } = tables;
    let py = pending.py();
    let rest = PyList::empty(py);
    let timed = !deadlines.is_empty();
    let set_result = intern!(py, "set_result");
    // `type(fut).set_result`, looked up once per read and called with the future
    // as its first argument: `fut.set_result(v)` would make a bound method object
    // per reply (the abi3 build has no vectorcall-method).
    let mut method: Option<(Bound<'py, PyType>, Bound<'py, PyAny>)> = None;
    let mut resolved = 0;
    let mut iter = replies.into_iter();
    for (id, ok, value) in iter.by_ref() {
        let Some(id) = id.filter(|_| ok) else {
            rest.append((id, ok, value))?;
            break;
        };
        let key = id.into_pyobject(py)?;
        let Some(fut) = pending.get_item(&key)? else {
            continue;
        };
        pending.del_item(&key)?;
        if timed && deadlines.contains(&key)? {
            deadlines.del_item(&key)?;
        }
        resolved += 1;
        let ty = fut.get_type();
        if !method.as_ref().is_some_and(|(t, _)| t.is(&ty)) {
            method = Some((ty.clone(), ty.getattr(set_result)?));
        }
        if let Some((_, m)) = &method {
            call_set_result(m, &fut, &value);
        }
    }
    for r in iter {
        rest.append(r)?;
    }
    Ok((resolved, rest))
}
