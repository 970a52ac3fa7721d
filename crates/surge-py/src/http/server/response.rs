//! Responses: the `Response` class and the encoder that turns a handler's
//! return value into bytes appended to the connection's output buffer.

use std::os::fd::{BorrowedFd, OwnedFd, RawFd};
use std::sync::Arc;

use pyo3::exceptions::{PyOSError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::sync::GILOnceCell;
use pyo3::types::{PyByteArray, PyBytes, PyDict, PyList, PyString, PyTuple};
use surge_proto::http1::common::is_token;
use surge_proto::http1::server::write_status_line;

use super::head_defaults::HeadDefaults;

static ORJSON_DUMPS: GILOnceCell<PyObject> = GILOnceCell::new();
static SET_COOKIE: GILOnceCell<PyObject> = GILOnceCell::new();
static DELETE_COOKIE: GILOnceCell<PyObject> = GILOnceCell::new();

fn cookie_function(
    py: Python<'_>,
    cell: &'static GILOnceCell<PyObject>,
    name: &str,
) -> PyResult<PyObject> {
    cell.get_or_try_init(py, || {
        Ok::<_, PyErr>(py.import("surge.http.cookies")?.getattr(name)?.unbind())
    })
    .map(|f| f.clone_ref(py))
}

pub const TEXT: &[u8] = b"text/plain; charset=utf-8";
pub const JSON: &[u8] = b"application/json";
pub const BINARY: &[u8] = b"application/octet-stream";

fn dumps(py: Python<'_>, obj: &Bound<'_, PyAny>) -> PyResult<Vec<u8>> {
    let f = ORJSON_DUMPS.get_or_try_init(py, || {
        Ok::<_, PyErr>(py.import("orjson")?.getattr("dumps")?.unbind())
    })?;
    let b = f.call1(py, (obj,))?;
    Ok(b.downcast_bound::<PyBytes>(py)?.as_bytes().to_vec())
}

fn check_header(name: &str, value: &str) -> PyResult<()> {
    if !is_token(name.as_bytes()) {
        return Err(PyValueError::new_err(format!(
            "invalid header name {name:?}"
        )));
    }
    if value.bytes().any(|b| b == b'\r' || b == b'\n' || b == 0) {
        return Err(PyValueError::new_err(format!(
            "header {name:?}: value may not contain CR, LF or NUL"
        )));
    }
    Ok(())
}

/// Headers given as a dict, a list of pairs, or any mapping with `items()`.
fn header_pairs(obj: &Bound<'_, PyAny>) -> PyResult<Vec<(String, String)>> {
    let items = if let Ok(d) = obj.downcast::<PyDict>() {
        d.items().into_any()
    } else if obj.downcast::<PyList>().is_ok() || obj.downcast::<PyTuple>().is_ok() {
        obj.clone()
    } else {
        obj.call_method0("items")?
    };
    let mut out = Vec::new();
    for item in items.try_iter()? {
        let (name, value): (String, String) = item?.extract()?;
        check_header(&name, &value)?;
        out.push((name, value));
    }
    Ok(out)
}

/// Bodies of at least this many bytes, given as `bytes`, are kept by reference
/// instead of copied: a cached static file is one immutable `bytes` that every
/// response to it shares, and the connection writes it with `writelines` (one
/// `writev`) next to the head instead of copying it into its output buffer.
/// Below this, a copy costs less than another buffer in the write.
pub const SHARED_BODY_MIN: usize = 8 * 1024;

/// A response body: bytes of its own, or a Python `bytes` object shared as it
/// is (immutable, so sharing it is safe; see `SHARED_BODY_MIN`).
pub enum Body {
    Owned(Vec<u8>),
    Shared(Py<PyBytes>),
}

impl Body {
    pub fn as_slice<'a>(&'a self, py: Python<'_>) -> &'a [u8] {
        match self {
            Body::Owned(v) => v,
            Body::Shared(b) => b.as_bytes(py),
        }
    }

    pub fn len(&self, py: Python<'_>) -> usize {
        self.as_slice(py).len()
    }

    fn clone_ref(&self, py: Python<'_>) -> Body {
        match self {
            Body::Owned(v) => Body::Owned(v.clone()),
            Body::Shared(b) => Body::Shared(b.clone_ref(py)),
        }
    }
}

/// The body a response is given, and the content type implied by its type.
fn body_of(py: Python<'_>, body: &Bound<'_, PyAny>) -> PyResult<(Body, &'static [u8])> {
    if let Ok(b) = body.downcast_exact::<PyBytes>() {
        if b.as_bytes().len() >= SHARED_BODY_MIN {
            return Ok((Body::Shared(b.clone().unbind()), BINARY));
        }
    }
    let (bytes, implied) = body_bytes(py, body)?;
    Ok((Body::Owned(bytes), implied))
}

/// Body bytes and the content type implied by the body's type.
fn body_bytes(py: Python<'_>, body: &Bound<'_, PyAny>) -> PyResult<(Vec<u8>, &'static [u8])> {
    if body.is_none() {
        Ok((Vec::new(), BINARY))
    } else if let Ok(s) = body.downcast::<PyString>() {
        Ok((s.to_str()?.as_bytes().to_vec(), TEXT))
    } else if let Ok(b) = body.downcast::<PyBytes>() {
        Ok((b.as_bytes().to_vec(), BINARY))
    } else if let Ok(b) = body.downcast::<PyByteArray>() {
        Ok((b.to_vec(), BINARY))
    } else if body.downcast::<PyDict>().is_ok() || body.downcast::<PyList>().is_ok() {
        Ok((dumps(py, body)?, JSON))
    } else {
        Err(PyTypeError::new_err(format!(
            "response body must be str, bytes, dict or list, not {}",
            body.get_type().name()?
        )))
    }
}

/// An HTTP response: `Response(body, status=200, headers=None, content_type=None)`.
/// A str body defaults to text/plain, bytes to application/octet-stream, a
/// dict or list is sent as JSON.
#[pyclass(module = "surge._core", subclass)]
pub struct Response {
    #[pyo3(get, set)]
    pub status: u16,
    pub body: Body,
    #[pyo3(get, set)]
    pub content_type: Option<String>,
    pub headers: Vec<(String, String)>,
    /// A file holding exactly the shared body's bytes (`send_file`): the
    /// connection may send the body from it with sendfile instead.
    pub file: Option<Arc<OwnedFd>>,
}

#[pymethods]
impl Response {
    #[new]
    #[pyo3(signature = (body=None, status=200, headers=None, content_type=None))]
    pub(crate) fn new(
        py: Python<'_>,
        body: Option<&Bound<'_, PyAny>>,
        status: u16,
        headers: Option<&Bound<'_, PyAny>>,
        content_type: Option<String>,
    ) -> PyResult<Self> {
        if !(100..=999).contains(&status) {
            return Err(PyValueError::new_err(format!(
                "invalid status code {status}"
            )));
        }
        let (body, implied) = match body {
            Some(b) => body_of(py, b)?,
            None => (Body::Owned(Vec::new()), BINARY),
        };
        let mut headers = match headers {
            Some(h) if !h.is_none() => header_pairs(h)?,
            _ => Vec::new(),
        };
        let mut content_type = content_type;
        if let Some(pos) = headers
            .iter()
            .position(|(n, _)| n.eq_ignore_ascii_case("content-type"))
        {
            let (_, v) = headers.remove(pos);
            content_type.get_or_insert(v);
        }
        if let Some(ct) = &content_type {
            check_header("Content-Type", ct)?;
        } else if body.len(py) > 0 {
            content_type = Some(String::from_utf8_lossy(implied).into_owned());
        }
        headers.retain(|(n, _)| {
            !n.eq_ignore_ascii_case("content-length")
                && !n.eq_ignore_ascii_case("transfer-encoding")
        });
        Ok(Response {
            status,
            body,
            content_type,
            headers,
            file: None,
        })
    }

    /// The body as bytes.
    #[getter]
    fn body<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        match &self.body {
            Body::Owned(v) => PyBytes::new(py, v),
            Body::Shared(b) => b.bind(py).clone(),
        }
    }

    #[setter(body)]
    fn set_body(&mut self, py: Python<'_>, body: &Bound<'_, PyAny>) -> PyResult<()> {
        self.body = body_of(py, body)?.0;
        self.file = None;
        Ok(())
    }

    /// Lets the connection send the (shared, at least `SHARED_BODY_MIN` bytes)
    /// body with sendfile from `fd`, a regular file whose first bytes are
    /// exactly the body's (it is duplicated; the caller keeps its own). A copy
    /// of the response shares it; setting `body` drops it.
    fn send_file(&mut self, fd: RawFd) -> PyResult<()> {
        if !matches!(self.body, Body::Shared(_)) {
            return Err(PyValueError::new_err(
                "send_file needs a bytes body of at least 8 KiB (kept shared)",
            ));
        }
        if fd < 0 {
            return Err(PyValueError::new_err("fd must be a file descriptor (>= 0)"));
        }
        // SAFETY: `fd` is only borrowed for the duration of the dup below; an
        // invalid descriptor makes the dup fail with EBADF, which is returned.
        let owned = unsafe { BorrowedFd::borrow_raw(fd) }
            .try_clone_to_owned()
            .map_err(|e| PyOSError::new_err(format!("send_file: cannot use fd {fd}: {e}")))?;
        self.file = Some(Arc::new(owned));
        Ok(())
    }

    /// A new response with the same status, headers and body (a large bytes
    /// body is shared, not copied): for a handler that answers from a prepared
    /// response and lets hooks change their own copy.
    fn copy(&self, py: Python<'_>) -> Response {
        Response {
            status: self.status,
            body: self.body.clone_ref(py),
            content_type: self.content_type.clone(),
            headers: self.headers.clone(),
            file: self.file.clone(),
        }
    }

    /// The extra headers, as a list of (name, value).
    #[getter]
    fn headers(&self) -> Vec<(String, String)> {
        self.headers.clone()
    }

    /// The value of the first header `name` (any case) among the extra
    /// headers, or `default`: a look-up without copying the list `headers` gives.
    #[pyo3(signature = (name, default=None))]
    fn get_header(&self, name: &str, default: Option<String>) -> Option<String> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.clone())
            .or(default)
    }

    /// Adds a header (kept alongside any of the same name).
    fn add_header(&mut self, name: String, value: String) -> PyResult<()> {
        check_header(&name, &value)?;
        self.headers.push((name, value));
        Ok(())
    }

    /// Sets a header, replacing those of the same name.
    fn set_header(&mut self, name: String, value: String) -> PyResult<()> {
        check_header(&name, &value)?;
        self.headers.retain(|(n, _)| !n.eq_ignore_ascii_case(&name));
        self.headers.push((name, value));
        Ok(())
    }

    /// Adds a Set-Cookie header (Starlette's signature; formatted and checked by
    /// `surge.http.cookies.set_cookie_header`, so every response type shares it).
    #[pyo3(signature = (*args, **kwargs))]
    fn set_cookie(
        &mut self,
        py: Python<'_>,
        args: &Bound<'_, PyTuple>,
        kwargs: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<()> {
        let header = cookie_function(py, &SET_COOKIE, "set_cookie_header")?
            .call(py, args, kwargs)?
            .extract::<String>(py)?;
        self.add_header("Set-Cookie".into(), header)
    }

    /// Adds a Set-Cookie header that removes the cookie `key`
    /// (`surge.http.cookies.delete_cookie_header`).
    #[pyo3(signature = (*args, **kwargs))]
    fn delete_cookie(
        &mut self,
        py: Python<'_>,
        args: &Bound<'_, PyTuple>,
        kwargs: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<()> {
        let header = cookie_function(py, &DELETE_COOKIE, "delete_cookie_header")?
            .call(py, args, kwargs)?
            .extract::<String>(py)?;
        self.add_header("Set-Cookie".into(), header)
    }

    fn __repr__(&self, py: Python<'_>) -> String {
        format!("<Response {} {} bytes>", self.status, self.body.len(py))
    }
}

/// A handler's str, bytes, dict or list result wrapped as a 200 `Response`
/// (what `App` does with such a return value), or None for any other value:
/// the middleware chains differ in what they do with those (a `Response`,
/// None, an awaitable), so they decide. Exact dict/list only, as in
/// `Pipeline`'s own fast path: subclasses go to `to_response` in Python.
#[inline]
pub(crate) fn wrap_plain_result(
    py: Python<'_>,
    value: &Bound<'_, PyAny>,
) -> Option<PyResult<Response>> {
    let plain = value.is_instance_of::<PyString>()
        || value.is_instance_of::<PyBytes>()
        || value.is_exact_instance_of::<PyDict>()
        || value.is_exact_instance_of::<PyList>();
    plain.then(|| Response::new(py, Some(value), 200, None, None))
}

/// What the response head needs to know about the request it answers.
#[derive(Clone, Copy)]
pub struct Reply {
    pub keep_alive: bool,
    pub http10: bool,
    pub head_only: bool,
}

fn has_body(status: u16) -> bool {
    !(status < 200 || status == 204 || status == 304)
}

/// Appends the head up to and including the blank line, the server's own
/// headers (`ours`) first. `length` None means the caller frames the body
/// itself (chunked or until close).
pub fn write_head(
    out: &mut Vec<u8>,
    status: u16,
    content_type: Option<&[u8]>,
    headers: &[(String, String)],
    length: Option<usize>,
    reply: Reply,
    ours: &HeadDefaults,
) {
    super::stats::count_response(status);
    write_status_line(out, status);
    let ours_at = ours.write(out);
    if let Some(ct) = content_type {
        out.extend_from_slice(b"Content-Type: ");
        out.extend_from_slice(ct);
        out.extend_from_slice(b"\r\n");
    }
    // The handler's own header of a name we send replaces ours.
    let mut replaced = 0;
    for (n, v) in headers {
        replaced |= ours.which(n.as_bytes());
        out.extend_from_slice(n.as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(v.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    if replaced != 0 {
        ours.remove(out, ours_at, replaced);
    }
    if let Some(n) = length {
        if has_body(status) {
            out.extend_from_slice(b"Content-Length: ");
            out.extend_from_slice(itoa::Buffer::new().format(n).as_bytes());
            out.extend_from_slice(b"\r\n");
        }
    }
    if !reply.keep_alive {
        out.extend_from_slice(b"Connection: close\r\n");
    } else if reply.http10 {
        out.extend_from_slice(b"Connection: keep-alive\r\n");
    }
    out.extend_from_slice(b"\r\n");
}

/// Writes a head and its body; returns where the head ends in `out`.
pub fn write_simple(
    out: &mut Vec<u8>,
    status: u16,
    ct: Option<&[u8]>,
    body: &[u8],
    reply: Reply,
    ours: &HeadDefaults,
) -> usize {
    write_head(out, status, ct, &[], Some(body.len()), reply, ours);
    let head_end = out.len();
    if !reply.head_only && has_body(status) {
        out.extend_from_slice(body);
    }
    head_end
}

/// Where a shared body goes instead of being copied into the output buffer:
/// each entry is the offset in that buffer it belongs at, the body, and the
/// file it may be sent from (`Response::send_file`).
pub type Spliced = Vec<(usize, Py<PyBytes>, Option<Arc<OwnedFd>>)>;

/// Encodes a handler's return value; `Ok(None)` when its type needs Python
/// (streaming and file responses, or anything unknown), else the length of
/// the head written (the access log reads it without searching for the head's
/// end). A shared body is recorded in `splice` when one is given (the caller
/// writes it in its place), else copied into `out`.
pub fn encode_result(
    py: Python<'_>,
    obj: &Bound<'_, PyAny>,
    reply: Reply,
    out: &mut Vec<u8>,
    splice: Option<&mut Spliced>,
    ours: &HeadDefaults,
) -> PyResult<Option<usize>> {
    let start = out.len();
    let head_end = if let Ok(s) = obj.downcast::<PyString>() {
        write_simple(out, 200, Some(TEXT), s.to_str()?.as_bytes(), reply, ours)
    } else if let Ok(b) = obj.downcast::<PyBytes>() {
        write_simple(out, 200, Some(BINARY), b.as_bytes(), reply, ours)
    } else if obj.downcast::<PyDict>().is_ok() || obj.downcast::<PyList>().is_ok() {
        let body = dumps(py, obj)?;
        write_simple(out, 200, Some(JSON), &body, reply, ours)
    } else if let Ok(r) = obj.downcast::<Response>() {
        let r = r.borrow();
        let ct = r.content_type.as_deref().map(str::as_bytes);
        let body = r.body.as_slice(py);
        write_head(out, r.status, ct, &r.headers, Some(body.len()), reply, ours);
        let head_end = out.len();
        if !reply.head_only && has_body(r.status) {
            match (&r.body, splice) {
                (Body::Shared(b), Some(splice)) => {
                    splice.push((out.len(), b.clone_ref(py), r.file.clone()));
                }
                _ => out.extend_from_slice(body),
            }
        }
        head_end
    } else if obj.is_none() {
        write_simple(out, 204, None, b"", reply, ours)
    } else {
        return Ok(None);
    };
    Ok(Some(head_end - start))
}

/// Encodes a response head for Python-framed bodies (streaming, files):
/// `length` None means chunked; `ours` the server's own headers (the plan's
/// `head_defaults`; surge's standard ones when None).
#[pyfunction]
#[pyo3(signature = (status, headers, content_type, length, keep_alive, http10=false, ours=None))]
#[allow(clippy::too_many_arguments)]
pub fn encode_response_head<'py>(
    py: Python<'py>,
    status: u16,
    headers: &Bound<'py, PyAny>,
    content_type: Option<String>,
    length: Option<usize>,
    keep_alive: bool,
    http10: bool,
    ours: Option<&HeadDefaults>,
) -> PyResult<Bound<'py, PyBytes>> {
    let ours = HeadDefaults::or_standard(ours);
    let mut pairs = if headers.is_none() {
        Vec::new()
    } else {
        header_pairs(headers)?
    };
    // The framing is ours to decide: a handler's own length or coding would contradict it.
    pairs.retain(|(n, _)| {
        !n.eq_ignore_ascii_case("content-length") && !n.eq_ignore_ascii_case("transfer-encoding")
    });
    // HTTP/1.0 has no chunked coding: such a body is framed by closing.
    if length.is_none() && has_body(status) && !http10 {
        pairs.push(("Transfer-Encoding".into(), "chunked".into()));
    }
    let keep_alive = keep_alive && !(http10 && length.is_none());
    let mut out = Vec::with_capacity(256);
    let reply = Reply {
        keep_alive,
        http10,
        head_only: false,
    };
    write_head(
        &mut out,
        status,
        content_type.as_deref().map(str::as_bytes),
        &pairs,
        length,
        reply,
        ours,
    );
    Ok(PyBytes::new(py, &out))
}
