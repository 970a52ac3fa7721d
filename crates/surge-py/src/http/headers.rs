//! Header fields as a read-only, case-insensitive multi-mapping over received
//! head bytes, shared by the server's requests and the client's responses.
//! Names and values become Python strings (latin-1, as RFC 9110 allows) only
//! when looked up.

use bytes::Bytes;
use pyo3::exceptions::PyKeyError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList, PyString, PyTuple};
use surge_proto::http1::common::HeaderIndex;

pub(crate) fn latin1<'py>(py: Python<'py>, b: &[u8]) -> Bound<'py, PyString> {
    match std::str::from_utf8(b) {
        Ok(s) if s.is_ascii() => PyString::new(py, s),
        _ => {
            let s: String = b.iter().map(|&c| c as char).collect();
            PyString::new(py, &s)
        }
    }
}

/// Header fields in the order received.
#[pyclass(module = "surge._core", frozen, sequence)]
pub struct Headers {
    bytes: Bytes,
    index: Vec<HeaderIndex>,
}

impl Headers {
    /// Headers over `bytes` (the whole head), located by `index`.
    pub fn new(bytes: Bytes, index: Vec<HeaderIndex>) -> Self {
        Headers { bytes, index }
    }

    fn name(&self, h: &HeaderIndex) -> &[u8] {
        h.name_in(&self.bytes)
    }

    fn value(&self, h: &HeaderIndex) -> &[u8] {
        h.value_in(&self.bytes)
    }

    fn find(&self, name: &str) -> Option<&HeaderIndex> {
        self.index
            .iter()
            .find(|h| self.name(h).eq_ignore_ascii_case(name.as_bytes()))
    }

    fn lower_name(&self, h: &HeaderIndex) -> String {
        String::from_utf8_lossy(self.name(h)).to_ascii_lowercase()
    }
}

#[pymethods]
impl Headers {
    fn __getitem__<'py>(&self, py: Python<'py>, name: &str) -> PyResult<Bound<'py, PyString>> {
        match self.find(name) {
            Some(h) => Ok(latin1(py, self.value(h))),
            None => Err(PyKeyError::new_err(name.to_owned())),
        }
    }

    /// The first value of `name` (case-insensitive), or `default`.
    #[pyo3(signature = (name, default=None))]
    fn get(&self, py: Python<'_>, name: &str, default: Option<PyObject>) -> PyObject {
        match self.find(name) {
            Some(h) => latin1(py, self.value(h)).into_any().unbind(),
            None => default.unwrap_or_else(|| py.None()),
        }
    }

    /// Every value of `name`, in order.
    fn getall<'py>(&self, py: Python<'py>, name: &str) -> PyResult<Bound<'py, PyList>> {
        let values: Vec<Bound<'py, PyString>> = self
            .index
            .iter()
            .filter(|h| self.name(h).eq_ignore_ascii_case(name.as_bytes()))
            .map(|h| latin1(py, self.value(h)))
            .collect();
        PyList::new(py, values)
    }

    /// `(name, value)` pairs as received; names lower-cased.
    fn items<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let items: Vec<Bound<'py, PyTuple>> = self
            .index
            .iter()
            .map(|h| {
                PyTuple::new(
                    py,
                    [
                        PyString::new(py, &self.lower_name(h)),
                        latin1(py, self.value(h)),
                    ],
                )
            })
            .collect::<PyResult<_>>()?;
        PyList::new(py, items)
    }

    /// Header names, lower-cased, in order (repeated names repeat).
    fn keys<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let names: Vec<String> = self.index.iter().map(|h| self.lower_name(h)).collect();
        PyList::new(py, names)
    }

    fn values<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let values: Vec<Bound<'py, PyString>> = self
            .index
            .iter()
            .map(|h| latin1(py, self.value(h)))
            .collect();
        PyList::new(py, values)
    }

    /// The head as received, start line to the empty line.
    fn raw<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &self.bytes)
    }

    fn __contains__(&self, name: &Bound<'_, PyAny>) -> bool {
        match name.downcast::<PyString>() {
            Ok(s) => s.to_str().is_ok_and(|s| self.find(s).is_some()),
            Err(_) => false,
        }
    }

    fn __len__(&self) -> usize {
        self.index.len()
    }

    fn __iter__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        self.keys(py)?.into_any().try_iter().map(|i| i.into_any())
    }

    fn __repr__(&self) -> String {
        let parts: Vec<String> = self
            .index
            .iter()
            .map(|h| {
                format!(
                    "{:?}: {:?}",
                    self.lower_name(h),
                    String::from_utf8_lossy(self.value(h))
                )
            })
            .collect();
        format!("Headers({{{}}})", parts.join(", "))
    }
}
