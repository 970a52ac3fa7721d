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

use std::sync::OnceLock;

use pyo3::exceptions::PyTypeError;
use pyo3::ffi;
use pyo3::impl_::pyclass_init::PyObjectInit;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::pyclass_init::PyClassInitializer;
use pyo3::types::{PyBytes, PyDict, PyList, PyTuple, PyType};

use super::asgi::{AsgiCycle, ConnParts};
use super::connection::Deferred;
use super::request::{asgi_scope_defaults, Request};
use crate::call;

// CPython's context functions (public since 3.7, in every later version, but
// outside the limited API, so pyo3's abi3 bindings leave them out).
extern "C" {
    fn PyContext_CopyCurrent() -> *mut ffi::PyObject;
    fn PyContext_Enter(ctx: *mut ffi::PyObject) -> std::os::raw::c_int;
    fn PyContext_Exit(ctx: *mut ffi::PyObject) -> std::os::raw::c_int;
}

/// A copy of the current context (``contextvars.copy_context()`` without the
/// call).
fn copy_current_context(py: Python<'_>) -> PyResult<Bound<'_, PyAny>> {
    // SAFETY: called with the GIL held; a new reference or null with an
    // exception set.
    unsafe { Bound::from_owned_ptr_or_err(py, PyContext_CopyCurrent()) }
}

/// One step of the coroutine `coro` inside the context `ctx` (a fresh copy,
/// never entered): ``ctx.run(coro.send, None)`` without its two calls, what
/// the step yielded (false) or returned (true). Entering the context and
/// sending from here, rather than calling `Context.run` with a step function,
/// saves the argument handling of both calls and the function's trampoline
/// (~0.4k instructions per request, callgrind); `PyIter_Send` hands the return
/// value back without a StopIteration to raise and catch (~1k).
fn step_in<'py>(
    ctx: &Bound<'py, PyAny>,
    coro: &Bound<'py, PyAny>,
) -> PyResult<(Bound<'py, PyAny>, bool)> {
    let py = ctx.py();
    // SAFETY: `ctx` is a Context held for the call; Enter fails (exception
    // set) only for a context already entered.
    if unsafe { PyContext_Enter(ctx.as_ptr()) } < 0 {
        return Err(PyErr::fetch(py));
    }
    let mut result: *mut ffi::PyObject = std::ptr::null_mut();
    // SAFETY: `coro` and None are valid references held for the call;
    // PyIter_Send leaves a new reference in `result` unless it fails (then an
    // exception is set). Exit leaves that exception alone, as `Context.run`
    // relies on; it fails only for a context not entered on this thread.
    let (status, exited) = unsafe {
        let status = ffi::PyIter_Send(coro.as_ptr(), ffi::Py_None(), &mut result);
        (status, PyContext_Exit(ctx.as_ptr()))
    };
    // SAFETY: on RETURN and NEXT `result` is a new (owned) reference, else null.
    let value = unsafe { Bound::from_owned_ptr_or_opt(py, result) };
    if exited < 0 {
        return Err(PyErr::fetch(py));
    }
    match (status, value) {
        (ffi::PySendResult::PYGEN_RETURN, Some(v)) => Ok((v, true)),
        (ffi::PySendResult::PYGEN_NEXT, Some(v)) => Ok((v, false)),
        _ => Err(PyErr::fetch(py)),
    }
}

/// What the dispatcher needs from the starter of the serving loop.
struct Starter {
    event_loop: PyObject,
    starter: PyObject,
    /// The starter runs first steps on a host task (Python 3.11): stepped here.
    hosted: bool,
    /// The starter's `_host`, looked up again only after `_finish` (which alone
    /// replaces it: the starter is this dispatcher's own), not once per request.
    host: Option<PyObject>,
}

/// The dispatch callable of an `AsgiApp`'s plan: ``dispatch(request, conn)``
/// starts the app for `request` and returns its `HttpCycle`.
#[pyclass(module = "surge._core")]
pub struct AsgiDispatch {
    /// The `AsgiApp`: `_connection_base(conn)`, `_starter_for(loop)`.
    owner: PyObject,
    app: PyObject,
    cycle_type: PyObject,
    /// The cycle type's `receive` and `send`, bound to each cycle by their
    /// descriptor's own `__get__` (see `Binder`).
    receive: Option<Binder>,
    send: Option<Binder>,
    root_path: String,
    state: Py<PyDict>,
    high_water: usize,
    /// asyncio's current task of each loop (`asyncio.tasks._current_tasks`,
    /// the dict `current_task()` reads), set and cleared here around a first
    /// step (two dict operations against ~1.4k instructions per request for
    /// calls of `_enter_task` and `_leave_task`, which remain for the errors).
    current_tasks: Py<PyDict>,
    enter_task: PyObject,
    leave_task: PyObject,
    /// `asyncio.Task.cancelling`, called unbound on the host (no bound method
    /// per request).
    task_cancelling: PyObject,
    coroutine_type: PyObject,
    /// The cycle module's `_raise` and `_await`.
    raise_in_coro: PyObject,
    await_in_coro: PyObject,
    starter: Option<Starter>,
}

/// A method of `AsgiCycle` that a cycle type inherits as it is: its descriptor
/// and the descriptor's `__get__`, which makes the bound method a `getattr`
/// on the cycle would make. Called directly it skips what `getattr` does first
/// (the lookup along the subclass's MRO, the instance-dict check, the
/// descriptor's type-slot fetch): ~0.3k instructions per method per request,
/// callgrind. A subclass that overrides the method gets no binder: `getattr`.
struct Binder {
    descr: PyObject,
    get: ffi::descrgetfunc,
}

impl Binder {
    /// The binder of `name` on `cycle_type`, if it inherits `AsgiCycle`'s.
    fn of(cycle_type: &Bound<'_, PyType>, name: &str) -> PyResult<Option<Self>> {
        let py = cycle_type.py();
        let descr = cycle_type.getattr(name)?;
        if !descr.is(&py.get_type::<AsgiCycle>().getattr(name)?) {
            return Ok(None);
        }
        // SAFETY: `descr` is a live object; PyType_GetSlot reads a slot of its
        // (static, method_descriptor) type, allowed for static types since 3.10.
        let get =
            unsafe { ffi::PyType_GetSlot(ffi::Py_TYPE(descr.as_ptr()), ffi::Py_tp_descr_get) };
        if get.is_null() {
            return Ok(None);
        }
        Ok(Some(Binder {
            descr: descr.unbind(),
            // SAFETY: the slot `Py_tp_descr_get` holds a `descrgetfunc`.
            get: unsafe { std::mem::transmute::<*mut std::ffi::c_void, ffi::descrgetfunc>(get) },
        }))
    }

    /// The method bound to `cycle` (an instance of the type it was made for).
    fn bind<'py>(&self, cycle: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
        let py = cycle.py();
        // SAFETY: `descr` and `cycle` are live references held for the call, and
        // `cycle`'s type is the one whose MRO gave `descr`; `__get__` returns a
        // new reference or null with an exception set.
        unsafe {
            let bound = (self.get)(
                self.descr.as_ptr(),
                cycle.as_ptr(),
                ffi::Py_TYPE(cycle.as_ptr()).cast(),
            );
            Bound::from_owned_ptr_or_err(py, bound)
        }
    }
}

/// One request's connection data: the scope's constant keys and the cycles'
/// `ConnParts` (the protocol's `dispatcher_data`, made on its first request).
fn conn_data<'py>(
    owner: &Bound<'py, PyAny>,
    conn: &Bound<'py, PyAny>,
) -> PyResult<(Bound<'py, PyDict>, Bound<'py, ConnParts>)> {
    let py = conn.py();
    let mut data = conn.getattr(intern!(py, "dispatcher_data"))?;
    if data.is_none() {
        let base = owner
            .call_method1(intern!(py, "_connection_base"), (conn,))?
            .downcast_into::<PyDict>()?;
        asgi_scope_defaults(&base)?;
        let base = base.into_any();
        let parts = Bound::new(py, ConnParts::of(conn)?)?;
        data = PyTuple::new(py, [base, parts.into_any()])?.into_any();
        conn.setattr(intern!(py, "dispatcher_data"), &data)?;
    }
    let data = data.downcast_into::<PyTuple>()?;
    Ok((
        data.get_item(0)?.downcast_into::<PyDict>()?,
        data.get_item(1)?.downcast_into::<ConnParts>()?,
    ))
}

impl AsgiDispatch {
    /// The starter for `event_loop` (made by the owner the first time a loop serves).
    fn starter(
        slf: &Bound<'_, Self>,
        event_loop: &Bound<'_, PyAny>,
    ) -> PyResult<(PyObject, bool, Option<PyObject>)> {
        let py = slf.py();
        if let Some(s) = &slf.borrow().starter {
            if s.event_loop.is(event_loop) {
                let host = s.host.as_ref().map(|h| h.clone_ref(py));
                return Ok((s.starter.clone_ref(py), s.hosted, host));
            }
        }
        let owner = slf.borrow().owner.clone_ref(py);
        let starter = owner.call_method1(py, intern!(py, "_starter_for"), (event_loop,))?;
        let hosted = starter.getattr(py, intern!(py, "hosted"))?.is_truthy(py)?;
        let host = if hosted {
            Some(starter.getattr(py, intern!(py, "_host"))?)
        } else {
            None
        };
        slf.borrow_mut().starter = Some(Starter {
            event_loop: event_loop.clone().unbind(),
            starter: starter.clone_ref(py),
            hosted,
            host: host.as_ref().map(|h| h.clone_ref(py)),
        });
        Ok((starter, hosted, host))
    }

    /// Makes `host` the current task of `event_loop` (`asyncio._enter_task`).
    /// The dict is used through the C API: most of what this and `leave` cost
    /// (~0.7k instructions per request) is the dict's own work, and PyO3's
    /// wrappers (owned references and their release) added ~50 to it.
    fn enter(&self, event_loop: &Bound<'_, PyAny>, host: &Bound<'_, PyAny>) -> PyResult<()> {
        let py = event_loop.py();
        let tasks = self.current_tasks.bind(py).as_ptr();
        // SAFETY: `tasks` is a dict and `event_loop`, `host` live references held
        // across the calls; `PyDict_GetItemWithError` returns a borrowed
        // reference (not kept) or null, with an exception set on failure.
        unsafe {
            if ffi::PyDict_GetItemWithError(tasks, event_loop.as_ptr()).is_null() {
                if !ffi::PyErr_Occurred().is_null() {
                    return Err(PyErr::fetch(py));
                }
                if ffi::PyDict_SetItem(tasks, event_loop.as_ptr(), host.as_ptr()) < 0 {
                    return Err(PyErr::fetch(py));
                }
                return Ok(());
            }
        }
        // Another task is current: asyncio's own call raises its error.
        self.enter_task.call1(py, (event_loop, host))?;
        Ok(())
    }

    /// Undoes `enter` (`asyncio._leave_task`).
    fn leave(&self, event_loop: &Bound<'_, PyAny>, host: &Bound<'_, PyAny>) -> PyResult<()> {
        let py = event_loop.py();
        let tasks = self.current_tasks.bind(py).as_ptr();
        // SAFETY: as in `enter`; the borrowed reference is only compared.
        unsafe {
            let current = ffi::PyDict_GetItemWithError(tasks, event_loop.as_ptr());
            if current == host.as_ptr() {
                if ffi::PyDict_DelItem(tasks, event_loop.as_ptr()) < 0 {
                    return Err(PyErr::fetch(py));
                }
                return Ok(());
            }
            if current.is_null() && !ffi::PyErr_Occurred().is_null() {
                return Err(PyErr::fetch(py));
            }
        }
        // Not the host: asyncio's own call raises its error.
        self.leave_task.call1(py, (event_loop, host))?;
        Ok(())
    }

    /// `dispatch_read` of a read that brought the one request (or parse error)
    /// `item`, with the connection's data at hand; `from_reader`: called
    /// by `AsgiReader` for a read, which saw the protocol's `_body_stream` None
    /// (and no read comes to a closed connection: its `_closed` is not asked).
    fn read(
        slf: &Bound<'_, Self>,
        protocol: &Bound<'_, PyAny>,
        item: &Bound<'_, PyAny>,
        base: &Bound<'_, PyDict>,
        parts: &Bound<'_, ConnParts>,
        from_reader: bool,
    ) -> PyResult<bool> {
        let py = slf.py();
        let Ok(request) = item.downcast::<Request>() else {
            return Ok(false); // a ParseError
        };
        let conn = parts.get().native.bind(py);
        {
            // Idle when this read began (`fed_idle`): nothing queued, held back or
            // being written in Python (the protocol's `_queue`, `_paused_queue`,
            // `_writer_busy`; `_held` pauses reading, so no read comes then).
            let c = conn.borrow();
            if !c.fed_idle || c.held || c.upgrade || c.closing || c.continue_owed {
                return Ok(false);
            }
        }
        if !request.borrow().body_whole()
            || (!from_reader
                && (!protocol.getattr(intern!(py, "_body_stream"))?.is_none()
                    || protocol.getattr(intern!(py, "_closed"))?.is_truthy()?))
        {
            return Ok(false);
        }
        // From here on this request is handled here, as `_handle_dispatched` would.
        let cycle = match Self::start(slf, request, protocol, base, parts, true) {
            Ok(cycle) => cycle,
            Err(e) => {
                protocol
                    .call_method1(intern!(py, "_dispatch_failed"), (request, e.into_value(py)))?;
                return Ok(true);
            }
        };
        let begun = match cycle.downcast::<AsgiCycle>() {
            // (A first step does no I/O: the connection is as open as it was.)
            Ok(c) if from_reader || !protocol.getattr(intern!(py, "_closed"))?.is_truthy()? => c,
            _ => {
                protocol.call_method1(intern!(py, "_queue_dispatched"), (request, cycle))?;
                return Ok(true);
            }
        };
        match AsgiCycle::begin_open(begun, protocol, true)? {
            None => {
                // `writer_done` follows, once the app has sent the rest.
                protocol.setattr(intern!(py, "_writer_busy"), true)?;
                protocol.setattr(intern!(py, "_inline_request"), request)?;
            }
            Some(keep_alive) => {
                request.borrow_mut().stream = None;
                let ends = {
                    let c = conn.borrow();
                    c.closing || c.draining
                };
                if !keep_alive {
                    protocol.call_method0(intern!(py, "_drop_queue"))?;
                    protocol.call_method0(intern!(py, "_close"))?;
                } else if ends {
                    // The connection ends after this: `_flush` closes it. (No EOF
                    // can have come: this runs for a read. A closing server has
                    // every connection draining, see `Server.connection_opened`:
                    // its `closing` is not asked per request.)
                    protocol.call_method0(intern!(py, "_flush"))?;
                } else {
                    // Idle again: what `_flush` would leave.
                    conn.borrow_mut().fast = true;
                }
            }
        }
        Ok(true)
    }

    /// `__call__` with the connection's data at hand; `open`: the caller saw the
    /// connection open (see `AsgiCycle::set_open_step`).
    fn start<'py>(
        slf: &Bound<'py, Self>,
        request: &Bound<'py, Request>,
        conn: &Bound<'py, PyAny>,
        base: &Bound<'py, PyDict>,
        parts: &Bound<'py, ConnParts>,
        open: bool,
    ) -> PyResult<Bound<'py, PyAny>> {
        let py = slf.py();
        let event_loop = parts.get().event_loop.bind(py);
        let (starter, hosted, host) = Self::starter(slf, event_loop)?;
        let this = slf.borrow();
        let scope = request.borrow_mut().asgi_scope(
            py,
            base,
            &this.root_path,
            this.state.bind(py),
            true,
        )?;
        // `conn.body_stream(request)`, without the call when the body is all here.
        let stream = if request.borrow().body_whole() {
            None
        } else {
            Some(
                conn.call_method1(intern!(py, "body_stream"), (request,))?
                    .unbind(),
            )
        };
        let cycle = AsgiCycle::create(
            py,
            request.clone(),
            stream,
            conn.clone(),
            this.high_water,
            Some(parts),
        )?;
        // An instance of the Python subclass made here: calling the class cost a
        // tuple, `type.__call__` and the parsing of five arguments (~0.8k
        // instructions per request).
        // SAFETY: `cycle_type` is a subclass of AsgiCycle (checked in `new`).
        let cycle = unsafe {
            let object = PyClassInitializer::from(cycle)
                .into_new_object(py, this.cycle_type.as_ptr().cast::<ffi::PyTypeObject>())?;
            Bound::from_owned_ptr(py, object)
        };
        let receive = match &this.receive {
            Some(b) => b.bind(&cycle)?,
            None => cycle.getattr(intern!(py, "receive"))?,
        };
        let send = match &this.send {
            Some(b) => b.bind(&cycle)?,
            None => cycle.getattr(intern!(py, "send"))?,
        };
        // Any awaitable may come back (or the call may fail): the starter drives
        // coroutines.
        let coro = match call::call3(this.app.bind(py), scope.as_any(), &receive, &send) {
            Ok(c) if c.get_type().is(this.coroutine_type.bind(py)) => c,
            Ok(c) => this.await_in_coro.bind(py).call1((c,))?,
            Err(e) => this.raise_in_coro.bind(py).call1((e.into_value(py),))?,
        };
        if !hosted {
            cycle.call_method1(intern!(py, "_run"), (coro, starter))?;
            return Ok(cycle);
        }
        let starter = starter.into_bound(py);
        let host = match host {
            Some(h) => h.into_bound(py),
            None => starter.getattr(intern!(py, "_host"))?,
        };
        let ctx = copy_current_context(py)?;
        this.enter(event_loop, &host)?;
        let native = cycle.downcast::<AsgiCycle>()?;
        native.borrow_mut().set_open_step(open);
        let outcome = step_in(&ctx, &coro);
        native.borrow_mut().set_open_step(false);
        this.leave(event_loop, &host)?;
        let (kind, value) = match outcome {
            Ok((value, true)) => {
                if host.getattr(intern!(py, "_callbacks"))?.is_none()
                    && !call::call1(this.task_cancelling.bind(py), &host)?.is_truthy()?
                {
                    // Complete in its first step and nothing holds on to the host:
                    // the starter keeps it for the next request.
                    if !native.borrow().is_complete() {
                        cycle.call_method1(intern!(py, "_first_step_done"), (py.None(),))?;
                    }
                    return Ok(cycle);
                }
                (intern!(py, "returned"), value)
            }
            Ok((first, _)) => (intern!(py, "suspended"), first),
            Err(e) => (
                intern!(py, "raised"),
                e.into_value(py).into_bound(py).into_any(),
            ),
        };
        let guard = cycle.getattr(intern!(py, "_guard"))?;
        let task = starter.call_method1(
            intern!(py, "_finish"),
            (host, ctx, coro, guard, kind, value),
        );
        // `_finish` may have made the host the app's task, and a new host.
        drop(this);
        let host = starter.getattr(intern!(py, "_host"))?.unbind();
        if let Some(s) = slf.borrow_mut().starter.as_mut() {
            s.host = Some(host);
        }
        cycle.call_method1(intern!(py, "_first_step_done"), (task?,))?;
        Ok(cycle)
    }
}

#[pymethods]
impl AsgiDispatch {
    /// The dispatcher of `owner`, an `AsgiApp`: it serves `owner.app` mounted at
    /// `owner.root_path` with `owner.state` and `owner.limits.write_high_water`,
    /// making `owner._cycle_type` cycles (see the module docs for the rest).
    #[new]
    fn new(py: Python<'_>, owner: Bound<'_, PyAny>) -> PyResult<Self> {
        let tasks = py.import("asyncio.tasks")?;
        let limits = owner.getattr("limits")?;
        let cycle_type = owner.getattr("_cycle_type")?.downcast_into::<PyType>()?;
        if !cycle_type.is_subclass_of::<AsgiCycle>()? {
            return Err(PyTypeError::new_err("_cycle_type must subclass AsgiCycle"));
        }
        Ok(AsgiDispatch {
            app: owner.getattr("app")?.unbind(),
            receive: Binder::of(&cycle_type, "receive")?,
            send: Binder::of(&cycle_type, "send")?,
            cycle_type: cycle_type.into_any().unbind(),
            root_path: owner.getattr("root_path")?.extract()?,
            state: owner.getattr("state")?.downcast_into::<PyDict>()?.unbind(),
            high_water: limits.getattr("write_high_water")?.extract()?,
            raise_in_coro: owner.getattr("_raise_in_coro")?.unbind(),
            await_in_coro: owner.getattr("_await_in_coro")?.unbind(),
            owner: owner.unbind(),
            current_tasks: tasks
                .getattr("_current_tasks")?
                .downcast_into::<PyDict>()?
                .unbind(),
            enter_task: tasks.getattr("_enter_task")?.unbind(),
            task_cancelling: tasks.getattr("Task")?.getattr("cancelling")?.unbind(),
            leave_task: tasks.getattr("_leave_task")?.unbind(),
            coroutine_type: py.import("types")?.getattr("CoroutineType")?.unbind(),
            starter: None,
        })
    }

    /// Starts the app for `request` on `conn` (an `HttpProtocol`); its cycle.
    fn __call__<'py>(
        slf: &Bound<'py, Self>,
        request: &Bound<'py, Request>,
        conn: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let (base, parts) = conn_data(slf.borrow().owner.bind(slf.py()), conn)?;
        Self::start(slf, request, conn, &base, &parts, false)
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
        let Some(deferred) = deferred else {
            return Ok(false);
        };
        if deferred.len() != 1 {
            return Ok(false);
        }
        let (base, parts) = conn_data(slf.borrow().owner.bind(slf.py()), protocol)?;
        Self::read(slf, protocol, &deferred.get_item(0)?, &base, &parts, false)
    }

    fn __traverse__(&self, visit: pyo3::PyVisit<'_>) -> Result<(), pyo3::PyTraverseError> {
        visit.call(&self.owner)?;
        visit.call(&self.app)?;
        visit.call(&self.cycle_type)?;
        for b in [&self.receive, &self.send].into_iter().flatten() {
            visit.call(&b.descr)?;
        }
        visit.call(&self.state)?;
        if let Some(s) = &self.starter {
            visit.call(&s.event_loop)?;
            visit.call(&s.starter)?;
            if let Some(h) = &s.host {
                visit.call(h)?;
            }
        }
        Ok(())
    }

    fn __clear__(&mut self) {
        self.starter = None;
    }
}

/// `data_received` of an ASGI app's connection (`surge.asgi.protocol.AsgiProtocol`,
/// which makes it its `data_received` attribute: the loop looks that up once
/// per connection). The usual read, on an idle connection with no body being
/// streamed, is fed to the parser and dispatched here (`AsgiDispatch.read`)
/// without the protocol's Python frame (~2.2k instructions per request); any
/// other read goes to `HttpProtocol.data_received`.
#[pyclass(module = "surge._core", frozen)]
pub struct AsgiReader {
    protocol: PyObject,
    dispatch: Py<AsgiDispatch>,
    /// `HttpProtocol.data_received`, unbound.
    fallback: PyObject,
    /// The feed budget of an idle connection: the write high-water mark and the
    /// pipelining bound (nothing is queued).
    high_water: i64,
    max_pipeline: i64,
    /// The protocol's `dispatcher_data` once its first request made it.
    known: OnceLock<(Py<PyDict>, Py<ConnParts>)>,
}

#[pymethods]
impl AsgiReader {
    /// The reader of `protocol` (an `AsgiProtocol` of a plan `dispatch`ed by
    /// `dispatch`); `fallback` is `HttpProtocol.data_received`.
    #[new]
    fn new(
        protocol: Bound<'_, PyAny>,
        dispatch: Py<AsgiDispatch>,
        fallback: PyObject,
    ) -> PyResult<Self> {
        let py = protocol.py();
        Ok(AsgiReader {
            high_water: protocol.getattr(intern!(py, "_high_water"))?.extract()?,
            max_pipeline: protocol.getattr(intern!(py, "_max_pipeline"))?.extract()?,
            protocol: protocol.unbind(),
            dispatch,
            fallback,
            known: OnceLock::new(),
        })
    }

    fn __call__(&self, py: Python<'_>, data: &Bound<'_, PyAny>) -> PyResult<()> {
        let protocol = self.protocol.bind(py);
        let known = match self.known.get() {
            Some(k) => k,
            None => {
                // Made by the connection's first request (Python's path), and never
                // for a connection over the concurrency limit (another plan serves it).
                let made = protocol.getattr(intern!(py, "dispatcher_data"))?;
                let Ok(made) = made.downcast::<PyTuple>() else {
                    self.fallback.call1(py, (protocol, data))?;
                    return Ok(());
                };
                let base = made.get_item(0)?.downcast_into::<PyDict>()?.unbind();
                let parts = made.get_item(1)?.downcast_into::<ConnParts>()?.unbind();
                let _ = self.known.set((base, parts));
                self.known.get().expect("just set")
            }
        };
        if !protocol.getattr(intern!(py, "_body_stream"))?.is_none() {
            self.fallback.call1(py, (protocol, data))?;
            return Ok(());
        }
        let (base, parts) = (known.0.bind(py), known.1.bind(py));
        let conn = parts.get().native.bind(py);
        let Ok(bytes) = data.downcast::<PyBytes>() else {
            self.fallback.call1(py, (protocol, data))?;
            return Ok(());
        };
        if !conn.borrow().fast {
            // Responses queued or being written: Python's path keeps their order.
            self.fallback.call1(py, (protocol, data))?;
            return Ok(());
        }
        let fed =
            conn.borrow_mut()
                .feed_items(py, bytes.as_bytes(), self.high_water, self.max_pipeline);
        let deferred = match fed {
            Ok(d) => d,
            Err(e) => {
                // A bug on our side must not kill the loop (as `data_received`).
                protocol.call_method1(intern!(py, "_read_failed"), (e.into_value(py),))?;
                return Ok(());
            }
        };
        let handled = match &deferred {
            Deferred::One(item) => {
                AsgiDispatch::read(self.dispatch.bind(py), protocol, item, base, parts, true)?
            }
            Deferred::Nothing => !conn.borrow().held,
            Deferred::Many(_) => false,
        };
        if !handled {
            protocol.call_method1(intern!(py, "_after_feed"), (deferred.into_list(py)?,))?;
        }
        Ok(())
    }

    fn __traverse__(&self, visit: pyo3::PyVisit<'_>) -> Result<(), pyo3::PyTraverseError> {
        visit.call(&self.protocol)?;
        visit.call(&self.dispatch)?;
        visit.call(&self.fallback)?;
        if let Some((base, parts)) = self.known.get() {
            visit.call(base)?;
            visit.call(parts)?;
        }
        Ok(())
    }
}
