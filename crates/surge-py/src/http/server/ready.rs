//! `ReadyValue`: an awaitable already complete with a value, that hands the
//! value over without an exception.
//!
//! `await x` on Python 3.11 drives `x` with `PyIter_Send`, which takes a
//! type's `am_send` slot when it has one: the value comes back as a
//! `PYGEN_RETURN` result, as a coroutine's return does. Through `__next__`
//! (all a `#[pyclass]` can offer) the value travels in a `StopIteration` that
//! is made, raised, caught and unpacked: ~1.3k instructions per ASGI
//! `receive()` against ~0.3k here. PyO3 has no way to fill `am_send`, so the
//! type is made from a `PyType_Spec` (stable ABI since 3.10).
//!
//! The shared `done()` (ASGI `send`'s usual result) holds no value: it
//! completes with None however often it is awaited.
//!
//! It still is a whole coroutine for callers that ask for one (asyncio's
//! `Task`, `ensure_future`): `send`, `throw`, `close`, `__await__`, `__iter__`
//! and `__next__` behave as a coroutine's that returns the value at once.
//!
//! `AwaitableType` makes such a type from its slots (here and for chain.rs's
//! `MiddlewareStep`); `ready_error` is the rare awaitable that raises.

use std::ffi::{c_int, c_uint, c_void, CStr};
use std::ptr;

use pyo3::exceptions::PyStopIteration;
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::sync::GILOnceCell;
use pyo3::types::PyType;

/// `Py_am_send` (CPython's typeslots.h, 3.10+; not in pyo3-ffi's list).
const PY_AM_SEND: c_int = 81;

/// An `am_send` slot function (`sendfunc`).
pub(crate) type SendFunc = unsafe extern "C" fn(
    *mut ffi::PyObject,
    *mut ffi::PyObject,
    *mut *mut ffi::PyObject,
) -> ffi::PySendResult;

/// A coroutine-like type written against the C API because it needs `am_send`,
/// which PyO3 cannot declare (`ReadyValue` here, chain.rs's `MiddlewareStep`):
/// `__await__` and `__iter__` return the object itself; the rest is given.
pub(crate) struct AwaitableType {
    pub name: &'static CStr,
    pub doc: Option<&'static CStr>,
    /// The object's size (its `#[repr(C)]` struct, `PyObject` first).
    pub basicsize: usize,
    /// `tp_traverse` and `tp_clear`, for objects the cycle collector tracks.
    pub gc: Option<(ffi::traverseproc, ffi::inquiry)>,
    pub dealloc: ffi::destructor,
    pub am_send: SendFunc,
    pub iternext: ffi::iternextfunc,
    /// The methods (`send`, `throw`, `close`...), without the terminator.
    pub methods: Vec<ffi::PyMethodDef>,
}

impl AwaitableType {
    /// Makes the type. Its spec, slots and methods are leaked: CPython keeps
    /// pointers into them (callers make each type once per process).
    pub(crate) fn create(self, py: Python<'_>) -> PyResult<Py<PyType>> {
        let mut methods = self.methods;
        methods.push(ffi::PyMethodDef::zeroed());
        let methods: &'static mut [ffi::PyMethodDef] = Box::leak(methods.into_boxed_slice());
        let slot = |slot: c_int, pfunc: *mut c_void| ffi::PyType_Slot { slot, pfunc };
        let mut slots = vec![
            slot(ffi::Py_tp_dealloc, self.dealloc as *mut c_void),
            slot(ffi::Py_tp_iter, itself as *mut c_void),
            slot(ffi::Py_tp_iternext, self.iternext as *mut c_void),
            slot(ffi::Py_am_await, itself as *mut c_void),
            slot(PY_AM_SEND, self.am_send as *mut c_void),
            slot(ffi::Py_tp_methods, methods.as_mut_ptr().cast::<c_void>()),
        ];
        let mut flags = ffi::Py_TPFLAGS_DEFAULT;
        if let Some((traverse, clear)) = self.gc {
            slots.push(slot(ffi::Py_tp_traverse, traverse as *mut c_void));
            slots.push(slot(ffi::Py_tp_clear, clear as *mut c_void));
            flags |= ffi::Py_TPFLAGS_HAVE_GC;
        }
        if let Some(doc) = self.doc {
            slots.push(slot(ffi::Py_tp_doc, doc.as_ptr() as *mut c_void));
        }
        slots.push(slot(0, ptr::null_mut()));
        let slots: &'static mut [ffi::PyType_Slot] = Box::leak(slots.into_boxed_slice());
        let spec: &'static mut ffi::PyType_Spec = Box::leak(Box::new(ffi::PyType_Spec {
            name: self.name.as_ptr(),
            basicsize: c_int::try_from(self.basicsize).expect("a small object"),
            itemsize: 0,
            flags: flags as c_uint,
            slots: slots.as_mut_ptr(),
        }));
        // SAFETY: the spec and everything it points to live for the process.
        let tp = unsafe { ffi::PyType_FromSpec(spec) };
        // SAFETY: a new reference or null with an exception set.
        let tp = unsafe { Bound::from_owned_ptr_or_err(py, tp) }?;
        Ok(tp.downcast_into::<PyType>()?.unbind())
    }
}

#[repr(C)]
struct ReadyValue {
    ob_base: ffi::PyObject,
    /// The value, owned; null once handed over.
    value: *mut ffi::PyObject,
}

static TYPE: GILOnceCell<Py<PyType>> = GILOnceCell::new();

/// Takes the value out of `obj` (a new reference; None once taken).
///
/// # Safety
/// `obj` is a live `ReadyValue` and the GIL is held.
unsafe fn take(obj: *mut ffi::PyObject) -> *mut ffi::PyObject {
    let this = obj.cast::<ReadyValue>();
    let value = (*this).value;
    (*this).value = ptr::null_mut();
    if value.is_null() {
        ffi::Py_INCREF(ffi::Py_None());
        ffi::Py_None()
    } else {
        value
    }
}

/// Raises StopIteration carrying the value (the iterator protocol's return).
///
/// # Safety
/// `obj` is a live `ReadyValue` and the GIL is held.
unsafe fn stop(obj: *mut ffi::PyObject) -> *mut ffi::PyObject {
    let value = take(obj);
    // StopIteration(value), made by calling the class: a tuple value stays one.
    let exc = ffi::PyObject_CallFunctionObjArgs(
        ffi::PyExc_StopIteration,
        value,
        ptr::null_mut::<ffi::PyObject>(),
    );
    ffi::Py_DECREF(value);
    if !exc.is_null() {
        ffi::PyErr_SetObject(ffi::PyExc_StopIteration, exc);
        ffi::Py_DECREF(exc);
    }
    ptr::null_mut()
}

unsafe extern "C" fn dealloc(obj: *mut ffi::PyObject) {
    let this = obj.cast::<ReadyValue>();
    ffi::Py_XDECREF((*this).value);
    let tp = ffi::Py_TYPE(obj);
    let free = ffi::PyType_GetSlot(tp, ffi::Py_tp_free);
    // SAFETY: (of the block) `tp_free` of a heap type is a `freefunc`.
    let free: ffi::freefunc = std::mem::transmute::<*mut c_void, ffi::freefunc>(free);
    free(obj.cast::<c_void>());
    ffi::Py_DECREF(tp.cast::<ffi::PyObject>());
}

/// `__await__` and `__iter__` of an `AwaitableType`: the object itself.
unsafe extern "C" fn itself(obj: *mut ffi::PyObject) -> *mut ffi::PyObject {
    ffi::Py_INCREF(obj);
    obj
}

unsafe extern "C" fn am_send(
    obj: *mut ffi::PyObject,
    _arg: *mut ffi::PyObject,
    result: *mut *mut ffi::PyObject,
) -> ffi::PySendResult {
    *result = take(obj);
    ffi::PySendResult::PYGEN_RETURN
}

unsafe extern "C" fn iternext(obj: *mut ffi::PyObject) -> *mut ffi::PyObject {
    stop(obj)
}

unsafe extern "C" fn send(obj: *mut ffi::PyObject, _arg: *mut ffi::PyObject) -> *mut ffi::PyObject {
    stop(obj)
}

unsafe extern "C" fn throw(
    obj: *mut ffi::PyObject,
    args: *mut ffi::PyObject,
) -> *mut ffi::PyObject {
    // As a coroutine that never ran: the exception comes straight back out.
    ffi::Py_XDECREF(take(obj));
    let mut typ: *mut ffi::PyObject = ptr::null_mut();
    let mut value: *mut ffi::PyObject = ptr::null_mut();
    let mut tb: *mut ffi::PyObject = ptr::null_mut();
    if ffi::PyArg_UnpackTuple(args, c"throw".as_ptr(), 1, 3, &mut typ, &mut value, &mut tb) == 0 {
        return ptr::null_mut();
    }
    let raised = if !value.is_null() && value != ffi::Py_None() {
        value
    } else {
        typ
    };
    if ffi::PyExceptionInstance_Check(raised) != 0 {
        ffi::PyErr_SetObject(ffi::Py_TYPE(raised).cast(), raised);
    } else {
        ffi::PyErr_SetNone(raised);
    }
    ptr::null_mut()
}

unsafe extern "C" fn close(
    obj: *mut ffi::PyObject,
    _unused: *mut ffi::PyObject,
) -> *mut ffi::PyObject {
    ffi::Py_XDECREF(take(obj));
    ffi::Py_INCREF(ffi::Py_None());
    ffi::Py_None()
}

fn ready_type(py: Python<'_>) -> PyResult<&Bound<'_, PyType>> {
    TYPE.get_or_try_init(py, || {
        let method = |name: &'static CStr, meth, flags| ffi::PyMethodDef {
            ml_name: name.as_ptr(),
            ml_meth: meth,
            ml_flags: flags,
            ml_doc: ptr::null(),
        };
        AwaitableType {
            name: c"surge._core.ReadyValue",
            doc: None,
            basicsize: std::mem::size_of::<ReadyValue>(),
            gc: None,
            dealloc,
            am_send,
            iternext,
            methods: vec![
                method(
                    c"send",
                    ffi::PyMethodDefPointer { PyCFunction: send },
                    ffi::METH_O,
                ),
                method(
                    c"throw",
                    ffi::PyMethodDefPointer { PyCFunction: throw },
                    ffi::METH_VARARGS,
                ),
                method(
                    c"close",
                    ffi::PyMethodDefPointer { PyCFunction: close },
                    ffi::METH_NOARGS,
                ),
            ],
        }
        .create(py)
    })
    .map(|t| t.bind(py))
}

/// A new `ReadyValue` holding `value` (owned; null for None, never taken).
fn new_ready(py: Python<'_>, value: *mut ffi::PyObject) -> PyResult<PyObject> {
    let tp = ready_type(py)?;
    // SAFETY: `tp` is a live heap type; tp_alloc of it returns a new zeroed
    // object of `basicsize` bytes (or null with an exception set).
    unsafe {
        let tp_ptr = tp.as_ptr().cast::<ffi::PyTypeObject>();
        let alloc = ffi::PyType_GetSlot(tp_ptr, ffi::Py_tp_alloc);
        let alloc: ffi::allocfunc = std::mem::transmute::<*mut c_void, ffi::allocfunc>(alloc);
        let obj = alloc(tp_ptr, 0);
        if obj.is_null() {
            ffi::Py_XDECREF(value);
            return Err(PyErr::fetch(py));
        }
        (*obj.cast::<ReadyValue>()).value = value;
        Ok(PyObject::from_owned_ptr(py, obj))
    }
}

/// An awaitable that completes at once with `value`, without an exception.
pub(crate) fn ready_value(value: Bound<'_, PyAny>) -> PyResult<PyObject> {
    new_ready(value.py(), value.into_ptr())
}

static DONE: GILOnceCell<PyObject> = GILOnceCell::new();

/// An awaitable already complete with None, shared (it holds no value to take):
/// what ASGI `send` returns when nothing has to be waited for.
pub(crate) fn done(py: Python<'_>) -> PyResult<PyObject> {
    Ok(DONE
        .get_or_try_init(py, || new_ready(py, ptr::null_mut()))?
        .clone_ref(py))
}

// An awaitable that fails: rare (an ASGI `send` given a bad message), so a
// `#[pyclass]` whose error is raised from `__next__` serves.

fn thrown(typ: &Bound<'_, PyAny>, value: Option<&Bound<'_, PyAny>>) -> PyErr {
    match value {
        Some(v) if !v.is_none() => PyErr::from_value(v.clone()),
        _ => PyErr::from_value(typ.clone()),
    }
}

/// An awaitable already complete with a value or an error, given once.
#[pyclass(module = "surge._core")]
pub struct Ready {
    value: Option<PyObject>,
    error: Option<PyErr>,
}

impl Ready {
    fn next(&mut self, py: Python<'_>) -> PyResult<Option<PyObject>> {
        if let Some(e) = self.error.take() {
            return Err(e);
        }
        match self.value.take() {
            // The value travels in StopIteration (never a tuple here, which
            // StopIteration would unpack).
            Some(v) => Err(PyStopIteration::new_err(v.into_bound(py).unbind())),
            None => Ok(None),
        }
    }
}

#[pymethods]
impl Ready {
    fn __await__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __next__(&mut self, py: Python<'_>) -> PyResult<Option<PyObject>> {
        self.next(py)
    }

    fn send(&mut self, py: Python<'_>, _value: &Bound<'_, PyAny>) -> PyResult<Option<PyObject>> {
        self.next(py)
    }

    #[pyo3(signature = (typ, value=None, _tb=None))]
    fn throw(
        &mut self,
        typ: &Bound<'_, PyAny>,
        value: Option<&Bound<'_, PyAny>>,
        _tb: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<()> {
        self.value = None;
        self.error = None;
        Err(thrown(typ, value))
    }

    fn close(&mut self) {
        self.value = None;
        self.error = None;
    }
}

/// An awaitable that raises `error` when awaited (as a coroutine would).
pub(crate) fn ready_error(py: Python<'_>, error: PyErr) -> PyResult<PyObject> {
    Ok(Py::new(
        py,
        Ready {
            value: None,
            error: Some(error),
        },
    )?
    .into_any())
}
