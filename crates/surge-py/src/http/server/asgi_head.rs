//! The encoded response headers of an ASGI app that answers with the same
//! header list again and again (a module-level list of constant tuples, as
//! raw ASGI apps and many middlewares write them).
//!
//! Encoding a header means checking every byte of its name and value and
//! classifying the name for framing: ~0.55k instructions per header of a
//! hello response (callgrind), done for every response. When a response's
//! `headers` is a list holding the very tuple objects of the list encoded
//! last, the bytes are the same (a tuple of `bytes` is immutable, and the
//! cache holds references to the tuples, so their addresses cannot be reused
//! by other objects): the lines and what framing learnt from them are taken
//! from the cache after one pointer comparison per header.
//!
//! Only lists whose every item is an exact 2-tuple of exact `bytes` are
//! cached, and only when no header depends on the request (`connection`,
//! `transfer-encoding`: their effect differs for HTTP/1.0 and keep-alive).
//! A list is cached the second time it is seen, so an app that makes a new
//! list for every response (FastAPI, Starlette) pays one reference swap per
//! response, not a copy of its headers. One entry per process: the loop
//! thread serves every connection, and the usual app has one such list.
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
use pyo3::types::PyList;

/// What framing learnt from a cached header list.
#[derive(Clone, Copy, Default)]
pub(crate) struct Learnt {
    /// The value of its `content-length`.
    pub length: Option<i64>,
    pub has_server: bool,
    pub has_date: bool,
}

struct Entry {
    /// The list last encoded (held so that its identity means something).
    list: PyObject,
    /// Its items when cached (empty until it was seen twice).
    items: Vec<PyObject>,
    /// Their encoded lines ("name: value\r\n" each).
    lines: Vec<u8>,
    learnt: Learnt,
}

static CACHE: GILProtected<RefCell<Option<Entry>>> = GILProtected::new(RefCell::new(None));

/// The item `i` of `list` as a pointer (no reference taken), null past its end.
fn item_ptr(list: &Bound<'_, PyList>, i: usize) -> *mut ffi::PyObject {
    // SAFETY: `list` is a live list; PyList_GetItem returns a borrowed reference
    // (only compared here, never dereferenced) or null with IndexError set,
    // which is cleared.
    unsafe {
        let item = ffi::PyList_GetItem(list.as_ptr(), i as ffi::Py_ssize_t);
        if item.is_null() {
            ffi::PyErr_Clear();
        }
        item
    }
}

/// Appends the cached lines of `headers` to `head` when it holds the cached
/// tuples: what framing learnt from them; None (and `head` untouched) otherwise.
pub(crate) fn lookup(headers: &Bound<'_, PyList>, head: &mut Vec<u8>) -> Option<Learnt> {
    let cache = CACHE.get(headers.py()).try_borrow().ok()?;
    let entry = cache.as_ref()?;
    if entry.items.is_empty() || entry.items.len() != headers.len() {
        return None;
    }
    for (i, item) in entry.items.iter().enumerate() {
        if item_ptr(headers, i) != item.as_ptr() {
            return None;
        }
    }
    head.extend_from_slice(&entry.lines);
    Some(entry.learnt)
}

/// After `headers` (a list of exact `(bytes, bytes)` tuples, checked and
/// encoded as `lines`) missed the cache: cached when it is the list seen
/// last, else remembered as the list seen last.
pub(crate) fn remember(headers: &Bound<'_, PyList>, lines: &[u8], learnt: Learnt) {
    let Ok(mut cache) = CACHE.get(headers.py()).try_borrow_mut() else {
        return;
    };
    let entry = match cache.as_mut() {
        Some(e) if e.list.is(headers) => e,
        _ => {
            let last = cache.replace(Entry {
                list: headers.clone().into_any().unbind(),
                items: Vec::new(),
                lines: Vec::new(),
                learnt,
            });
            // Released after the borrow: freeing the old list may run Python code
            // (whatever the app put in it since), which may send a response.
            drop(cache);
            drop(last);
            return;
        }
    };
    let items = headers.iter().map(|item| item.unbind()).collect();
    let last = std::mem::replace(&mut entry.items, items);
    entry.lines = lines.to_vec();
    entry.learnt = learnt;
    drop(cache);
    drop(last);
}
