//! `TarantoolResponse` (`surge.tarantool.Response`): a request's reply as
//! asynctnt's `Response` reads (`.body`, `.code`, `.schema_id`, `.sync`,
//! `.rowcount`, `.done()`, ...) that is also the list of its rows, as surge's replies always were (`isinstance(r, list)`,
//! `r == [...]`, slicing, JSON).
//!
//! Why a list subclass made here rather than a `#[pyclass]` or a Python class:
//! pyo3 cannot extend `list` under the limited API (abi3), and a wrapper object
//! holding the list would be one more object per reply (the cost the replies
//! avoided so far). So the type is made once with `PyType_FromSpecWithBases`
//! (base `list`, through `ffi_type::HeapType`); its instances are lists with the reply header's sync and
//! schema version stored after the list's own fields, read by native getters.
//! Everything else asynctnt's `Response` has is a constant for a reply that
//! arrived (a failed request raises instead): `code`/`return_code` 0, `errmsg`,
//! `error`, `metadata`, `params`, `autoincrement_ids` None, ...

use std::os::raw::c_void;
use std::ptr;

use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::sync::GILOnceCell;
use pyo3::types::{PyList, PyType};

use crate::ffi_type::{getter, guard, method, slot, type_slot, HeapType};

/// What a reply's header says, stored in each `Response` after the list.
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct ReplyInfo {
    pub sync: u64,
    pub schema_id: u64,
    /// 0: the reply had IPROTO_DATA (`body` is the list itself); 1: it had
    /// none (ping, auth, ...: `body` is None, as asynctnt's).
    pub no_body: u64,
}

/// The type and where `ReplyInfo` sits in its instances.
struct ResponseType {
    ty: Py<PyType>,
    /// `list.__basicsize__` rounded up to `ReplyInfo`'s alignment.
    info_offset: usize,
    /// `list`'s own `tp_dealloc` (ours calls it, then releases the type).
    list_dealloc: ffi::destructor,
    /// The type's `tp_alloc`, read once (`PyType_GetSlot` per reply was a
    /// call and a slot table walk for a pointer that never changes).
    alloc: ffi::allocfunc,
}

static RESPONSE: GILOnceCell<ResponseType> = GILOnceCell::new();

/// Constants the getters return, by their closure index.
const CONST_ZERO: usize = 0;
const CONST_NONE: usize = 1;
const CONST_ENCODING: usize = 2;

/// `Response` (made on first use).
pub fn response_type(py: Python<'_>) -> PyResult<&Bound<'_, PyType>> {
    Ok(kind(py)?.ty.bind(py))
}

fn kind(py: Python<'_>) -> PyResult<&ResponseType> {
    RESPONSE.get_or_try_init(py, || make_type(py))
}

/// A `Response` with no items yet (`append` fills it), its header `info`.
pub fn new_response<'py>(py: Python<'py>, info: ReplyInfo) -> PyResult<Bound<'py, PyList>> {
    let k = kind(py)?;
    // SAFETY: `k.ty` is a live type object (kept for the process's life);
    // its tp_alloc returns a new reference, zeroed past the list's fields, or
    // NULL with an exception set.
    let obj = unsafe {
        let tp = k.ty.as_ptr().cast::<ffi::PyTypeObject>();
        Bound::from_owned_ptr_or_err(py, (k.alloc)(tp, 0))?
    };
    // SAFETY: the object was made with the type's basicsize, which leaves room
    // for a `ReplyInfo` at `info_offset` (see `make_type`).
    unsafe {
        let at = obj
            .as_ptr()
            .cast::<u8>()
            .add(k.info_offset)
            .cast::<ReplyInfo>();
        ptr::write(at, info);
    }
    // SAFETY: a `Response` is a list (its base type).
    Ok(unsafe { obj.downcast_into_unchecked() })
}

/// The header stored in a `Response`.
///
/// # Safety
/// `obj` must be a `Response` (made by `new_response` or by the type's own
/// `__new__`, which zeroes it).
unsafe fn info_of(obj: *mut ffi::PyObject, k: &ResponseType) -> ReplyInfo {
    // SAFETY: the caller's promise; see `new_response`.
    unsafe { ptr::read(obj.cast::<u8>().add(k.info_offset).cast::<ReplyInfo>()) }
}

fn make_type(py: Python<'_>) -> PyResult<ResponseType> {
    let list = py.get_type::<PyList>();
    let base: usize = list.getattr("__basicsize__")?.extract()?;
    let align = std::mem::align_of::<ReplyInfo>();
    let info_offset = base.div_ceil(align) * align;
    // SAFETY: `list` is a static type (PyType_GetSlot takes static types since
    // 3.10) whose tp_dealloc is set.
    let list_dealloc: ffi::destructor =
        unsafe { type_slot(list.as_ptr().cast(), ffi::Py_tp_dealloc) };
    let ty = HeapType {
        name: c"surge._core.TarantoolResponse",
        doc: c"A request's reply: the list of its rows, with asynctnt's Response attributes.",
        basicsize: info_offset + std::mem::size_of::<ReplyInfo>(),
        itemsize: 0,
        // No BASETYPE: nothing else may lay itself out after `ReplyInfo`. GC
        // support (list's traverse and clear) is inherited from the base.
        flags: ffi::Py_TPFLAGS_DEFAULT | ffi::Py_TPFLAGS_IMMUTABLETYPE,
        base: Some(&list),
        getters: vec![
            getter(c"body", get_body, 0),
            getter(c"sync", get_sync, 0),
            getter(c"schema_id", get_schema_id, 0),
            getter(c"rowcount", get_rowcount, 0),
            getter(c"code", get_const, CONST_ZERO),
            getter(c"return_code", get_const, CONST_ZERO),
            getter(c"stmt_id", get_const, CONST_ZERO),
            getter(c"params_count", get_const, CONST_ZERO),
            getter(c"errmsg", get_const, CONST_NONE),
            getter(c"error", get_const, CONST_NONE),
            getter(c"metadata", get_const, CONST_NONE),
            getter(c"params", get_const, CONST_NONE),
            getter(c"autoincrement_ids", get_const, CONST_NONE),
            getter(c"encoding", get_const, CONST_ENCODING),
        ],
        methods: vec![method(
            c"done",
            ffi::PyMethodDefPointer { PyCFunction: done },
            ffi::METH_NOARGS,
            c"True: the reply is complete (asynctnt's).",
        )],
        slots: vec![slot(ffi::Py_tp_dealloc, dealloc as *mut c_void)],
    }
    .make(py)?;
    // SAFETY: `ty` is the type just made; its tp_alloc is set (inherited).
    let alloc: ffi::allocfunc =
        unsafe { type_slot(ty.as_ptr().cast::<ffi::PyTypeObject>(), ffi::Py_tp_alloc) };
    Ok(ResponseType {
        ty,
        info_offset,
        list_dealloc,
        alloc,
    })
}

/// `list`'s dealloc, then the reference every instance of a heap type holds
/// on it (what CPython's own `subtype_dealloc` would do).
unsafe extern "C" fn dealloc(obj: *mut ffi::PyObject) {
    // SAFETY: only called by CPython on a `Response` about to be freed, so the
    // type (and `RESPONSE`) exists; the type pointer is read before the object
    // is freed.
    unsafe {
        let tp = ffi::Py_TYPE(obj);
        let k = RESPONSE
            .get(Python::assume_gil_acquired())
            .expect("Response dealloc before the type was made");
        (k.list_dealloc)(obj);
        ffi::Py_DECREF(tp.cast());
    }
}

/// Runs `f` with the GIL held on a `Response` and turns its result into a
/// new reference (or NULL with the exception set, a panic as PanicException).
///
/// # Safety
/// `obj` must be a `Response`; the GIL is held (CPython calls getters with it).
unsafe fn with_info(
    obj: *mut ffi::PyObject,
    f: impl FnOnce(Python<'_>, ReplyInfo) -> PyResult<PyObject>,
) -> *mut ffi::PyObject {
    guard(ptr::null_mut(), |py| {
        let k = kind(py)?;
        // SAFETY: the caller's promise that `obj` is a `Response`.
        let info = unsafe { info_of(obj, k) };
        Ok(f(py, info)?.into_ptr())
    })
}

unsafe extern "C" fn get_body(obj: *mut ffi::PyObject, _: *mut c_void) -> *mut ffi::PyObject {
    // SAFETY: a getter of the type: `obj` is a `Response`, the GIL is held.
    unsafe {
        with_info(obj, |py, info| {
            if info.no_body != 0 {
                return Ok(py.None());
            }
            Ok(Bound::from_borrowed_ptr(py, obj).unbind())
        })
    }
}

unsafe extern "C" fn get_sync(obj: *mut ffi::PyObject, _: *mut c_void) -> *mut ffi::PyObject {
    // SAFETY: as `get_body`.
    unsafe {
        with_info(obj, |py, info| {
            Ok(info.sync.into_pyobject(py)?.into_any().unbind())
        })
    }
}

unsafe extern "C" fn get_schema_id(obj: *mut ffi::PyObject, _: *mut c_void) -> *mut ffi::PyObject {
    // SAFETY: as `get_body`.
    unsafe {
        with_info(obj, |py, info| {
            Ok(info.schema_id.into_pyobject(py)?.into_any().unbind())
        })
    }
}

unsafe extern "C" fn get_rowcount(obj: *mut ffi::PyObject, _: *mut c_void) -> *mut ffi::PyObject {
    // SAFETY: as `get_body`; a `Response` is a list.
    unsafe {
        with_info(obj, |py, _| {
            let n = ffi::PyList_Size(obj);
            Ok(n.into_pyobject(py)?.into_any().unbind())
        })
    }
}

unsafe extern "C" fn get_const(_: *mut ffi::PyObject, closure: *mut c_void) -> *mut ffi::PyObject {
    // SAFETY: CPython calls getters with the GIL held.
    let py = unsafe { Python::assume_gil_acquired() };
    let v: PyObject = match closure as usize {
        CONST_ZERO => 0u8
            .into_pyobject(py)
            .map(|v| v.into_any().unbind())
            .unwrap_or_else(|_| py.None()),
        CONST_ENCODING => pyo3::types::PyBytes::new(py, b"utf-8").into_any().unbind(),
        _ => py.None(),
    };
    v.into_ptr()
}

unsafe extern "C" fn done(_: *mut ffi::PyObject, _: *mut ffi::PyObject) -> *mut ffi::PyObject {
    // SAFETY: CPython calls methods with the GIL held.
    let py = unsafe { Python::assume_gil_acquired() };
    true.into_pyobject(py)
        .map(|b| b.to_owned().into_any().unbind())
        .unwrap_or_else(|_| py.None())
        .into_ptr()
}
