//! The request encoder: appends one request to a buffer the caller owns, so a
//! batch of pipelined requests leaves in one write. The encoder frames the body
//! itself; Content-Length and Transfer-Encoding given by the caller are dropped
//! rather than trusted, so a request can never disagree with its own framing.
//! On an error nothing is left in the buffer.

use super::EncodeError;
use crate::http1::common::is_token;

/// The body of a request, as the encoder frames it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RequestBody<'a> {
    /// No body. POST, PUT and PATCH still get `content-length: 0`.
    None,
    /// A body of known length: `content-length` and the bytes.
    Bytes(&'a [u8]),
    /// A body the caller writes next with [`write_chunk`] and [`write_last_chunk`].
    Chunked,
}

fn is_target(s: &[u8]) -> bool {
    !s.is_empty() && s.iter().all(|&b| b > b' ' && b != 0x7f)
}

fn is_field_value(s: &[u8]) -> bool {
    s.iter().all(|&b| (b >= b' ' && b != 0x7f) || b == b'\t')
}

fn expects_body(method: &[u8]) -> bool {
    matches!(method, b"POST" | b"PUT" | b"PATCH")
}

/// Appends a request: request line, the caller's headers, framing headers, the
/// empty line and (for `RequestBody::Bytes`) the body. The caller supplies
/// `host` among the headers.
pub fn write_request<'h>(
    buf: &mut Vec<u8>,
    method: &[u8],
    target: &[u8],
    headers: impl IntoIterator<Item = (&'h [u8], &'h [u8])>,
    body: RequestBody<'_>,
) -> Result<(), EncodeError> {
    if !is_token(method) {
        return Err(EncodeError::InvalidMethod);
    }
    if !is_target(target) {
        return Err(EncodeError::InvalidTarget);
    }
    let mark = buf.len();
    buf.extend_from_slice(method);
    buf.push(b' ');
    buf.extend_from_slice(target);
    buf.extend_from_slice(b" HTTP/1.1\r\n");
    for (name, value) in headers {
        let err = if !is_token(name) {
            Some(EncodeError::InvalidHeaderName)
        } else if !is_field_value(value) {
            Some(EncodeError::InvalidHeaderValue)
        } else {
            None
        };
        if let Some(e) = err {
            buf.truncate(mark);
            return Err(e);
        }
        if name.eq_ignore_ascii_case(b"content-length")
            || name.eq_ignore_ascii_case(b"transfer-encoding")
        {
            continue;
        }
        buf.extend_from_slice(name);
        buf.extend_from_slice(b": ");
        buf.extend_from_slice(value.trim_ascii());
        buf.extend_from_slice(b"\r\n");
    }
    match body {
        RequestBody::None if expects_body(method) => {
            buf.extend_from_slice(b"content-length: 0\r\n\r\n");
        }
        RequestBody::None => buf.extend_from_slice(b"\r\n"),
        RequestBody::Bytes(b) => {
            buf.extend_from_slice(b"content-length: ");
            buf.extend_from_slice(b.len().to_string().as_bytes());
            buf.extend_from_slice(b"\r\n\r\n");
            buf.extend_from_slice(b);
        }
        RequestBody::Chunked => buf.extend_from_slice(b"transfer-encoding: chunked\r\n\r\n"),
    }
    Ok(())
}

/// Appends one chunk of a chunked body; an empty `data` writes nothing (an
/// empty chunk would end the body).
pub fn write_chunk(buf: &mut Vec<u8>, data: &[u8]) {
    if data.is_empty() {
        return;
    }
    buf.extend_from_slice(format!("{:x}\r\n", data.len()).as_bytes());
    buf.extend_from_slice(data);
    buf.extend_from_slice(b"\r\n");
}

/// Appends the last chunk (no trailers), ending a chunked body.
pub fn write_last_chunk(buf: &mut Vec<u8>) {
    buf.extend_from_slice(b"0\r\n\r\n");
}

#[cfg(test)]
mod tests {
    use super::*;

    fn enc(
        method: &str,
        target: &str,
        headers: &[(&str, &str)],
        body: RequestBody<'_>,
    ) -> Result<String, EncodeError> {
        let mut buf = b"x".to_vec();
        let r = write_request(
            &mut buf,
            method.as_bytes(),
            target.as_bytes(),
            headers.iter().map(|(n, v)| (n.as_bytes(), v.as_bytes())),
            body,
        );
        match r {
            Ok(()) => Ok(String::from_utf8(buf[1..].to_vec()).unwrap()),
            Err(e) => {
                assert_eq!(buf, b"x", "an error leaves the buffer as it was");
                Err(e)
            }
        }
    }

    #[test]
    fn requests() {
        let h = [("Host", "a")];
        assert_eq!(
            enc("GET", "/", &h, RequestBody::None),
            Ok("GET / HTTP/1.1\r\nHost: a\r\n\r\n".into())
        );
        assert_eq!(
            enc("POST", "/p?q=1", &h, RequestBody::None),
            Ok("POST /p?q=1 HTTP/1.1\r\nHost: a\r\ncontent-length: 0\r\n\r\n".into())
        );
        assert_eq!(
            enc(
                "PUT",
                "/",
                &[
                    ("Host", "a"),
                    ("Content-Length", "99"),
                    ("transfer-encoding", "gzip")
                ],
                RequestBody::Bytes(b"hi")
            ),
            Ok("PUT / HTTP/1.1\r\nHost: a\r\ncontent-length: 2\r\n\r\nhi".into())
        );
        assert_eq!(
            enc("POST", "/", &h, RequestBody::Chunked),
            Ok("POST / HTTP/1.1\r\nHost: a\r\ntransfer-encoding: chunked\r\n\r\n".into())
        );
        let mut buf = Vec::new();
        write_chunk(&mut buf, b"");
        write_chunk(&mut buf, &[b'z'; 26]);
        write_last_chunk(&mut buf);
        assert_eq!(
            buf,
            [&b"1a\r\n"[..], &[b'z'; 26], b"\r\n0\r\n\r\n"].concat()
        );
    }

    #[test]
    fn refused() {
        let h = [("Host", "a")];
        assert_eq!(
            enc("G T", "/", &h, RequestBody::None),
            Err(EncodeError::InvalidMethod)
        );
        assert_eq!(
            enc("", "/", &h, RequestBody::None),
            Err(EncodeError::InvalidMethod)
        );
        assert_eq!(
            enc("GET", "/a b", &h, RequestBody::None),
            Err(EncodeError::InvalidTarget)
        );
        assert_eq!(
            enc("GET", "", &h, RequestBody::None),
            Err(EncodeError::InvalidTarget)
        );
        assert_eq!(
            enc("GET", "/\r\n", &h, RequestBody::None),
            Err(EncodeError::InvalidTarget)
        );
        assert_eq!(
            enc("GET", "/", &[("Ho st", "a")], RequestBody::None),
            Err(EncodeError::InvalidHeaderName)
        );
        assert_eq!(
            enc("GET", "/", &[("X", "a\r\nEvil: 1")], RequestBody::None),
            Err(EncodeError::InvalidHeaderValue)
        );
        assert_eq!(
            enc("GET", "/", &[("X", "a\0")], RequestBody::None),
            Err(EncodeError::InvalidHeaderValue)
        );
        assert_eq!(
            enc("GET", "/", &[("X", "a\tb")], RequestBody::None),
            Ok("GET / HTTP/1.1\r\nX: a\tb\r\n\r\n".into())
        );
    }
}
