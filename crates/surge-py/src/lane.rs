//! `EngineLane`: the engine's request path (`surge.engine.PipelinedConnection.request`)
//! written out natively, for a driver's hot methods (`redis::RespLane`,
//! `tarantool::IprotoLane`) to make a request in ONE native call: the gate, the
//! request encoded into the codec's buffer, a future registered under its id, the
//! request counted, the flush scheduled.
//!
//! Why: with many coroutines pipelining over one connection the client's CPU per
//! request is what limits the rate, and the Python frames between a driver's
//! method and the codec (the method, its helpers, the engine's `request`) were a
//! fifth of a Redis command's and a quarter of a Tarantool request's.
//!
//! The lane reads the engine's own state (its `EngineState` slots, the limits
//! among them), so the engine stays the
//! one owner of that state: the same gate (connected, not paused, under
//! the in-flight and byte limits, no per-request timeout; the limits, the timeout
//! and the early-flush counts are read once per flushed batch, with the batch's
//! first request), the flush scheduled once per loop iteration with
//! ``loop.call_soon(engine._flush)``, or made at once by the engine's
//! `FLUSH_SIZE` and `EARLY_FLUSH` rules. Whenever the gate is shut
//! the caller takes its Python path, which behaves exactly as the lane would
//! have (and waits, connects or raises where the lane cannot).

use pyo3::gc::PyVisit;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict};
use pyo3::PyTraverseError;

use crate::engine_state::{EngineState, Field};

/// The engine's public limits, read with the first request after each flush (a
/// change takes effect from the next batch) rather than three lookups per call.
#[derive(Clone, Copy)]
struct Knobs {
    max_in_flight: usize,
    max_bytes: usize,
    /// No per-request timeout (a timed request takes the engine's own path).
    untimed: bool,
    /// How many requests leave at once when none is on the wire (`_early`).
    early: usize,
}

/// Where an early flush stands, for the engine's rule: how many requests
/// `EARLY_FLUSH` counts (a fixed number, or the engine's own `_early`, which
/// follows the replies of the last read).
#[derive(Clone, Copy)]
pub enum Early {
    Fixed(usize),
    Engine,
}

impl Knobs {
    fn read(py: Python<'_>, core: &EngineState, early: Early) -> PyResult<Self> {
        let count = |f: &Field| -> PyResult<usize> {
            match f.get(py) {
                Some(v) => v.extract(),
                None => Ok(0),
            }
        };
        Ok(Knobs {
            max_in_flight: count(&core.max_in_flight)?,
            max_bytes: count(&core.max_in_flight_bytes)?,
            untimed: core.request_timeout.get(py).is_some_and(|v| v.is_none()),
            early: match early {
                Early::Fixed(n) => n,
                Early::Engine => count(&core.early)?,
            },
        })
    }
}

/// A codec's write buffer as the gate sees it: bytes buffered, and requests
/// encoded since the engine last took the buffer.
#[derive(Clone, Copy)]
pub struct Buffered {
    pub bytes: usize,
    pub requests: usize,
}

/// A request the gate let through: what `register` needs of the engine's state.
pub struct Admitted<'py> {
    pending: Bound<'py, PyDict>,
    in_flight: usize,
    event_loop: Bound<'py, PyAny>,
    buffered: Buffered,
    early: usize,
}

/// How the futures of one event loop are made.
enum FutureMaker {
    /// The loop's own `create_future`.
    Call(PyObject),
    /// `asyncio.Future(loop=loop)` with its keywords made once: what the
    /// `create_future` of asyncio's loops and of uvloop's does, without their
    /// frame (Python's on asyncio, Cython's on uvloop: a tenth of the lane's
    /// cost per request on asyncio, ~550 of uvloop's ~13k instructions per
    /// Redis command) and without a keywords dict per call.
    Future(PyObject, Py<PyDict>),
}

impl FutureMaker {
    fn make(&self, py: Python<'_>) -> PyResult<PyObject> {
        match self {
            FutureMaker::Call(c) => c.call0(py),
            FutureMaker::Future(t, kw) => t.call(py, (), Some(kw.bind(py))),
        }
    }

    fn traverse(&self, visit: &PyVisit<'_>) -> Result<(), PyTraverseError> {
        match self {
            FutureMaker::Call(c) => visit.call(c),
            FutureMaker::Future(t, kw) => {
                visit.call(t)?;
                visit.call(kw)
            }
        }
    }
}

/// Whether `own` (a loop type's `create_future`) is the one of asyncio's
/// `BaseEventLoop` or of uvloop's `Loop` (when uvloop is loaded): both return
/// `asyncio.Future(loop=self)`. A loop that overrides it keeps its own.
fn plain_create_future(own: &Bound<'_, PyAny>) -> PyResult<bool> {
    let py = own.py();
    let base = py
        .import(intern!(py, "asyncio.base_events"))?
        .getattr(intern!(py, "BaseEventLoop"))?
        .getattr(intern!(py, "create_future"))?;
    if own.is(&base) {
        return Ok(true);
    }
    let modules = py
        .import(intern!(py, "sys"))?
        .getattr(intern!(py, "modules"))?;
    let Ok(uvloop) = modules.get_item(intern!(py, "uvloop.loop")) else {
        return Ok(false);
    };
    Ok(own.is(&uvloop
        .getattr(intern!(py, "Loop"))?
        .getattr(intern!(py, "create_future"))?))
}

/// What makes the futures of `event_loop` (see `FutureMaker`).
fn future_factory(event_loop: &Bound<'_, PyAny>) -> PyResult<FutureMaker> {
    let py = event_loop.py();
    let own = event_loop
        .get_type()
        .getattr(intern!(py, "create_future"))?;
    if !plain_create_future(&own)? {
        let create = event_loop.getattr(intern!(py, "create_future"))?;
        return Ok(FutureMaker::Call(create.unbind()));
    }
    let future = py
        .import(intern!(py, "asyncio"))?
        .getattr(intern!(py, "Future"))?;
    let kw = PyDict::new(py);
    kw.set_item(intern!(py, "loop"), event_loop)?;
    Ok(FutureMaker::Future(future.unbind(), kw.unbind()))
}

/// A keyword argument as the caller gave it: left out, or a value, None
/// included (an `Option` argument takes an explicit None for "left out", where
/// the Python method may mean something else by it).
pub enum Given<'py> {
    Missing,
    Value(Bound<'py, PyAny>),
}

impl<'py> FromPyObject<'py> for Given<'py> {
    fn extract_bound(ob: &Bound<'py, PyAny>) -> PyResult<Self> {
        Ok(Given::Value(ob.clone()))
    }
}

impl<'py> Given<'py> {
    /// The value given, if any.
    pub fn get(&self) -> Option<&Bound<'py, PyAny>> {
        match self {
            Given::Missing => None,
            Given::Value(v) => Some(v),
        }
    }
}

/// The shape of every native lane method: `native` runs with the lane
/// borrowed; when it makes no future (the gate is shut, the call needs
/// Python), `fallback` picks the lane's Python method, which `call` calls with
/// the lane released (the Python path may come back to the lane).
pub fn native_or_fallback<'py, L>(
    slf: &Bound<'py, L>,
    native: impl FnOnce(&mut L) -> PyResult<Option<PyObject>>,
    fallback: impl FnOnce(&L) -> &PyObject,
    call: impl FnOnce(&Bound<'py, PyAny>) -> PyResult<PyObject>,
) -> PyResult<PyObject>
where
    L: pyo3::PyClass<Frozen = pyo3::pyclass::boolean_struct::False>,
{
    let py = slf.py();
    let fallback = {
        let mut this = slf.borrow_mut();
        if let Some(fut) = native(&mut this)? {
            return Ok(fut);
        }
        fallback(&this).clone_ref(py)
    };
    call(fallback.bind(py))
}

/// Whether `v` is there and is `True` itself (the engine's flags are bools).
pub(crate) fn is_true(py: Python<'_>, v: Option<Bound<'_, PyAny>>) -> bool {
    v.is_some_and(|v| v.is(PyBool::new(py, true)))
}

/// Requests a lane sent, by encoder: the lane's share of the engine's
/// requests-by-encoder counts, which the engine adds up with its own `_sent`
/// when `stats` or `ops` is read (it keeps these in ``_lane_sent``).
///
/// Why not the engine's dict: bumping it cost a lookup, a new int object and a
/// store per request (~300 instructions of a Tarantool request's ~20k); here it
/// is an add to a counter found by the encoder's identity (a lane has a handful).
#[pyclass(module = "surge._core")]
pub struct LaneCounts {
    counts: Vec<(PyObject, u64)>,
}

#[pymethods]
impl LaneCounts {
    /// (encoder, requests sent) pairs.
    fn items(&self, py: Python<'_>) -> Vec<(PyObject, u64)> {
        self.counts
            .iter()
            .map(|(k, n)| (k.clone_ref(py), *n))
            .collect()
    }

    fn __traverse__(&self, visit: PyVisit<'_>) -> Result<(), PyTraverseError> {
        for (k, _) in &self.counts {
            visit.call(k)?;
        }
        Ok(())
    }

    fn __clear__(&mut self) {
        self.counts.clear();
    }
}

/// The engine half of a native lane (see the module's docs).
pub struct EngineLane {
    engine: PyObject,
    /// The engine's bound `_flush`, made once (scheduled or called per batch).
    flush: PyObject,
    /// The engine's slots: the state read per request, and its limits (read
    /// once per batch).
    core: Py<EngineState>,
    /// Requests sent through this lane, by encoder (see `LaneCounts`).
    sent: Py<LaneCounts>,
    flush_size: usize,
    early: Early,
    /// The loop last seen and how its futures are made.
    futures: Option<(PyObject, FutureMaker)>,
    knobs: Option<Knobs>,
}

impl EngineLane {
    /// A lane over `engine` (a `PipelinedConnection`); `flush_size` is its
    /// `FLUSH_SIZE`.
    pub fn new(engine: Bound<'_, PyAny>, flush_size: usize, early: Early) -> PyResult<Self> {
        let py = engine.py();
        let core = engine.downcast::<EngineState>()?.clone().unbind();
        let sent = Py::new(py, LaneCounts { counts: Vec::new() })?;
        engine
            .getattr(intern!(py, "_lane_sent"))?
            .call_method1(intern!(py, "append"), (&sent,))?;
        Ok(EngineLane {
            flush: engine.getattr(intern!(py, "_flush"))?.unbind(),
            engine: engine.unbind(),
            core,
            sent,
            flush_size,
            early,
            futures: None,
            knobs: None,
        })
    }

    /// The engine's gate for one request, with the codec's buffer as it is now:
    /// None when it is shut (the caller takes its Python path). Then the caller
    /// encodes the request and, with the codec released (a flush takes its
    /// buffer), hands its id to `register`.
    pub fn admit<'py>(
        &mut self,
        py: Python<'py>,
        buffered: Buffered,
    ) -> PyResult<Option<Admitted<'py>>> {
        let core = self.core.get();
        if !core.ready.is_true(py) || core.paused.is_true(py) {
            return Ok(None);
        }
        let knobs = match self.knobs {
            Some(k) if buffered.requests > 0 => k,
            _ => {
                let k = Knobs::read(py, core, self.early)?;
                self.knobs = Some(k);
                k
            }
        };
        if !knobs.untimed {
            return Ok(None);
        }
        let Some(pending) = core.pending.get(py) else {
            return Ok(None);
        };
        let pending = pending.downcast_into::<PyDict>()?;
        let in_flight = pending.len();
        if in_flight >= knobs.max_in_flight {
            return Ok(None);
        }
        let tbuf: usize = match core.tbuf.get(py) {
            Some(v) => v.extract()?,
            None => 0,
        };
        if buffered.bytes + tbuf >= knobs.max_bytes {
            return Ok(None);
        }
        let Some(event_loop) = core.event_loop.get(py) else {
            return Ok(None);
        };
        Ok(Some(Admitted {
            pending,
            in_flight,
            event_loop,
            buffered,
            early: knobs.early,
        }))
    }

    /// The rest of the engine's request path for a request `admit` let through
    /// and that was encoded as `id`: its future registered, the request counted
    /// under `key`, the flush scheduled (or made). Returns the future.
    pub fn register<'py>(
        &mut self,
        py: Python<'py>,
        admitted: Admitted<'py>,
        id: u64,
        key: &PyObject,
    ) -> PyResult<PyObject> {
        let Admitted {
            pending,
            in_flight,
            event_loop,
            buffered,
            early,
        } = admitted;
        let fut = match &self.futures {
            Some((l, maker)) if l.bind(py).is(&event_loop) => maker.make(py)?,
            _ => {
                let maker = future_factory(&event_loop)?;
                let fut = maker.make(py)?;
                self.futures = Some((event_loop.clone().unbind(), maker));
                fut
            }
        };
        pending.set_item(id, &fut)?;
        {
            let mut sent = self.sent.bind(py).borrow_mut();
            match sent.counts.iter_mut().find(|(k, _)| k.is(key)) {
                Some((_, n)) => *n += 1,
                None => sent.counts.push((key.clone_ref(py), 1)),
            }
        }
        let core = self.core.get();
        let encoded = buffered.requests + 1;
        // Requests sent whose replies were not read yet: the pending ones less
        // those still in the buffer.
        let on_wire = (in_flight + 1).saturating_sub(encoded);
        if !core.flush_scheduled.is_true(py) {
            core.flush_scheduled.set(PyBool::new(py, true).as_any());
            event_loop.call_method1(intern!(py, "call_soon"), (&self.flush,))?;
        } else if buffered.bytes >= self.flush_size || (encoded == early && on_wire == 0) {
            self.flush.call0(py)?;
        }
        Ok(fut)
    }

    /// For the owner's `__traverse__`.
    pub fn traverse(&self, visit: &PyVisit<'_>) -> Result<(), PyTraverseError> {
        visit.call(&self.engine)?;
        visit.call(&self.flush)?;
        visit.call(&self.core)?;
        visit.call(&self.sent)?;
        if let Some((l, maker)) = &self.futures {
            visit.call(l)?;
            maker.traverse(visit)?;
        }
        Ok(())
    }

    /// For the owner's `__clear__`.
    pub fn clear(&mut self) {
        self.futures = None;
    }
}
