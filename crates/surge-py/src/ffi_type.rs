//! Heap types made against the C API with `PyType_FromSpecWithBases`, for the
//! few types a `#[pyclass]` cannot be: `Record` (values inline, one allocation
//! per row) and `TarantoolResponse` (a `list` subclass, which pyo3 cannot make
//! under abi3). [`HeapType`] holds what differs between them (name, layout,
//! base, getters, methods, slots); [`HeapType::make`] does the rest once.
//!
//! CPython copies the spec and its slot array but keeps pointers into the
//! getter and method tables (its descriptors point at them), so those two are
//! leaked on purpose: one small table per type, made once per process.

use std::ffi::{c_int, c_uint, c_ulong, c_void, CStr};
use std::ptr;

use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::PyType;

/// What a type made here is: its spec, less what `make` fills in.
pub struct HeapType<'a, 'py> {
    /// "module.Name", 'static (CPython may keep the pointer as `tp_name`).
    pub name: &'static CStr,
    pub doc: &'static CStr,
    /// The instance size, and the size of each item of a var-sized type (0 if not).
    pub basicsize: usize,
    pub itemsize: usize,
    /// `Py_TPFLAGS_*`, DEFAULT included by the caller.
    pub flags: c_ulong,
    /// The base type (`object` when None).
    pub base: Option<&'a Bound<'py, PyType>>,
    /// Without the terminating entry.
    pub getters: Vec<ffi::PyGetSetDef>,
    /// Without the terminating entry.
    pub methods: Vec<ffi::PyMethodDef>,
    /// Without doc, getset, methods and the terminating entry.
    pub slots: Vec<ffi::PyType_Slot>,
}

/// A slot entry; `f` a function cast to a pointer (`dealloc as *mut c_void`).
pub fn slot(slot: c_int, f: *mut c_void) -> ffi::PyType_Slot {
    ffi::PyType_Slot { slot, pfunc: f }
}

/// A read-only attribute computed by `get`, handed `closure` as its second argument.
pub fn getter(name: &'static CStr, get: ffi::getter, closure: usize) -> ffi::PyGetSetDef {
    ffi::PyGetSetDef {
        name: name.as_ptr(),
        get: Some(get),
        set: None,
        doc: ptr::null(),
        closure: closure as *mut c_void,
    }
}

/// A method; `doc` may start with a text signature ("name($self, /)\n--\n\n").
pub fn method(
    name: &'static CStr,
    meth: ffi::PyMethodDefPointer,
    flags: c_int,
    doc: &'static CStr,
) -> ffi::PyMethodDef {
    ffi::PyMethodDef {
        ml_name: name.as_ptr(),
        ml_meth: meth,
        ml_flags: flags,
        ml_doc: doc.as_ptr(),
    }
}

impl HeapType<'_, '_> {
    /// The type (a new heap type on each call: callers keep it in a GILOnceCell).
    pub fn make(self, py: Python<'_>) -> PyResult<Py<PyType>> {
        let mut slots = self.slots;
        slots.push(slot(ffi::Py_tp_doc, self.doc.as_ptr() as *mut c_void));
        if !self.getters.is_empty() {
            let mut getters = self.getters;
            getters.push(ffi::PyGetSetDef::default());
            let table: &'static mut [ffi::PyGetSetDef] = Box::leak(getters.into_boxed_slice());
            slots.push(slot(ffi::Py_tp_getset, table.as_mut_ptr().cast()));
        }
        if !self.methods.is_empty() {
            let mut methods = self.methods;
            methods.push(ffi::PyMethodDef::zeroed());
            let table: &'static mut [ffi::PyMethodDef] = Box::leak(methods.into_boxed_slice());
            slots.push(slot(ffi::Py_tp_methods, table.as_mut_ptr().cast()));
        }
        slots.push(slot(0, ptr::null_mut()));
        let mut spec = ffi::PyType_Spec {
            name: self.name.as_ptr(),
            basicsize: c_int::try_from(self.basicsize)?,
            itemsize: c_int::try_from(self.itemsize)?,
            flags: c_uint::try_from(self.flags)?,
            slots: slots.as_mut_ptr(),
        };
        let bases = self.base.map_or(ptr::null_mut(), |b| b.as_ptr());
        // SAFETY: the GIL is held; the spec and slot array are valid for the call
        // (CPython copies them), the tables and strings they point to are
        // 'static; `bases` is NULL or a borrowed live type. Returns a new
        // reference or NULL with an exception set.
        let tp = unsafe {
            Bound::from_owned_ptr_or_err(py, ffi::PyType_FromSpecWithBases(&mut spec, bases))?
        };
        Ok(tp.downcast_into::<PyType>()?.unbind())
    }
}

/// The function in slot `id` of `tp` (`Py_tp_alloc`, `Py_tp_free`, ...), as `F`.
///
/// # Safety
/// `tp` is a live type (static types too: PyType_GetSlot takes them since
/// 3.10), `F` is the function pointer type of that slot, and the slot is set.
pub unsafe fn type_slot<F: Copy>(tp: *mut ffi::PyTypeObject, id: c_int) -> F {
    const { assert!(std::mem::size_of::<F>() == std::mem::size_of::<*mut c_void>()) };
    // SAFETY: the caller's promise; a non-NULL slot holds a function of type `F`,
    // the same size as the pointer (checked above).
    unsafe {
        let p = ffi::PyType_GetSlot(tp, id);
        debug_assert!(!p.is_null(), "slot {id} is not set");
        std::mem::transmute_copy::<*mut c_void, F>(&p)
    }
}

/// Runs a slot's body with the GIL token: an error becomes the raised
/// exception and `err` is returned, a panic a PanicException (a panic must not
/// unwind into CPython).
pub fn guard<R>(err: R, body: impl FnOnce(Python<'_>) -> PyResult<R>) -> R {
    // SAFETY: slots, getters and methods are called by the interpreter with the GIL held.
    let py = unsafe { Python::assume_gil_acquired() };
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| body(py)));
    match r {
        Ok(Ok(v)) => v,
        Ok(Err(e)) => {
            e.restore(py);
            err
        }
        Err(payload) => {
            let what = payload
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "a panic in a native type's slot".into());
            pyo3::panic::PanicException::new_err(what).restore(py);
            err
        }
    }
}
