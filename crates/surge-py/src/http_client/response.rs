//! `HttpResponse` and `ResponseHeaders`: a received response as Python sees it.
//! Headers stay as offsets into the received head bytes; names and values
//! become Python strings (latin-1, as RFC 9110 allows) only when looked up.

use bytes::Bytes;
use pyo3::exceptions::PyKeyError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList, PyString, PyTuple};
use surge_proto::http1::client::ResponseHead;
use surge_proto::http1::{HeaderIndex, Version};

pub(crate) fn latin1<'py>(py: Python<'py>, b: &[u8]) -> Bound<'py, PyString> {
    match std::str::from_utf8(b) {
        Ok(s) if s.is_ascii() => PyString::new(py, s),
        _ => {
            let s: String = b.iter().map(|&c| c as char).collect();
            PyString::new(py, &s)
        }
    }
}

/// Response headers: a read-only, case-insensitive multi-mapping in the order
/// received.
#[pyclass(module = "surge._core", frozen, sequence)]
pub struct ResponseHeaders {
    bytes: Bytes,
    index: Vec<HeaderIndex>,
}

impl ResponseHeaders {
    fn name(&self, h: &HeaderIndex) -> &[u8] {
        &self.bytes[h.name.0 as usize..h.name.1 as usize]
    }

    fn value(&self, h: &HeaderIndex) -> &[u8] {
        &self.bytes[h.value.0 as usize..h.value.1 as usize]
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
impl ResponseHeaders {
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

    /// The head as received, status line to the empty line.
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
        format!("ResponseHeaders({{{}}})", parts.join(", "))
    }
}

/// One response: status line, headers and (unless streamed) the whole body.
#[pyclass(module = "surge._core", frozen)]
pub struct HttpResponse {
    head: ResponseHead,
    headers: std::sync::OnceLock<Py<ResponseHeaders>>,
    body: Py<PyBytes>,
}

impl HttpResponse {
    pub fn new(head: ResponseHead, body: Py<PyBytes>) -> Self {
        HttpResponse {
            head,
            headers: std::sync::OnceLock::new(),
            body,
        }
    }
}

/// One `bytes` object from body pieces, copied once.
pub(crate) fn join_body<'py>(py: Python<'py>, chunks: &[Bytes]) -> PyResult<Bound<'py, PyBytes>> {
    if let [one] = chunks {
        return Ok(PyBytes::new(py, one));
    }
    let total = chunks.iter().map(Bytes::len).sum();
    PyBytes::new_with(py, total, |buf| {
        let mut at = 0;
        for c in chunks {
            buf[at..at + c.len()].copy_from_slice(c);
            at += c.len();
        }
        Ok(())
    })
}

#[pymethods]
impl HttpResponse {
    #[getter]
    fn status(&self) -> u16 {
        self.head.status
    }

    #[getter]
    fn reason<'py>(&self, py: Python<'py>) -> Bound<'py, PyString> {
        latin1(py, self.head.reason())
    }

    /// "1.0" or "1.1".
    #[getter]
    fn version(&self) -> &'static str {
        match self.head.version {
            Version::Http10 => "1.0",
            Version::Http11 => "1.1",
        }
    }

    /// Whether the connection may carry another request after this response.
    #[getter]
    fn keep_alive(&self) -> bool {
        self.head.keep_alive
    }

    /// The declared body length; `None` for chunked or close-delimited bodies.
    #[getter]
    fn content_length(&self) -> Option<u64> {
        self.head.content_length()
    }

    #[getter]
    fn headers(&self, py: Python<'_>) -> PyResult<Py<ResponseHeaders>> {
        if let Some(h) = self.headers.get() {
            return Ok(h.clone_ref(py));
        }
        let h = Py::new(
            py,
            ResponseHeaders {
                bytes: self.head.bytes.clone(),
                index: self.head.headers.clone(),
            },
        )?;
        Ok(self.headers.get_or_init(|| h).clone_ref(py))
    }

    /// The whole body (empty for a streamed response: read its chunks instead).
    #[getter]
    fn body(&self, py: Python<'_>) -> Py<PyBytes> {
        self.body.clone_ref(py)
    }

    fn __repr__(&self) -> String {
        format!(
            "<HttpResponse {} {}>",
            self.head.status,
            String::from_utf8_lossy(self.head.reason())
        )
    }
}
