//! The request object handed to handlers. Everything is kept as received
//! bytes and turned into Python objects on first access, then cached.

use bytes::Bytes;
use pyo3::exceptions::{PyAttributeError, PyRuntimeError};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::sync::GILOnceCell;
use pyo3::types::{PyBytes, PyDict, PyList, PyString, PyTuple, PyType};
use surge_proto::http1::common::Version;
use surge_proto::http1::server::RequestHead;

use super::router::percent_decode;
use crate::http::headers::latin1;
use crate::http::Headers;

static ORJSON_LOADS: GILOnceCell<PyObject> = GILOnceCell::new();
static PARSE_QUERY: GILOnceCell<PyObject> = GILOnceCell::new();
static PARSE_COOKIES: GILOnceCell<PyObject> = GILOnceCell::new();
static HTTP_EXCEPTION: GILOnceCell<PyObject> = GILOnceCell::new();
static FORM: GILOnceCell<PyObject> = GILOnceCell::new();
/// The ASGI scope's `asgi` dict; each scope gets a copy (see `asgi_scope`).
static ASGI_KEY: GILOnceCell<Py<PyDict>> = GILOnceCell::new();

fn import_attr(
    py: Python<'_>,
    cell: &'static GILOnceCell<PyObject>,
    module: &str,
    attr: &str,
) -> PyResult<PyObject> {
    cell.get_or_try_init(py, || Ok(py.import(module)?.getattr(attr)?.unbind()))
        .map(|o| o.clone_ref(py))
}

/// Sets in `base` (an ASGI connection's scope template, see
/// `Request::asgi_scope`) the values most requests share, which that call then
/// sets only where a request differs.
///
/// The template's table is left at the size its ~14 keys give it (room for 7
/// more), though FastAPI adds 9 keys to every scope and so grows each copy's
/// table once: a template grown beforehand (dummy keys added and removed) was
/// measured and dropped. It saved the growth but its removed keys lengthened
/// every lookup's probe and its larger table left pymalloc for malloc: FastAPI
/// hello ~0.2k instructions per request more, raw ASGI ~0.35k more (callgrind).
pub(crate) fn asgi_scope_defaults(base: &Bound<'_, PyDict>) -> PyResult<()> {
    let py = base.py();
    base.set_item(intern!(py, "http_version"), intern!(py, "1.1"))?;
    base.set_item(intern!(py, "method"), intern!(py, "GET"))?;
    base.set_item(intern!(py, "query_string"), PyBytes::new(py, b""))
}

/// What happened when the connection already ran the handler for a request
/// it then handed to Python.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    NotRun = 0,
    Raised = 1,
    Returned = 2,
    /// A coroutine suspended at its first await: `result` is (coroutine, yielded).
    Suspended = 3,
}

#[pyclass(module = "surge._core", dict, freelist = 256)]
pub struct Request {
    pub head: RequestHead,
    pub body: Bytes,
    /// Route index, -1 for no route (404), -2 for a wrong method (405).
    #[pyo3(get, name = "_route")]
    pub route: isize,
    pub params: Option<Py<PyDict>>,
    #[pyo3(get, name = "_allowed")]
    pub allowed: Option<PyObject>,
    #[pyo3(get)]
    pub client: Option<PyObject>,
    pub outcome: Outcome,
    #[pyo3(get, name = "_result")]
    pub result: Option<PyObject>,
    // Streamed bodies: chunks not yet taken by `request.stream()`.
    pub streaming: bool,
    pub chunks: Vec<Bytes>,
    pub chunk_bytes: usize,
    pub eof: bool,
    /// The body ended on a framing error (a bad chunk): `eof` is set, so no
    /// reader waits for more, but what arrived is not the whole body.
    pub truncated: bool,
    #[pyo3(get, set, name = "_stream")]
    pub stream: Option<PyObject>,
    /// When the head was parsed; only read while an access log is on.
    pub started: Option<std::time::Instant>,
    /// "http" or "https": the connection's, or what a trusted proxy reported.
    pub scheme: &'static str,
    /// The host a trusted proxy reported (`Forwarded: host=`, `X-Forwarded-Host`).
    pub forwarded_host: Option<String>,
    /// A trusted proxy reported the client or the scheme: the ASGI scope and
    /// the WSGI environ take them from this request, not from the connection.
    pub proxied: bool,
    /// ``request.session`` (see `SessionSlot`).
    pub session: SessionSlot,
    // Caches.
    method_obj: Option<Py<PyString>>,
    path_obj: Option<Py<PyString>>,
    body_obj: Option<Py<PyBytes>>,
    headers_obj: Option<Py<Headers>>,
    query_obj: Option<PyObject>,
    cookies_obj: Option<PyObject>,
}

impl Request {
    /// The body has all arrived: an app may be handed it as complete. A body
    /// cut short by a bad chunk has `eof` too, and must reach the app as a
    /// disconnect, never as a shorter complete body.
    pub fn body_whole(&self) -> bool {
        self.eof && !self.truncated
    }

    pub fn new(head: RequestHead, route: isize, client: Option<PyObject>) -> Self {
        Request {
            head,
            body: Bytes::new(),
            route,
            params: None,
            allowed: None,
            client,
            outcome: Outcome::NotRun,
            result: None,
            streaming: false,
            chunks: Vec::new(),
            chunk_bytes: 0,
            eof: false,
            truncated: false,
            stream: None,
            started: None,
            scheme: "http",
            forwarded_host: None,
            proxied: false,
            session: SessionSlot::Absent,
            method_obj: None,
            path_obj: None,
            body_obj: None,
            headers_obj: None,
            query_obj: None,
            cookies_obj: None,
        }
    }

    /// `_asgi_scope`, for the ASGI dispatcher. `defaults`: `base` holds the
    /// common values of the keys `http_version` ("1.1"), `method` ("GET") and
    /// `query_string` (b""), see `asgi_scope_defaults`; they are set only where
    /// this request differs (three insertions less for the usual request,
    /// ~0.7k instructions).
    pub(crate) fn asgi_scope<'py>(
        &mut self,
        py: Python<'py>,
        base: &Bound<'py, PyDict>,
        root_path: &str,
        state: &Bound<'py, PyDict>,
        defaults: bool,
    ) -> PyResult<Bound<'py, PyDict>> {
        let scope = base.copy()?;
        if self.proxied {
            if let Some(c) = &self.client {
                scope.set_item(intern!(py, "client"), c.clone_ref(py))?;
            }
            scope.set_item(intern!(py, "scheme"), self.scheme)?;
        }
        if let Some(host) = &self.forwarded_host {
            // The server the client addressed, as the proxy reports it.
            let default_port = if self.scheme == "https" { 443 } else { 80 };
            let (name, port) = match host.rsplit_once(':') {
                Some((n, p)) if !n.ends_with(']') || host.starts_with('[') => {
                    match p.parse::<u16>() {
                        Ok(p) => (n, p),
                        Err(_) => (host.as_str(), default_port),
                    }
                }
                _ => (host.as_str(), default_port),
            };
            let name = name.trim_start_matches('[').trim_end_matches(']');
            scope.set_item(intern!(py, "server"), (name, port))?;
        }
        // A copy of one template: cheaper than a new dict and two insertions.
        let asgi = ASGI_KEY
            .get_or_try_init(py, || -> PyResult<Py<PyDict>> {
                let d = PyDict::new(py);
                d.set_item(intern!(py, "version"), intern!(py, "3.0"))?;
                d.set_item(intern!(py, "spec_version"), intern!(py, "2.4"))?;
                Ok(d.unbind())
            })?
            .bind(py)
            .copy()?;
        scope.set_item(intern!(py, "asgi"), asgi)?;
        let version = match self.head.version {
            Version::Http11 => intern!(py, "1.1"),
            Version::Http10 => intern!(py, "1.0"),
        };
        let (http10, get) = (
            self.head.version == Version::Http10,
            self.head.method() == b"GET",
        );
        if !defaults || http10 {
            scope.set_item(intern!(py, "http_version"), version)?;
        }
        if !defaults || !get {
            scope.set_item(intern!(py, "method"), self.method(py))?;
        }
        let path = self.path(py);
        let raw = self.head.path();
        if root_path.is_empty() {
            scope.set_item(intern!(py, "path"), path)?;
            scope.set_item(intern!(py, "raw_path"), PyBytes::new(py, raw))?;
        } else {
            let decoded = path.bind(py).to_str()?;
            let mut full = String::with_capacity(root_path.len() + decoded.len());
            full.push_str(root_path);
            full.push_str(decoded);
            scope.set_item(intern!(py, "path"), full)?;
            let mut raw_full = Vec::with_capacity(root_path.len() + raw.len());
            raw_full.extend_from_slice(root_path.as_bytes());
            raw_full.extend_from_slice(raw);
            scope.set_item(intern!(py, "raw_path"), PyBytes::new(py, &raw_full))?;
        }
        let query = self.head.query();
        if !defaults || !query.is_empty() {
            scope.set_item(intern!(py, "query_string"), PyBytes::new(py, query))?;
        }
        let headers = PyList::empty(py);
        let mut lower = Vec::new();
        for h in &self.head.headers {
            let name = self.head.header_name(h);
            let name = if name.iter().any(u8::is_ascii_uppercase) {
                lower.clear();
                lower.extend(name.iter().map(u8::to_ascii_lowercase));
                common_name(py, &lower).unwrap_or_else(|| PyBytes::new(py, &lower))
            } else {
                common_name(py, name).unwrap_or_else(|| PyBytes::new(py, name))
            };
            let value = PyBytes::new(py, self.head.header_value(h));
            headers.append(PyTuple::new(py, [name, value])?)?;
        }
        scope.set_item(intern!(py, "headers"), headers)?;
        let state = if state.is_empty() {
            PyDict::new(py)
        } else {
            state.copy()?
        };
        scope.set_item(intern!(py, "state"), state)?;
        Ok(scope)
    }
}

fn intern_method<'py>(py: Python<'py>, m: &[u8]) -> Bound<'py, PyString> {
    match m {
        // `intern!` keeps each one: `PyString::intern` made and looked up a new
        // str on every call (~700 instructions per request).
        b"GET" => intern!(py, "GET").clone(),
        b"POST" => intern!(py, "POST").clone(),
        b"PUT" => intern!(py, "PUT").clone(),
        b"PATCH" => intern!(py, "PATCH").clone(),
        b"DELETE" => intern!(py, "DELETE").clone(),
        b"HEAD" => intern!(py, "HEAD").clone(),
        b"OPTIONS" => intern!(py, "OPTIONS").clone(),
        other => PyString::new(py, &String::from_utf8_lossy(other)),
    }
}

/// The lowercase name of a header most requests carry, as one shared bytes
/// object (immutable, so the ASGI scope may share it): no allocation per header.
fn common_name<'py>(py: Python<'py>, name: &[u8]) -> Option<Bound<'py, PyBytes>> {
    macro_rules! cached {
        ($text:literal) => {{
            static CELL: GILOnceCell<Py<PyBytes>> = GILOnceCell::new();
            CELL.get_or_init(py, || PyBytes::new(py, $text).unbind())
                .bind(py)
                .clone()
        }};
    }
    Some(match name {
        b"host" => cached!(b"host"),
        b"user-agent" => cached!(b"user-agent"),
        b"accept" => cached!(b"accept"),
        b"accept-encoding" => cached!(b"accept-encoding"),
        b"accept-language" => cached!(b"accept-language"),
        b"connection" => cached!(b"connection"),
        b"content-type" => cached!(b"content-type"),
        b"content-length" => cached!(b"content-length"),
        b"cookie" => cached!(b"cookie"),
        b"cache-control" => cached!(b"cache-control"),
        b"origin" => cached!(b"origin"),
        b"referer" => cached!(b"referer"),
        b"authorization" => cached!(b"authorization"),
        b"x-forwarded-for" => cached!(b"x-forwarded-for"),
        b"x-forwarded-proto" => cached!(b"x-forwarded-proto"),
        b"x-request-id" => cached!(b"x-request-id"),
        _ => return None,
    })
}

/// ``request.session``: kept natively so that the middleware chain
/// (`hook_chain`) can leave an empty session to be made on first read: most
/// handlers never read it, and a session per request set through the
/// instance dict cost about 1,600 instructions.
pub enum SessionSlot {
    /// No session middleware: reading it is an AttributeError.
    Absent,
    /// An empty session of this type, made when first read.
    Lazy(Py<PyType>),
    Set(PyObject),
}

#[pymethods]
impl Request {
    /// The session that `SessionMiddleware` keeps (a dict); an
    /// AttributeError without that middleware.
    #[getter]
    fn session(&mut self, py: Python<'_>) -> PyResult<PyObject> {
        match &self.session {
            SessionSlot::Set(s) => Ok(s.clone_ref(py)),
            SessionSlot::Lazy(make) => {
                let s = make.call0(py)?;
                self.session = SessionSlot::Set(s.clone_ref(py));
                Ok(s)
            }
            SessionSlot::Absent => Err(PyAttributeError::new_err(
                "request.session needs SessionMiddleware (app.add_middleware(SessionMiddleware, \
                 secret_key=...))",
            )),
        }
    }

    #[setter]
    fn set_session(&mut self, py: Python<'_>, session: Option<PyObject>) {
        // `del request.session` (None here, as `= None` is) leaves None.
        self.session = SessionSlot::Set(session.unwrap_or_else(|| py.None()));
    }

    /// The method, e.g. "GET".
    #[getter]
    fn method(&mut self, py: Python<'_>) -> Py<PyString> {
        if let Some(m) = &self.method_obj {
            return m.clone_ref(py);
        }
        let m = intern_method(py, self.head.method()).unbind();
        self.method_obj = Some(m.clone_ref(py));
        m
    }

    /// The percent-decoded path, without the query.
    #[getter]
    fn path(&mut self, py: Python<'_>) -> Py<PyString> {
        if let Some(p) = &self.path_obj {
            return p.clone_ref(py);
        }
        let raw = self.head.path();
        let p = match std::str::from_utf8(raw) {
            // Nothing escaped (the usual path): the str straight from the bytes,
            // without an owned String in between (a malloc and a free).
            Ok(s) if !raw.contains(&b'%') => PyString::new(py, s),
            _ => PyString::new(
                py,
                &percent_decode(raw, false).unwrap_or_else(|| String::from_utf8_lossy(raw).into()),
            ),
        }
        .unbind();
        self.path_obj = Some(p.clone_ref(py));
        p
    }

    /// The path as received, still percent-encoded.
    #[getter]
    fn raw_path<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, self.head.path())
    }

    /// The request target as received (path and query).
    #[getter]
    fn target(&self) -> String {
        String::from_utf8_lossy(self.head.target()).into_owned()
    }

    /// The raw query string after `?` ("" when absent).
    #[getter]
    fn query_string(&self) -> String {
        String::from_utf8_lossy(self.head.query()).into_owned()
    }

    /// Query parameters as a multi-dict (`params["a"]`, `params.getlist("a")`).
    #[getter]
    fn query_params(&mut self, py: Python<'_>) -> PyResult<PyObject> {
        if let Some(q) = &self.query_obj {
            return Ok(q.clone_ref(py));
        }
        let parse = import_attr(py, &PARSE_QUERY, "surge.http.datastructures", "parse_query")?;
        let q = parse.call1(py, (PyBytes::new(py, self.head.query()),))?;
        self.query_obj = Some(q.clone_ref(py));
        Ok(q)
    }

    /// Flask's name for `query_params`.
    #[getter]
    fn args(&mut self, py: Python<'_>) -> PyResult<PyObject> {
        self.query_params(py)
    }

    /// "1.1" or "1.0".
    #[getter]
    fn version(&self) -> &'static str {
        match self.head.version {
            Version::Http11 => "1.1",
            Version::Http10 => "1.0",
        }
    }

    /// Whether the connection stays open after this request.
    #[getter]
    fn keep_alive(&self) -> bool {
        self.head.keep_alive
    }

    #[getter]
    fn headers(&mut self, py: Python<'_>) -> PyResult<Py<Headers>> {
        if let Some(h) = &self.headers_obj {
            return Ok(h.clone_ref(py));
        }
        let h = Py::new(
            py,
            Headers::new(self.head.bytes.clone(), self.head.headers.clone()),
        )?;
        self.headers_obj = Some(h.clone_ref(py));
        Ok(h)
    }

    /// Cookies sent by the client, as a dict.
    #[getter]
    fn cookies(&mut self, py: Python<'_>) -> PyResult<PyObject> {
        if let Some(c) = &self.cookies_obj {
            return Ok(c.clone_ref(py));
        }
        let parse = import_attr(
            py,
            &PARSE_COOKIES,
            "surge.http.datastructures",
            "parse_cookies",
        )?;
        let values: Vec<String> = self
            .head
            .headers
            .iter()
            .filter(|h| self.head.header_name(h).eq_ignore_ascii_case(b"cookie"))
            .map(|h| String::from_utf8_lossy(self.head.header_value(h)).into_owned())
            .collect();
        let c = parse.call1(py, (PyList::new(py, values)?,))?;
        self.cookies_obj = Some(c.clone_ref(py));
        Ok(c)
    }

    /// "http" or "https" (with `--proxy-headers`, as a trusted proxy reports it).
    #[getter]
    fn scheme(&self) -> &'static str {
        self.scheme
    }

    /// The host the client asked for: with `--proxy-headers`, the one a trusted
    /// proxy reports; else the authority of an absolute-form target
    /// (RFC 9112 3.2.2: it overrides the Host header), else the Host header
    /// ("" when absent).
    #[getter]
    fn host(&self) -> String {
        if let Some(h) = &self.forwarded_host {
            return h.clone();
        }
        self.head
            .authority()
            .or_else(|| self.head.header(b"host"))
            .map(|h| String::from_utf8_lossy(h).into_owned())
            .unwrap_or_default()
    }

    /// The Content-Type header, or None.
    #[getter]
    fn content_type(&self) -> Option<String> {
        self.head
            .header(b"content-type")
            .map(|h| String::from_utf8_lossy(h).into_owned())
    }

    /// The declared Content-Length, None for chunked bodies.
    #[getter]
    fn content_length(&self) -> Option<u64> {
        self.head.content_length()
    }

    /// Path parameters matched by the route.
    #[getter]
    fn path_params(&self, py: Python<'_>) -> Py<PyDict> {
        match &self.params {
            Some(p) => p.clone_ref(py),
            None => PyDict::new(py).unbind(),
        }
    }

    /// The whole body (read before the handler runs, unless the route streams).
    #[getter]
    fn body(&mut self, py: Python<'_>) -> PyResult<Py<PyBytes>> {
        if self.streaming {
            return Err(PyRuntimeError::new_err(
                "this route streams its body: read it with `async for chunk in request.stream()`",
            ));
        }
        if let Some(b) = &self.body_obj {
            return Ok(b.clone_ref(py));
        }
        let b = PyBytes::new(py, &self.body).unbind();
        self.body_obj = Some(b.clone_ref(py));
        Ok(b)
    }

    /// The body decoded as UTF-8.
    #[getter]
    fn text(&mut self, py: Python<'_>) -> PyResult<String> {
        let b = self.body(py)?;
        let bytes = b.bind(py).as_bytes();
        Ok(String::from_utf8_lossy(bytes).into_owned())
    }

    /// The body parsed as JSON (orjson); a body that is not JSON raises
    /// `HTTPException(400)`, so the client, not the server, gets the blame.
    fn json(&mut self, py: Python<'_>) -> PyResult<PyObject> {
        let b = self.body(py)?;
        let loads = import_attr(py, &ORJSON_LOADS, "orjson", "loads")?;
        loads.call1(py, (b,)).map_err(|e| {
            if !e.is_instance_of::<pyo3::exceptions::PyValueError>(py) {
                return e;
            }
            let bad = import_attr(py, &HTTP_EXCEPTION, "surge.http.errors", "HTTPException")
                .and_then(|cls| {
                    cls.call1(py, (400, format!("invalid JSON body: {}", e.value(py))))
                });
            match bad {
                Ok(exc) => {
                    let err = PyErr::from_value(exc.into_bound(py));
                    err.set_cause(py, Some(e));
                    err
                }
                Err(other) => other,
            }
        })
    }

    /// The body parsed as a form: `await request.form()` (or `async with`) gives a
    /// `FormData`; written in Python (`surge.http.forms.form`, which takes the
    /// limits as keywords) since it is python-multipart's parser that runs.
    #[pyo3(signature = (**limits))]
    fn form(slf: &Bound<'_, Self>, limits: Option<&Bound<'_, PyDict>>) -> PyResult<PyObject> {
        let py = slf.py();
        let form = import_attr(py, &FORM, "surge.http.forms", "form")?;
        form.call(py, (slf,), limits)
    }

    /// An async iterator over the body's chunks (routes declared `stream=True`).
    fn stream(&self, py: Python<'_>) -> PyResult<PyObject> {
        match &self.stream {
            Some(s) if self.streaming => Ok(s.clone_ref(py)),
            _ => Err(PyRuntimeError::new_err(
                "request.stream() needs a route declared with stream=True; use request.body",
            )),
        }
    }

    /// True when body bytes wait in this request: chunks for `_take_chunks`,
    /// or the whole body of a request no route framed (an `OPTIONS *` target).
    #[getter(_has_body)]
    pub(crate) fn has_body(&self) -> bool {
        !self.chunks.is_empty() || (self.route < 0 && !self.body.is_empty())
    }

    /// Body chunks received since the last call (streaming routes).
    fn _take_chunks<'py>(&mut self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let chunks: Vec<Bound<'py, PyBytes>> = self
            .chunks
            .drain(..)
            .map(|c| PyBytes::new(py, &c))
            .collect();
        self.chunk_bytes = 0;
        PyList::new(py, chunks)
    }

    /// The ASGI HTTP scope of this request (spec 2.4), built here in one call:
    /// a copy of `base` (the keys constant for the connection: type, scheme,
    /// server, client, root_path), a fresh `asgi` dict, a shallow copy of the
    /// lifespan `state`, and the request's own keys. Header names are lowercased
    /// bytes and values the bytes as received, in arrival order; the query
    /// string is the raw bytes (never decoded and re-encoded, so nothing is lost).
    /// Written natively because it runs once per request on the ASGI hot path.
    #[pyo3(name = "_asgi_scope")]
    fn py_asgi_scope<'py>(
        &mut self,
        py: Python<'py>,
        base: &Bound<'py, PyDict>,
        root_path: &str,
        state: &Bound<'py, PyDict>,
    ) -> PyResult<Bound<'py, PyDict>> {
        self.asgi_scope(py, base, root_path, state, false)
    }

    /// The WSGI environ of this request (PEP 3333), built here in one call: a
    /// copy of `base` (the keys constant for the app and the connection) plus
    /// REQUEST_METHOD, PATH_INFO (percent-decoded, its bytes as latin-1 text),
    /// QUERY_STRING, SERVER_PROTOCOL, CONTENT_TYPE, CONTENT_LENGTH and an
    /// `HTTP_*` key per header (repeats joined with ","; a name holding "_" is
    /// dropped, as nginx and gunicorn do, since it would collide with its
    /// hyphenated twin). Written natively: it runs once per request.
    #[pyo3(name = "_wsgi_environ")]
    pub(crate) fn wsgi_environ<'py>(
        &mut self,
        py: Python<'py>,
        base: &Bound<'py, PyDict>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let env = base.copy()?;
        env.set_item(intern!(py, "REQUEST_METHOD"), self.method(py))?;
        let path = percent_decode_bytes(self.head.path());
        env.set_item(intern!(py, "PATH_INFO"), latin1(py, &path))?;
        env.set_item(intern!(py, "QUERY_STRING"), latin1(py, self.head.query()))?;
        let protocol = match self.head.version {
            Version::Http11 => intern!(py, "HTTP/1.1"),
            Version::Http10 => intern!(py, "HTTP/1.0"),
        };
        env.set_item(intern!(py, "SERVER_PROTOCOL"), protocol)?;
        let mut key = String::new();
        let headers = &self.head.headers;
        for (i, h) in headers.iter().enumerate() {
            let name = self.head.header_name(h);
            let key_obj = if name.eq_ignore_ascii_case(b"content-type") {
                intern!(py, "CONTENT_TYPE").clone()
            } else if name.eq_ignore_ascii_case(b"content-length") {
                intern!(py, "CONTENT_LENGTH").clone()
            } else if name.contains(&b'_') {
                continue;
            } else if let Some(common) = common_wsgi_key(py, name) {
                common
            } else {
                key.clear();
                key.push_str("HTTP_");
                key.extend(name.iter().map(|&c| match c {
                    b'-' => '_',
                    c => c.to_ascii_uppercase() as char,
                }));
                PyString::new(py, &key)
            };
            let value = self.head.header_value(h);
            // Only a name seen before (in any case) can have a value to join with:
            // the environ is not searched for the others. Long heads just search.
            let seen = i >= 32
                || headers[..i]
                    .iter()
                    .any(|p| self.head.header_name(p).eq_ignore_ascii_case(name));
            if !seen {
                env.set_item(key_obj, latin1(py, value))?;
                continue;
            }
            match env.get_item(&key_obj)? {
                Some(old) => {
                    let joined = format!(
                        "{},{}",
                        old.downcast::<PyString>()?.to_str()?,
                        latin1(py, value).to_str()?
                    );
                    env.set_item(key_obj, joined)?;
                }
                None => env.set_item(key_obj, latin1(py, value))?,
            }
        }
        if self.proxied {
            env.set_item(intern!(py, "wsgi.url_scheme"), self.scheme)?;
            if let Some(c) = &self.client {
                let c = c.bind(py);
                env.set_item(intern!(py, "REMOTE_ADDR"), c.get_item(0)?.str()?)?;
                env.set_item(intern!(py, "REMOTE_PORT"), c.get_item(1)?.str()?)?;
            }
            if let Some(h) = &self.forwarded_host {
                env.set_item(intern!(py, "HTTP_HOST"), h)?;
            }
        }
        Ok(env)
    }

    /// True once the streamed body has ended: whole, or cut by a framing error.
    #[getter]
    fn _eof(&self) -> bool {
        self.eof
    }

    /// True once the whole body has arrived (ended, and not on a framing error).
    #[getter]
    fn _whole(&self) -> bool {
        self.body_whole()
    }

    /// 0: handler not run yet, 1: it raised `_result`, 2: it returned `_result`,
    /// 3: its coroutine suspended, `_result` is (coroutine, awaited object).
    #[getter]
    fn _outcome(&self) -> u8 {
        self.outcome as u8
    }

    fn __repr__(&self) -> String {
        format!(
            "<Request {} {}>",
            String::from_utf8_lossy(self.head.method()),
            String::from_utf8_lossy(self.head.target())
        )
    }
}

/// The environ key of a request header most requests carry, interned (no
/// string is made and hashed for it per request); None for the others.
fn common_wsgi_key<'py>(py: Python<'py>, name: &[u8]) -> Option<Bound<'py, PyString>> {
    macro_rules! keys {
        ($($name:literal => $key:literal),* $(,)?) => {
            $(if name.eq_ignore_ascii_case($name) {
                return Some(intern!(py, $key).clone());
            })*
        };
    }
    keys!(
        b"host" => "HTTP_HOST",
        b"user-agent" => "HTTP_USER_AGENT",
        b"accept" => "HTTP_ACCEPT",
        b"accept-encoding" => "HTTP_ACCEPT_ENCODING",
        b"accept-language" => "HTTP_ACCEPT_LANGUAGE",
        b"connection" => "HTTP_CONNECTION",
        b"cookie" => "HTTP_COOKIE",
        b"referer" => "HTTP_REFERER",
        b"origin" => "HTTP_ORIGIN",
        b"cache-control" => "HTTP_CACHE_CONTROL",
        b"authorization" => "HTTP_AUTHORIZATION",
        b"x-forwarded-for" => "HTTP_X_FORWARDED_FOR",
        b"x-forwarded-proto" => "HTTP_X_FORWARDED_PROTO",
        b"x-request-id" => "HTTP_X_REQUEST_ID",
        b"if-none-match" => "HTTP_IF_NONE_MATCH",
        b"if-modified-since" => "HTTP_IF_MODIFIED_SINCE",
    );
    None
}

/// `%XX` escapes decoded to bytes (a malformed escape stays as sent), for
/// PATH_INFO, which holds the path's bytes whatever their encoding.
pub(crate) fn percent_decode_bytes(raw: &[u8]) -> std::borrow::Cow<'_, [u8]> {
    fn hex(c: u8) -> Option<u8> {
        (c as char).to_digit(16).map(|d| d as u8)
    }
    if !raw.contains(&b'%') {
        return std::borrow::Cow::Borrowed(raw);
    }
    let mut out = Vec::with_capacity(raw.len());
    let mut i = 0;
    while i < raw.len() {
        if raw[i] == b'%' && i + 2 < raw.len() {
            if let (Some(h), Some(l)) = (hex(raw[i + 1]), hex(raw[i + 2])) {
                out.push(h * 16 + l);
                i += 3;
                continue;
            }
        }
        out.push(raw[i]);
        i += 1;
    }
    std::borrow::Cow::Owned(out)
}
