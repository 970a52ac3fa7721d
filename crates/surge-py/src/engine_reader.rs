//! `EngineReader`: the engine's read path (`surge.engine.PipelinedConnection._on_data`
//! and the plain-result tail of `_resolve`) as native calls, installed as the
//! protocol's ``get_buffer``/``buffer_updated`` on plaintext connections whose
//! codec has a native parser (Tarantool's, Redis's, PostgreSQL's).
//!
//! Theory of operation
//! -------------------
//! The protocol is an `asyncio.BufferedProtocol`: the event loop asks it for a
//! buffer (`get_buffer`), reads the socket straight into it and says how many
//! bytes came (`buffer_updated`). The buffer is a `ReadSlot`, one per thread,
//! shared by every connection of that thread's loop: a read and its
//! `buffer_updated` follow each other within one callback of the loop, and the
//! bytes are parsed (a reply split across reads leaves only its tail in the
//! codec's own buffer) before anything else can read, so one slot serves them
//! all. A connection that asks while the slot is being parsed (a read from
//! inside a reply's handling, never seen in practice) gets a slot of its own.
//!
//! Each read is parsed and its futures resolved by the codec, then the engine's
//! bookkeeping is done here: the receive time, the early-flush count, the flush
//! scheduled behind the wakeups, the transport's buffer, the driver's hook when
//! it has anything to do, a drain or capacity waiters woken, the busy poll told
//! of the read (and started while replies are due). Anything else (an
//! error reply, an out-of-band message, a bad stream, a protocol that is no
//! longer the engine's current one, an `_on_data` replaced on the instance) goes
//! to the engine's Python methods, which behave exactly as before.
//!
//! Over native TLS (a rustls session, `surge.endpoint.NativeTlsTransport`) the
//! slot holds records: `buffer_updated` decrypts them into this thread's
//! plaintext buffer (shared like the slot, and for the same reason) and feeds
//! that; what rustls wants sent (an alert) and a broken stream go to the
//! engine's `_on_tls_extra`. Before this the TLS reads went through Python
//! (`data_received`, `_on_tls_data`, `_resolve`), and a bytes object per read.
//!
//! Read pacing (`surge.engine.PACE_DELAY`, for connections that ask for it:
//! `set_pacing`) is decided here too, from what the reader knows of each read:
//! a read under `read` bytes that finished at most one reply while more than
//! `depth` were due pauses the transport's reading for `delay` seconds. It used
//! to be a Python closure around ``buffer_updated``, one more Python call on
//! every read of every paced connection; now a read that cannot be paced costs
//! one comparison, one that may be two dict lookups.
//!
//! Why: at 10 coroutines on one connection a read brings a few replies, and the
//! Python frames per read (`data_received`, `_on_data`, `_resolve`, the driver's
//! hook) were several percent of the client's CPU per request; and with
//! ``data_received`` uvloop copies every read into a new bytes object (asyncio
//! allocates one per read as well), which the buffered protocol avoids.

use pyo3::exceptions::{PyBufferError, PyTypeError};
use pyo3::gc::PyVisit;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyBytes, PyDict};
use pyo3::{ffi, PyTraverseError};
use std::cell::RefCell;
use std::os::raw::c_int;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::engine_state::EngineState;
use crate::lane::is_true;
use crate::tls_client::TlsClientSession;
use crate::wire::{feed_resolve, EngineTables, ReplyParser, Resolved};

/// Bytes one read may bring: uvloop's own read buffer's size (a read of 1000
/// pipelined replies takes a few of them). One slot per thread, made once.
const READ_SLOT_SIZE: usize = 256 * 1024;

/// A codec the engine's native read path can feed.
pub trait NativeFeed: Send + Sync {
    /// The codec's `feed_resolve(data, pending, deadlines)`.
    fn feed_resolve<'py>(&self, data: &[u8], tables: EngineTables<'_, 'py>) -> Resolved<'py>;
    /// `ReplyParser::batch_hook_due`.
    fn batch_hook_due(&self, py: Python<'_>) -> bool;
    /// The codec object, for the owner's `__traverse__`.
    fn object(&self) -> &PyObject;
}

impl<C> NativeFeed for Py<C>
where
    C: ReplyParser + pyo3::PyClass<Frozen = pyo3::pyclass::boolean_struct::False>,
{
    fn feed_resolve<'py>(&self, data: &[u8], tables: EngineTables<'_, 'py>) -> Resolved<'py> {
        let py = tables.pending.py();
        feed_resolve(&mut *self.try_borrow_mut(py)?, data, tables)
    }

    fn batch_hook_due(&self, py: Python<'_>) -> bool {
        self.borrow(py).batch_hook_due()
    }

    fn object(&self) -> &PyObject {
        self.as_any()
    }
}

/// The memory a read goes into: a writable buffer of `READ_SLOT_SIZE` bytes
/// (what ``get_buffer`` returns; the event loop reads into it through the
/// buffer protocol). Never resized, so a buffer handed out stays valid as long
/// as the slot lives, which the consumer's reference guarantees.
#[pyclass(module = "surge._core")]
pub struct ReadSlot {
    buf: Box<[u8]>,
}

#[pymethods]
impl ReadSlot {
    fn __len__(&self) -> usize {
        self.buf.len()
    }

    /// # Safety
    /// Called by Python's buffer protocol with a valid `view`.
    unsafe fn __getbuffer__(
        slf: Bound<'_, Self>,
        view: *mut ffi::Py_buffer,
        flags: c_int,
    ) -> PyResult<()> {
        if view.is_null() {
            return Err(PyBufferError::new_err("no view to fill"));
        }
        let (ptr, len) = {
            let mut this = slf.try_borrow_mut()?;
            (this.buf.as_mut_ptr(), this.buf.len())
        };
        // SAFETY: `view` is valid (checked above, from the caller); the memory
        // is the slot's own boxed slice, never reallocated, and the view holds a
        // reference to the slot (set by PyBuffer_FillInfo), so it outlives the
        // view. It is written only by the event loop's read, before
        // `buffer_updated` borrows it to parse.
        let rc = unsafe {
            ffi::PyBuffer_FillInfo(view, slf.as_ptr(), ptr.cast(), len as isize, 0, flags)
        };
        if rc != 0 {
            return Err(PyErr::fetch(slf.py()));
        }
        Ok(())
    }
}

thread_local! {
    /// This thread's shared slot (see the module's theory of operation).
    static SHARED_SLOT: RefCell<Option<Py<ReadSlot>>> = const { RefCell::new(None) };
    /// This thread's plaintext of a TLS read, kept for its capacity (taken out
    /// while in use: a read from inside the parse gets an empty one).
    static PLAIN: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

fn new_slot(py: Python<'_>) -> PyResult<Py<ReadSlot>> {
    Py::new(
        py,
        ReadSlot {
            buf: vec![0u8; READ_SLOT_SIZE].into_boxed_slice(),
        },
    )
}

/// This thread's shared slot, made on first use.
fn shared_slot(py: Python<'_>) -> PyResult<Py<ReadSlot>> {
    SHARED_SLOT.with(|cell| {
        let mut cell = cell.borrow_mut();
        if let Some(slot) = cell.as_ref() {
            return Ok(slot.clone_ref(py));
        }
        let slot = new_slot(py)?;
        *cell = Some(slot.clone_ref(py));
        Ok(slot)
    })
}

/// Read pacing's settings (`surge.engine.PACE_DELAY`, `PACE_READ`, `PACE_DEPTH`).
#[derive(Clone, Copy)]
struct Pacing {
    /// Seconds reading stays paused.
    delay: f64,
    /// Reads of this many bytes or more are never paced.
    read: usize,
    /// Paced only while more than this many replies are due.
    depth: usize,
}

/// The engine's read path (see the module's docs).
#[pyclass(module = "surge._core")]
pub struct EngineReader {
    engine: PyObject,
    /// The engine's slots: the state a read works on.
    core: Py<EngineState>,
    /// The engine's instance dict (the rest of its state).
    state: Py<PyDict>,
    /// The protocol this reader serves (stale once the engine has another).
    protocol: PyObject,
    codec: Box<dyn NativeFeed>,
    early_min: usize,
    early_max: usize,
    /// The engine's bound `_flush`, made once.
    flush: PyObject,
    /// The slot the last `get_buffer` handed out (the next read is in it).
    current: Option<Py<ReadSlot>>,
    /// This connection's own slot, made only when the shared one was busy.
    own: Option<Py<ReadSlot>>,
    /// Native TLS: the transport (for `_on_tls_extra`) and its session.
    tls: Option<(PyObject, Py<TlsClientSession>)>,
    /// Read pacing, when asked for (`set_pacing`).
    pacing: Option<Pacing>,
    /// Reading is paused by pacing (until `_resume_reading`).
    paused: AtomicBool,
}

fn codec_feed(codec: &Bound<'_, PyAny>) -> Option<Box<dyn NativeFeed>> {
    if let Ok(c) = codec.downcast::<crate::tarantool::IprotoCodec>() {
        return Some(Box::new(c.clone().unbind()));
    }
    if let Ok(c) = codec.downcast::<crate::redis::RespCodec>() {
        return Some(Box::new(c.clone().unbind()));
    }
    if let Ok(c) = codec.downcast::<crate::postgres::PgCodec>() {
        return Some(Box::new(c.clone().unbind()));
    }
    None
}

impl EngineReader {
    /// One read of TLS records: decrypted, then through `feed`; an alert to
    /// send or a broken stream to the engine's `_on_tls_extra` after the
    /// plaintext before it.
    fn feed_records(
        &self,
        py: Python<'_>,
        transport: &PyObject,
        session: &Py<TlsClientSession>,
        data: &[u8],
    ) -> PyResult<()> {
        let mut plain = PLAIN.with(|p| std::mem::take(&mut *p.borrow_mut()));
        let (out, error) = session
            .bind(py)
            .try_borrow_mut()?
            .feed_into(data, &mut plain);
        let fed = if plain.is_empty() {
            Ok(())
        } else {
            self.feed(py, &plain)
        };
        plain.clear();
        PLAIN.with(|p| *p.borrow_mut() = plain);
        fed?;
        if !out.is_empty() || error.is_some() {
            let out = (!out.is_empty()).then(|| PyBytes::new(py, &out));
            self.engine
                .bind(py)
                .call_method1(intern!(py, "_on_tls_extra"), (transport, out, error))?;
        }
        Ok(())
    }

    /// Replies due before a read that pacing may pause after it (a small read
    /// while many are due, reading not paused yet), else None.
    fn pace_due(&self, py: Python<'_>, nbytes: usize) -> PyResult<Option<usize>> {
        let Some(p) = self.pacing else {
            return Ok(None);
        };
        if nbytes >= p.read || self.paused.load(Ordering::Relaxed) {
            return Ok(None);
        }
        let due = self.due(py)?;
        Ok((due > p.depth).then_some(due))
    }

    /// Replies due on the engine (its pending table's size).
    fn due(&self, py: Python<'_>) -> PyResult<usize> {
        match self.core.get().pending.get(py) {
            Some(pending) => pending.len(),
            None => Ok(0),
        }
    }

    /// After a read that `pace_due` let through: pauses reading for the delay when
    /// it finished at most one of the `due` replies and this protocol is still
    /// the engine's (a read from a protocol left behind never pauses the next).
    fn pace(&self, slf: &Bound<'_, Self>, due: usize) -> PyResult<()> {
        let py = slf.py();
        let Some(p) = self.pacing else {
            return Ok(());
        };
        if due.saturating_sub(self.due(py)?) > 1 {
            return Ok(());
        }
        let st = self.state.bind(py);
        let core = self.core.get();
        if !core
            .protocol
            .get(py)
            .is_some_and(|proto| proto.is(&self.protocol))
        {
            return Ok(());
        }
        let Some(transport) = self.open_transport(py)? else {
            return Ok(());
        };
        let Some(event_loop) = core.event_loop.get(py).filter(|l| !l.is_none()) else {
            return Ok(());
        };
        transport.call_method0(intern!(py, "pause_reading"))?;
        self.paused.store(true, Ordering::Relaxed);
        let resume = slf.getattr(intern!(py, "_resume_reading"))?;
        event_loop.call_method1(intern!(py, "call_later"), (p.delay, resume))?;
        if let Some(counts) = st.get_item(intern!(py, "_counts"))? {
            let key = intern!(py, "paced");
            let n: u64 = counts.get_item(key)?.extract()?;
            counts.set_item(key, n + 1)?;
        }
        Ok(())
    }

    /// The protocol's transport, when it is still open.
    fn open_transport<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        let proto = self.protocol.bind(py);
        if is_true(py, Some(proto.getattr(intern!(py, "lost"))?)) {
            return Ok(None);
        }
        let transport = proto.getattr(intern!(py, "transport"))?;
        if transport.is_none()
            || transport
                .call_method0(intern!(py, "is_closing"))?
                .is_truthy()?
        {
            return Ok(None);
        }
        Ok(Some(transport))
    }

    /// One read's bytes through the engine's read path.
    fn feed<'py>(&self, py: Python<'py>, data: &[u8]) -> PyResult<()> {
        let st = self.state.bind(py);
        let core = self.core.get();
        let engine = self.engine.bind(py);
        if !core.protocol.get(py).is_some_and(|p| p.is(&self.protocol)) {
            return Ok(()); // a protocol left behind: never the next codec's bytes
        }
        if st.contains(intern!(py, "_on_data"))? {
            engine.call_method1(intern!(py, "_on_data"), (PyBytes::new(py, data),))?;
            return Ok(());
        }
        let Some(event_loop) = core.event_loop.get(py).filter(|l| !l.is_none()) else {
            engine.call_method1(intern!(py, "_on_data"), (PyBytes::new(py, data),))?;
            return Ok(());
        };
        core.rx_at
            .set(&event_loop.call_method0(intern!(py, "time"))?);
        let (Some(pending), Some(deadlines)) = (core.pending.get(py), core.deadline_of.get(py))
        else {
            return Err(PyTypeError::new_err("the engine has no pending table"));
        };
        let tables = EngineTables {
            pending: pending.downcast::<PyDict>()?,
            deadlines: deadlines.downcast::<PyDict>()?,
        };
        let fed = self.codec.feed_resolve(data, tables);
        let (resolved, rest) = match fed {
            Ok(r) => r,
            Err(e) => {
                engine.call_method1(intern!(py, "_on_bad_reply"), (e.into_value(py),))?;
                return Ok(());
            }
        };
        if !rest.is_empty() {
            engine.call_method1(intern!(py, "_resolve"), (rest, resolved))?;
            return Ok(());
        }
        // `_resolve` with nothing left over.
        let n = resolved;
        if n > 1 {
            let early = (n >> 1).max(self.early_min).min(self.early_max);
            core.early.set(early.into_pyobject(py)?.as_any());
        }
        if n > 0 && !core.flush_scheduled.is_true(py) {
            core.flush_scheduled.set(PyBool::new(py, true).as_any());
            event_loop.call_method1(intern!(py, "call_soon"), (&self.flush,))?;
        }
        if core.tbuf.truthy(py)? {
            if let Some(t) = core.transport.get(py).filter(|t| !t.is_none()) {
                let size = t.call_method0(intern!(py, "get_write_buffer_size"))?;
                core.tbuf.set(&size);
            }
        }
        if self.codec.batch_hook_due(py) {
            if let Some(hook) = core.on_batch.get(py).filter(|h| !h.is_none()) {
                hook.call0()?;
            }
        }
        if core.drain_waiter.get(py).is_some_and(|w| !w.is_none()) {
            engine.call_method0(intern!(py, "check_drained"))?;
        }
        if core.waiters.truthy(py)? {
            engine.call_method0(intern!(py, "_wake_waiters"))?;
        }
        // Busy polling (`surge.engine.SPIN_WINDOW`): the read tells a running poll
        // that bytes came, and starts one when replies are still due (the rest of
        // a reply that comes in pieces).
        if core.spinning.is_true(py) {
            core.spin_read.set(PyBool::new(py, true).as_any());
        } else if pending.is_truthy()? {
            engine.call_method0(intern!(py, "_poll_read"))?;
        }
        Ok(())
    }
}

#[pymethods]
impl EngineReader {
    /// A reader for `protocol` of `engine` (a `PipelinedConnection` whose codec
    /// is an `IprotoCodec`, a `RespCodec` or a `PgCodec`), with the engine's `EARLY_FLUSH`
    /// and `EARLY_FLUSH_MAX`.
    #[new]
    fn new(
        engine: Bound<'_, PyAny>,
        protocol: PyObject,
        early_flush: usize,
        early_flush_max: usize,
    ) -> PyResult<Self> {
        let py = engine.py();
        let codec = codec_feed(&engine.getattr(intern!(py, "codec"))?)
            .ok_or_else(|| PyTypeError::new_err("no native read path for this codec"))?;
        let state = engine
            .getattr(intern!(py, "__dict__"))?
            .downcast_into::<PyDict>()
            .map_err(|_| PyTypeError::new_err("the engine has no instance dict"))?;
        let core = engine.downcast::<EngineState>()?.clone().unbind();
        Ok(EngineReader {
            core,
            flush: engine.getattr(intern!(py, "_flush"))?.unbind(),
            engine: engine.unbind(),
            state: state.unbind(),
            protocol,
            codec,
            early_min: early_flush,
            early_max: early_flush_max,
            current: None,
            own: None,
            tls: None,
            pacing: None,
            paused: AtomicBool::new(false),
        })
    }

    /// Reads from now on are records of `transport`'s TLS session (a
    /// `NativeTlsTransport`), decrypted here.
    fn set_tls(&mut self, transport: Bound<'_, PyAny>) -> PyResult<()> {
        let session = transport
            .getattr(intern!(transport.py(), "session"))?
            .downcast_into::<TlsClientSession>()?
            .unbind();
        self.tls = Some((transport.unbind(), session));
        Ok(())
    }

    /// Pace this connection's reads (see the module's docs): pause reading for
    /// `delay` seconds after a read under `read` bytes that finished at most one
    /// reply while more than `depth` were due.
    fn set_pacing(&mut self, delay: f64, read: usize, depth: usize) {
        self.pacing = Some(Pacing { delay, read, depth });
    }

    /// Whether reads are paced (`set_pacing`).
    #[getter]
    fn pacing(&self) -> bool {
        self.pacing.is_some()
    }

    /// The end of a pause (`call_later`'s callback): reading resumes unless the
    /// connection is gone.
    fn _resume_reading(&self, py: Python<'_>) -> PyResult<()> {
        self.paused.store(false, Ordering::Relaxed);
        if let Some(transport) = self.open_transport(py)? {
            transport.call_method0(intern!(py, "resume_reading"))?;
        }
        Ok(())
    }

    /// Whether `codec` has a native read path.
    #[staticmethod]
    fn supports(codec: &Bound<'_, PyAny>) -> bool {
        codec_feed(codec).is_some()
    }

    /// `codec.feed(data)` with the plain results handed to their futures in the
    /// same call, for a native codec read outside this reader (the engine's
    /// `_on_data`: TLS, or the native read path turned off). Each successful
    /// reply to a request in ``pending`` (id -> future) pops it (and its entry
    /// in ``deadlines``, when that is not empty) and sets its result; a future
    /// already done (cancelled, timed out) drops its reply, and so does a reply
    /// nobody waits for. From the first reply that is not a plain result (an
    /// error, a push, an event) on, the rest of the batch comes back as `feed`'s
    /// `(id, ok, value)` triples, in order. Returns (futures resolved, the
    /// rest). A bad stream raises after the replies before it were resolved.
    ///
    /// One function for the three codecs rather than a method on each: the
    /// work is the same generic `wire::feed_resolve`.
    #[staticmethod]
    fn feed_resolve<'py>(
        codec: &Bound<'py, PyAny>,
        data: &[u8],
        pending: &Bound<'py, PyDict>,
        deadlines: &Bound<'py, PyDict>,
    ) -> Resolved<'py> {
        let Some(native) = codec_feed(codec) else {
            return Err(PyTypeError::new_err("not a codec with a native read path"));
        };
        native.feed_resolve(data, EngineTables { pending, deadlines })
    }

    /// The protocol's ``get_buffer``: the slot the next read goes into (the
    /// size hint is not needed: a slot is as large as a read may be).
    fn get_buffer(&mut self, py: Python<'_>, sizehint: isize) -> PyResult<Py<ReadSlot>> {
        let _ = sizehint;
        let shared = shared_slot(py)?;
        // Borrowed: a read from inside the parse of another (see the module's docs).
        let slot = if shared.bind(py).try_borrow_mut().is_ok() {
            shared
        } else {
            match &self.own {
                Some(own) => own.clone_ref(py),
                None => {
                    let own = new_slot(py)?;
                    self.own = Some(own.clone_ref(py));
                    own
                }
            }
        };
        self.current = Some(slot.clone_ref(py));
        Ok(slot)
    }

    /// The protocol's ``buffer_updated``: `nbytes` were read into the slot.
    fn buffer_updated(slf: &Bound<'_, Self>, nbytes: usize) -> PyResult<()> {
        let py = slf.py();
        let this = slf.borrow();
        let Some(slot) = &this.current else {
            return Err(PyBufferError::new_err("buffer_updated before get_buffer"));
        };
        let due = this.pace_due(py, nbytes)?;
        {
            // Held while the bytes are parsed: the slot counts as busy meanwhile.
            let slot = slot.bind(py).try_borrow()?;
            let data = &slot.buf[..nbytes.min(slot.buf.len())];
            match &this.tls {
                None => this.feed(py, data),
                Some((transport, session)) => this.feed_records(py, transport, session, data),
            }?;
        }
        match due {
            Some(due) => this.pace(slf, due),
            None => Ok(()),
        }
    }

    /// The bytes of one read, as ``data_received`` would take them (a reader
    /// used by a stream protocol, and tests).
    #[pyo3(name = "feed")]
    fn feed_bytes(&self, py: Python<'_>, data: &[u8]) -> PyResult<()> {
        match &self.tls {
            None => self.feed(py, data),
            Some((transport, session)) => self.feed_records(py, transport, session, data),
        }
    }

    fn __traverse__(&self, visit: PyVisit<'_>) -> Result<(), PyTraverseError> {
        visit.call(&self.engine)?;
        visit.call(&self.core)?;
        visit.call(&self.state)?;
        visit.call(&self.protocol)?;
        visit.call(self.codec.object())?;
        visit.call(&self.flush)?;
        if let Some((transport, session)) = &self.tls {
            visit.call(transport)?;
            visit.call(session)?;
        }
        Ok(())
    }
}
