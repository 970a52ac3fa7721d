//! The protocol's side of a dispatcher's `dispatch_read` (see
//! `HttpProtocol.data_received`): the checks that a read brought the usual
//! case, and the connection's state once its response was begun. Written for
//! any dispatcher whose response object is begun at once (`WsgiDispatch`;
//! `AsgiDispatch.dispatch_read` does the same steps inline).

use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::PyList;

use super::connection::HttpConnection;
use super::request::Request;

/// The request of `deferred` when a read brought the usual case: one request,
/// its body all here, nothing queued, held, streaming or upgrading on the
/// connection `protocol` (an `HttpProtocol`); None otherwise (the protocol's
/// Python path takes it), before anything was done.
pub(crate) fn usual_request<'py>(
    protocol: &Bound<'py, PyAny>,
    deferred: Option<&Bound<'py, PyList>>,
) -> PyResult<Option<(Bound<'py, Request>, Bound<'py, HttpConnection>)>> {
    let py = protocol.py();
    let Some(deferred) = deferred else {
        return Ok(None);
    };
    if deferred.len() != 1 {
        return Ok(None);
    }
    let item = deferred.get_item(0)?;
    let Ok(request) = item.downcast_into::<Request>() else {
        return Ok(None); // a ParseError
    };
    let conn = protocol
        .getattr(intern!(py, "_conn"))?
        .downcast_into::<HttpConnection>()?;
    {
        let c = conn.borrow();
        if c.held || c.upgrade || c.closing || c.continue_owed {
            return Ok(None);
        }
    }
    if !request.borrow().body_whole()
        || !protocol.getattr(intern!(py, "_body_stream"))?.is_none()
        || protocol.getattr(intern!(py, "_held"))?.is_truthy()?
        || protocol
            .getattr(intern!(py, "_paused_queue"))?
            .is_truthy()?
        || protocol.getattr(intern!(py, "_writer_busy"))?.is_truthy()?
        || protocol.getattr(intern!(py, "_closed"))?.is_truthy()?
        || protocol.getattr(intern!(py, "_queue"))?.len()? != 0
    {
        return Ok(None);
    }
    Ok(Some((request, conn)))
}

/// The protocol's state after an inline response for the usual request was
/// begun: `begun` is what its `begin` returned (None: `writer_done` follows).
pub(crate) fn began(
    protocol: &Bound<'_, PyAny>,
    conn: &Bound<'_, HttpConnection>,
    request: &Bound<'_, Request>,
    begun: Option<bool>,
) -> PyResult<()> {
    let py = protocol.py();
    match begun {
        None => {
            protocol.setattr(intern!(py, "_writer_busy"), true)?;
            protocol.setattr(intern!(py, "_inline_request"), request)?;
        }
        Some(keep_alive) => {
            request.borrow_mut().stream = None;
            if !keep_alive {
                protocol.call_method0(intern!(py, "_drop_queue"))?;
                protocol.call_method0(intern!(py, "_close"))?;
            } else if conn.borrow().closing
                || protocol.getattr(intern!(py, "_eof"))?.is_truthy()?
                || protocol
                    .getattr(intern!(py, "_server"))?
                    .getattr(intern!(py, "closing"))?
                    .is_truthy()?
            {
                // The connection ends after this: `_flush` closes it.
                protocol.call_method0(intern!(py, "_flush"))?;
            } else {
                // Idle again: what `_flush` would leave.
                conn.borrow_mut().fast = true;
            }
        }
    }
    Ok(())
}
