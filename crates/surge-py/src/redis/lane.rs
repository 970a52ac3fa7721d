//! `RespLane`: `Redis.get(k)`, the plain `Redis.set(k, v)` and every other command
//! whose reply needs no conversion in Python, in one native call.
//!
//! Why: with 1000 coroutines pipelining GET/SET over one connection, the client's
//! CPU per command is what limits the rate, and two Python frames per command
//! (the client's method, then the engine's `request`) were a fifth of it. The
//! lane does what `surge.engine.PipelinedConnection.request` does, step for step,
//! reading the engine's own state from its instance dict (so the engine stays
//! the one owner of that state): the same gate (connected, not paused, under the
//! in-flight and byte limits, no per-request timeout; the limits and the timeout,
//! public settings that rarely change, are read once per flushed batch), the
//! command encoded into the codec's buffer, a future from the loop registered
//! under the command's id, the request counted, and the flush scheduled once per
//! loop iteration (or made early, by the engine's `FLUSH_SIZE` and `EARLY_FLUSH`
//! rules). Whenever the
//! gate is shut, or an argument is not one the codec takes as it is (a
//! memoryview, a bad type: the Python path decides), or SET has options, the
//! call goes to the Python method instead, which behaves exactly as before.

use pyo3::exceptions::PyTypeError;
use pyo3::gc::PyVisit;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyInt, PyString, PyTuple};
use pyo3::PyTraverseError;

use super::codec::RespCodec;

/// The engine's public limits, read with the first request after each flush (a
/// change takes effect from the next batch) rather than three lookups per call.
#[derive(Clone, Copy)]
struct Knobs {
    max_in_flight: usize,
    max_bytes: usize,
    /// No per-request timeout (a timed request takes the engine's own path).
    untimed: bool,
}

impl Knobs {
    fn read(py: Python<'_>, st: &Bound<'_, PyDict>) -> PyResult<Self> {
        let limit = |key: &Bound<'_, PyString>| -> PyResult<usize> {
            match st.get_item(key)? {
                Some(v) => v.extract(),
                None => Ok(0),
            }
        };
        Ok(Knobs {
            max_in_flight: limit(intern!(py, "max_in_flight"))?,
            max_bytes: limit(intern!(py, "max_in_flight_bytes"))?,
            untimed: st
                .get_item(intern!(py, "request_timeout"))?
                .is_some_and(|v| v.is_none()),
        })
    }
}

/// A command to encode: a name and its arguments (GET, SET), or a whole tuple.
enum Command<'a, 'py> {
    Named(&'static [u8], &'a [&'a Bound<'py, PyAny>]),
    Args(&'a Bound<'py, PyTuple>),
}

#[pyclass(module = "surge._core")]
pub struct RespLane {
    codec: Py<RespCodec>,
    engine: PyObject,
    /// The engine's instance dict: its state, read per call without a getattr.
    state: Py<PyDict>,
    /// The engine's requests-by-encoder counters (`PipelinedConnection._sent`).
    sent: Py<PyDict>,
    /// The keys the engine counts GET and SET under (`codec.command`, `command_ok`).
    key_command: PyObject,
    key_ok: PyObject,
    fallback_get: PyObject,
    fallback_set: PyObject,
    fallback_command: PyObject,
    fallback_command_ok: PyObject,
    flush_size: usize,
    early_flush: usize,
    /// The loop last seen and its bound `create_future`.
    futures: Option<(PyObject, PyObject)>,
    knobs: Option<Knobs>,
}

impl RespLane {
    /// The engine's request path for one command; None: the gate is shut or an
    /// argument was refused (the caller takes the Python path).
    fn submit<'py>(
        &mut self,
        py: Python<'py>,
        command: Command<'_, 'py>,
        ok: bool,
    ) -> PyResult<Option<PyObject>> {
        let st = self.state.bind(py);
        let item = |key: &Bound<'py, PyString>| st.get_item(key);
        let truthy = |v: Option<Bound<'_, PyAny>>| v.is_some_and(|v| v.is(PyBool::new(py, true)));
        if !truthy(item(intern!(py, "_ready"))?) || truthy(item(intern!(py, "_paused"))?) {
            return Ok(None);
        }
        let Ok((buffered, encoded)) = self.codec.try_borrow(py).map(|c| c.buffered()) else {
            return Ok(None);
        };
        let knobs = match self.knobs {
            Some(k) if encoded > 0 => k,
            _ => {
                let k = Knobs::read(py, st)?;
                self.knobs = Some(k);
                k
            }
        };
        if !knobs.untimed {
            return Ok(None);
        }
        let Some(pending) = item(intern!(py, "_pending"))? else {
            return Ok(None);
        };
        let pending = pending.downcast_into::<PyDict>()?;
        let in_flight = pending.len();
        if in_flight >= knobs.max_in_flight {
            return Ok(None);
        }
        let tbuf: usize = match item(intern!(py, "_tbuf"))? {
            Some(v) => v.extract()?,
            None => 0,
        };
        if buffered + tbuf >= knobs.max_bytes {
            return Ok(None);
        }
        let (id, before, encoded) = {
            let Ok(mut codec) = self.codec.try_borrow_mut(py) else {
                return Ok(None);
            };
            let encoded = match command {
                Command::Named(name, args) => codec.encode_named(py, name, args, ok),
                Command::Args(args) => codec.encode_args(py, args, ok),
            };
            let Ok(id) = encoded else {
                return Ok(None);
            };
            (id, buffered, codec.buffered().1)
        };
        let Some(event_loop) = item(intern!(py, "_loop"))? else {
            return Ok(None);
        };
        let create = match &self.futures {
            Some((l, c)) if l.bind(py).is(&event_loop) => c.clone_ref(py),
            _ => {
                let c = event_loop.getattr(intern!(py, "create_future"))?.unbind();
                self.futures = Some((event_loop.clone().unbind(), c.clone_ref(py)));
                c
            }
        };
        let fut = create.call0(py)?;
        pending.set_item(id, &fut)?;
        let sent = self.sent.bind(py);
        let key = if ok { &self.key_ok } else { &self.key_command };
        let count = match sent.get_item(key)? {
            Some(n) => n.downcast_into::<PyInt>()?.extract::<u64>()?,
            None => 0,
        };
        sent.set_item(key, count + 1)?;
        if !truthy(item(intern!(py, "_flush_scheduled"))?) {
            st.set_item(intern!(py, "_flush_scheduled"), true)?;
            let flush = self.engine.bind(py).getattr(intern!(py, "_flush"))?;
            event_loop.call_method1(intern!(py, "call_soon"), (flush,))?;
        } else if before >= self.flush_size
            || (encoded == self.early_flush && in_flight + 1 == encoded)
        {
            self.engine.bind(py).call_method0(intern!(py, "_flush"))?;
        }
        Ok(Some(fut))
    }
}

#[pymethods]
impl RespLane {
    /// A lane over `engine` (a `PipelinedConnection`) and its `codec`;
    /// `fallback_get(name)`, `fallback_set(name, value, ex, px, nx, xx,
    /// keepttl, get, exat, pxat)`, `fallback_command(*args)` and
    /// `fallback_command_ok(*args)` are the Python paths taken when the lane
    /// cannot serve a call.
    #[new]
    #[pyo3(signature = (
        codec, engine, fallback_get, fallback_set, fallback_command, fallback_command_ok,
        flush_size, early_flush
    ))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        codec: Bound<'_, RespCodec>,
        engine: Bound<'_, PyAny>,
        fallback_get: PyObject,
        fallback_set: PyObject,
        fallback_command: PyObject,
        fallback_command_ok: PyObject,
        flush_size: usize,
        early_flush: usize,
    ) -> PyResult<Self> {
        let state = engine
            .getattr(intern!(py, "__dict__"))?
            .downcast_into::<PyDict>()
            .map_err(|_| PyTypeError::new_err("the engine has no instance dict"))?;
        let sent = engine
            .getattr(intern!(py, "_sent"))?
            .downcast_into::<PyDict>()
            .map_err(|_| PyTypeError::new_err("the engine's _sent is not a dict"))?;
        Ok(RespLane {
            key_command: codec.getattr(intern!(py, "command"))?.unbind(),
            key_ok: codec.getattr(intern!(py, "command_ok"))?.unbind(),
            codec: codec.unbind(),
            engine: engine.unbind(),
            state: state.unbind(),
            sent: sent.unbind(),
            fallback_get,
            fallback_set,
            fallback_command,
            fallback_command_ok,
            flush_size,
            early_flush,
            futures: None,
            knobs: None,
        })
    }

    /// GET: a future of the value (or None).
    fn get(slf: &Bound<'_, Self>, name: &Bound<'_, PyAny>) -> PyResult<PyObject> {
        let py = slf.py();
        let fallback = {
            let mut this = slf.borrow_mut();
            if let Some(fut) = this.submit(py, Command::Named(b"GET", &[name]), false)? {
                return Ok(fut);
            }
            this.fallback_get.clone_ref(py)
        };
        // The lane is released first: the Python path may come back to it.
        fallback.call1(py, (name,))
    }

    /// SET with redis-py's signature: the plain `set(name, value)` here, any
    /// option through the Python method.
    #[pyo3(signature = (
        name, value, ex=None, px=None, nx=None, xx=None, keepttl=None, get=None,
        exat=None, pxat=None
    ))]
    #[allow(clippy::too_many_arguments)]
    fn set(
        slf: &Bound<'_, Self>,
        name: &Bound<'_, PyAny>,
        value: &Bound<'_, PyAny>,
        ex: Option<&Bound<'_, PyAny>>,
        px: Option<&Bound<'_, PyAny>>,
        nx: Option<&Bound<'_, PyAny>>,
        xx: Option<&Bound<'_, PyAny>>,
        keepttl: Option<&Bound<'_, PyAny>>,
        get: Option<&Bound<'_, PyAny>>,
        exat: Option<&Bound<'_, PyAny>>,
        pxat: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<PyObject> {
        let py = slf.py();
        // Options left out arrive as None (redis-py's False): either way, not set.
        let truthy = |v: Option<&Bound<'_, PyAny>>| v.map_or(Ok(false), |v| v.is_truthy());
        let plain = ex.is_none()
            && px.is_none()
            && exat.is_none()
            && pxat.is_none()
            && !truthy(nx)?
            && !truthy(xx)?
            && !truthy(keepttl)?
            && !truthy(get)?;
        let fallback = {
            let mut this = slf.borrow_mut();
            if plain {
                if let Some(fut) = this.submit(py, Command::Named(b"SET", &[name, value]), true)? {
                    return Ok(fut);
                }
            }
            this.fallback_set.clone_ref(py)
        };
        let none = py.None();
        let opt =
            |v: Option<&Bound<'_, PyAny>>| v.map_or(none.clone_ref(py), |v| v.clone().unbind());
        let flag = |v: Option<&Bound<'_, PyAny>>| {
            v.map_or_else(
                || PyBool::new(py, false).to_owned().into_any().unbind(),
                |v| v.clone().unbind(),
            )
        };
        let args = (
            name,
            value,
            opt(ex),
            opt(px),
            flag(nx),
            flag(xx),
            flag(keepttl),
            flag(get),
            opt(exat),
            opt(pxat),
        );
        fallback.call1(py, args)
    }

    /// Any command (`"HGET", "h", "f"`), as `codec.command` through the engine: a
    /// future of its reply.
    #[pyo3(signature = (*args))]
    fn command(slf: &Bound<'_, Self>, args: &Bound<'_, PyTuple>) -> PyResult<PyObject> {
        let py = slf.py();
        let fallback = {
            let mut this = slf.borrow_mut();
            if let Some(fut) = this.submit(py, Command::Args(args), false)? {
                return Ok(fut);
            }
            this.fallback_command.clone_ref(py)
        };
        fallback.call1(py, args)
    }

    /// As `command`, a status reply (`+OK`) answering True (`codec.command_ok`).
    #[pyo3(signature = (*args))]
    fn command_ok(slf: &Bound<'_, Self>, args: &Bound<'_, PyTuple>) -> PyResult<PyObject> {
        let py = slf.py();
        let fallback = {
            let mut this = slf.borrow_mut();
            if let Some(fut) = this.submit(py, Command::Args(args), true)? {
                return Ok(fut);
            }
            this.fallback_command_ok.clone_ref(py)
        };
        fallback.call1(py, args)
    }

    fn __traverse__(&self, visit: PyVisit<'_>) -> Result<(), PyTraverseError> {
        visit.call(&self.codec)?;
        visit.call(&self.engine)?;
        visit.call(&self.state)?;
        visit.call(&self.sent)?;
        visit.call(&self.key_command)?;
        visit.call(&self.key_ok)?;
        visit.call(&self.fallback_get)?;
        visit.call(&self.fallback_set)?;
        visit.call(&self.fallback_command)?;
        visit.call(&self.fallback_command_ok)?;
        if let Some((l, c)) = &self.futures {
            visit.call(l)?;
            visit.call(c)?;
        }
        Ok(())
    }

    fn __clear__(&mut self) {
        self.futures = None;
    }
}
