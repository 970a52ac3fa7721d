//! The WSGI dispatcher's per-request path on the loop (`surge.wsgi.app.WsgiApp`'s
//! plan dispatch): from the read that brought a request to its cycle handed to
//! the thread pool, in one native call.
//!
//! In Python the usual read took five frames per request (`_after_feed`,
//! `_dispatch`, `_handle_dispatched` on the protocol, `WsgiApp._dispatch`, the
//! body's set-up) and some twenty attribute lookups; here the environ is
//! built, the cycle made and submitted and its turn begun without them.

use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyTuple};
use pyo3::{PyTraverseError, PyVisit};

use super::dispatch_read::{began, usual_request};
use super::request::Request;
use super::wsgi_cycle::WsgiCycle;

/// The dispatch callable of a `WsgiApp`'s plan: ``dispatch(request, conn)``
/// makes `request`'s cycle, hands it to the thread pool and returns it.
#[pyclass(module = "surge._core")]
pub struct WsgiDispatch {
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

#[pymethods]
impl WsgiDispatch {
    /// The dispatcher of `owner` (a `WsgiApp`) serving `app`.
    #[new]
    #[allow(clippy::too_many_arguments)]
    fn new(
        owner: PyObject,
        app: PyObject,
        cycle_type: PyObject,
        submit: PyObject,
        no_body: PyObject,
        body_input: PyObject,
        high_water: usize,
    ) -> Self {
        WsgiDispatch {
            owner,
            app,
            cycle_type,
            submit,
            no_body,
            body_input,
            high_water,
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
            (!r.eof, r.has_body())
        };
        let stream = if stream {
            conn.call_method1(intern!(py, "body_stream"), (request,))?
        } else {
            py.None().into_bound(py)
        };
        if stream.is_none() && !has_body {
            environ.set_item(intern!(py, "wsgi.input"), &self.no_body)?;
        } else {
            let event_loop = wakeups.getattr(intern!(py, "loop"))?;
            self.body_input
                .call1(py, (&environ, request, &stream, conn, event_loop))?;
        }
        let cycle = self.cycle_type.bind(py).call1((
            &self.app,
            environ,
            request,
            stream,
            conn,
            wakeups,
            self.high_water,
        ))?;
        self.submit.call1(py, (&cycle,))?;
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
        visit.call(&self.owner)?;
        visit.call(&self.app)?;
        visit.call(&self.cycle_type)?;
        visit.call(&self.submit)?;
        visit.call(&self.no_body)?;
        visit.call(&self.body_input)?;
        Ok(())
    }
}
