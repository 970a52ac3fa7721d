//! `HttpResponse` and `Headers`: a received response as Python sees it.
//! Headers stay as offsets into the received head bytes; names and values
//! become Python strings (latin-1, as RFC 9110 allows) only when looked up.

use bytes::Bytes;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyString};
use surge_proto::http1::client::ResponseHead;
use surge_proto::http1::common::Version;

use crate::http::headers::{latin1, Headers};

/// One response: status line, headers and (unless streamed) the whole body.
#[pyclass(module = "surge._core", frozen)]
pub struct HttpResponse {
    head: ResponseHead,
    headers: std::sync::OnceLock<Py<Headers>>,
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
    fn headers(&self, py: Python<'_>) -> PyResult<Py<Headers>> {
        if let Some(h) = self.headers.get() {
            return Ok(h.clone_ref(py));
        }
        let h = Py::new(
            py,
            Headers::new(self.head.bytes.clone(), self.head.headers.clone()),
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
