//! MessagePack -> Python objects, in one pass over a borrowed slice.

use pyo3::exceptions::PyValueError;
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::sync::GILOnceCell;
use pyo3::types::{PyBytes, PyDict, PyList, PyString, PyTuple, PyType};
use pyo3::IntoPyObjectExt;
use std::os::raw::c_int;
use surge_proto::msgpack::{self as mp, ext, Token};

use super::pack::{DECIMAL, INTERVAL, TYPES_MODULE, UUID};
use super::response::{new_response, ReplyInfo};
use super::tuple::Tuple;

static ERROR_INFO: GILOnceCell<Py<PyType>> = GILOnceCell::new();
static EXT_VALUE: GILOnceCell<Py<PyType>> = GILOnceCell::new();
static DATETIME: GILOnceCell<Py<PyType>> = GILOnceCell::new();
static TIMEZONE: GILOnceCell<Py<PyType>> = GILOnceCell::new();
static TIMEDELTA: GILOnceCell<Py<PyType>> = GILOnceCell::new();

pub fn mp_err(e: mp::Error) -> PyErr {
    PyValueError::new_err(e.to_string())
}

/// Decode one value at `*pos`.
pub fn unpack(py: Python<'_>, buf: &[u8], pos: &mut usize) -> PyResult<PyObject> {
    unpack_depth(py, buf, pos, 0)
}

/// A MessagePack str as a Python str, or as bytes when it is not UTF-8 (rather
/// than failing the whole reply). One pass: Python's decoder checks the UTF-8 as
/// it copies, where a check in Rust first read every string twice (a tenth of
/// the client's instructions for a reply carrying a 1.5 KB string).
fn str_or_bytes(py: Python<'_>, s: &[u8]) -> PyObject {
    let Ok(len) = ffi::Py_ssize_t::try_from(s.len()) else {
        return PyBytes::new(py, s).into_any().unbind();
    };
    // SAFETY: `s` is a live slice of `len` bytes for the whole call, "strict" a
    // NUL-terminated C string; the result is a new reference or NULL with an
    // exception set, which `from_owned_ptr_or_err` takes over either way.
    let decoded = unsafe {
        let ptr = ffi::PyUnicode_DecodeUTF8(s.as_ptr().cast(), len, c"strict".as_ptr());
        Bound::from_owned_ptr_or_err(py, ptr)
    };
    match decoded {
        Ok(v) => v.unbind(),
        Err(_) => PyBytes::new(py, s).into_any().unbind(),
    }
}

fn unpack_depth(py: Python<'_>, buf: &[u8], pos: &mut usize, depth: usize) -> PyResult<PyObject> {
    if depth > ext::MAX_DEPTH {
        return Err(mp_err(mp::Error::TooDeep));
    }
    let tok = mp::read_token(buf, pos).map_err(mp_err)?;
    Ok(match tok {
        Token::Nil => py.None(),
        Token::Bool(b) => b.into_py_any(py)?,
        Token::Int(i) => i.into_py_any(py)?,
        Token::Uint(u) => u.into_py_any(py)?,
        Token::F32(f) => (f as f64).into_py_any(py)?,
        Token::F64(f) => f.into_py_any(py)?,
        Token::Str(s) => str_or_bytes(py, s),
        Token::Bin(b) => PyBytes::new(py, b).into_any().unbind(),
        Token::Array(n) => {
            check_room(buf, *pos, n as usize)?;
            list_of(py, n as usize, || unpack_depth(py, buf, pos, depth + 1))?
                .into_any()
                .unbind()
        }
        Token::Map(n) => {
            check_room(buf, *pos, 2 * n as usize)?;
            let d = PyDict::new(py);
            for _ in 0..n {
                let k = unpack_depth(py, buf, pos, depth + 1)?;
                let v = unpack_depth(py, buf, pos, depth + 1)?;
                // A map or array as a key (Lua allows table keys) cannot be a
                // Python dict key: a clear ValueError, as for other bad input.
                if let Err(e) = d.set_item(&k, v) {
                    let kind = k.bind(py).get_type().name()?;
                    return Err(PyValueError::new_err(format!(
                        "msgpack map key of type {kind} cannot be a dict key: {e}"
                    )));
                }
            }
            d.into_any().unbind()
        }
        Token::Ext(ty, data) => unpack_ext(py, ty, data)?,
    })
}

/// A container cannot hold more items than bytes left; refuse before allocating.
fn check_room(buf: &[u8], pos: usize, items: usize) -> PyResult<()> {
    if items > buf.len() - pos {
        return Err(mp_err(mp::Error::Truncated));
    }
    Ok(())
}

/// Decode an array of tuples (a reply's IPROTO_DATA) into a list of `Tuple`s,
/// a `Response` when the reply's header `info` is given.
pub fn unpack_rows(
    py: Python<'_>,
    buf: &[u8],
    names: &Option<Py<PyDict>>,
    info: Option<ReplyInfo>,
) -> PyResult<PyObject> {
    let mut pos = 0;
    let Token::Array(n) = mp::read_token(buf, &mut pos).map_err(mp_err)? else {
        return Err(mp_err(mp::Error::Unexpected("array of tuples")));
    };
    check_room(buf, pos, n as usize)?;
    let rows = reply_list(py, n as usize, info, || {
        let start = pos;
        match mp::read_token(buf, &mut pos).map_err(mp_err)? {
            Token::Array(m) => {
                check_room(buf, pos, m as usize)?;
                let items = tuple_of(py, m as usize, || unpack_depth(py, buf, &mut pos, 2))?;
                let t = Tuple {
                    items: items.unbind(),
                    names: names.as_ref().map(|n| n.clone_ref(py)),
                };
                Ok(Py::new(py, t)?.into_any())
            }
            _ => {
                // Not a tuple (e.g. a Lua function's scalar): decode it as is.
                pos = start;
                unpack_depth(py, buf, &mut pos, 1)
            }
        }
    })?;
    Ok(rows.into_any().unbind())
}

/// A reply's IPROTO_DATA decoded as it is (call, eval): a `Response` of its
/// items when the reply's header `info` is given.
pub fn unpack_data(py: Python<'_>, buf: &[u8], info: Option<ReplyInfo>) -> PyResult<PyObject> {
    let Some(info) = info else {
        return unpack(py, buf, &mut 0);
    };
    let mut pos = 0;
    let Token::Array(n) = mp::read_token(buf, &mut pos).map_err(mp_err)? else {
        // IPROTO_DATA is always an array; anything else is decoded as it is.
        return unpack(py, buf, &mut 0);
    };
    check_room(buf, pos, n as usize)?;
    let items = reply_list(py, n as usize, Some(info), || {
        unpack_depth(py, buf, &mut pos, 1)
    })?;
    Ok(items.into_any().unbind())
}

/// `list_of`, or a `Response` filled by appending when `info` is given (its
/// size cannot be set ahead under the limited API: one append per item, a
/// few reallocations for a long reply).
fn reply_list<'py>(
    py: Python<'py>,
    n: usize,
    info: Option<ReplyInfo>,
    mut item: impl FnMut() -> PyResult<PyObject>,
) -> PyResult<Bound<'py, PyList>> {
    let Some(info) = info else {
        return list_of(py, n, item);
    };
    let r = new_response(py, info)?;
    for _ in 0..n {
        let v = item()?;
        // SAFETY: `r` is a list; PyList_Append takes a new reference of its
        // own (ours in `v` is released when it drops).
        if unsafe { ffi::PyList_Append(r.as_ptr(), v.as_ptr()) } != 0 {
            return Err(PyErr::fetch(py));
        }
    }
    Ok(r)
}

// Containers are filled in place, item by item as they are decoded: no Vec
// between the decoder and the container (pyo3's `PyTuple::new`/`PyList::new`
// take an iterator and check its length; ~300 instructions per row of a reply,
// a tenth of the decoding of a 1.5 KB tuple). A decoding error drops the
// container half filled: its slots not yet set are NULL, which the tuple's and
// the list's dealloc (and the GC's traversal) skip.

/// A tuple of `n` items, `item()` called for each in order.
fn tuple_of<'py>(
    py: Python<'py>,
    n: usize,
    item: impl FnMut() -> PyResult<PyObject>,
) -> PyResult<Bound<'py, PyTuple>> {
    // SAFETY: PyTuple_New/PyTuple_SetItem are the pair `filled` wants; the
    // tuple is only this call's until it returns (PyTuple_SetItem wants its
    // refcount to be 1).
    let t = unsafe { filled(py, n, ffi::PyTuple_New, ffi::PyTuple_SetItem, item)? };
    // SAFETY: made by PyTuple_New.
    Ok(unsafe { t.downcast_into_unchecked() })
}

/// A list of `n` items, `item()` called for each in order.
fn list_of<'py>(
    py: Python<'py>,
    n: usize,
    item: impl FnMut() -> PyResult<PyObject>,
) -> PyResult<Bound<'py, PyList>> {
    // SAFETY: PyList_New/PyList_SetItem are the pair `filled` wants.
    let l = unsafe { filled(py, n, ffi::PyList_New, ffi::PyList_SetItem, item)? };
    // SAFETY: made by PyList_New.
    Ok(unsafe { l.downcast_into_unchecked() })
}

/// A container of `n` slots made by `new`, slot `i` set to `item()` by `set`.
///
/// # Safety
/// `new(n)` must return a new reference to a container of `n` empty slots (or
/// NULL with an exception set) and `set(c, i, v)` put `v` in slot `i < n`,
/// stealing its reference, and return 0 (or -1 with an exception set).
unsafe fn filled<'py>(
    py: Python<'py>,
    n: usize,
    new: unsafe extern "C" fn(ffi::Py_ssize_t) -> *mut ffi::PyObject,
    set: unsafe extern "C" fn(*mut ffi::PyObject, ffi::Py_ssize_t, *mut ffi::PyObject) -> c_int,
    mut item: impl FnMut() -> PyResult<PyObject>,
) -> PyResult<Bound<'py, PyAny>> {
    let len = ffi::Py_ssize_t::try_from(n).map_err(|_| mp_err(mp::Error::Truncated))?;
    // SAFETY: `new` returns a new reference or NULL with an exception set (the
    // caller's promise); `from_owned_ptr_or_err` takes it over either way.
    let c = unsafe { Bound::from_owned_ptr_or_err(py, new(len))? };
    for i in 0..len {
        let v = item()?;
        // SAFETY: `c` has `len` slots and `i < len` (the caller's promise for
        // `set`); the item's reference is stolen, on failure too.
        if unsafe { set(c.as_ptr(), i, v.into_ptr()) } != 0 {
            return Err(PyErr::fetch(py));
        }
    }
    Ok(c)
}

fn bstr(py: Python<'_>, b: &[u8]) -> PyObject {
    PyString::new(py, &String::from_utf8_lossy(b))
        .into_any()
        .unbind()
}

/// An error stack as a list of dicts, for `ErrorInfo.from_stack`.
pub fn error_stack_to_py(py: Python<'_>, data: &[u8]) -> PyResult<PyObject> {
    let stack = ext::decode_error_stack(data).map_err(mp_err)?;
    let mut out = Vec::with_capacity(stack.len());
    for e in &stack {
        let d = PyDict::new(py);
        d.set_item("type", bstr(py, e.ty))?;
        d.set_item("file", bstr(py, e.file))?;
        d.set_item("line", e.line)?;
        d.set_item("message", bstr(py, e.message))?;
        d.set_item("errno", e.errno)?;
        d.set_item("code", e.code)?;
        let fields = if e.fields.is_empty() {
            PyDict::new(py).into_any().unbind()
        } else {
            unpack(py, e.fields, &mut 0)?
        };
        d.set_item("fields", fields)?;
        out.push(d);
    }
    let list = PyList::new(py, out)?;
    Ok(ERROR_INFO
        .import(py, TYPES_MODULE, "ErrorInfo")?
        .call_method1("from_stack", (list,))?
        .unbind())
}

fn unpack_ext(py: Python<'_>, ty: i8, data: &[u8]) -> PyResult<PyObject> {
    match ty {
        ext::EXT_DECIMAL => {
            let d = ext::decode_decimal(data).map_err(mp_err)?;
            let digits = PyTuple::new(py, d.digits.iter().map(|&x| x as u32))?;
            let t = (u8::from(d.negative), digits, -d.scale);
            Ok(DECIMAL
                .import(py, "decimal", "Decimal")?
                .call1((t,))?
                .unbind())
        }
        ext::EXT_UUID => {
            if data.len() != 16 {
                return Err(mp_err(mp::Error::BadExt(ty)));
            }
            let kw = PyDict::new(py);
            kw.set_item("bytes", PyBytes::new(py, data))?;
            Ok(UUID
                .import(py, "uuid", "UUID")?
                .call((), Some(&kw))?
                .unbind())
        }
        ext::EXT_DATETIME => {
            let d = ext::decode_datetime(data).map_err(mp_err)?;
            let td = TIMEDELTA.import(py, "datetime", "timedelta")?;
            let tz_cls = TIMEZONE.import(py, "datetime", "timezone")?;
            let tz = tz_cls.call1((td.call1((0, d.tzoffset as i64 * 60))?,))?;
            let epoch = DATETIME.import(py, "datetime", "datetime")?.call1((
                1970,
                1,
                1,
                0,
                0,
                0,
                0,
                tz_cls.getattr("utc")?,
            ))?;
            // epoch + timedelta avoids the platform limits of fromtimestamp().
            let delta = td.call1((0, d.seconds, d.nsec / 1000))?;
            let utc = epoch.call_method1("__add__", (delta,))?;
            Ok(utc.call_method1("astimezone", (tz,))?.unbind())
        }
        ext::EXT_INTERVAL => {
            let iv = ext::decode_interval(data).map_err(mp_err)?;
            let kw = PyDict::new(py);
            for (i, name) in ext::INTERVAL_FIELDS.iter().enumerate() {
                kw.set_item(*name, iv.fields[i])?;
            }
            Ok(INTERVAL
                .import(py, TYPES_MODULE, "Interval")?
                .call((), Some(&kw))?
                .unbind())
        }
        ext::EXT_ERROR => error_stack_to_py(py, data),
        _ => Ok(EXT_VALUE
            .import(py, TYPES_MODULE, "ExtValue")?
            .call1((ty, PyBytes::new(py, data)))?
            .unbind()),
    }
}
