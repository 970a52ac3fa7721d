//! The WSGI dispatcher's per-request path on the loop (`surge.wsgi.app.WsgiApp`'s
//! plan dispatch): from the read that brought a request to its cycle handed to
//! the thread pool, in one native call.
//!
//! In Python the usual read took five frames per request (`_after_feed`,
//! `_dispatch`, `_handle_dispatched` on the protocol, `WsgiApp._dispatch`, the
//! body's set-up) and some twenty attribute lookups; here the environ is
//! built, the cycle made and submitted and its turn begun without them.

use pyo3::exceptions::PyTypeError;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyTuple};
use pyo3::{PyTraverseError, PyVisit};

use super::dispatch_read::{began, usual_request};
use super::request::Request;
use super::wsgi_cycle::WsgiCycle;

/// What a `WsgiDispatch` holds, given by keyword (each field's name) by the
/// `WsgiApp` that makes it, so the list is written once.
#[derive(FromPyObject)]
#[pyo3(from_item_all)]
struct Parts {
    /// The `WsgiApp`: `_connection_data(conn)` gives (environ base, wakeups).
    owner: PyObject,
    app: PyObject,
    /// `surge.wsgi.cycle.WsgiCycle`, the pool's `submit`, the shared
    /// `wsgi.input` of a request without a body, and `body_input` for the others.
    cycle_type: PyObject,
    submit: PyObject,
    no_body: PyObject,
    body_input: PyObject,
    high_water: usize,
}

/// The dispatch callable of a `WsgiApp`'s plan: ``dispatch(request, conn)``
/// makes `request`'s cycle, hands it to the thread pool and returns it.
#[pyclass(module = "surge._core")]
pub struct WsgiDispatch(Parts);

#[pymethods]
impl WsgiDispatch {
    /// The dispatcher of `owner` (a `WsgiApp`) serving `app`; every part by keyword.
    #[new]
    #[pyo3(signature = (**parts))]
    fn new(parts: Option<&Bound<'_, PyDict>>) -> PyResult<Self> {
        match parts {
            Some(parts) => Ok(WsgiDispatch(parts.extract()?)),
            None => Err(PyTypeError::new_err(
                "WsgiDispatch takes its parts by keyword",
            )),
        }
    }

    /// Makes `request`'s cycle on `conn` (an `HttpProtocol`), submits it; the cycle.
    fn __call__<'py>(
        &self,
        request: &Bound<'py, Request>,
        conn: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let py = conn.py();
        let mut data = conn.getattr(intern!(py, "dispatcher_data"))?;
        if data.is_none() {
            data = self
                .0
                .owner
                .call_method1(py, intern!(py, "_connection_data"), (conn,))?
                .into_bound(py);
            conn.setattr(intern!(py, "dispatcher_data"), &data)?;
        }
        let data = data.downcast::<PyTuple>()?;
        let (base, wakeups) = (data.get_borrowed_item(0)?, data.get_borrowed_item(1)?);
        let environ = request
            .borrow_mut()
            .wsgi_environ(py, base.downcast::<PyDict>()?)?;
        // `conn.body_stream(request)`, without the call when the body is all here.
        let (stream, has_body) = {
            let r = request.borrow();
            (!r.body_whole(), r.has_body())
        };
        let stream = if stream {
            conn.call_method1(intern!(py, "body_stream"), (request,))?
        } else {
            py.None().into_bound(py)
        };
        if stream.is_none() && !has_body {
            environ.set_item(intern!(py, "wsgi.input"), &self.0.no_body)?;
        } else {
            let event_loop = wakeups.getattr(intern!(py, "loop"))?;
            self.0
                .body_input
                .call1(py, (&environ, request, &stream, conn, event_loop))?;
        }
        let cycle = self.0.cycle_type.bind(py).call1((
            &self.0.app,
            environ,
            request,
            stream,
            conn,
            wakeups,
            self.0.high_water,
        ))?;
        self.0.submit.call1(py, (&cycle,))?;
        Ok(cycle)
    }

    /// What `HttpProtocol.data_received` calls with the requests one read
    /// brought (`deferred`) on a connection `protocol` serving this app: the
    /// usual case (see `usual_request`) is dispatched and begun here, and True
    /// comes back; anything else returns False at once, before anything was
    /// done, and the protocol's Python path takes it.
    fn dispatch_read(
        &self,
        protocol: &Bound<'_, PyAny>,
        deferred: Option<&Bound<'_, PyList>>,
    ) -> PyResult<bool> {
        let py = protocol.py();
        let Some((request, conn)) = usual_request(protocol, deferred)? else {
            return Ok(false);
        };
        // From here on this request is handled here, as `_handle_dispatched` would.
        let cycle = match self.__call__(&request, protocol) {
            Ok(cycle) => cycle,
            Err(e) => {
                protocol
                    .call_method1(intern!(py, "_dispatch_failed"), (request, e.into_value(py)))?;
                return Ok(true);
            }
        };
        if protocol.getattr(intern!(py, "_closed"))?.is_truthy()? {
            protocol.call_method1(intern!(py, "_queue_dispatched"), (request, cycle))?;
            return Ok(true);
        }
        let begun = WsgiCycle::begin(cycle.downcast::<WsgiCycle>()?, protocol)?;
        let begun = if begun.is_none(py) {
            None
        } else {
            Some(begun.is_truthy(py)?)
        };
        began(protocol, &conn, &request, begun)?;
        Ok(true)
    }

    fn __traverse__(&self, visit: PyVisit<'_>) -> Result<(), PyTraverseError> {
        let p = &self.0;
        for o in [
            &p.owner,
            &p.app,
            &p.cycle_type,
            &p.submit,
            &p.no_body,
            &p.body_input,
        ] {
            visit.call(o)?;
        }
        Ok(())
    }
}
