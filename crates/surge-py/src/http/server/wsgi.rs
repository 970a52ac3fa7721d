//! WSGI (PEP 3333) response heads: an app's `start_response(status, headers)`
//! checked and encoded in one native call from the app's thread.
//!
//! Why native: `surge.wsgi`'s cycle checked every header name and value with
//! Python loops and joined the head piece by piece, several microseconds per
//! request on the thread that also runs the app (the GIL is held throughout);
//! here the same rules cost one call.

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList, PyString, PyTuple};
use surge_proto::http1::common::is_token;

use super::head_defaults::HeadDefaults;

/// How the body of a WSGI response is framed, decided with its head.
pub const FRAMING_NONE: u8 = 0; // HEAD, 1xx, 204, 304: no body at all
pub const FRAMING_LENGTH: u8 = 1; // the app's Content-Length
pub const FRAMING_CHUNKED: u8 = 2; // no length, HTTP/1.1
pub const FRAMING_UNTIL_CLOSE: u8 = 3; // no length, HTTP/1.0: the body ends when we close

/// PEP 3333 forbids these in an application's response headers.
const HOP_BY_HOP: [&str; 8] = [
    "connection",
    "keep-alive",
    "proxy-authenticate",
    "proxy-authorization",
    "te",
    "trailers",
    "transfer-encoding",
    "upgrade",
];

fn repr(obj: &Bound<'_, PyAny>) -> String {
    obj.repr()
        .map(|r| r.to_string())
        .unwrap_or_else(|_| "<unprintable>".into())
}

/// A str as bytes, each character one latin-1 byte (PEP 3333's "bytes as str").
fn push_latin1(out: &mut Vec<u8>, text: &str) -> bool {
    if text.is_ascii() {
        out.extend_from_slice(text.as_bytes());
        return true;
    }
    for c in text.chars() {
        match u8::try_from(u32::from(c)) {
            Ok(b) => out.push(b),
            Err(_) => return false,
        }
    }
    true
}

fn check_status(status: &Bound<'_, PyAny>) -> PyResult<String> {
    let Ok(text) = status.downcast_exact::<PyString>() else {
        return Err(PyValueError::new_err(format!(
            "invalid WSGI status {}: expected e.g. '200 OK'",
            repr(status)
        )));
    };
    let text = text.to_str()?;
    let b = text.as_bytes();
    if b.len() < 4 || b[3] != b' ' {
        return Err(PyValueError::new_err(format!(
            "invalid WSGI status {}: expected e.g. '200 OK'",
            repr(status)
        )));
    }
    if !b[..3].iter().all(u8::is_ascii_digit) || b.iter().any(|&c| matches!(c, b'\r' | b'\n' | 0)) {
        return Err(PyValueError::new_err(format!(
            "invalid WSGI status {}",
            repr(status)
        )));
    }
    Ok(text.to_owned())
}

/// A Content-Length value: digits, optionally surrounded by blanks.
fn parse_length(value: &str) -> Option<u64> {
    let v = value.trim_matches(|c| c == ' ' || c == '\t');
    if v.is_empty() || !v.bytes().all(|c| c.is_ascii_digit()) {
        return None;
    }
    v.parse().ok()
}

/// A response head checked and encoded (see `encode_head`).
pub(crate) struct Head {
    pub bytes: Vec<u8>,
    pub framing: u8,
    pub length: u64,
    pub keep_alive: bool,
    pub status: u16,
}

/// Checks an app's `start_response(status, headers)` and encodes the response
/// head. `head_only` (a HEAD request), `http10` and `keep_alive` (the request's,
/// and the server's wish) decide the framing; `ours` are the server's own
/// headers. Runs no Python code. Raises TypeError or ValueError with the rule
/// broken.
pub(crate) fn encode_head(
    status: &Bound<'_, PyAny>,
    headers: &Bound<'_, PyAny>,
    head_only: bool,
    http10: bool,
    keep_alive: bool,
    ours: &HeadDefaults,
) -> PyResult<Head> {
    let status = check_status(status)?;
    let Ok(list) = headers.downcast_exact::<PyList>() else {
        return Err(PyTypeError::new_err(format!(
            "response headers must be a list, got {}",
            headers.get_type().name()?
        )));
    };
    let mut out = Vec::with_capacity(192 + list.len() * 48);
    out.extend_from_slice(b"HTTP/1.1 ");
    if !push_latin1(&mut out, &status) {
        return Err(PyValueError::new_err(format!(
            "invalid WSGI status {status}: not latin-1"
        )));
    }
    out.extend_from_slice(b"\r\n");
    // The server's own headers go first; those the app set are dropped below.
    let ours_at = ours.write(&mut out);
    let mut replaced = 0u64;
    let mut length = None;
    for item in list.iter() {
        let pair = match item.downcast_exact::<PyTuple>() {
            Ok(t) if t.len() == 2 => t,
            _ => {
                return Err(PyTypeError::new_err(format!(
                    "response header {} is not a (name, value) tuple",
                    repr(&item)
                )))
            }
        };
        let (name_obj, value_obj) = (pair.get_borrowed_item(0)?, pair.get_borrowed_item(1)?);
        let (Ok(name), Ok(value)) = (
            name_obj.downcast_exact::<PyString>(),
            value_obj.downcast_exact::<PyString>(),
        ) else {
            return Err(PyTypeError::new_err(format!(
                "response header {}: name and value must be str",
                repr(&item)
            )));
        };
        let (name, value) = (name.to_str()?, value.to_str()?);
        // Errors name the header as Python shows it (its repr).
        let shown = || repr(&name_obj);
        if name.is_empty() || !is_token(name.as_bytes()) {
            return Err(PyValueError::new_err(format!(
                "invalid response header name {}",
                shown()
            )));
        }
        if value.bytes().any(|b| matches!(b, b'\r' | b'\n' | 0)) {
            return Err(PyValueError::new_err(format!(
                "response header {}: value may not contain CR, LF or NUL",
                shown()
            )));
        }
        if HOP_BY_HOP.iter().any(|h| h.eq_ignore_ascii_case(name)) {
            return Err(PyValueError::new_err(format!(
                "hop-by-hop header {} not allowed in a WSGI response",
                shown()
            )));
        }
        if name.eq_ignore_ascii_case("content-length") {
            length = Some(parse_length(value).ok_or_else(|| {
                PyValueError::new_err(format!("invalid Content-Length {}", repr(&value_obj)))
            })?);
        } else {
            replaced |= ours.which(name.as_bytes());
        }
        out.extend_from_slice(name.as_bytes());
        out.extend_from_slice(b": ");
        if !push_latin1(&mut out, value) {
            return Err(PyValueError::new_err(format!(
                "response header {}: value is not latin-1",
                shown()
            )));
        }
        out.extend_from_slice(b"\r\n");
    }
    if replaced != 0 {
        ours.remove(&mut out, ours_at, replaced);
    }
    let code: u16 = status[..3].parse().unwrap_or(500);
    let mut keep_alive = keep_alive;
    let (framing, remaining) = if head_only || code < 200 || code == 204 || code == 304 {
        (FRAMING_NONE, 0)
    } else if let Some(n) = length {
        (FRAMING_LENGTH, n)
    } else if !http10 {
        out.extend_from_slice(b"transfer-encoding: chunked\r\n");
        (FRAMING_CHUNKED, 0)
    } else {
        keep_alive = false;
        (FRAMING_UNTIL_CLOSE, 0)
    };
    if !keep_alive {
        out.extend_from_slice(b"connection: close\r\n");
    } else if http10 {
        out.extend_from_slice(b"connection: keep-alive\r\n");
    }
    out.extend_from_slice(b"\r\n");
    Ok(Head {
        bytes: out,
        framing,
        length: remaining,
        keep_alive,
        status: code,
    })
}

/// Checks an app's `start_response(status, headers)` and encodes the response
/// head (see `encode_head`). Returns (head, framing, content length or 0,
/// keep-alive): framing is one of the `FRAMING_*` values (0 none, 1
/// Content-Length, 2 chunked, 3 until the connection closes). Raises
/// TypeError or ValueError with the rule broken. `ours`: the server's own
/// headers (surge's standard ones when None).
#[pyfunction]
#[pyo3(signature = (status, headers, head_only, http10, keep_alive, ours=None))]
pub fn wsgi_response_head<'py>(
    py: Python<'py>,
    status: &Bound<'py, PyAny>,
    headers: &Bound<'py, PyAny>,
    head_only: bool,
    http10: bool,
    keep_alive: bool,
    ours: Option<&HeadDefaults>,
) -> PyResult<(Bound<'py, PyBytes>, u8, u64, bool)> {
    let ours = HeadDefaults::or_standard(ours);
    let head = encode_head(status, headers, head_only, http10, keep_alive, ours)?;
    Ok((
        PyBytes::new(py, &head.bytes),
        head.framing,
        head.length,
        head.keep_alive,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lengths() {
        assert_eq!(parse_length("13"), Some(13));
        assert_eq!(parse_length(" 13\t"), Some(13));
        assert_eq!(parse_length("-1"), None);
        assert_eq!(parse_length("+1"), None);
        assert_eq!(parse_length(""), None);
        assert_eq!(parse_length("1_0"), None);
    }

    #[test]
    fn latin1() {
        let mut out = Vec::new();
        assert!(push_latin1(&mut out, "a\u{e9}"));
        assert_eq!(out, b"a\xe9");
        assert!(!push_latin1(&mut out, "\u{20ac}"));
    }
}
