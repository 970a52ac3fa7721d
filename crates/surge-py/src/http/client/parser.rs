//! `HttpResponseParser`: the response parser alone, for callers that own the
//! socket and the requests (the load generator). `feed` builds whole
//! responses; `feed_statuses` only counts them and returns their statuses, with
//! no header objects and no body kept, so timing many pipelined responses
//! costs little more than the parse itself.

use bytes::Bytes;
use pyo3::create_exception;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyList;
use surge_proto::http1::client::{
    Expect, ResponseEvent, ResponseHead, ResponseLimits, ResponseParser, DEFAULT_MAX_BODY,
    DEFAULT_MAX_CHUNK_LINE, DEFAULT_MAX_HEAD, DEFAULT_MAX_HEADERS, DEFAULT_MAX_INTERIM,
};

use super::response::{join_body, HttpResponse};

create_exception!(
    _core,
    HttpResponseError,
    PyValueError,
    "The bytes from the server are not a valid HTTP/1.x response stream."
);

pub(crate) fn limits(max_head: usize, max_headers: usize, max_body: u64) -> ResponseLimits {
    ResponseLimits {
        max_head,
        max_headers,
        max_body,
        max_chunk_line: DEFAULT_MAX_CHUNK_LINE,
        max_interim: DEFAULT_MAX_INTERIM,
    }
}

#[pyclass(module = "surge._core")]
pub struct HttpResponseParser {
    parser: ResponseParser,
    head: Option<ResponseHead>,
    chunks: Vec<Bytes>,
    /// Final responses completed so far.
    #[pyo3(get)]
    responses: u64,
    /// Body bytes received so far (decoded: chunk framing not counted).
    #[pyo3(get)]
    body_bytes: u64,
    /// Bytes fed so far.
    #[pyo3(get)]
    bytes_received: u64,
}

impl HttpResponseParser {
    /// Polls dry; `keep` says whether to build `HttpResponse`s or statuses.
    fn drain<'py>(&mut self, py: Python<'py>, keep: bool) -> PyResult<Bound<'py, PyList>> {
        let out = PyList::empty(py);
        loop {
            match self.parser.poll() {
                Ok(None) => return Ok(out),
                Ok(Some(ResponseEvent::Head(h))) => self.head = Some(h),
                Ok(Some(ResponseEvent::Data(d))) => {
                    self.body_bytes += d.len() as u64;
                    if keep {
                        self.chunks.push(d);
                    }
                }
                Ok(Some(ResponseEvent::End)) => {
                    self.responses += 1;
                    let head = self.head.take().expect("End follows a Head");
                    if keep {
                        let body = join_body(py, &self.chunks)?.unbind();
                        self.chunks.clear();
                        out.append(Py::new(py, HttpResponse::new(head, body))?)?;
                    } else {
                        out.append(head.status)?;
                    }
                }
                // Responses completed before the error are returned first; the
                // parser stays failed, so the next call raises.
                Err(_) if !out.is_empty() => return Ok(out),
                Err(e) => return Err(HttpResponseError::new_err(e.message())),
            }
        }
    }
}

#[pymethods]
impl HttpResponseParser {
    #[new]
    #[pyo3(signature = (*, max_head=DEFAULT_MAX_HEAD, max_headers=DEFAULT_MAX_HEADERS, max_body=DEFAULT_MAX_BODY))]
    fn new(max_head: usize, max_headers: usize, max_body: u64) -> Self {
        HttpResponseParser {
            parser: ResponseParser::new(limits(max_head, max_headers, max_body)),
            head: None,
            chunks: Vec::new(),
            responses: 0,
            body_bytes: 0,
            bytes_received: 0,
        }
    }

    /// Notes one request sent; call once per request, in order, if any of
    /// them is HEAD (its response has no body whatever its headers say).
    #[pyo3(signature = (head=false))]
    fn expect(&mut self, head: bool) {
        self.parser
            .expect(if head { Expect::Head } else { Expect::Normal });
    }

    /// Parses `data` (plus what was buffered): the responses it completed.
    fn feed<'py>(&mut self, py: Python<'py>, data: &[u8]) -> PyResult<Bound<'py, PyList>> {
        self.bytes_received += data.len() as u64;
        self.parser.feed(data);
        self.drain(py, true)
    }

    /// Like `feed`, but returns only the statuses of completed responses.
    fn feed_statuses<'py>(&mut self, py: Python<'py>, data: &[u8]) -> PyResult<Bound<'py, PyList>> {
        self.bytes_received += data.len() as u64;
        self.parser.feed(data);
        self.drain(py, false)
    }

    /// The peer closed: completes a close-delimited response, or raises if
    /// one was cut short.
    #[pyo3(signature = (statuses=false))]
    fn feed_eof<'py>(&mut self, py: Python<'py>, statuses: bool) -> PyResult<Bound<'py, PyList>> {
        self.parser.feed_eof();
        self.drain(py, !statuses)
    }

    /// True between responses (no response partly received).
    #[getter]
    fn is_idle(&self) -> bool {
        self.parser.is_idle() && self.head.is_none()
    }

    /// Forgets the stream (a new connection); counters are kept.
    fn reset(&mut self) {
        self.parser.reset();
        self.head = None;
        self.chunks.clear();
    }
}
