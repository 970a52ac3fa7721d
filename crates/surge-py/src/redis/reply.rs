//! RESP replies straight to Python objects, from bytes the scanner has seen whole.
//!
//! Error replies become exception objects made by the driver's factory (which
//! maps the `ERR`/`WRONGTYPE`/... prefix to a class); inside an aggregate (an
//! EXEC reply) they stay in place as values, so one failed command does not
//! hide the others' results.

use pyo3::exceptions::{PyUnicodeDecodeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyFrozenSet, PyInt, PyList, PySet, PyString, PyTuple};
use pyo3::IntoPyObjectExt;
use surge_proto::resp::{read_header, Header, Status, MAX_NESTING};

/// How replies become Python objects.
pub struct Builder<'a, 'py> {
    pub py: Python<'py>,
    /// Bulk strings as `str` (redis-py's `decode_responses=True`).
    pub decode: bool,
    /// Makes an exception object from an error reply's text.
    pub error_factory: &'a Bound<'py, PyAny>,
}

impl<'py> Builder<'_, 'py> {
    fn header<'b>(&self, buf: &'b [u8], pos: &mut usize) -> PyResult<Header<'b>> {
        match read_header(buf, pos) {
            Ok(Status::Complete(h)) => Ok(h),
            Ok(Status::Partial) => Err(PyValueError::new_err("resp: reply ends early")),
            Err(e) => Err(PyValueError::new_err(e.to_string())),
        }
    }

    fn text(&self, b: &[u8]) -> PyResult<Bound<'py, PyAny>> {
        if !self.decode {
            return Ok(PyBytes::new(self.py, b).into_any());
        }
        match std::str::from_utf8(b) {
            Ok(s) => Ok(PyString::new(self.py, s).into_any()),
            Err(e) => Err(PyErr::from_value(
                PyUnicodeDecodeError::new_utf8(self.py, b, e)?.into_any(),
            )),
        }
    }

    /// Whether the value at `pos` is a RESP3 push (without consuming it).
    pub fn is_push(buf: &[u8], pos: usize) -> bool {
        buf.get(pos) == Some(&b'>')
    }

    /// Build the value at `*pos`; error replies come back as exception objects
    /// with `is_error` set when they are the whole reply.
    pub fn build(&self, buf: &[u8], pos: &mut usize) -> PyResult<(Bound<'py, PyAny>, bool)> {
        // Simple ('-') and blob ('!') errors: the type byte says it, no second
        // header parse per reply.
        let first_is_error = matches!(buf.get(*pos), Some(b'-' | b'!'));
        let v = self.value(buf, pos, 0)?;
        Ok((v, first_is_error))
    }

    fn value(&self, buf: &[u8], pos: &mut usize, depth: usize) -> PyResult<Bound<'py, PyAny>> {
        let py = self.py;
        let h = self.header(buf, pos)?;
        if h.children() > 0 && depth >= MAX_NESTING {
            return Err(PyValueError::new_err("resp: aggregates nested too deep"));
        }
        Ok(match h {
            Header::Simple(s) => PyString::new(py, &String::from_utf8_lossy(s)).into_any(),
            Header::Error(s) => self
                .error_factory
                .call1((String::from_utf8_lossy(s).as_ref(),))?,
            Header::Integer(i) => i.into_bound_py_any(py)?,
            Header::Bulk(Some(b)) => self.text(b)?,
            Header::Verbatim(_, t) => self.text(t)?,
            Header::Bulk(None) | Header::Array(None) | Header::Null => py.None().into_bound(py),
            Header::Boolean(b) => b.into_bound_py_any(py)?,
            Header::Double(d) => d.into_bound_py_any(py)?,
            Header::BigNumber(s) => py
                .get_type::<PyInt>()
                .call1((String::from_utf8_lossy(s).as_ref(),))?,
            Header::Array(Some(n)) | Header::Push(n) => self.list(buf, pos, n, depth)?.into_any(),
            Header::Set(n) => {
                let items = self.list(buf, pos, n, depth)?;
                // Members that cannot be hashed (nested aggregates) keep the list.
                match PySet::new(py, items.iter()) {
                    Ok(s) => s.into_any(),
                    Err(_) => items.into_any(),
                }
            }
            Header::Map(n) => {
                let d = PyDict::new(py);
                for _ in 0..n {
                    let k = hashable(self.value(buf, pos, depth + 1)?)?;
                    let v = self.value(buf, pos, depth + 1)?;
                    d.set_item(k, v)?;
                }
                d.into_any()
            }
            Header::Attribute(n) => {
                for _ in 0..2 * n {
                    self.value(buf, pos, depth + 1)?;
                }
                self.value(buf, pos, depth)?
            }
        })
    }

    fn list(
        &self,
        buf: &[u8],
        pos: &mut usize,
        n: u64,
        depth: usize,
    ) -> PyResult<Bound<'py, PyList>> {
        let out = PyList::empty(self.py);
        for _ in 0..n {
            out.append(self.value(buf, pos, depth + 1)?)?;
        }
        Ok(out)
    }
}

/// A map key Python can hash: lists become tuples, sets frozensets.
fn hashable(k: Bound<'_, PyAny>) -> PyResult<Bound<'_, PyAny>> {
    if let Ok(l) = k.downcast::<PyList>() {
        let items: Vec<Bound<'_, PyAny>> = l.iter().map(hashable).collect::<PyResult<Vec<_>>>()?;
        return Ok(PyTuple::new(k.py(), items)?.into_any());
    }
    if let Ok(s) = k.downcast::<PySet>() {
        return Ok(PyFrozenSet::new(k.py(), s.iter())?.into_any());
    }
    Ok(k)
}
