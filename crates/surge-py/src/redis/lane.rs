//! `RespLane`: `Redis.get(k)`, the plain `Redis.set(k, v)` and every other command
//! whose reply needs no conversion in Python, in one native call.
//!
//! Why: with 1000 coroutines pipelining GET/SET over one connection, the client's
//! CPU per command is what limits the rate, and two Python frames per command
//! (the client's method, then the engine's `request`) were a fifth of it. The
//! engine's half (the gate, the future, the count, the flush) is
//! `crate::lane::EngineLane`, shared with Tarantool's lane; this one encodes the
//! command. Its early flush keeps the fixed `EARLY_FLUSH` it was measured with.
//! Whenever the gate is shut, or an argument is not one the codec takes as it is
//! (a memoryview, a bad type: the Python path decides), or SET has options, the
//! call goes to the Python method instead, which behaves exactly as before.

use pyo3::gc::PyVisit;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyTuple};
use pyo3::PyTraverseError;

use super::codec::RespCodec;
use crate::lane::{native_or_fallback, Buffered, Early, EngineLane};

/// A command to encode: a name and its arguments (GET, SET), or a whole tuple.
#[derive(Clone, Copy)]
enum Command<'a, 'py> {
    Named(&'static [u8], &'a [&'a Bound<'py, PyAny>]),
    Args(&'a Bound<'py, PyTuple>),
}

#[pyclass(module = "surge._core")]
pub struct RespLane {
    codec: Py<RespCodec>,
    lane: EngineLane,
    /// The keys the engine counts GET and SET under (`codec.command`, `command_ok`).
    key_command: PyObject,
    key_ok: PyObject,
    fallback_get: PyObject,
    fallback_set: PyObject,
    fallback_command: PyObject,
    fallback_command_ok: PyObject,
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
        self.submit_as(py, command, ok, false)
    }

    /// `submit`; `routed`: a cluster command (`RespCodec::redirect_last`).
    fn submit_as<'py>(
        &mut self,
        py: Python<'py>,
        command: Command<'_, 'py>,
        ok: bool,
        routed: bool,
    ) -> PyResult<Option<PyObject>> {
        let (admitted, id) = {
            let Ok(mut codec) = self.codec.try_borrow_mut(py) else {
                return Ok(None);
            };
            let (bytes, requests) = codec.buffered();
            let Some(admitted) = self.lane.admit(py, Buffered { bytes, requests })? else {
                return Ok(None);
            };
            let encoded = match command {
                Command::Named(name, args) => codec.encode_named(py, name, args, ok),
                Command::Args(args) => codec.encode_args(py, args, ok),
            };
            let Ok(id) = encoded else {
                return Ok(None);
            };
            if let (true, Command::Args(args)) = (routed, &command) {
                codec.redirect_last(args);
            }
            (admitted, id)
        };
        // The codec is released: a flush takes its buffer.
        let key = if ok { &self.key_ok } else { &self.key_command };
        self.lane.register(py, admitted, id, key).map(Some)
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
        Ok(RespLane {
            key_command: codec.getattr(intern!(py, "command"))?.unbind(),
            key_ok: codec.getattr(intern!(py, "command_ok"))?.unbind(),
            codec: codec.unbind(),
            lane: EngineLane::new(engine, flush_size, Early::Fixed(early_flush))?,
            fallback_get,
            fallback_set,
            fallback_command,
            fallback_command_ok,
        })
    }

    /// GET: a future of the value (or None).
    fn get(slf: &Bound<'_, Self>, name: &Bound<'_, PyAny>) -> PyResult<PyObject> {
        let py = slf.py();
        native_or_fallback(
            slf,
            |this| this.submit(py, Command::Named(b"GET", &[name]), false),
            |this| &this.fallback_get,
            |f| Ok(f.call1((name,))?.unbind()),
        )
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
        native_or_fallback(
            slf,
            |this| match plain {
                true => this.submit(py, Command::Named(b"SET", &[name, value]), true),
                false => Ok(None),
            },
            |this| &this.fallback_set,
            |f| {
                let none = py.None();
                let opt = |v: Option<&Bound<'_, PyAny>>| {
                    v.map_or(none.clone_ref(py), |v| v.clone().unbind())
                };
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
                Ok(f.call1(args)?.unbind())
            },
        )
    }

    /// Any command (`"HGET", "h", "f"`), as `codec.command` through the engine: a
    /// future of its reply.
    #[pyo3(signature = (*args))]
    fn command(slf: &Bound<'_, Self>, args: &Bound<'_, PyTuple>) -> PyResult<PyObject> {
        let py = slf.py();
        native_or_fallback(
            slf,
            |this| this.submit(py, Command::Args(args), false),
            |this| &this.fallback_command,
            |f| Ok(f.call1(args)?.unbind()),
        )
    }

    /// As `command`, a status reply (`+OK`) answering True (`codec.command_ok`).
    #[pyo3(signature = (*args))]
    fn command_ok(slf: &Bound<'_, Self>, args: &Bound<'_, PyTuple>) -> PyResult<PyObject> {
        let py = slf.py();
        native_or_fallback(
            slf,
            |this| this.submit(py, Command::Args(args), true),
            |this| &this.fallback_command_ok,
            |f| Ok(f.call1(args)?.unbind()),
        )
    }

    /// A cluster node's command (`ok`: as `command_ok`): its future, where a
    /// redirection does not answer it but goes out of band (see
    /// `RespCodec.command_routed`); None when the lane cannot send it now (not
    /// connected, over a limit, a request timeout, an argument for the Python
    /// path), and nothing was sent: the cluster takes its general path.
    #[pyo3(signature = (ok, *args))]
    fn routed(
        &mut self,
        py: Python<'_>,
        ok: bool,
        args: &Bound<'_, PyTuple>,
    ) -> PyResult<Option<PyObject>> {
        self.submit_as(py, Command::Args(args), ok, true)
    }

    fn __traverse__(&self, visit: PyVisit<'_>) -> Result<(), PyTraverseError> {
        visit.call(&self.codec)?;
        self.lane.traverse(&visit)?;
        visit.call(&self.key_command)?;
        visit.call(&self.key_ok)?;
        visit.call(&self.fallback_get)?;
        visit.call(&self.fallback_set)?;
        visit.call(&self.fallback_command)?;
        visit.call(&self.fallback_command_ok)?;
        Ok(())
    }

    fn __clear__(&mut self) {
        self.lane.clear();
    }
}
