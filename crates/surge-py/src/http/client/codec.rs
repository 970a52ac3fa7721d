//! `HttpClientCodec`: one HTTP/1.1 client connection for the shared engine
//! (`surge.engine.PipelinedConnection`).
//!
//! Requests are encoded straight into the write buffer and numbered; responses
//! come back in request order, so each is matched to the oldest request still
//! waiting. `feed` returns the engine's `(id, ok, value)` triples:
//!
//! - a buffered response: `(id, True, HttpResponse)` once its body is complete;
//! - a streamed response (`stream=True`): `(id, True, HttpResponse)` at its
//!   head, then out of band `(None, True, (id, chunk))` per body piece and
//!   `(None, True, (id, None))` at its end;
//! - a malformed reply: `(id, False, message)` for the request it answers (out
//!   of band `(None, True, (id, message))` when that response was streaming),
//!   after which `failed` is true, the codec ignores further bytes and the
//!   connection must be dropped: requests behind it can no longer be matched.

use std::collections::VecDeque;

use bytes::Bytes;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList};
use surge_proto::http1::client::{
    Expect, ResponseEvent, ResponseHead, ResponseParser, DEFAULT_MAX_BODY, DEFAULT_MAX_HEAD,
    DEFAULT_MAX_HEADERS,
};

use super::encode::encode_into;
use super::parser::limits;
use super::response::{join_body, HttpResponse};

use crate::wire::WriteBuf;

struct Waiting {
    id: u64,
    stream: bool,
}

enum Current {
    Idle,
    Buffering {
        id: Option<u64>,
        head: ResponseHead,
        chunks: Vec<Bytes>,
    },
    Streaming {
        id: Option<u64>,
    },
}

#[pyclass(module = "surge._core")]
pub struct HttpClientCodec {
    wbuf: WriteBuf,
    parser: ResponseParser,
    next_id: u64,
    waiting: VecDeque<Waiting>,
    current: Current,
    /// A reply did not parse: the connection must be dropped.
    #[pyo3(get)]
    failed: bool,
}

impl HttpClientCodec {
    fn drain<'py>(&mut self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let out = PyList::empty(py);
        if self.failed {
            return Ok(out);
        }
        loop {
            let ev = match self.parser.poll() {
                Ok(None) => return Ok(out),
                Ok(Some(ev)) => ev,
                Err(e) => {
                    self.failed = true;
                    let msg = e.message();
                    match std::mem::replace(&mut self.current, Current::Idle) {
                        Current::Streaming { id } => out.append((py.None(), true, (id, msg)))?,
                        Current::Buffering { id, .. } => out.append((id, false, msg))?,
                        Current::Idle => {
                            let id = self.waiting.front().map(|w| w.id);
                            out.append((id, false, msg))?;
                        }
                    }
                    return Ok(out);
                }
            };
            match ev {
                ResponseEvent::Head(head) => {
                    // A response with no request waiting (say a 408 before the
                    // server closes) is reported out of band with id None.
                    let (id, stream) = match self.waiting.pop_front() {
                        Some(w) => (Some(w.id), w.stream),
                        None => (None, false),
                    };
                    if stream {
                        self.parser.set_body_limit(u64::MAX);
                        let body = PyBytes::new(py, b"").unbind();
                        let resp = Py::new(py, HttpResponse::new(head, body))?;
                        out.append((id, true, resp))?;
                        self.current = Current::Streaming { id };
                    } else {
                        self.current = Current::Buffering {
                            id,
                            head,
                            chunks: Vec::new(),
                        };
                    }
                }
                ResponseEvent::Data(d) => match &mut self.current {
                    Current::Buffering { chunks, .. } => chunks.push(d),
                    Current::Streaming { id } => {
                        out.append((py.None(), true, (*id, PyBytes::new(py, &d))))?;
                    }
                    Current::Idle => unreachable!("Data follows a Head"),
                },
                ResponseEvent::End => match std::mem::replace(&mut self.current, Current::Idle) {
                    Current::Buffering { id, head, chunks } => {
                        let body = join_body(py, &chunks)?.unbind();
                        let resp = Py::new(py, HttpResponse::new(head, body))?;
                        out.append((id, true, resp))?;
                    }
                    Current::Streaming { id } => out.append((py.None(), true, (id, py.None())))?,
                    Current::Idle => unreachable!("End follows a Head"),
                },
            }
        }
    }
}

#[pymethods]
impl HttpClientCodec {
    #[new]
    #[pyo3(signature = (*, max_head=DEFAULT_MAX_HEAD, max_headers=DEFAULT_MAX_HEADERS, max_body=DEFAULT_MAX_BODY))]
    fn new(max_head: usize, max_headers: usize, max_body: u64) -> Self {
        HttpClientCodec {
            wbuf: WriteBuf::new(),
            parser: ResponseParser::new(limits(max_head, max_headers, max_body)),
            next_id: 0,
            waiting: VecDeque::new(),
            current: Current::Idle,
            failed: false,
        }
    }

    /// Encodes a request into the write buffer and returns its id. `headers`
    /// are `(name, value)` pairs of str or bytes and must include `host`; a bad
    /// method, target or header raises `ValueError` and nothing is buffered.
    #[pyo3(signature = (method, target, headers, body=None, stream=false))]
    fn request(
        &mut self,
        method: &str,
        target: &str,
        headers: &Bound<'_, PyAny>,
        body: Option<&[u8]>,
        stream: bool,
    ) -> PyResult<u64> {
        encode_into(&mut self.wbuf, method, target, headers, body)?;
        // Ids are never reused, even across connections, so a late reply can
        // never be taken for another request's.
        self.next_id += 1;
        let id = self.next_id;
        self.parser.expect(if method == "HEAD" {
            Expect::Head
        } else {
            Expect::Normal
        });
        self.waiting.push_back(Waiting { id, stream });
        Ok(id)
    }

    /// Parses `data` (plus what was buffered): the engine's reply triples.
    fn feed<'py>(&mut self, py: Python<'py>, data: &[u8]) -> PyResult<Bound<'py, PyList>> {
        if !self.failed {
            self.parser.feed(data);
        }
        self.drain(py)
    }

    /// The server closed its side: ends a close-delimited response, or reports
    /// the one cut short.
    fn feed_eof<'py>(&mut self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        self.parser.feed_eof();
        self.drain(py)
    }

    /// Bytes waiting in the write buffer.
    fn pending(&self) -> usize {
        self.wbuf.len()
    }

    /// The write buffer's contents as bytes, leaving it empty.
    fn take<'py>(&mut self, py: Python<'py>) -> Bound<'py, PyBytes> {
        self.wbuf.take(py)
    }

    /// Requests sent whose responses have not completed.
    #[getter]
    fn in_flight(&self) -> usize {
        self.waiting.len() + usize::from(!matches!(self.current, Current::Idle))
    }

    /// True when no response is partly received and none is awaited.
    #[getter]
    fn is_idle(&self) -> bool {
        self.waiting.is_empty() && matches!(self.current, Current::Idle) && self.parser.is_idle()
    }

    /// Forgets the previous connection (buffers, waiting requests).
    fn reset(&mut self) {
        self.wbuf.clear();
        self.parser.reset();
        self.waiting.clear();
        self.current = Current::Idle;
        self.failed = false;
    }
}
