//! The encoded response headers of the last ASGI response, reused when the
//! next response carries the same header list.
//!
//! Encoding a header means checking every byte of its name and value and
//! classifying the name for framing: ~0.55k instructions per header of a
//! hello response (callgrind), done for every response. Most apps answer with
//! the same headers again and again: raw ASGI apps and many middlewares with
//! one module-level list of constant tuples, FastAPI and Starlette with a
//! fresh list of fresh tuples of equal bytes (`Response.init_headers`). A
//! response whose `headers` holds, item by item, either the very tuple
//! encoded last (one pointer comparison: the cache holds a reference to it, so
//! its address cannot be reused by another object, and a tuple of `bytes` is
//! immutable) or an exact 2-tuple of exact `bytes` equal to the name and value
//! encoded last (two short comparisons) encodes to the same lines: they and
//! what framing learnt from them are taken from the cache.
//!
//! Only lists whose every item is an exact 2-tuple of exact `bytes` are
//! cached, and only when no header depends on the request (`connection`,
//! `transfer-encoding`: their effect differs for HTTP/1.0 and keep-alive).
//! One entry per process: the loop thread serves every connection, and the
//! usual app has one such list.
//!
//! The entry is guarded by the GIL, which every caller holds, rather than by
//! a lock of its own: a `Mutex` cost a lock and an unlock per response (~0.2k
//! instructions, callgrind) for an exclusion the GIL already gives. Nothing in
//! `lookup` or `remember` runs Python code while the entry is borrowed (the
//! objects an update releases are dropped after the borrow ends), so the
//! `RefCell` borrow cannot be re-entered; a failed borrow is a miss anyway.

use std::cell::RefCell;

use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::sync::GILProtected;
use pyo3::types::{PyBytes, PyList, PyTuple};

/// What framing learnt from a cached header list.
#[derive(Clone, Copy, Default)]
pub(crate) struct Learnt {
    /// The value of its `content-length`.
    pub length: Option<i64>,
    /// The server's own headers the list replaces (`HeadDefaults::which`).
    pub replaced: u64,
}

/// Where one header lies in `Entry::lines`: its name is `lines[name..value - 2]`
/// (": " follows it), its value `lines[value..end]` ("\r\n" follows it).
#[derive(Clone, Copy)]
pub(crate) struct Span {
    pub name: usize,
    pub value: usize,
    pub end: usize,
}

struct Entry {
    /// The tuples of the list encoded last.
    items: Vec<PyObject>,
    /// Their encoded lines ("name: value\r\n" each).
    lines: Vec<u8>,
    spans: Vec<Span>,
    learnt: Learnt,
    /// The `HeadDefaults::serial` that `learnt.replaced` was computed for.
    serial: u64,
}

static CACHE: GILProtected<RefCell<Option<Entry>>> = GILProtected::new(RefCell::new(None));

/// The item `i` of `list` as a pointer (no reference taken), null past its end.
fn item_ptr(list: &Bound<'_, PyList>, i: usize) -> *mut ffi::PyObject {
    // SAFETY: `list` is a live list; PyList_GetItem returns a borrowed reference
    // (only compared or borrowed for the caller's check, while `list` holds it)
    // or null with IndexError set, which is cleared.
    unsafe {
        let item = ffi::PyList_GetItem(list.as_ptr(), i as ffi::Py_ssize_t);
        if item.is_null() {
            ffi::PyErr_Clear();
        }
        item
    }
}

/// Whether `item` (a live object) is an exact `(bytes, bytes)` tuple holding
/// exactly `name` and `value`.
fn equal_pair(py: Python<'_>, item: *mut ffi::PyObject, name: &[u8], value: &[u8]) -> bool {
    // SAFETY: `item` is a borrowed reference the caller's list keeps alive for
    // this call; nothing here runs Python code that could change the list.
    let item = unsafe { Borrowed::from_ptr(py, item) };
    let Ok(pair) = item.downcast_exact::<PyTuple>() else {
        return false;
    };
    if pair.len() != 2 {
        return false;
    }
    let bytes_equal = |i: usize, want: &[u8]| {
        pair.get_borrowed_item(i)
            .ok()
            .and_then(|b| {
                b.downcast_exact::<PyBytes>()
                    .ok()
                    .map(|b| b.as_bytes() == want)
            })
            .unwrap_or(false)
    };
    bytes_equal(0, name) && bytes_equal(1, value)
}

/// Appends the cached lines of `headers` to `head` when it holds the headers
/// encoded last against the same server headers (`serial`): what framing
/// learnt from them; None (and `head` untouched) otherwise.
pub(crate) fn lookup(
    headers: &Bound<'_, PyList>,
    head: &mut Vec<u8>,
    serial: u64,
) -> Option<Learnt> {
    let py = headers.py();
    let cache = CACHE.get(py).try_borrow().ok()?;
    let entry = cache.as_ref()?;
    if entry.items.len() != headers.len() || entry.serial != serial {
        return None;
    }
    for (i, (item, span)) in entry.items.iter().zip(&entry.spans).enumerate() {
        let got = item_ptr(headers, i);
        if got == item.as_ptr() {
            continue;
        }
        if got.is_null()
            || !equal_pair(
                py,
                got,
                &entry.lines[span.name..span.value - 2],
                &entry.lines[span.value..span.end],
            )
        {
            return None;
        }
    }
    head.extend_from_slice(&entry.lines);
    Some(entry.learnt)
}

/// After `headers` (a list of exact `(bytes, bytes)` tuples, checked and
/// encoded as `lines`, each header where `spans` says) missed the cache: it
/// becomes the entry.
pub(crate) fn remember(
    headers: &Bound<'_, PyList>,
    lines: &[u8],
    spans: &[Span],
    learnt: Learnt,
    serial: u64,
) {
    let Ok(mut cache) = CACHE.get(headers.py()).try_borrow_mut() else {
        return;
    };
    let items = headers.iter().map(|item| item.unbind()).collect();
    let last = match cache.as_mut() {
        Some(entry) => {
            entry.lines.clear();
            entry.lines.extend_from_slice(lines);
            entry.spans.clear();
            entry.spans.extend_from_slice(spans);
            entry.learnt = learnt;
            entry.serial = serial;
            Some(std::mem::replace(&mut entry.items, items))
        }
        None => {
            *cache = Some(Entry {
                items,
                lines: lines.to_vec(),
                spans: spans.to_vec(),
                learnt,
                serial,
            });
            None
        }
    };
    // Released after the borrow: freeing the old tuples may run Python code
    // (none of `bytes`, but a tuple's release is not ours to reason about).
    drop(cache);
    drop(last);
}
