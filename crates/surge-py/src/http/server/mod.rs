//! The HTTP server's native half: router, lazy request, response encoding and
//! the per-connection parser that runs sync handlers on the fast path.

mod connection;
mod date;
mod request;
mod response;
mod router;
mod stats;

use pyo3::prelude::*;

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<router::Router>()?;
    m.add_class::<request::Request>()?;
    m.add_class::<crate::headers::Headers>()?;
    m.add_class::<response::Response>()?;
    m.add_class::<connection::HttpConnection>()?;
    m.add_class::<connection::ParseError>()?;
    m.add_function(wrap_pyfunction!(response::encode_response_head, m)?)?;
    m.add_function(wrap_pyfunction!(date::http_date, m)?)?;
    m.add_function(wrap_pyfunction!(stats::http_stats, m)?)?;
    let limits = surge_proto::http1::Limits::default();
    m.add("DEFAULT_MAX_REQUEST_LINE", limits.max_request_line)?;
    m.add("DEFAULT_MAX_HEADER_LINE", limits.max_header_line)?;
    m.add("DEFAULT_MAX_HEADERS", limits.max_headers)?;
    m.add("DEFAULT_MAX_HEAD", limits.max_head)?;
    m.add("DEFAULT_MAX_BODY", limits.max_body)?;
    Ok(())
}
