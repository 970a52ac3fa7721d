//! The HTTP client's native half: the response parser, the request encoder and
//! the engine codec built on `surge_proto::http1::client`.

mod codec;
mod encode;
mod parser;
mod response;

use pyo3::create_exception;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use surge_proto::http1::client as proto;

create_exception!(
    _core,
    HttpResponseError,
    PyValueError,
    "The bytes from the server are not a valid HTTP/1.x response stream."
);

/// Add the HTTP client types and functions to `surge._core`.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<codec::HttpClientCodec>()?;
    m.add_class::<parser::HttpResponseParser>()?;
    m.add_class::<response::HttpResponse>()?;
    m.add("HttpResponseError", m.py().get_type::<HttpResponseError>())?;
    m.add_function(wrap_pyfunction!(encode::encode_request, m)?)?;
    m.add("HTTP_CLIENT_MAX_HEAD", proto::DEFAULT_MAX_HEAD)?;
    m.add("HTTP_CLIENT_MAX_HEADERS", proto::DEFAULT_MAX_HEADERS)?;
    m.add("HTTP_CLIENT_MAX_BODY", proto::DEFAULT_MAX_BODY)?;
    Ok(())
}
