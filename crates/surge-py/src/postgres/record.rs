//! `Record`: one result row, indexed by position and by column name (asyncpg's
//! shape). All rows of a statement share one `Desc` (names and a name -> index
//! dict), so a row costs its values and one pointer.
//!
//! Why a type written against the C API rather than a `#[pyclass]`: a row is
//! the hot path of every read (1000 of them per generate_series query), and a
//! pyclass row was two objects (the class instance and a tuple of its values)
//! plus pyo3's per-object work (the lazy type lookup, slot lookups, a
//! thread-local check and a trampoline per deallocation). This type keeps the
//! values inline, as asyncpg's Record and CPython's tuple do: one allocation
//! and one deallocation per row. Measured with callgrind on generate_series
//! (1000 one-int rows) replayed from a capture into `PgCodec.feed`, rows then
//! freed: 1,071 -> 690 instructions per row.
//!
//! It is not tracked by the cyclic collector (neither was the pyclass row, and
//! rows almost never hold containers that point back at them): a cycle made by
//! putting a Record into a list it holds is not collected.

use std::ffi::{c_int, c_void};
use std::ptr;
use std::sync::Arc;

use pyo3::exceptions::{PyIndexError, PyKeyError, PyTypeError};
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::pyclass::CompareOp;
use pyo3::sync::GILOnceCell;
use pyo3::types::{PyDict, PyInt, PyList, PySlice, PyString, PyTuple, PyType};

use crate::ffi_type::{guard, method, slot, type_slot, HeapType};

/// Column names of a statement's rows, shared by all of them.
pub struct Desc {
    pub names: Vec<Py<PyString>>,
    /// name -> position (the LAST column of a duplicated name wins, as in asyncpg 0.32).
    pub index: Py<PyDict>,
}

impl Desc {
    pub fn new(py: Python<'_>, names: &[String]) -> PyResult<Arc<Desc>> {
        let index = PyDict::new(py);
        let mut v = Vec::with_capacity(names.len());
        for (i, n) in names.iter().enumerate() {
            index.set_item(n, i)?;
        }
        for n in names {
            v.push(PyString::new(py, n).unbind());
        }
        Ok(Arc::new(Desc {
            names: v,
            index: index.unbind(),
        }))
    }
}

/// The object's layout: a var-sized header, the shared `Desc`, then `ob_size`
/// value pointers (the type's item size), as a tuple lays out its items.
#[repr(C)]
struct RecordObject {
    ob_base: ffi::PyVarObject,
    /// From `Arc::into_raw`; released in `dealloc`.
    desc: *const Desc,
}

static TYPE: GILOnceCell<Py<PyType>> = GILOnceCell::new();

/// The `Record` type (made once per interpreter).
pub fn record_type(py: Python<'_>) -> PyResult<&Bound<'_, PyType>> {
    Ok(TYPE.get_or_try_init(py, || make_type(py))?.bind(py))
}

/// A Record of `n` values made by `f` from `items`, with the names of `desc`;
/// an instance of `class` (a subclass of Record, asyncpg's ``record_class``) when given.
pub fn new_record<I, T>(
    py: Python<'_>,
    desc: &Arc<Desc>,
    class: Option<&Py<PyType>>,
    n: usize,
    items: I,
    mut f: impl FnMut(T) -> PyResult<PyObject>,
) -> PyResult<PyObject>
where
    I: Iterator<Item = T>,
{
    let tp = match class {
        Some(c) => c.bind(py),
        None => record_type(py)?,
    };
    let len = ffi::Py_ssize_t::try_from(n)
        .map_err(|_| pyo3::exceptions::PyOverflowError::new_err("too many columns"))?;
    // SAFETY: the GIL is held; `tp` is Record or a subclass of it (checked by the
    // caller, `check_record_class`), so its layout starts with `RecordObject` and
    // its items are the value slots. PyType_GenericAlloc returns a new, zeroed
    // object of `len` items (its value slots NULL, `desc` NULL) with a reference
    // to the type (GC-tracked when a Python subclass asks for it), or NULL with
    // an exception. Owned as `rec` at once: an early return frees it
    // through `dealloc`, which skips NULL slots and a NULL `desc`.
    let rec: PyObject = unsafe {
        let p = ffi::PyType_GenericAlloc(tp.as_ptr().cast(), len);
        Bound::from_owned_ptr_or_err(py, p)?.unbind()
    };
    let obj = rec.as_ptr().cast::<RecordObject>();
    // SAFETY: `obj` is the live object allocated above with `len` slots; `desc`
    // is set once; each slot index < len is written once with a reference we own
    // (`into_ptr` gives it up).
    unsafe {
        (*obj).desc = Arc::into_raw(desc.clone());
        let slots = slots(obj);
        let mut filled = 0;
        for item in items.take(n) {
            let v = f(item)?;
            *slots.add(filled) = v.into_ptr();
            filled += 1;
        }
        if filled != n {
            // Fewer items than announced: never hand out a row with NULL slots.
            return Err(pyo3::exceptions::PyValueError::new_err(
                "row shorter than its description",
            ));
        }
    }
    Ok(rec)
}

/// A Record of `values`, with the names of `desc` (composites).
pub fn record_from_vec(
    py: Python<'_>,
    values: Vec<PyObject>,
    desc: &Arc<Desc>,
) -> PyResult<PyObject> {
    let n = values.len();
    new_record(py, desc, None, n, values.into_iter(), Ok)
}

/// The first value slot of `obj`.
///
/// # Safety
/// `obj` is a live `RecordObject`.
unsafe fn slots(obj: *mut RecordObject) -> *mut *mut ffi::PyObject {
    // SAFETY: the slots follow the header (basicsize = size_of RecordObject,
    // pointer-aligned), inside the object's allocation.
    unsafe { obj.add(1).cast::<*mut ffi::PyObject>() }
}

/// The object's values and names, borrowed while `slf` lives.
///
/// # Safety
/// `slf` is a live, fully built Record (every slot set, `desc` set) and the GIL is held.
unsafe fn parts<'a>(slf: *mut ffi::PyObject) -> (&'a [*mut ffi::PyObject], &'a Desc) {
    let obj = slf.cast::<RecordObject>();
    // SAFETY: see above; ob_size is the slot count given at allocation.
    unsafe {
        let n = (*obj).ob_base.ob_size as usize;
        (std::slice::from_raw_parts(slots(obj), n), &*(*obj).desc)
    }
}

/// The values as a new tuple (iteration, slices, equality and hashing go through it).
fn values_tuple<'py>(
    py: Python<'py>,
    vals: &[*mut ffi::PyObject],
) -> PyResult<Bound<'py, PyTuple>> {
    // SAFETY: each pointer is a live value the Record holds; borrowed for the call.
    let items = vals
        .iter()
        .map(|&v| unsafe { Bound::from_borrowed_ptr(py, v) });
    PyTuple::new(py, items)
}

fn obj_ptr(o: PyObject) -> *mut ffi::PyObject {
    o.into_ptr()
}

/// What `key` names in a Record, looked up as asyncpg's Record does.
enum Key {
    /// A position (an int, negative from the end) in range.
    At(usize),
    /// An int out of range (or too large for an index).
    OutOfRange,
    /// Anything else that is not a column name: a missing name, a float, None...
    Missing,
}

/// The value position a column name names; None for anything else (a Record's
/// names are all str, so no other key can be one).
fn by_name(py: Python<'_>, desc: &Desc, key: &Bound<'_, PyAny>) -> PyResult<Option<usize>> {
    match key.downcast::<PyString>() {
        Ok(s) => desc
            .index
            .bind(py)
            .get_item(s)?
            .map(|i| i.extract())
            .transpose(),
        Err(_) => Ok(None),
    }
}

/// What `key` names: a column name, an int position (negative from the end);
/// as in asyncpg, any other key is a missing name (`KeyError`), not a `TypeError`.
fn position(
    py: Python<'_>,
    vals: &[*mut ffi::PyObject],
    desc: &Desc,
    key: &Bound<'_, PyAny>,
) -> PyResult<Key> {
    if key.is_instance_of::<PyInt>() {
        let Ok(i) = key.extract::<isize>() else {
            return Ok(Key::OutOfRange);
        };
        let n = vals.len() as isize;
        let j = if i < 0 { i + n } else { i };
        return Ok(if (0..n).contains(&j) {
            Key::At(j as usize)
        } else {
            Key::OutOfRange
        });
    }
    Ok(by_name(py, desc, key)?.map_or(Key::Missing, Key::At))
}

/// asyncpg's text for a position out of range.
const OUT_OF_RANGE: &str = "record index out of range";

fn value(py: Python<'_>, v: *mut ffi::PyObject) -> PyObject {
    // SAFETY: a live value the Record holds; a new reference for the caller.
    unsafe { Bound::from_borrowed_ptr(py, v) }.unbind()
}

unsafe extern "C" fn dealloc(slf: *mut ffi::PyObject) {
    let obj = slf.cast::<RecordObject>();
    // SAFETY: called once by the interpreter when the last reference goes, GIL
    // held; the slots hold owned references or NULL (a half-built row), `desc`
    // an `Arc::into_raw` or NULL; the object's memory goes back through the
    // type's tp_free, and the reference to its heap type taken at allocation
    // is released.
    unsafe {
        let n = (*obj).ob_base.ob_size as usize;
        let s = slots(obj);
        for i in 0..n {
            let v = *s.add(i);
            if !v.is_null() {
                ffi::Py_DecRef(v);
            }
        }
        if !(*obj).desc.is_null() {
            drop(Arc::from_raw((*obj).desc));
        }
        let tp = ffi::Py_TYPE(slf);
        type_slot::<ffi::freefunc>(tp, ffi::Py_tp_free)(slf.cast::<c_void>());
        ffi::Py_DecRef(tp.cast());
    }
}

unsafe extern "C" fn length(slf: *mut ffi::PyObject) -> ffi::Py_ssize_t {
    // SAFETY: `slf` is a live Record.
    unsafe { (*slf.cast::<RecordObject>()).ob_base.ob_size }
}

unsafe extern "C" fn subscript(
    slf: *mut ffi::PyObject,
    key: *mut ffi::PyObject,
) -> *mut ffi::PyObject {
    guard(ptr::null_mut(), |py| {
        // SAFETY: live objects handed in by the interpreter, GIL held.
        let (vals, desc) = unsafe { parts(slf) };
        // SAFETY: a live key handed in by the interpreter, borrowed for the call.
        let key = unsafe { Bound::from_borrowed_ptr(py, key) };
        if key.is_instance_of::<PySlice>() {
            let t = values_tuple(py, vals)?;
            return Ok(obj_ptr(t.as_any().get_item(&key)?.unbind()));
        }
        match position(py, vals, desc, &key)? {
            Key::At(i) => Ok(obj_ptr(value(py, vals[i]))),
            Key::OutOfRange => Err(PyIndexError::new_err(OUT_OF_RANGE)),
            Key::Missing => Err(PyKeyError::new_err(key.unbind())),
        }
    })
}

unsafe extern "C" fn item(slf: *mut ffi::PyObject, i: ffi::Py_ssize_t) -> *mut ffi::PyObject {
    guard(ptr::null_mut(), |py| {
        // SAFETY: a live Record, GIL held.
        let (vals, _) = unsafe { parts(slf) };
        match usize::try_from(i).ok().and_then(|i| vals.get(i)) {
            Some(&v) => Ok(obj_ptr(value(py, v))),
            None => Err(PyIndexError::new_err(OUT_OF_RANGE)),
        }
    })
}

unsafe extern "C" fn contains(slf: *mut ffi::PyObject, key: *mut ffi::PyObject) -> c_int {
    guard(-1, |py| {
        // SAFETY: live objects, GIL held.
        let (_, desc) = unsafe { parts(slf) };
        // SAFETY: a live key handed in by the interpreter, borrowed for the call.
        let key = unsafe { Bound::from_borrowed_ptr(py, key) };
        // Only a name is in a Record (an unhashable key is simply not, as in
        // asyncpg); a membership test, not a lookup: no position is extracted.
        Ok(c_int::from(
            key.is_instance_of::<PyString>() && desc.index.bind(py).contains(key)?,
        ))
    })
}

unsafe extern "C" fn iter(slf: *mut ffi::PyObject) -> *mut ffi::PyObject {
    guard(ptr::null_mut(), |py| {
        // SAFETY: a live Record, GIL held.
        let (vals, _) = unsafe { parts(slf) };
        Ok(obj_ptr(
            values_tuple(py, vals)?.try_iter()?.into_any().unbind(),
        ))
    })
}

unsafe extern "C" fn richcompare(
    slf: *mut ffi::PyObject,
    other: *mut ffi::PyObject,
    op: c_int,
) -> *mut ffi::PyObject {
    guard(ptr::null_mut(), |py| {
        // SAFETY: live objects, GIL held.
        let (vals, _) = unsafe { parts(slf) };
        // SAFETY: a live object handed in by the interpreter, borrowed for the call.
        let other = unsafe { Bound::from_borrowed_ptr(py, other) };
        // As asyncpg's: compared as the tuple of its values, with another Record
        // or a tuple, by every operator (rows sort as tuples do); anything else
        // is not comparable (`==` then falls back to identity).
        let theirs = if other.is_instance(record_type(py)?)? {
            // SAFETY: `other` is a live Record.
            let (theirs, _) = unsafe { parts(other.as_ptr()) };
            values_tuple(py, theirs)?.into_any()
        } else if other.is_instance_of::<PyTuple>() {
            other
        } else {
            return Ok(obj_ptr(py.NotImplemented()));
        };
        let op = match op {
            ffi::Py_LT => CompareOp::Lt,
            ffi::Py_LE => CompareOp::Le,
            ffi::Py_EQ => CompareOp::Eq,
            ffi::Py_NE => CompareOp::Ne,
            ffi::Py_GT => CompareOp::Gt,
            ffi::Py_GE => CompareOp::Ge,
            _ => return Ok(obj_ptr(py.NotImplemented())),
        };
        Ok(obj_ptr(
            values_tuple(py, vals)?.rich_compare(theirs, op)?.unbind(),
        ))
    })
}

unsafe extern "C" fn hash(slf: *mut ffi::PyObject) -> ffi::Py_hash_t {
    guard(-1, |py| {
        // SAFETY: a live Record, GIL held.
        let (vals, _) = unsafe { parts(slf) };
        values_tuple(py, vals)?.hash()
    })
}

unsafe extern "C" fn repr(slf: *mut ffi::PyObject) -> *mut ffi::PyObject {
    guard(ptr::null_mut(), |py| {
        // SAFETY: a live Record, GIL held.
        let (vals, desc) = unsafe { parts(slf) };
        // SAFETY: a live object handed in by the interpreter, borrowed for the call.
        let tp = unsafe { Bound::from_borrowed_ptr(py, slf) }.get_type();
        // The class's own name, as asyncpg's (a ``record_class`` shows as itself).
        let mut s = format!("<{}", tp.name()?.to_str()?);
        for (n, &v) in desc.names.iter().zip(vals) {
            s.push(' ');
            s.push_str(n.bind(py).to_str()?);
            s.push('=');
            // SAFETY: a live value the Record holds.
            s.push_str(
                unsafe { Bound::from_borrowed_ptr(py, v) }
                    .repr()?
                    .to_str()?,
            );
        }
        s.push('>');
        Ok(obj_ptr(PyString::new(py, &s).into_any().unbind()))
    })
}

unsafe extern "C" fn keys(slf: *mut ffi::PyObject, _: *mut ffi::PyObject) -> *mut ffi::PyObject {
    guard(ptr::null_mut(), |py| {
        // SAFETY: a live Record, GIL held.
        let (_, desc) = unsafe { parts(slf) };
        let t = PyTuple::new(py, desc.names.iter().map(|v| v.clone_ref(py)))?;
        Ok(obj_ptr(t.try_iter()?.into_any().unbind()))
    })
}

unsafe extern "C" fn values(slf: *mut ffi::PyObject, _: *mut ffi::PyObject) -> *mut ffi::PyObject {
    // SAFETY: forwarded from the interpreter's call.
    unsafe { iter(slf) }
}

unsafe extern "C" fn items(slf: *mut ffi::PyObject, _: *mut ffi::PyObject) -> *mut ffi::PyObject {
    guard(ptr::null_mut(), |py| {
        // SAFETY: a live Record, GIL held.
        let (vals, desc) = unsafe { parts(slf) };
        let pairs = PyList::empty(py);
        for (n, &v) in desc.names.iter().zip(vals) {
            pairs.append((n.clone_ref(py), value(py, v)))?;
        }
        Ok(obj_ptr(pairs.try_iter()?.into_any().unbind()))
    })
}

unsafe extern "C" fn get(
    slf: *mut ffi::PyObject,
    args: *mut *mut ffi::PyObject,
    nargs: ffi::Py_ssize_t,
) -> *mut ffi::PyObject {
    guard(ptr::null_mut(), |py| {
        if !(1..=2).contains(&nargs) {
            return Err(PyTypeError::new_err(format!(
                "get() takes 1 or 2 arguments ({nargs} given)"
            )));
        }
        // SAFETY: the interpreter passes `nargs` live arguments; a live Record.
        let (vals, desc) = unsafe { parts(slf) };
        // SAFETY: nargs >= 1: the first argument is live, borrowed for the call.
        let key = unsafe { Bound::from_borrowed_ptr(py, *args) };
        let default = if nargs == 2 {
            // SAFETY: as above, the second argument.
            unsafe { Bound::from_borrowed_ptr(py, *args.add(1)) }.unbind()
        } else {
            py.None()
        };
        // By column name only, as asyncpg's (and a Mapping's): `get(0)` is the default.
        Ok(obj_ptr(match by_name(py, desc, &key)? {
            Some(i) => value(py, vals[i]),
            None => default,
        }))
    })
}

fn make_type(py: Python<'_>) -> PyResult<Py<PyType>> {
    use ffi::PyMethodDefPointer as M;
    HeapType {
        name: c"surge._core.Record",
        doc: c"One result row: values by position or by column name (asyncpg's Record).",
        basicsize: std::mem::size_of::<RecordObject>(),
        itemsize: std::mem::size_of::<*mut ffi::PyObject>(),
        // Subclassable (asyncpg's ``record_class``: rows of a subclass, made by
        // `new_record`; the subclass cannot be instantiated either), no instances
        // from Python (a Record comes from a query), type attributes read-only.
        flags: ffi::Py_TPFLAGS_DEFAULT
            | ffi::Py_TPFLAGS_BASETYPE
            | ffi::Py_TPFLAGS_DISALLOW_INSTANTIATION
            | ffi::Py_TPFLAGS_IMMUTABLETYPE,
        base: None,
        getters: Vec::new(),
        methods: vec![
            method(
                c"keys",
                M { PyCFunction: keys },
                ffi::METH_NOARGS,
                c"keys($self, /)\n--\n\nThe column names, in order.",
            ),
            method(
                c"values",
                M { PyCFunction: values },
                ffi::METH_NOARGS,
                c"values($self, /)\n--\n\nThe values, in order.",
            ),
            method(
                c"items",
                M { PyCFunction: items },
                ffi::METH_NOARGS,
                c"items($self, /)\n--\n\n(name, value) pairs, in order.",
            ),
            method(
                c"get",
                M { PyCFunctionFast: get },
                ffi::METH_FASTCALL,
                c"get($self, key, default=None, /)\n--\n\nThe value of column `key`, or `default` when there is no such column.",
            ),
        ],
        slots: vec![
            slot(ffi::Py_tp_dealloc, dealloc as *mut c_void),
            slot(ffi::Py_sq_length, length as *mut c_void),
            slot(ffi::Py_mp_length, length as *mut c_void),
            slot(ffi::Py_sq_item, item as *mut c_void),
            slot(ffi::Py_mp_subscript, subscript as *mut c_void),
            slot(ffi::Py_sq_contains, contains as *mut c_void),
            slot(ffi::Py_tp_iter, iter as *mut c_void),
            slot(ffi::Py_tp_richcompare, richcompare as *mut c_void),
            slot(ffi::Py_tp_hash, hash as *mut c_void),
            slot(ffi::Py_tp_repr, repr as *mut c_void),
        ],
    }
    .make(py)
}
