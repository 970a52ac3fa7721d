//! The ASGI dispatcher's per-request path (`surge.asgi.app.AsgiApp`'s plan
//! dispatch), from the connection to the end of the app's first step in one
//! native call.
//!
//! In Python it took three frames per request (`AsgiApp._dispatch`,
//! `HttpCycle.start`, `EagerStarter.start`), and the app's first step ended in
//! a `StopIteration` raised, caught and unpacked. Here the scope is built, the
//! cycle made, the app called and its coroutine stepped with `PyIter_Send`
//! (the return value comes back without an exception), inside a fresh copy of
//! the context with the starter's host task made current, exactly as
//! `surge.asgi.eager.EagerStarter.start` does on Python 3.11 (see that module
//! for why). Every outcome but "returned, and nothing registered on the host"
//! goes to the starter's `_finish` (Python), which makes the task; with
//! asyncio's own eager start (Python >= 3.12) the starter is left to Python.

use std::sync::atomic::{AtomicBool, Ordering};

use pyo3::ffi;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyTuple};

use super::asgi::{AsgiCycle, ConnParts};
use super::connection::HttpConnection;
use super::request::Request;

/// One step of a coroutine, called through `Context.run`: `PyIter_Send`
/// returns the coroutine's return value without a StopIteration to raise and
/// catch (~1k instructions per request); `returned` tells which it was.
#[pyclass(module = "surge._core", frozen)]
pub struct CoroStep {
    returned: AtomicBool,
}

#[pymethods]
impl CoroStep {
    /// Sends None into `coro`: what it yielded or returned (see `returned`).
    fn __call__(&self, coro: &Bound<'_, PyAny>) -> PyResult<PyObject> {
        let py = coro.py();
        let mut result: *mut ffi::PyObject = std::ptr::null_mut();
        // SAFETY: `coro` and None are valid references held for the call;
        // PyIter_Send leaves a new reference in `result` unless it fails.
        let status = unsafe { ffi::PyIter_Send(coro.as_ptr(), ffi::Py_None(), &mut result) };
        let returned = match status {
            ffi::PySendResult::PYGEN_RETURN => true,
            ffi::PySendResult::PYGEN_NEXT => false,
            _ => return Err(PyErr::fetch(py)),
        };
        self.returned.store(returned, Ordering::Relaxed);
        // SAFETY: on RETURN and NEXT `result` is a new (owned) reference.
        Ok(unsafe { PyObject::from_owned_ptr(py, result) })
    }
}

/// What the dispatcher needs from the starter of the serving loop.
struct Starter {
    event_loop: PyObject,
    starter: PyObject,
    /// The starter runs first steps on a host task (Python 3.11): stepped here.
    hosted: bool,
}

/// The dispatch callable of an `AsgiApp`'s plan: ``dispatch(request, conn)``
/// starts the app for `request` and returns its `HttpCycle`.
#[pyclass(module = "surge._core")]
pub struct AsgiDispatch {
    /// The `AsgiApp`: `_connection_base(conn)`, `_starter_for(loop)`.
    owner: PyObject,
    app: PyObject,
    cycle_type: PyObject,
    root_path: String,
    state: Py<PyDict>,
    high_water: usize,
    /// `contextvars.copy_context`, asyncio's `_enter_task` and `_leave_task`,
    /// `types.CoroutineType`, and the cycle module's `_raise` and `_await`.
    copy_context: PyObject,
    /// `contextvars.Context.run`, called unbound (no bound method per request).
    context_run: PyObject,
    enter_task: PyObject,
    leave_task: PyObject,
    coroutine_type: PyObject,
    raise_in_coro: PyObject,
    await_in_coro: PyObject,
    step: Py<CoroStep>,
    starter: Option<Starter>,
}

impl AsgiDispatch {
    /// The starter for `event_loop` (made by the owner the first time a loop serves).
    fn starter(slf: &Bound<'_, Self>, event_loop: &Bound<'_, PyAny>) -> PyResult<(PyObject, bool)> {
        let py = slf.py();
        if let Some(s) = &slf.borrow().starter {
            if s.event_loop.is(event_loop) {
                return Ok((s.starter.clone_ref(py), s.hosted));
            }
        }
        let owner = slf.borrow().owner.clone_ref(py);
        let starter = owner.call_method1(py, intern!(py, "_starter_for"), (event_loop,))?;
        let hosted = starter.getattr(py, intern!(py, "hosted"))?.is_truthy(py)?;
        slf.borrow_mut().starter = Some(Starter {
            event_loop: event_loop.clone().unbind(),
            starter: starter.clone_ref(py),
            hosted,
        });
        Ok((starter, hosted))
    }
}

#[pymethods]
impl AsgiDispatch {
    /// The dispatcher of `owner` (an `AsgiApp`) serving `app`; see the module docs
    /// for the helpers.
    #[new]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        owner: PyObject,
        app: PyObject,
        cycle_type: PyObject,
        root_path: String,
        state: Py<PyDict>,
        high_water: usize,
        raise_in_coro: PyObject,
        await_in_coro: PyObject,
    ) -> PyResult<Self> {
        let tasks = py.import("asyncio.tasks")?;
        let contextvars = py.import("contextvars")?;
        Ok(AsgiDispatch {
            owner,
            app,
            cycle_type,
            root_path,
            state,
            high_water,
            copy_context: contextvars.getattr("copy_context")?.unbind(),
            context_run: contextvars.getattr("Context")?.getattr("run")?.unbind(),
            enter_task: tasks.getattr("_enter_task")?.unbind(),
            leave_task: tasks.getattr("_leave_task")?.unbind(),
            coroutine_type: py.import("types")?.getattr("CoroutineType")?.unbind(),
            raise_in_coro,
            await_in_coro,
            step: Py::new(
                py,
                CoroStep {
                    returned: AtomicBool::new(false),
                },
            )?,
            starter: None,
        })
    }

    /// Starts the app for `request` on `conn` (an `HttpProtocol`); its cycle.
    fn __call__<'py>(
        slf: &Bound<'py, Self>,
        request: &Bound<'py, Request>,
        conn: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let py = slf.py();
        let event_loop = conn.getattr(intern!(py, "_loop"))?;
        let (starter, hosted) = Self::starter(slf, &event_loop)?;
        let this = slf.borrow();
        // Per connection: the scope's constant keys and the cycles' `ConnParts`.
        let mut data = conn.getattr(intern!(py, "dispatcher_data"))?;
        if data.is_none() {
            let base = this
                .owner
                .call_method1(py, intern!(py, "_connection_base"), (conn,))?;
            let parts = Py::new(py, ConnParts::of(conn)?)?;
            data = PyTuple::new(py, [base, parts.into_any()])?.into_any();
            conn.setattr(intern!(py, "dispatcher_data"), &data)?;
        }
        let data = data.downcast::<PyTuple>()?;
        let (base, parts) = (data.get_borrowed_item(0)?, data.get_borrowed_item(1)?);
        let scope = request.borrow_mut().asgi_scope(
            py,
            base.downcast::<PyDict>()?,
            &this.root_path,
            this.state.bind(py),
        )?;
        // `conn.body_stream(request)`, without the call when the body is all here.
        let stream = if request.borrow().eof {
            py.None().into_bound(py)
        } else {
            conn.call_method1(intern!(py, "body_stream"), (request,))?
        };
        let cycle =
            this.cycle_type
                .bind(py)
                .call1((request, stream, conn, this.high_water, parts))?;
        let receive = cycle.getattr(intern!(py, "receive"))?;
        let send = cycle.getattr(intern!(py, "send"))?;
        // Any awaitable may come back (or the call may fail): the starter drives
        // coroutines.
        let coro = match this.app.bind(py).call1((scope, receive, send)) {
            Ok(c) if c.get_type().is(this.coroutine_type.bind(py)) => c,
            Ok(c) => this.await_in_coro.bind(py).call1((c,))?,
            Err(e) => this.raise_in_coro.bind(py).call1((e.into_value(py),))?,
        };
        if !hosted {
            cycle.call_method1(intern!(py, "_run"), (coro, starter))?;
            return Ok(cycle);
        }
        let starter = starter.into_bound(py);
        let host = starter.getattr(intern!(py, "_host"))?;
        let ctx = this.copy_context.bind(py).call0()?;
        this.enter_task.bind(py).call1((&event_loop, &host))?;
        let step = this.step.bind(py);
        let outcome = this.context_run.bind(py).call1((&ctx, step, &coro));
        this.leave_task.bind(py).call1((&event_loop, &host))?;
        let returned = step.get().returned.load(Ordering::Relaxed);
        let (kind, value) = match outcome {
            Ok(value) if returned => {
                if host.getattr(intern!(py, "_callbacks"))?.is_none()
                    && !host.call_method0(intern!(py, "cancelling"))?.is_truthy()?
                {
                    // Complete in its first step and nothing holds on to the host:
                    // the starter keeps it for the next request.
                    if !cycle.downcast::<AsgiCycle>()?.borrow().is_complete() {
                        cycle.call_method1(intern!(py, "_first_step_done"), (py.None(),))?;
                    }
                    return Ok(cycle);
                }
                (intern!(py, "returned"), value)
            }
            Ok(first) => (intern!(py, "suspended"), first),
            Err(e) => (
                intern!(py, "raised"),
                e.into_value(py).into_bound(py).into_any(),
            ),
        };
        let guard = cycle.getattr(intern!(py, "_guard"))?;
        let task = starter.call_method1(
            intern!(py, "_finish"),
            (host, ctx, coro, guard, kind, value),
        )?;
        cycle.call_method1(intern!(py, "_first_step_done"), (task,))?;
        Ok(cycle)
    }

    /// What `HttpProtocol.data_received` calls with the requests one read
    /// brought (`deferred`, from `HttpConnection.feed`) on a connection
    /// `protocol` serving this app. The usual case: one request, its body all
    /// here, nothing queued, held or streaming: the app is started, the response
    /// begun (it leaves with the loop's write batch) and the connection left idle,
    /// all here, and True comes back. Anything else returns False at once,
    /// before anything was done, and the protocol's Python path takes it (for
    /// the usual case that path cost ~4 Python frames per request).
    fn dispatch_read(
        slf: &Bound<'_, Self>,
        protocol: &Bound<'_, PyAny>,
        deferred: Option<&Bound<'_, PyList>>,
    ) -> PyResult<bool> {
        let py = slf.py();
        let Some(deferred) = deferred else {
            return Ok(false);
        };
        if deferred.len() != 1 {
            return Ok(false);
        }
        let item = deferred.get_item(0)?;
        let Ok(request) = item.downcast::<Request>() else {
            return Ok(false); // a ParseError
        };
        let conn = protocol.getattr(intern!(py, "_conn"))?;
        let conn = conn.downcast::<HttpConnection>()?;
        {
            let c = conn.borrow();
            if c.held || c.upgrade || c.closing || c.continue_owed {
                return Ok(false);
            }
        }
        if !request.borrow().eof
            || !protocol.getattr(intern!(py, "_body_stream"))?.is_none()
            || protocol.getattr(intern!(py, "_held"))?.is_truthy()?
            || protocol
                .getattr(intern!(py, "_paused_queue"))?
                .is_truthy()?
            || protocol.getattr(intern!(py, "_writer_busy"))?.is_truthy()?
            || protocol.getattr(intern!(py, "_closed"))?.is_truthy()?
            || protocol.getattr(intern!(py, "_queue"))?.len()? != 0
        {
            return Ok(false);
        }
        // From here on this request is handled here, as `_handle_dispatched` would.
        let cycle = match Self::__call__(slf, request, protocol) {
            Ok(cycle) => cycle,
            Err(e) => {
                protocol
                    .call_method1(intern!(py, "_dispatch_failed"), (request, e.into_value(py)))?;
                return Ok(true);
            }
        };
        let begun = match cycle.downcast::<AsgiCycle>() {
            Ok(c) if !protocol.getattr(intern!(py, "_closed"))?.is_truthy()? => c,
            _ => {
                protocol.call_method1(intern!(py, "_queue_dispatched"), (request, cycle))?;
                return Ok(true);
            }
        };
        match AsgiCycle::begin(begun, protocol)? {
            None => {
                // `writer_done` follows, once the app has sent the rest.
                protocol.setattr(intern!(py, "_writer_busy"), true)?;
                protocol.setattr(intern!(py, "_inline_request"), request)?;
            }
            Some(keep_alive) => {
                request.borrow_mut().stream = None;
                if !keep_alive {
                    protocol.call_method0(intern!(py, "_drop_queue"))?;
                    protocol.call_method0(intern!(py, "_close"))?;
                } else if conn.borrow().closing
                    || protocol.getattr(intern!(py, "_eof"))?.is_truthy()?
                    || protocol
                        .getattr(intern!(py, "_server"))?
                        .getattr(intern!(py, "closing"))?
                        .is_truthy()?
                {
                    // The connection ends after this: `_flush` closes it.
                    protocol.call_method0(intern!(py, "_flush"))?;
                } else {
                    // Idle again: what `_flush` would leave.
                    conn.borrow_mut().fast = true;
                }
            }
        }
        Ok(true)
    }

    fn __traverse__(&self, visit: pyo3::PyVisit<'_>) -> Result<(), pyo3::PyTraverseError> {
        visit.call(&self.owner)?;
        visit.call(&self.app)?;
        visit.call(&self.cycle_type)?;
        visit.call(&self.state)?;
        if let Some(s) = &self.starter {
            visit.call(&s.event_loop)?;
            visit.call(&s.starter)?;
        }
        Ok(())
    }

    fn __clear__(&mut self) {
        self.starter = None;
    }
}
