//! Request encoding from Python values: `encode_request` for callers that
//! build their own batches (the load generator), and the helper the codec uses.

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyString};
use surge_proto::http1::client::{write_request, RequestBody};

/// The bytes of a `str` (UTF-8) or `bytes` value.
fn as_bytes<'a>(o: &'a Bound<'_, PyAny>) -> PyResult<&'a [u8]> {
    if let Ok(s) = o.downcast::<PyString>() {
        return Ok(s.to_str()?.as_bytes());
    }
    if let Ok(b) = o.downcast::<PyBytes>() {
        return Ok(b.as_bytes());
    }
    Err(PyTypeError::new_err(format!(
        "header names and values must be str or bytes, not {}",
        o.get_type().name()?
    )))
}

/// Appends one request to `buf`; a bad method, target or header raises
/// `ValueError` and leaves `buf` as it was.
pub(crate) fn encode_into(
    buf: &mut Vec<u8>,
    method: &str,
    target: &str,
    headers: &Bound<'_, PyAny>,
    body: Option<&[u8]>,
) -> PyResult<()> {
    let mut pairs: Vec<(Bound<'_, PyAny>, Bound<'_, PyAny>)> = Vec::new();
    for item in headers.try_iter()? {
        pairs.push(item?.extract()?);
    }
    let views = pairs
        .iter()
        .map(|(n, v)| Ok((as_bytes(n)?, as_bytes(v)?)))
        .collect::<PyResult<Vec<_>>>()?;
    let body = match body {
        Some(b) => RequestBody::Bytes(b),
        None => RequestBody::None,
    };
    write_request(
        buf,
        method.as_bytes(),
        target.as_bytes(),
        views.iter().copied(),
        body,
    )
    .map_err(|e| PyValueError::new_err(e.to_string()))
}

/// Encodes one request (headers: pairs of str or bytes; `host` is the
/// caller's to add) into bytes; framing headers are written by the encoder.
#[pyfunction]
#[pyo3(signature = (method, target, headers, body=None))]
pub fn encode_request<'py>(
    py: Python<'py>,
    method: &str,
    target: &str,
    headers: &Bound<'py, PyAny>,
    body: Option<&[u8]>,
) -> PyResult<Bound<'py, PyBytes>> {
    let mut buf = Vec::with_capacity(256 + body.map_or(0, <[u8]>::len));
    encode_into(&mut buf, method, target, headers, body)?;
    Ok(PyBytes::new(py, &buf))
}
