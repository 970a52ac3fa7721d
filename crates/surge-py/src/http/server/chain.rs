//! The middleware chain's driver: ``call_next`` for ``async def mw(request,
//! call_next)`` middleware (`surge.http.pipeline`), in Rust.
//!
//! Written natively for speed: in Python every layer cost a wrapper coroutine
//! (to turn the layer's exception, or a non-response it returns, into the
//! error handlers' response before the next outer layer sees it) and the
//! innermost call another coroutine around the handler. Here ``call_next(request)``
//! returns a `Step`, an awaitable that is its own iterator: awaiting it starts
//! the next layer's coroutine (or calls the handler) and drives it with
//! `PyIter_Send`, handing every object it suspends on up unchanged, so the
//! task underneath sees exactly what it would with nested coroutines; `throw`
//! and `close` are forwarded to the coroutine being driven. The errors are
//! converted per layer as before: an exception (except `ClientDisconnected`
//! and what is not an `Exception`, such as `CancelledError`) or a non-response
//! from a layer switches the step to driving the pipeline's ``_error``
//! coroutine for it, and what that returns is the layer's result.

use std::ffi::{c_int, c_void, CStr};

use pyo3::exceptions::{
    PyException, PyIndexError, PyRuntimeError, PyStopIteration, PyTypeError, PyValueError,
};
use pyo3::ffi;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::sync::GILOnceCell;
use pyo3::types::{PyTuple, PyType};
use pyo3::{PyTraverseError, PyVisit};

use super::ready::AwaitableType;
use super::request::Request;
use super::response::{wrap_plain_result, Response};

static CORO_TYPE: GILOnceCell<PyObject> = GILOnceCell::new();

/// The middleware of one frozen plan, outermost first, and what their
/// innermost ``call_next`` runs.
#[pyclass(module = "surge._core", frozen)]
pub struct MiddlewareChain {
    /// ``mw(request, call_next)`` callables, outermost first.
    layers: Vec<PyObject>,
    /// ``nexts[i]`` is the ``call_next`` given to layer ``i - 1`` (``nexts[0]``
    /// enters the chain); set once by `link`.
    /// Each a builtin function (METH_O, bound to a `CallNext`): a layer's
    /// ``call_next(request)`` is then a vectorcall with no argument tuple or
    /// keyword parsing, which a #[pyclass] ``__call__`` costs.
    nexts: std::sync::OnceLock<Vec<PyObject>>,
    /// The `Pipeline`: its ``_app``, ``_finish``, ``_error`` and
    /// ``_not_a_response`` coroutines take over where this code stops.
    pipeline: PyObject,
    /// By route id: the handler of a plain-function route that the innermost
    /// ``call_next`` may call itself (no hooks, not threaded, not async).
    plain: Vec<Option<PyObject>>,
    /// The response classes a layer may return (``isinstance`` check).
    responses: PyObject,
    /// `surge.http.errors.ClientDisconnected`: never converted, re-raised.
    disconnected: PyObject,
}

/// ``call_next`` of one layer: calling it with the request gives the awaitable
/// running the rest of the chain.
#[pyclass(module = "surge._core", frozen)]
pub struct CallNext {
    chain: Py<MiddlewareChain>,
    index: usize,
}

enum Sent {
    Yield(PyObject),
    Return(PyObject),
    Error(PyErr),
}

fn drive(py: Python<'_>, coro: &PyObject, value: &Bound<'_, PyAny>) -> Sent {
    let mut out: *mut ffi::PyObject = std::ptr::null_mut();
    // SAFETY: `coro` and `value` are live objects; PyIter_Send returns a new
    // reference in `out` for PYGEN_NEXT and PYGEN_RETURN, sets an error otherwise.
    let status = unsafe { ffi::PyIter_Send(coro.as_ptr(), value.as_ptr(), &mut out) };
    match status {
        // SAFETY: PYGEN_NEXT and PYGEN_RETURN give a new reference in `out`.
        ffi::PySendResult::PYGEN_NEXT => Sent::Yield(unsafe { PyObject::from_owned_ptr(py, out) }),
        ffi::PySendResult::PYGEN_RETURN => {
            // SAFETY: as above.
            Sent::Return(unsafe { PyObject::from_owned_ptr(py, out) })
        }
        ffi::PySendResult::PYGEN_ERROR => Sent::Error(PyErr::fetch(py)),
    }
}

fn thrown_into(py: Python<'_>, coro: &PyObject, exc: &Bound<'_, PyAny>) -> Sent {
    match coro.call_method1(py, intern!(py, "throw"), (exc,)) {
        Ok(yielded) => Sent::Yield(yielded),
        Err(e) if e.is_instance_of::<PyStopIteration>(py) => {
            match e.value(py).getattr(intern!(py, "value")) {
                Ok(v) => Sent::Return(v.unbind()),
                Err(e) => Sent::Error(e),
            }
        }
        Err(e) => Sent::Error(e),
    }
}

/// The iterator ``await obj`` drives for `obj`.
fn awaitable_iter(py: Python<'_>, obj: PyObject) -> PyResult<PyObject> {
    let coro = CORO_TYPE.get_or_try_init(py, || -> PyResult<PyObject> {
        Ok(py.import("types")?.getattr("CoroutineType")?.unbind())
    })?;
    let ty = obj.bind(py).get_type();
    if ty.is(coro) || is_step(py, obj.bind(py)) {
        return Ok(obj);
    }
    obj.call_method0(py, intern!(py, "__await__"))
}

impl MiddlewareChain {
    fn next(&self, index: usize) -> PyResult<&PyObject> {
        self.nexts
            .get()
            .and_then(|n| n.get(index))
            .ok_or_else(|| PyIndexError::new_err("no such call_next (or link() not called)"))
    }

    /// Starts what ``call_next`` number `index` runs: a layer's coroutine, or
    /// the handler (whose plain result is the step's result at once).
    fn begin(
        &self,
        py: Python<'_>,
        index: usize,
        request: &PyObject,
    ) -> PyResult<Result<(PyObject, bool), PyObject>> {
        if index < self.layers.len() {
            let started = self.layers[index].call1(py, (request, self.next(index + 1)?));
            return Ok(Ok(match started.and_then(|c| awaitable_iter(py, c)) {
                Ok(coro) => (coro, true),
                Err(e) => (self.error(py, request, e)?, false),
            }));
        }
        self.innermost(py, request)
    }

    fn innermost(
        &self,
        py: Python<'_>,
        request: &PyObject,
    ) -> PyResult<Result<(PyObject, bool), PyObject>> {
        let req = request.bind(py).downcast::<Request>()?;
        let (rid, params) = {
            let r = req.borrow();
            (r.route, r.params.as_ref().map(|p| p.clone_ref(py)))
        };
        let handler = usize::try_from(rid)
            .ok()
            .and_then(|i| self.plain.get(i))
            .and_then(Option::as_ref);
        let Some(handler) = handler else {
            let coro = self
                .pipeline
                .call_method1(py, intern!(py, "_app"), (request,))?;
            return Ok(Ok((coro, false)));
        };
        let result = match params {
            Some(p) if !p.bind(py).is_empty() => handler.call(py, (request,), Some(p.bind(py))),
            _ => handler.call1(py, (request,)),
        };
        let result = match result {
            Ok(r) => r,
            Err(e) => return Ok(Ok((self.error(py, request, e)?, false))),
        };
        let value = result.bind(py);
        if let Some(wrapped) = wrap_plain_result(py, value) {
            return Ok(match wrapped {
                Ok(r) => Err(Py::new(py, r)?.into_any()),
                Err(e) => Ok((self.error(py, request, e)?, false)),
            });
        }
        if value.is_instance(self.responses.bind(py))? {
            return Ok(Err(result));
        }
        // None, an awaitable or something else: the pipeline finishes it.
        let coro = self
            .pipeline
            .call_method1(py, intern!(py, "_finish"), (request, value))?;
        Ok(Ok((coro, false)))
    }

    /// The pipeline's coroutine answering `err`, or `err` itself when it is
    /// not to be converted.
    fn error(&self, py: Python<'_>, request: &PyObject, err: PyErr) -> PyResult<PyObject> {
        if !err.is_instance_of::<PyException>(py) || err.is_instance(py, self.disconnected.bind(py))
        {
            return Err(err);
        }
        self.pipeline
            .call_method1(py, intern!(py, "_error"), (request, err.into_value(py)))
    }
}

#[pymethods]
impl MiddlewareChain {
    #[new]
    fn new(
        layers: Vec<PyObject>,
        pipeline: PyObject,
        plain: Vec<Option<PyObject>>,
        responses: PyObject,
        disconnected: PyObject,
    ) -> Self {
        MiddlewareChain {
            layers,
            nexts: std::sync::OnceLock::new(),
            pipeline,
            plain,
            responses,
            disconnected,
        }
    }

    /// Makes the ``call_next`` objects (once, after construction: they refer
    /// to the chain).
    fn link(slf: &Bound<'_, Self>) -> PyResult<()> {
        let py = slf.py();
        let me = slf.get();
        let def = call_next_def();
        let nexts = (0..=me.layers.len())
            .map(|index| -> PyResult<PyObject> {
                let owner = Py::new(
                    py,
                    CallNext {
                        chain: slf.clone().unbind(),
                        index,
                    },
                )?;
                // SAFETY: `def` lives forever; the function keeps a reference to `owner`.
                unsafe {
                    let f = ffi::PyCFunction_NewEx(def, owner.as_ptr(), std::ptr::null_mut());
                    Bound::from_owned_ptr_or_err(py, f).map(Bound::unbind)
                }
            })
            .collect::<PyResult<Vec<_>>>()?;
        let _ = me.nexts.set(nexts);
        Ok(())
    }

    /// How many layers the chain has.
    #[getter]
    fn depth(&self) -> usize {
        self.layers.len()
    }

    /// The ``call_next`` given to layer ``index - 1``: ``call_next(0)`` enters
    /// the chain, ``call_next(depth)`` runs the handler.
    fn call_next(&self, py: Python<'_>, index: usize) -> PyResult<PyObject> {
        Ok(self.next(index)?.clone_ref(py))
    }

    /// Runs the chain for `request` up to its first suspension: the response
    /// when it never suspends, else the `Step` (its `first_yield` is what it
    /// suspended on; drive it on with `send`/`throw`).
    fn start(slf: &Bound<'_, Self>, request: &Bound<'_, PyAny>) -> PyResult<PyObject> {
        let py = slf.py();
        let step = new_step(py, slf, 0, request)?;
        let raw = step.as_ptr().cast::<StepObject>();
        // SAFETY: `step` is a live StepObject we hold.
        match unsafe { resume(py, raw, Input::Send(py.None().into_bound(py)))? } {
            Ok(yielded) => {
                // SAFETY: as above; `first` was null (a new step).
                unsafe { (*raw).first = yielded.into_ptr() };
                Ok(step)
            }
            Err(response) => Ok(response),
        }
    }

    fn __traverse__(&self, visit: PyVisit<'_>) -> Result<(), PyTraverseError> {
        for layer in &self.layers {
            visit.call(layer)?;
        }
        if let Some(nexts) = self.nexts.get() {
            for n in nexts {
                visit.call(n)?;
            }
        }
        visit.call(&self.pipeline)?;
        for h in self.plain.iter().flatten() {
            visit.call(h)?;
        }
        Ok(())
    }
}

#[pymethods]
impl CallNext {
    fn __call__(&self, py: Python<'_>, request: &Bound<'_, PyAny>) -> PyResult<PyObject> {
        new_step(py, self.chain.bind(py), self.index, request)
    }

    fn __traverse__(&self, visit: PyVisit<'_>) -> Result<(), PyTraverseError> {
        visit.call(&self.chain)
    }
}

// The step type, written against the C API rather than as a #[pyclass]: it
// needs `am_send`, which PyO3 cannot declare. With it, a layer's ``await
// call_next(request)`` gets the result as `PyIter_Send`'s PYGEN_RETURN, with
// no StopIteration made and normalized per layer (PyO3's `__next__` could only
// raise one), and no PyO3 trampoline around each step.

/// A `MiddlewareStep` object.
#[repr(C)]
struct StepObject {
    ob_base: ffi::PyObject,
    /// The `MiddlewareChain` (a strong reference).
    chain: *mut ffi::PyObject,
    request: *mut ffi::PyObject,
    /// The iterator being driven: the layer's coroutine, or a pipeline one;
    /// null before the start and after the end.
    coro: *mut ffi::PyObject,
    /// What the chain's first step suspended on (`MiddlewareChain.start`).
    first: *mut ffi::PyObject,
    index: usize,
    /// Whether what `coro` returns is a layer's result, to check.
    layer: bool,
    started: bool,
    running: bool,
}

static STEP_TYPE: GILOnceCell<Py<PyType>> = GILOnceCell::new();

/// The `MiddlewareStep` type (made once).
pub(crate) fn step_type(py: Python<'_>) -> PyResult<&Bound<'_, PyType>> {
    STEP_TYPE
        .get_or_try_init(py, || -> PyResult<Py<PyType>> {
            let method = |name: &'static CStr, meth, flags, doc: &'static CStr| ffi::PyMethodDef {
                ml_name: name.as_ptr(),
                ml_meth: meth,
                ml_flags: flags,
                ml_doc: doc.as_ptr(),
            };
            AwaitableType {
                name: c"surge._core.MiddlewareStep",
                doc: Some(
                    c"One ``call_next(request)``: the rest of the middleware chain, awaitable.",
                ),
                basicsize: std::mem::size_of::<StepObject>(),
                gc: Some((step_traverse, step_clear)),
                dealloc: step_dealloc,
                am_send: step_am_send,
                iternext: step_iternext,
                methods: vec![
                    method(
                        c"send",
                        ffi::PyMethodDefPointer {
                            PyCFunction: step_send_method,
                        },
                        ffi::METH_O,
                        c"send($self, value, /)\n--\n\nResumes the step with `value`.",
                    ),
                    method(
                        c"throw",
                        ffi::PyMethodDefPointer {
                            PyCFunction: step_throw_method,
                        },
                        ffi::METH_VARARGS,
                        c"throw($self, typ, val=None, tb=None, /)\n--\n\nRaises in the step.",
                    ),
                    method(
                        c"close",
                        ffi::PyMethodDefPointer {
                            PyCFunction: step_close_method,
                        },
                        ffi::METH_NOARGS,
                        c"close($self, /)\n--\n\nCloses the coroutine being driven.",
                    ),
                    method(
                        c"take_first",
                        ffi::PyMethodDefPointer {
                            PyCFunction: step_take_first,
                        },
                        ffi::METH_NOARGS,
                        c"take_first($self, /)\n--\n\nWhat the first step suspended on.",
                    ),
                ],
            }
            .create(py)
        })
        .map(|t| t.bind(py))
}

/// A new step for ``call_next`` number `index` of `chain`.
fn new_step(
    py: Python<'_>,
    chain: &Bound<'_, MiddlewareChain>,
    index: usize,
    request: &Bound<'_, PyAny>,
) -> PyResult<PyObject> {
    let ty = step_type(py)?;
    // SAFETY: a GC type of StepObject's size; GenericAlloc zeroes it and tracks it.
    unsafe {
        let obj = ffi::PyType_GenericAlloc(ty.as_ptr().cast(), 0);
        if obj.is_null() {
            return Err(PyErr::fetch(py));
        }
        let step = obj.cast::<StepObject>();
        (*step).chain = chain.clone().into_ptr();
        (*step).request = request.clone().into_ptr();
        (*step).index = index;
        Ok(PyObject::from_owned_ptr(py, obj))
    }
}

fn is_step(py: Python<'_>, obj: &Bound<'_, PyAny>) -> bool {
    STEP_TYPE
        .get(py)
        .is_some_and(|t| obj.get_type().is(t.bind(py)))
}

/// What a step is resumed with.
enum Input<'py> {
    Send(Bound<'py, PyAny>),
    Throw(Bound<'py, PyAny>),
}

/// One step: Ok(what it suspends on) or Err(its result).
///
/// # Safety
/// `step` is a live `StepObject` and the GIL is held.
unsafe fn resume(
    py: Python<'_>,
    step: *mut StepObject,
    input: Input<'_>,
) -> PyResult<Result<PyObject, PyObject>> {
    if (*step).running {
        return Err(PyValueError::new_err("call_next already executing"));
    }
    (*step).running = true;
    let out = resume_inner(py, step, input);
    (*step).running = false;
    out
}

unsafe fn resume_inner(
    py: Python<'_>,
    step: *mut StepObject,
    input: Input<'_>,
) -> PyResult<Result<PyObject, PyObject>> {
    let chain_obj = Bound::from_borrowed_ptr(py, (*step).chain);
    let chain = chain_obj.downcast_unchecked::<MiddlewareChain>().get();
    let request = Bound::from_borrowed_ptr(py, (*step).request).unbind();
    let mut input = Some(input);
    if !(*step).started {
        (*step).started = true;
        match input.take() {
            Some(Input::Throw(exc)) => return Err(PyErr::from_value(exc)),
            Some(Input::Send(v)) if !v.is_none() => {
                return Err(PyTypeError::new_err(
                    "can't send non-None value to a just-started call_next",
                ))
            }
            _ => {}
        }
        match chain.begin(py, (*step).index, &request)? {
            Ok((coro, layer)) => {
                set_coro(step, Some(coro));
                (*step).layer = layer;
            }
            Err(response) => return Ok(Err(response)),
        }
    }
    loop {
        if (*step).coro.is_null() {
            return Err(PyRuntimeError::new_err("cannot reuse an awaited call_next"));
        }
        let coro = Bound::from_borrowed_ptr(py, (*step).coro).unbind();
        let sent = match input.take() {
            Some(Input::Throw(exc)) => thrown_into(py, &coro, &exc),
            Some(Input::Send(v)) => drive(py, &coro, &v),
            None => drive(py, &coro, &py.None().into_bound(py)),
        };
        match sent {
            Sent::Yield(y) => return Ok(Ok(y)),
            Sent::Return(value) => {
                let v = value.bind(py);
                let bad = (*step).layer
                    && !v.is_exact_instance_of::<Response>()
                    && !v.is_instance(chain.responses.bind(py))?;
                if !bad {
                    set_coro(step, None);
                    return Ok(Err(value));
                }
                let mw = &chain.layers[(*step).index];
                let next = chain.pipeline.call_method1(
                    py,
                    intern!(py, "_not_a_response"),
                    (&request, mw, value),
                );
                set_coro(step, None);
                set_coro(step, Some(next?));
                (*step).layer = false;
            }
            Sent::Error(err) => {
                set_coro(step, None);
                set_coro(step, Some(chain.error(py, &request, err)?));
                (*step).layer = false;
            }
        }
    }
}

unsafe fn set_coro(step: *mut StepObject, coro: Option<PyObject>) {
    let old = std::mem::replace(
        &mut (*step).coro,
        coro.map_or(std::ptr::null_mut(), PyObject::into_ptr),
    );
    ffi::Py_XDECREF(old);
}

fn guarded<T>(default: T, f: impl FnOnce(Python<'_>) -> T) -> T {
    // SAFETY: every caller is a slot or method CPython calls with the GIL held.
    let py = unsafe { Python::assume_gil_acquired() };
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(py))) {
        Ok(v) => v,
        Err(_) => {
            PyErr::new::<pyo3::exceptions::PySystemError, _>("panic in MiddlewareStep").restore(py);
            default
        }
    }
}

/// StopIteration(value) raised, for the iterator protocol's callers.
fn raise_stop(py: Python<'_>, value: PyObject) -> *mut ffi::PyObject {
    match py.get_type::<PyStopIteration>().call1((value,)) {
        Ok(exc) => PyErr::from_value(exc).restore(py),
        Err(e) => e.restore(py),
    }
    std::ptr::null_mut()
}

fn yielded_or_stop(
    py: Python<'_>,
    outcome: PyResult<Result<PyObject, PyObject>>,
) -> *mut ffi::PyObject {
    match outcome {
        Ok(Ok(y)) => y.into_ptr(),
        Ok(Err(value)) => raise_stop(py, value),
        Err(e) => {
            e.restore(py);
            std::ptr::null_mut()
        }
    }
}

unsafe extern "C" fn step_am_send(
    slf: *mut ffi::PyObject,
    arg: *mut ffi::PyObject,
    presult: *mut *mut ffi::PyObject,
) -> ffi::PySendResult {
    guarded(ffi::PySendResult::PYGEN_ERROR, |py| {
        let arg = if arg.is_null() {
            py.None().into_bound(py)
        } else {
            Bound::from_borrowed_ptr(py, arg)
        };
        match resume(py, slf.cast(), Input::Send(arg)) {
            Ok(Ok(y)) => {
                *presult = y.into_ptr();
                ffi::PySendResult::PYGEN_NEXT
            }
            Ok(Err(value)) => {
                *presult = value.into_ptr();
                ffi::PySendResult::PYGEN_RETURN
            }
            Err(e) => {
                e.restore(py);
                *presult = std::ptr::null_mut();
                ffi::PySendResult::PYGEN_ERROR
            }
        }
    })
}

unsafe extern "C" fn step_iternext(slf: *mut ffi::PyObject) -> *mut ffi::PyObject {
    guarded(std::ptr::null_mut(), |py| {
        let outcome = resume(py, slf.cast(), Input::Send(py.None().into_bound(py)));
        yielded_or_stop(py, outcome)
    })
}

unsafe extern "C" fn step_send_method(
    slf: *mut ffi::PyObject,
    arg: *mut ffi::PyObject,
) -> *mut ffi::PyObject {
    guarded(std::ptr::null_mut(), |py| {
        let outcome = resume(
            py,
            slf.cast(),
            Input::Send(Bound::from_borrowed_ptr(py, arg)),
        );
        yielded_or_stop(py, outcome)
    })
}

unsafe extern "C" fn step_throw_method(
    slf: *mut ffi::PyObject,
    args: *mut ffi::PyObject,
) -> *mut ffi::PyObject {
    guarded(std::ptr::null_mut(), |py| {
        let args = Bound::from_borrowed_ptr(py, args);
        let exc = (|| -> PyResult<Bound<'_, PyAny>> {
            let args = args.downcast::<PyTuple>()?;
            let typ = args.get_item(0)?;
            let value = args.get_item(1).ok().filter(|v| !v.is_none());
            Ok(match value {
                Some(v) => v,
                None if typ.is_instance_of::<PyType>() => typ.call0()?,
                None => typ,
            })
        })();
        let outcome = match exc {
            Ok(exc) => resume(py, slf.cast(), Input::Throw(exc)),
            Err(e) => Err(e),
        };
        yielded_or_stop(py, outcome)
    })
}

unsafe extern "C" fn step_close_method(
    slf: *mut ffi::PyObject,
    _unused: *mut ffi::PyObject,
) -> *mut ffi::PyObject {
    guarded(std::ptr::null_mut(), |py| {
        let step = slf.cast::<StepObject>();
        (*step).started = true;
        let coro = std::mem::replace(&mut (*step).coro, std::ptr::null_mut());
        if !coro.is_null() {
            let coro = PyObject::from_owned_ptr(py, coro);
            if let Ok(close) = coro.getattr(py, intern!(py, "close")) {
                if let Err(e) = close.call0(py) {
                    e.restore(py);
                    return std::ptr::null_mut();
                }
            }
        }
        py.None().into_ptr()
    })
}

unsafe extern "C" fn step_take_first(
    slf: *mut ffi::PyObject,
    _unused: *mut ffi::PyObject,
) -> *mut ffi::PyObject {
    let step = slf.cast::<StepObject>();
    let first = std::mem::replace(&mut (*step).first, std::ptr::null_mut());
    if first.is_null() {
        ffi::Py_INCREF(ffi::Py_None());
        return ffi::Py_None();
    }
    first
}

unsafe extern "C" fn step_traverse(
    slf: *mut ffi::PyObject,
    visit: ffi::visitproc,
    arg: *mut c_void,
) -> c_int {
    let step = slf.cast::<StepObject>();
    for field in [(*step).chain, (*step).request, (*step).coro, (*step).first] {
        if !field.is_null() {
            let r = visit(field, arg);
            if r != 0 {
                return r;
            }
        }
    }
    0
}

unsafe extern "C" fn step_clear(slf: *mut ffi::PyObject) -> c_int {
    let step = slf.cast::<StepObject>();
    for field in [
        &mut (*step).chain,
        &mut (*step).request,
        &mut (*step).coro,
        &mut (*step).first,
    ] {
        let old = std::mem::replace(field, std::ptr::null_mut());
        ffi::Py_XDECREF(old);
    }
    0
}

unsafe extern "C" fn step_dealloc(slf: *mut ffi::PyObject) {
    ffi::PyObject_GC_UnTrack(slf.cast());
    step_clear(slf);
    let ty = ffi::Py_TYPE(slf);
    let free = ffi::PyType_GetSlot(ty, ffi::Py_tp_free);
    if !free.is_null() {
        let free: unsafe extern "C" fn(*mut c_void) = std::mem::transmute(free);
        free(slf.cast());
    }
    ffi::Py_DECREF(ty.cast());
}

/// The method definition of every ``call_next`` builtin (made once).
fn call_next_def() -> *mut ffi::PyMethodDef {
    static DEF: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *DEF.get_or_init(|| {
        let def = Box::leak(Box::new(ffi::PyMethodDef {
            ml_name: c"call_next".as_ptr(),
            ml_meth: ffi::PyMethodDefPointer {
                PyCFunction: call_next_o,
            },
            ml_flags: ffi::METH_O,
            ml_doc: c"call_next($self, request, /)\n--\n\nThe rest of the middleware chain for `request`, awaitable.".as_ptr(),
        }));
        def as *mut ffi::PyMethodDef as usize
    }) as *mut ffi::PyMethodDef
}

unsafe extern "C" fn call_next_o(
    slf: *mut ffi::PyObject,
    request: *mut ffi::PyObject,
) -> *mut ffi::PyObject {
    guarded(std::ptr::null_mut(), |py| {
        // SAFETY: the builtin is bound to a CallNext (see `MiddlewareChain.link`).
        let owner = Bound::from_borrowed_ptr(py, slf);
        let next = owner.downcast_unchecked::<CallNext>().get();
        let request = Bound::from_borrowed_ptr(py, request);
        match new_step(py, next.chain.bind(py), next.index, &request) {
            Ok(step) => step.into_ptr(),
            Err(e) => {
                e.restore(py);
                std::ptr::null_mut()
            }
        }
    })
}
