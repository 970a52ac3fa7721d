//! Write batching for ASGI/WSGI connections (`surge.http.protocol._Batched`).
//!
//! A connection's writes wait in its `BatchedTransport` until the end of the
//! loop iteration, when the loop's `WriteBatch` hands each waiting connection's
//! bytes to its transport in one write (why: see `_Batched`). Native because
//! it runs for every response: as Python methods the write, the registration
//! with the batch and the flush were three frames per request (~3k
//! instructions of a raw ASGI hello), and the ASGI cycle (`asgi.rs`) now
//! writes here without a Python call.
//!
//! A flush sends straight to a plain socket while its transport holds nothing
//! (see `direct`): the transport's `write` and a `bytes` object for it were
//! ~1.2k instructions of a raw ASGI hello's ~25k in the server (callgrind).

use std::os::fd::RawFd;

use pyo3::gc::PyVisit;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use pyo3::PyTraverseError;

use super::direct;
use crate::call;

/// What may wait before a write leaves at once: a large or streamed body gains
/// nothing from waiting, and the transport must see it for its write
/// back-pressure (`pause_writing`).
pub const BATCH_LIMIT: usize = 64 * 1024;

/// The largest write buffer a connection keeps between batches (see
/// `BatchedTransport::flush_bound`): a few responses' worth.
const KEEP_CAPACITY: usize = 1024;

/// The connections of one event loop with writes waiting for the iteration's end.
#[pyclass(module = "surge._core")]
pub struct WriteBatch {
    event_loop: PyObject,
    dirty: Vec<Py<BatchedTransport>>,
    scheduled: bool,
}

#[pymethods]
impl WriteBatch {
    #[new]
    fn new(event_loop: PyObject) -> Self {
        WriteBatch {
            event_loop,
            dirty: Vec::new(),
            scheduled: false,
        }
    }

    /// Hands every waiting connection's bytes to its transport (the loop calls
    /// this once per iteration in which something was written).
    fn flush(slf: &Bound<'_, Self>) -> PyResult<()> {
        let py = slf.py();
        let dirty = {
            let mut this = slf.borrow_mut();
            this.scheduled = false;
            std::mem::take(&mut this.dirty)
        };
        for batched in dirty {
            // Bound: its release is a plain decref (see `flush_bound`).
            BatchedTransport::flush_bound(&batched.into_bound(py))?;
        }
        Ok(())
    }

    fn __traverse__(&self, visit: PyVisit<'_>) -> Result<(), PyTraverseError> {
        visit.call(&self.event_loop)?;
        for d in &self.dirty {
            visit.call(d)?;
        }
        Ok(())
    }

    fn __clear__(&mut self) {
        self.dirty.clear();
    }
}

/// A transport whose writes leave together at the end of the loop iteration
/// (subclassed by `surge.http.protocol._Batched`, which delegates the rest of
/// the `asyncio.Transport` API).
#[pyclass(module = "surge._core", subclass)]
pub struct BatchedTransport {
    /// The real transport.
    #[pyo3(get)]
    transport: PyObject,
    /// The transport's `write`, `is_closing` and `get_write_buffer_size`,
    /// bound once (a method lookup and a bound method per flush otherwise).
    write: PyObject,
    is_closing: PyObject,
    buffer_size: PyObject,
    batch: Py<WriteBatch>,
    pending: Vec<u8>,
    /// The plain socket to send to directly (`direct`), looked up on the first
    /// flush: `Some(None)` for a TLS or socketless transport.
    socket: Option<Option<RawFd>>,
}

impl BatchedTransport {
    /// `write` from Rust (the ASGI cycle): no Python call, no bytes object.
    pub fn write_bytes(slf: &Bound<'_, Self>, data: &[u8]) -> PyResult<()> {
        if data.is_empty() {
            return Ok(());
        }
        let py = slf.py();
        let (first, flush_now, batch) = {
            let mut this = slf.borrow_mut();
            let first = this.pending.is_empty();
            this.pending.extend_from_slice(data);
            (
                first,
                this.pending.len() >= BATCH_LIMIT,
                this.batch.bind(py).clone(),
            )
        };
        if flush_now {
            return Self::flush_bound(slf);
        }
        if first {
            let schedule = {
                let mut b = batch.borrow_mut();
                b.dirty.push(slf.clone().unbind());
                !std::mem::replace(&mut b.scheduled, true)
            };
            if schedule {
                let event_loop = batch.borrow().event_loop.clone_ref(py);
                event_loop.call_method1(
                    py,
                    intern!(py, "call_soon"),
                    (batch.getattr(intern!(py, "flush"))?,),
                )?;
            }
        }
        Ok(())
    }

    fn flush_bound(slf: &Bound<'_, Self>) -> PyResult<()> {
        let py = slf.py();
        // Bound references (not `Py` clones): dropping a `Py` asks the
        // thread-local GIL state first (~30 instructions each, five per flush).
        let (write, is_closing, buffer_size, socket) = {
            let this = slf.borrow();
            if this.pending.is_empty() {
                return Ok(());
            }
            (
                this.write.bind(py).clone(),
                this.is_closing.bind(py).clone(),
                this.buffer_size.bind(py).clone(),
                this.socket,
            )
        };
        if is_closing.call0()?.is_truthy()? {
            Self::take_pending(slf, usize::MAX); // dropped: nobody will read it
            return Ok(());
        }
        let socket = match socket {
            Some(s) => s,
            None => {
                let transport = slf.borrow().transport.clone_ref(py);
                let s = direct::plain_socket(transport.bind(py));
                slf.borrow_mut().socket = Some(s);
                s
            }
        };
        let mut sent = 0;
        if let Some(fd) = socket {
            // Only while the transport holds nothing: these bytes must not
            // overtake its own.
            if buffer_size.call0()?.extract::<usize>()? == 0 {
                sent = direct::send_bytes(fd, &slf.borrow().pending, direct::FLAGS);
            }
        }
        if let Some(rest) = Self::take_pending(slf, sent) {
            call::call1(&write, rest.as_any())?;
        }
        Ok(())
    }

    /// Empties the buffer; the bytes from `from` on, if any, as a `bytes` to
    /// hand to the transport. The buffer keeps its allocation for the next
    /// batch unless it grew large (a malloc and a free less per response, while
    /// an idle connection holds at most `KEEP_CAPACITY`).
    fn take_pending<'py>(slf: &Bound<'py, Self>, from: usize) -> Option<Bound<'py, PyBytes>> {
        let mut this = slf.borrow_mut();
        let rest =
            (from < this.pending.len()).then(|| PyBytes::new(slf.py(), &this.pending[from..]));
        if this.pending.capacity() > KEEP_CAPACITY {
            this.pending = Vec::new();
        } else {
            this.pending.clear();
        }
        rest
    }
}

#[pymethods]
impl BatchedTransport {
    /// Batches the writes to `transport` on the loop of `batch`.
    #[new]
    fn new(py: Python<'_>, transport: PyObject, batch: Py<WriteBatch>) -> PyResult<Self> {
        Ok(BatchedTransport {
            write: transport.getattr(py, intern!(py, "write"))?,
            is_closing: transport.getattr(py, intern!(py, "is_closing"))?,
            buffer_size: transport.getattr(py, intern!(py, "get_write_buffer_size"))?,
            transport,
            batch,
            pending: Vec::new(),
            socket: None,
        })
    }

    /// Keeps `data` until the iteration's end (or writes at once what reaches
    /// the batch limit).
    fn write(slf: &Bound<'_, Self>, data: &Bound<'_, PyAny>) -> PyResult<()> {
        let py = slf.py();
        let owned;
        let bytes = match data.downcast::<PyBytes>() {
            Ok(b) => b,
            Err(_) => {
                // bytearray, memoryview: what transports take, as bytes
                owned = py.get_type::<PyBytes>().call1((data,))?;
                owned.downcast::<PyBytes>()?
            }
        };
        let slice = bytes.as_bytes();
        if slice.len() >= BATCH_LIMIT && slf.borrow().pending.is_empty() {
            // A large write with nothing ahead of it: straight through, uncopied.
            let (write, is_closing) = {
                let this = slf.borrow();
                (this.write.clone_ref(py), this.is_closing.clone_ref(py))
            };
            if !is_closing.call0(py)?.is_truthy(py)? {
                write.call1(py, (bytes,))?;
            }
            return Ok(());
        }
        Self::write_bytes(slf, slice)
    }

    /// Hands what waits to the transport now.
    fn flush(slf: &Bound<'_, Self>) -> PyResult<()> {
        Self::flush_bound(slf)
    }

    /// The bytes waiting here.
    #[getter]
    fn _size(&self) -> usize {
        self.pending.len()
    }

    /// The transport's buffer plus what waits here (the back-pressure budget).
    fn get_write_buffer_size(&self, py: Python<'_>) -> PyResult<usize> {
        let size: usize = self
            .transport
            .call_method0(py, intern!(py, "get_write_buffer_size"))?
            .extract(py)?;
        Ok(size + self.pending.len())
    }

    fn is_closing(&self, py: Python<'_>) -> PyResult<PyObject> {
        self.is_closing.call0(py)
    }

    /// Flushes, then closes.
    fn close(slf: &Bound<'_, Self>) -> PyResult<()> {
        let py = slf.py();
        Self::flush_bound(slf)?;
        let transport = slf.borrow().transport.clone_ref(py);
        transport.call_method0(py, intern!(py, "close"))?;
        Ok(())
    }

    /// Flushes, then half-closes.
    fn write_eof(slf: &Bound<'_, Self>) -> PyResult<()> {
        let py = slf.py();
        Self::flush_bound(slf)?;
        let transport = slf.borrow().transport.clone_ref(py);
        transport.call_method0(py, intern!(py, "write_eof"))?;
        Ok(())
    }

    /// Drops what waits, then aborts.
    fn abort(slf: &Bound<'_, Self>) -> PyResult<()> {
        let py = slf.py();
        let transport = {
            let mut this = slf.borrow_mut();
            this.pending = Vec::new();
            this.transport.clone_ref(py)
        };
        transport.call_method0(py, intern!(py, "abort"))?;
        Ok(())
    }

    fn __traverse__(&self, visit: PyVisit<'_>) -> Result<(), PyTraverseError> {
        visit.call(&self.transport)?;
        visit.call(&self.write)?;
        visit.call(&self.is_closing)?;
        visit.call(&self.buffer_size)?;
        visit.call(&self.batch)?;
        Ok(())
    }
}
