//! Calls into Python without an argument tuple, for the per-request paths.
//!
//! PyO3's `call1` packs the arguments into a tuple (the abi3 build has no
//! `PyObject_Vectorcall` before Python 3.12), which the callee's vectorcall
//! then unpacks again. `PyObject_CallFunctionObjArgs` (stable ABI) hands them
//! over on the C stack instead: a tuple's allocation, fill and free less per
//! call (~0.2k instructions, callgrind, on an ASGI request's app call and
//! `Context.run`).

use std::ptr;

use pyo3::ffi;
use pyo3::prelude::*;

/// `f(a)`.
pub(crate) fn call1<'py>(
    f: &Bound<'py, PyAny>,
    a: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyAny>> {
    // SAFETY: every argument is a live reference held across the call, and the
    // list ends with the null pointer the variadic function looks for; the
    // result is a new reference or null with an exception set.
    unsafe {
        let result = ffi::PyObject_CallFunctionObjArgs(
            f.as_ptr(),
            a.as_ptr(),
            ptr::null_mut::<ffi::PyObject>(),
        );
        Bound::from_owned_ptr_or_err(f.py(), result)
    }
}

/// `f(a, b, c)`.
pub(crate) fn call3<'py>(
    f: &Bound<'py, PyAny>,
    a: &Bound<'py, PyAny>,
    b: &Bound<'py, PyAny>,
    c: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyAny>> {
    // SAFETY: as in `call1`.
    unsafe {
        let result = ffi::PyObject_CallFunctionObjArgs(
            f.as_ptr(),
            a.as_ptr(),
            b.as_ptr(),
            c.as_ptr(),
            ptr::null_mut::<ffi::PyObject>(),
        );
        Bound::from_owned_ptr_or_err(f.py(), result)
    }
}
