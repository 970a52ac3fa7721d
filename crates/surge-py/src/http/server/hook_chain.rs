//! The chain of ``process_request``/``process_response`` middleware around a
//! plain handler (`surge.http.pipeline`, `HookMiddleware`), run natively.
//!
//! Written natively for speed: it runs on every request of an app whose
//! middleware are all of this kind (CORS, compression, sessions, and the
//! user's own `HookMiddleware`), and in Python the chain's own loop, the
//! wrapping of the handler's result and the built-in middlewares' hooks cost
//! about four times the hello handler itself. Here each request gets its own
//! copy of the context (``contextvars.copy_context()``, entered with
//! ``Context.run`` as Python does), the hooks are called in the pipeline's
//! order, a str/bytes/dict/list result becomes a `Response` at once, and the
//! common cases of the built-in middlewares are done without calling them:
//!
//! - CORS: a request that is not ``OPTIONS`` needs no preflight; on a native
//!   `Response`, an ASCII ``Origin`` gets the prebuilt simple headers, the
//!   origin itself when it is in the list, and ``Vary: Origin`` merged in.
//! - compression: a native `Response` whose body is below the minimum size is
//!   left as it is (that is all the middleware would do with it).
//! - sessions: a request with no ``Cookie`` header gets an empty `Session`; an
//!   empty `Session` that did not come from a cookie sends no cookie back.
//!
//! Anything else calls the middleware's own Python hook: a subclass that
//! overrides a hook never gets a native layer (`surge.http.pipeline` decides),
//! and a response of another type, a non-ASCII origin, a cookie, a non-empty
//! session or a large body all go to Python. An exception (except what is not
//! an `Exception` and `ClientDisconnected`, which propagate), an awaitable or
//! other unusual result of the handler hands the rest to the pipeline's
//! ``_recover`` coroutine, driven in the same context, as before.
//!
//! A built-in middleware's options are read once, when the app is frozen.

use pyo3::exceptions::{PyException, PyTypeError, PyValueError};
use pyo3::ffi;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::sync::GILOnceCell;
use pyo3::types::{PyDict, PyTuple, PyType};
use pyo3::{PyTraverseError, PyVisit};
use rustc_hash::FxHashSet;
use surge_proto::http1::common::is_token;

use super::request::{Request, SessionSlot};
use super::response::{wrap_plain_result, Response};

/// ``contextvars.copy_context`` and ``contextvars.Context.run``: the context
/// is copied and entered through them, as the C functions for it are not in
/// the stable ABI the wheel is built for.
static COPY_CONTEXT: GILOnceCell<(PyObject, PyObject)> = GILOnceCell::new();

/// What a layer does natively (see the module docstring).
enum Native {
    /// Nothing: the middleware's Python hooks are called.
    None,
    Cors {
        /// The allowed origins (``allow_origins``), as bytes.
        origins: FxHashSet<Vec<u8>>,
        allow_all: bool,
        credentials: bool,
        /// Set on every response to a request with an ``Origin``.
        simple: Vec<(String, String)>,
    },
    Compression {
        minimum: usize,
    },
    Session {
        /// `surge.http.middleware.sessions.Session`.
        session: Py<PyType>,
    },
}

/// One middleware of the chain.
struct Layer {
    /// The middleware (named in errors).
    middleware: PyObject,
    /// Its bound ``process_request``, None when it keeps the inherited no-op.
    before: Option<PyObject>,
    /// Its bound ``process_response``, None when it keeps the inherited no-op.
    after: Option<PyObject>,
    native: Native,
}

/// What the chain gives back.
enum Outcome<'py> {
    Done(Bound<'py, PyAny>),
    /// The rest runs in the pipeline's ``_recover`` coroutine.
    Recover(Bound<'py, PyAny>),
}

/// The ``process_request``/``process_response`` middleware of one frozen plan
/// and the plain handlers they wrap (see the module docstring).
#[pyclass(module = "surge._core", frozen)]
pub struct HookChain {
    /// Outermost first.
    layers: Vec<Layer>,
    /// By route id: the plain (not threaded) handler this chain may call;
    /// other routes go to the pipeline's ``_endpoint``.
    handlers: Vec<Option<PyObject>>,
    /// The `Pipeline`: ``_endpoint``, ``_recover`` and ``_drive``.
    pipeline: PyObject,
    /// The response classes a hook may return (``isinstance`` check).
    responses: PyObject,
    /// `surge.http.errors.ClientDisconnected`: never converted, re-raised.
    disconnected: PyObject,
    /// What `Context.run` calls: a builtin bound to this chain, running it
    /// (set by `endpoint_function`).
    inner: std::sync::OnceLock<PyObject>,
    /// A request runs in its own copy of the context: some middleware is the
    /// user's (it may set context variables). The built-in ones set none,
    /// and with only them the handler runs as it does with no middleware.
    isolate: bool,
}

/// Only header names and values `Response.set_header` would take.
fn checked_header(name: String, value: String) -> PyResult<(String, String)> {
    if !is_token(name.as_bytes()) || value.bytes().any(|b| b == b'\r' || b == b'\n' || b == 0) {
        return Err(PyValueError::new_err(format!(
            "invalid CORS header {name:?}: {value:?}"
        )));
    }
    Ok((name, value))
}

fn set_header(response: &mut Response, name: &str, value: String) {
    response
        .headers
        .retain(|(n, _)| !n.eq_ignore_ascii_case(name));
    response.headers.push((name.to_owned(), value));
}

/// `surge.http.middleware.base.add_vary` on a native response.
fn add_vary(response: &mut Response, name: &str) {
    let mut values = response
        .headers
        .iter()
        .filter(|(n, _)| n.eq_ignore_ascii_case("vary"))
        .map(|(_, v)| v.as_str())
        .peekable();
    if values.peek().is_none() {
        response.headers.push(("Vary".to_owned(), name.to_owned()));
        return;
    }
    let values: Vec<&str> = values.collect();
    let named = values
        .iter()
        .flat_map(|joined| joined.split(','))
        .any(|v| v.trim().eq_ignore_ascii_case(name));
    if named {
        return;
    }
    let joined = [values.as_slice(), &[name]].concat().join(", ");
    set_header(response, "Vary", joined);
}

impl Layer {
    fn new(spec: &Bound<'_, PyTuple>) -> PyResult<Layer> {
        let (middleware, before, after, native): (
            PyObject,
            Option<PyObject>,
            Option<PyObject>,
            Option<Bound<'_, PyTuple>>,
        ) = spec.extract()?;
        let native = match native {
            None => Native::None,
            Some(n) => {
                let kind: String = n.get_item(0)?.extract()?;
                match kind.as_str() {
                    "cors" => {
                        let (_, origins, allow_all, credentials, simple): (
                            String,
                            Vec<String>,
                            bool,
                            bool,
                            Vec<(String, String)>,
                        ) = n.extract()?;
                        Native::Cors {
                            origins: origins.into_iter().map(String::into_bytes).collect(),
                            allow_all,
                            credentials,
                            simple: simple
                                .into_iter()
                                .map(|(k, v)| checked_header(k, v))
                                .collect::<PyResult<_>>()?,
                        }
                    }
                    "compression" => {
                        let (_, minimum): (String, usize) = n.extract()?;
                        Native::Compression { minimum }
                    }
                    "session" => {
                        let (_, session): (String, Bound<'_, PyType>) = n.extract()?;
                        Native::Session {
                            session: session.unbind(),
                        }
                    }
                    other => {
                        return Err(PyValueError::new_err(format!(
                            "unknown native middleware {other:?}"
                        )))
                    }
                }
            }
        };
        Ok(Layer {
            middleware,
            before,
            after,
            native,
        })
    }

    /// ``process_request``: None to go on, else the response to answer with.
    fn before<'py>(
        &self,
        py: Python<'py>,
        request: &Bound<'py, Request>,
    ) -> PyResult<Option<Bound<'py, PyAny>>> {
        match &self.native {
            Native::Cors { .. } => {
                if request.borrow().head.method() != b"OPTIONS" {
                    return Ok(None);
                }
            }
            Native::Session { session } => {
                let mut r = request.borrow_mut();
                if r.head.header(b"cookie").is_none() {
                    r.session = SessionSlot::Lazy(session.clone_ref(py));
                    return Ok(None);
                }
            }
            Native::Compression { .. } | Native::None => {}
        }
        let Some(hook) = &self.before else {
            return Ok(None);
        };
        let answer = hook.bind(py).call1((request,))?;
        Ok((!answer.is_none()).then_some(answer))
    }

    /// ``process_response``: the response to pass on.
    fn after<'py>(
        &self,
        py: Python<'py>,
        chain: &HookChain,
        request: &Bound<'py, Request>,
        response: Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        if self.after_natively(py, request, &response)? {
            return Ok(response);
        }
        let Some(hook) = &self.after else {
            return Ok(response);
        };
        let new = hook.bind(py).call1((request, response))?;
        let value = &new;
        if !value.is_exact_instance_of::<Response>()
            && !value.is_instance(chain.responses.bind(py))?
        {
            return Err(PyTypeError::new_err(format!(
                "{}.process_response returned {}, not a response",
                self.middleware.bind(py).get_type().qualname()?,
                value.get_type().name()?
            )));
        }
        Ok(new)
    }

    /// Does this layer's ``process_response`` natively, if it can: true when done.
    fn after_natively(
        &self,
        py: Python<'_>,
        request: &Bound<'_, Request>,
        response: &Bound<'_, PyAny>,
    ) -> PyResult<bool> {
        match &self.native {
            Native::None => Ok(false),
            Native::Cors {
                origins,
                allow_all,
                credentials,
                simple,
            } => {
                let Ok(native) = response.downcast_exact::<Response>() else {
                    return Ok(false);
                };
                let req = request.borrow();
                let origin = req.head.header(b"origin");
                let Some(origin) = origin else {
                    add_vary(&mut native.borrow_mut(), "Origin");
                    return Ok(true);
                };
                // A non-ASCII origin is left to Python's latin-1 reading.
                if !origin.is_ascii() {
                    return Ok(false);
                }
                let mut r = native.borrow_mut();
                for (name, value) in simple {
                    set_header(&mut r, name, value.clone());
                }
                let allowed = if *allow_all {
                    *credentials
                } else {
                    origins.contains(origin)
                };
                if allowed {
                    // ASCII with no CR, LF or NUL: httparse took it as a value.
                    let origin = std::str::from_utf8(origin).unwrap_or_default().to_owned();
                    set_header(&mut r, "Access-Control-Allow-Origin", origin);
                }
                add_vary(&mut r, "Origin");
                Ok(true)
            }
            Native::Compression { minimum } => Ok(response
                .downcast_exact::<Response>()
                .is_ok_and(|r| r.borrow().body.len(py) < *minimum)),
            Native::Session { session } => Ok(match &request.borrow().session {
                // Never read: still empty.
                SessionSlot::Lazy(_) => true,
                SessionSlot::Set(current) => {
                    let current = current.bind(py);
                    current.get_type().is(session.bind(py))
                        && current.downcast::<PyDict>().is_ok_and(|d| d.is_empty())
                }
                SessionSlot::Absent => false,
            }),
        }
    }
}

impl HookChain {
    /// Errors the pipeline turns into responses: an `Exception` other than
    /// `ClientDisconnected`; anything else propagates.
    fn convertible(&self, py: Python<'_>, err: &PyErr) -> bool {
        err.is_instance_of::<PyException>(py) && !err.is_instance(py, self.disconnected.bind(py))
    }

    fn recover<'py>(
        &self,
        py: Python<'py>,
        request: &Bound<'py, Request>,
        entered: usize,
        error: Option<PyErr>,
        result: Option<Bound<'py, PyAny>>,
    ) -> PyResult<Outcome<'py>> {
        let error = match error {
            Some(e) if !self.convertible(py, &e) => return Err(e),
            Some(e) => e.into_value(py).into_bound(py).into_any(),
            None => py.None().into_bound(py),
        };
        let result = result.unwrap_or_else(|| py.None().into_bound(py));
        let coro = self
            .pipeline
            .bind(py)
            .call_method1(intern!(py, "_recover"), (request, entered, error, result))?;
        Ok(Outcome::Recover(coro))
    }

    /// The handler's result as a response, or None when Python must finish it.
    fn response_of<'py>(
        &self,
        py: Python<'py>,
        result: &Bound<'py, PyAny>,
    ) -> PyResult<Option<Bound<'py, PyAny>>> {
        if result.is_exact_instance_of::<Response>() {
            return Ok(Some(result.clone()));
        }
        if let Some(r) = wrap_plain_result(py, result) {
            return Ok(Some(Bound::new(py, r?)?.into_any()));
        }
        if result.is_none() {
            let r = Response::new(py, None, 204, None, None)?;
            return Ok(Some(Bound::new(py, r)?.into_any()));
        }
        if result.is_instance(self.responses.bind(py))? {
            return Ok(Some(result.clone()));
        }
        Ok(None)
    }

    /// The chain for one request, in its context.
    fn run<'py>(
        &self,
        py: Python<'py>,
        request: &Bound<'py, Request>,
        handler: &Bound<'py, PyAny>,
    ) -> PyResult<Outcome<'py>> {
        let mut entered = 0;
        let mut answer = None;
        for layer in &self.layers {
            match layer.before(py, request) {
                Ok(None) => entered += 1,
                Ok(Some(early)) => {
                    answer = Some(early);
                    break;
                }
                Err(e) => return self.recover(py, request, entered, Some(e), None),
            }
        }
        let mut response = match answer {
            Some(early) => early,
            None => {
                let params = request.borrow().params.as_ref().map(|p| p.bind(py).clone());
                let result = match params {
                    Some(p) if !p.is_empty() => handler.call((request,), Some(&p)),
                    _ => handler.call1((request,)),
                };
                let result = match result {
                    Ok(r) => r,
                    Err(e) => return self.recover(py, request, entered, Some(e), None),
                };
                match self.response_of(py, &result) {
                    Ok(Some(r)) => r,
                    Ok(None) => return self.recover(py, request, entered, None, Some(result)),
                    Err(e) => return self.recover(py, request, entered, Some(e), None),
                }
            }
        };
        while entered > 0 {
            entered -= 1;
            response = match self.layers[entered].after(py, self, request, response) {
                Ok(r) => r,
                Err(e) => return self.recover(py, request, entered, Some(e), None),
            };
        }
        Ok(Outcome::Done(response))
    }

    /// The route's handler when this chain runs it.
    fn handler(&self, request: &Bound<'_, Request>) -> Option<&PyObject> {
        let rid = request.borrow().route;
        usize::try_from(rid)
            .ok()
            .and_then(|i| self.handlers.get(i))
            .and_then(Option::as_ref)
    }

    /// The endpoint: the response, or what the connection awaits for it.
    fn endpoint(slf: &Bound<'_, Self>, request: &Bound<'_, PyAny>) -> PyResult<PyObject> {
        let py = slf.py();
        let me = slf.get();
        let Ok(req) = request.downcast::<Request>() else {
            return me
                .pipeline
                .call_method1(py, intern!(py, "_endpoint"), (request,));
        };
        if me.handler(req).is_none() {
            return me
                .pipeline
                .call_method1(py, intern!(py, "_endpoint"), (request,));
        }
        let (copy, run) = COPY_CONTEXT.get_or_try_init(py, || -> PyResult<_> {
            let cv = py.import("contextvars")?;
            Ok((
                cv.getattr("copy_context")?.unbind(),
                cv.getattr("Context")?.getattr("run")?.unbind(),
            ))
        })?;
        if !me.isolate {
            let Some(handler) = me.handler(req) else {
                return Err(PyValueError::new_err("no plain handler for this request"));
            };
            let handler = handler.bind(py).clone();
            return match me.run(py, req, &handler)? {
                Outcome::Done(response) => Ok(response.unbind()),
                Outcome::Recover(coro) => {
                    let ctx = copy.bind(py).call0()?;
                    me.pipeline
                        .call_method1(py, intern!(py, "_drive"), (ctx, coro))
                }
            };
        }
        let Some(inner) = me.inner.get() else {
            return Err(PyValueError::new_err("endpoint_function() not called"));
        };
        let ctx = copy.bind(py).call0()?;
        let out = run.bind(py).call1((&ctx, inner, request))?;
        if let Ok(recovery) = out.downcast_exact::<Recovery>() {
            let coro = recovery.get().coro.bind(py);
            return me
                .pipeline
                .call_method1(py, intern!(py, "_drive"), (ctx, coro));
        }
        Ok(out.unbind())
    }
}

/// The rest of a chain that stopped natively: the pipeline's coroutine.
#[pyclass(module = "surge._core", frozen)]
pub struct Recovery {
    coro: PyObject,
}

#[pymethods]
impl HookChain {
    /// `layers`: per middleware, outermost first, ``(middleware,
    /// process_request or None, process_response or None, native or None)``
    /// where native is ``("cors", origins, allow_all, credentials,
    /// simple_headers)``, ``("compression", minimum_size)`` or ``("session",
    /// Session)``. `handlers`: by route id, the plain handler to run or None.
    #[new]
    fn new(
        layers: Vec<Bound<'_, PyTuple>>,
        handlers: Vec<Option<PyObject>>,
        pipeline: PyObject,
        responses: PyObject,
        disconnected: PyObject,
    ) -> PyResult<Self> {
        let layers: Vec<Layer> = layers.iter().map(Layer::new).collect::<PyResult<_>>()?;
        Ok(HookChain {
            isolate: layers.iter().any(|l| matches!(l.native, Native::None)),
            layers,
            handlers,
            pipeline,
            responses,
            disconnected,
            inner: std::sync::OnceLock::new(),
        })
    }

    /// The handler of every route: ``endpoint(request, **params)``, a builtin
    /// function (no argument parsing per call).
    fn endpoint_function(slf: &Bound<'_, Self>) -> PyResult<PyObject> {
        let py = slf.py();
        if slf.get().inner.get().is_none() {
            let _ = slf.get().inner.set(builtin(py, slf.as_any(), inner_def())?);
        }
        builtin(py, slf.as_any(), endpoint_def())
    }

    /// How many middleware the chain has.
    #[getter]
    fn depth(&self) -> usize {
        self.layers.len()
    }

    /// How many of them run natively in their common cases.
    #[getter]
    fn native_layers(&self) -> usize {
        self.layers
            .iter()
            .filter(|l| !matches!(l.native, Native::None))
            .count()
    }

    fn __traverse__(&self, visit: PyVisit<'_>) -> Result<(), PyTraverseError> {
        for layer in &self.layers {
            visit.call(&layer.middleware)?;
            if let Some(h) = &layer.before {
                visit.call(h)?;
            }
            if let Some(h) = &layer.after {
                visit.call(h)?;
            }
        }
        for h in self.handlers.iter().flatten() {
            visit.call(h)?;
        }
        visit.call(&self.pipeline)?;
        if let Some(inner) = self.inner.get() {
            visit.call(inner)?;
        }
        Ok(())
    }
}

fn builtin(
    py: Python<'_>,
    owner: &Bound<'_, PyAny>,
    def: *mut ffi::PyMethodDef,
) -> PyResult<PyObject> {
    // SAFETY: `def` lives forever; the function keeps a reference to `owner`.
    unsafe {
        let f = ffi::PyCFunction_NewEx(def, owner.as_ptr(), std::ptr::null_mut());
        Bound::from_owned_ptr_or_err(py, f).map(Bound::unbind)
    }
}

fn leaked_def(
    name: &'static std::ffi::CStr,
    meth: ffi::PyMethodDefPointer,
    flags: std::ffi::c_int,
    doc: &'static std::ffi::CStr,
) -> usize {
    let def = Box::leak(Box::new(ffi::PyMethodDef {
        ml_name: name.as_ptr(),
        ml_meth: meth,
        ml_flags: flags,
        ml_doc: doc.as_ptr(),
    }));
    def as *mut ffi::PyMethodDef as usize
}

fn endpoint_def() -> *mut ffi::PyMethodDef {
    static DEF: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *DEF.get_or_init(|| {
        leaked_def(
            c"endpoint",
            ffi::PyMethodDefPointer {
                PyCFunctionWithKeywords: endpoint_call,
            },
            ffi::METH_VARARGS | ffi::METH_KEYWORDS,
            c"endpoint($self, request, /, **params)\n--\n\nThe response for `request` through the middleware.",
        )
    }) as *mut ffi::PyMethodDef
}

fn inner_def() -> *mut ffi::PyMethodDef {
    static DEF: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *DEF.get_or_init(|| {
        leaked_def(
            c"run_chain",
            ffi::PyMethodDefPointer {
                PyCFunction: inner_call,
            },
            ffi::METH_O,
            c"run_chain($self, request, /)\n--\n\nThe chain for `request`, in the current context.",
        )
    }) as *mut ffi::PyMethodDef
}

fn guarded(f: impl FnOnce(Python<'_>) -> PyResult<PyObject>) -> *mut ffi::PyObject {
    // SAFETY: every caller is a builtin CPython calls with the GIL held.
    let py = unsafe { Python::assume_gil_acquired() };
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(py))) {
        Ok(Ok(v)) => v.into_ptr(),
        Ok(Err(e)) => {
            e.restore(py);
            std::ptr::null_mut()
        }
        Err(_) => {
            PyErr::new::<pyo3::exceptions::PySystemError, _>("panic in the middleware chain")
                .restore(py);
            std::ptr::null_mut()
        }
    }
}

unsafe extern "C" fn endpoint_call(
    slf: *mut ffi::PyObject,
    args: *mut ffi::PyObject,
    _kwargs: *mut ffi::PyObject,
) -> *mut ffi::PyObject {
    guarded(|py| {
        // SAFETY: the builtin is bound to a HookChain (`endpoint_function`);
        // `args` is the call's tuple. The path parameters (`_kwargs`) are the
        // request's own, which `run` passes on.
        let chain = Bound::from_borrowed_ptr(py, slf);
        let chain = chain.downcast_unchecked::<HookChain>();
        let args = Bound::from_borrowed_ptr(py, args);
        let request = args.downcast::<PyTuple>()?.get_item(0)?;
        HookChain::endpoint(chain, &request)
    })
}

unsafe extern "C" fn inner_call(
    slf: *mut ffi::PyObject,
    request: *mut ffi::PyObject,
) -> *mut ffi::PyObject {
    guarded(|py| {
        // SAFETY: the builtin is bound to a HookChain (`endpoint_function`), and
        // `endpoint` checked the request and its handler.
        let chain = Bound::from_borrowed_ptr(py, slf);
        let chain = chain.downcast_unchecked::<HookChain>().get();
        let request = Bound::from_borrowed_ptr(py, request);
        let request = request.downcast::<Request>()?;
        let Some(handler) = chain.handler(request) else {
            return Err(PyValueError::new_err("no plain handler for this request"));
        };
        let handler = handler.bind(py).clone();
        match chain.run(py, request, &handler)? {
            Outcome::Done(response) => Ok(response.unbind()),
            Outcome::Recover(coro) => Ok(Py::new(
                py,
                Recovery {
                    coro: coro.unbind(),
                },
            )?
            .into_any()),
        }
    })
}
