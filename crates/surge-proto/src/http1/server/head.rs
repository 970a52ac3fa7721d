//! The request head: parsed by httparse, then checked against RFC 9112's
//! framing rules. Names and values stay as offsets into the shared head bytes,
//! so nothing is decoded or copied until someone asks for it.

use std::mem::MaybeUninit;

use bytes::Bytes;

use super::{Error, Limits};
use crate::http1::common::{
    find_header, offsets, parse_length, slice, trim, ConnectionOptions, HeaderIndex,
    TransferCodings, Version, MAX_HEADERS_CAP,
};

/// How the body of a request is framed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BodyKind {
    Length(u64),
    Chunked,
}

/// A parsed, validated request head.
#[derive(Clone, Debug)]
pub struct RequestHead {
    /// The head as received, request line to the empty line.
    pub bytes: Bytes,
    pub method: (u32, u32),
    pub target: (u32, u32),
    pub version: Version,
    pub headers: Vec<HeaderIndex>,
    /// Whether the connection stays open after this request.
    pub keep_alive: bool,
    /// The client sent `Expect: 100-continue` (HTTP/1.1 only).
    pub expect_continue: bool,
    pub body: BodyKind,
}

impl RequestHead {
    pub fn method(&self) -> &[u8] {
        slice(&self.bytes, self.method)
    }

    /// The request target as sent: path and query.
    pub fn target(&self) -> &[u8] {
        slice(&self.bytes, self.target)
    }

    /// The target in origin form: an absolute-form target
    /// (`http://host/path?q`, RFC 9112 3.2.2) loses its scheme and authority.
    pub fn origin_target(&self) -> &[u8] {
        let t = self.target();
        let Some(rest) = strip_scheme(t) else {
            return t;
        };
        match memchr::memchr3(b'/', b'?', b'#', rest) {
            Some(i) if rest[i] == b'/' => &rest[i..],
            // `http://host?q` or `http://host`: the path is "/".
            _ => b"/",
        }
    }

    /// The authority (`host[:port]`) of an absolute-form target (RFC 9112
    /// 3.2.2), which a server uses instead of the Host header; None for the
    /// other forms.
    pub fn authority(&self) -> Option<&[u8]> {
        let rest = strip_scheme(self.target())?;
        let end = memchr::memchr3(b'/', b'?', b'#', rest).unwrap_or(rest.len());
        let authority = &rest[..end];
        // Userinfo (`user@host`) is not part of the host.
        Some(match memchr::memrchr(b'@', authority) {
            Some(i) => &authority[i + 1..],
            None => authority,
        })
    }

    /// The target up to `?` (or a `#fragment` a client should not have sent).
    pub fn path(&self) -> &[u8] {
        let t = self.origin_target();
        match memchr::memchr2(b'?', b'#', t) {
            Some(i) => &t[..i],
            None => t,
        }
    }

    /// The target after `?`, up to a `#fragment`; empty when there is none.
    pub fn query(&self) -> &[u8] {
        let t = self.target();
        let t = match memchr::memchr(b'#', t) {
            Some(i) => &t[..i],
            None => t,
        };
        match memchr::memchr(b'?', t) {
            Some(i) => &t[i + 1..],
            None => b"",
        }
    }

    pub fn header_name(&self, h: &HeaderIndex) -> &[u8] {
        h.name_in(&self.bytes)
    }

    pub fn header_value(&self, h: &HeaderIndex) -> &[u8] {
        h.value_in(&self.bytes)
    }

    /// The first value of a header, matched case-insensitively.
    pub fn header(&self, name: &[u8]) -> Option<&[u8]> {
        find_header(&self.bytes, &self.headers, name)
    }

    /// The content length declared, 0 for no body, `None` for chunked.
    pub fn content_length(&self) -> Option<u64> {
        match self.body {
            BodyKind::Length(n) => Some(n),
            BodyKind::Chunked => None,
        }
    }
}

/// Offsets and framing of a head, before it is split off the read buffer.
pub(crate) struct RawHead {
    pub len: usize,
    pub method: (u32, u32),
    pub target: (u32, u32),
    pub version: Version,
    pub headers: Vec<HeaderIndex>,
    pub keep_alive: bool,
    pub expect_continue: bool,
    pub body: BodyKind,
}

impl RawHead {
    pub fn into_head(self, bytes: Bytes) -> RequestHead {
        RequestHead {
            bytes,
            method: self.method,
            target: self.target,
            version: self.version,
            headers: self.headers,
            keep_alive: self.keep_alive,
            expect_continue: self.expect_continue,
            body: self.body,
        }
    }
}

fn parse_content_length(v: &[u8]) -> Result<u64, Error> {
    parse_length(v).ok_or(Error::InvalidContentLength)
}

/// Where the head at the start of `buf` first breaks a size limit: the
/// length of the shortest prefix of `buf` that breaks one, and the error.
///
/// Lines are measured as sent (CR included, LF not, with one byte of slack
/// for the CR); the head runs to its first empty line, the empty lines that
/// httparse skips before the request line included. Deciding by the shortest
/// breaking prefix gives the same answer however the bytes were cut into
/// reads, and refuses a slow or endless head before it fills memory.
fn over_limit(buf: &[u8], limits: &Limits) -> Option<(usize, Error)> {
    let head_over = (limits.max_head.saturating_add(1), Error::HeadTooLarge);
    let mut start = skip_empty_lines(buf);
    let mut max_line = limits.max_request_line;
    let mut line_error = Error::RequestLineTooLong;
    loop {
        if start > limits.max_head {
            return Some(head_over);
        }
        let line = &buf[start..];
        let end = memchr::memchr(b'\n', line);
        if end.unwrap_or(line.len()) > max_line.saturating_add(1) {
            let at = start.saturating_add(max_line).saturating_add(2);
            return Some(if at <= head_over.0 {
                (at, line_error)
            } else {
                head_over
            });
        }
        match end {
            None => return (buf.len() > limits.max_head).then_some(head_over),
            // The empty line that ends the head.
            Some(i) if i == 0 || (i == 1 && line[0] == b'\r') => {
                return (start + i + 1 > limits.max_head).then_some(head_over);
            }
            Some(i) => start += i + 1,
        }
        max_line = limits.max_header_line;
        line_error = Error::HeaderLineTooLong;
    }
}

/// Where the request line starts: httparse skips empty lines before it.
fn skip_empty_lines(buf: &[u8]) -> usize {
    let mut i = 0;
    loop {
        match buf[i..] {
            [b'\r', b'\n', ..] => i += 2,
            [b'\n', ..] => i += 1,
            _ => return i,
        }
    }
}

/// httparse's error on `buf` as a request head, if any.
fn httparse_error(buf: &[u8], max_headers: usize) -> Option<httparse::Error> {
    let mut storage: [MaybeUninit<httparse::Header<'_>>; MAX_HEADERS_CAP] =
        [const { MaybeUninit::uninit() }; MAX_HEADERS_CAP];
    let mut req = httparse::Request::new(&mut []);
    httparse::ParserConfig::default()
        .parse_request_with_uninit_headers(&mut req, buf, &mut storage[..max_headers])
        .err()
}

fn map_httparse(e: httparse::Error, buf: &[u8], max_headers: usize) -> Error {
    match e {
        httparse::Error::HeaderName => {
            // A line that starts with whitespace continues the previous one
            // (obs-fold). It is the error if httparse stopped at the first
            // such line, that is if the head parses up to it; a bad name
            // before it is a bad name, whatever arrived after.
            let fold = [&b"\n "[..], b"\n\t"]
                .iter()
                .filter_map(|p| memchr::memmem::find(buf, p))
                .min();
            match fold {
                Some(i) if httparse_error(&buf[..=i], max_headers).is_none() => Error::ObsFold,
                _ => Error::InvalidHeaderName,
            }
        }
        httparse::Error::HeaderValue => Error::InvalidHeaderValue,
        httparse::Error::TooManyHeaders => Error::TooManyHeaders,
        httparse::Error::Version => {
            // httparse has read "method SP target SP" and refused the version,
            // maybe before all of it arrived: decide from the bytes it saw,
            // so the answer does not depend on where a read ended.
            let line = &buf[skip_empty_lines(buf)..];
            match line.splitn(3, |&b| b == b' ').nth(2).unwrap_or_default() {
                [b'H', b'T', b'T', b'P', b'/', major, rest @ ..]
                    if major.is_ascii_digit()
                        && (*major != b'1'
                            || rest.first().is_some_and(u8::is_ascii_digit)
                            || matches!(rest, [b'.', minor, ..] if minor.is_ascii_digit())) =>
                {
                    Error::UnsupportedVersion
                }
                _ => Error::BadRequestLine,
            }
        }
        _ => Error::BadRequestLine,
    }
}

/// Parses a head at the start of `buf`: `Ok(None)` when more bytes are needed.
pub(crate) fn parse_head(buf: &[u8], limits: &Limits) -> Result<Option<RawHead>, Error> {
    let mut storage: [MaybeUninit<httparse::Header<'_>>; MAX_HEADERS_CAP] =
        [const { MaybeUninit::uninit() }; MAX_HEADERS_CAP];
    let max_headers = limits.max_headers.min(MAX_HEADERS_CAP);
    let mut req = httparse::Request::new(&mut []);
    let status = httparse::ParserConfig::default().parse_request_with_uninit_headers(
        &mut req,
        buf,
        &mut storage[..max_headers],
    );
    let len = match status {
        Ok(httparse::Status::Complete(len)) => {
            // A head no longer than any limit cannot break one: skip the scan.
            let short = limits
                .max_head
                .min(limits.max_request_line)
                .min(limits.max_header_line);
            if len > short {
                if let Some((_, e)) = over_limit(&buf[..len], limits) {
                    return Err(e);
                }
            }
            len
        }
        Ok(httparse::Status::Partial) => {
            return match over_limit(buf, limits) {
                Some((_, e)) => Err(e),
                None => Ok(None),
            };
        }
        // A limit broken before the byte httparse refused comes first: look
        // for a syntax error only in the bytes before the limit.
        Err(e) => {
            return Err(match over_limit(buf, limits) {
                Some((at, limit)) => {
                    let within = &buf[..at - 1];
                    httparse_error(within, max_headers)
                        .map_or(limit, |e| map_httparse(e, within, max_headers))
                }
                None => map_httparse(e, buf, max_headers),
            });
        }
    };
    let method = req.method.expect("complete request has a method");
    let target = req.path.expect("complete request has a target");
    let version = if req.version == Some(0) {
        Version::Http10
    } else {
        Version::Http11
    };

    let mut headers = Vec::with_capacity(req.headers.len());
    let mut content_length: Option<u64> = None;
    let mut te = TransferCodings::default();
    let mut hosts = 0;
    let mut connection = ConnectionOptions::default();
    let mut expect_continue = false;
    for h in req.headers.iter() {
        let name = h.name.as_bytes();
        let value = h.value;
        headers.push(HeaderIndex {
            name: offsets(buf, name),
            value: offsets(buf, value),
        });
        // Dispatch on length first: most headers are none of these.
        match name.len() {
            4 if name.eq_ignore_ascii_case(b"host") => hosts += 1,
            6 if name.eq_ignore_ascii_case(b"expect") => {
                expect_continue = trim(value).eq_ignore_ascii_case(b"100-continue");
            }
            10 if name.eq_ignore_ascii_case(b"connection") => connection.add(value),
            14 if name.eq_ignore_ascii_case(b"content-length") => {
                if content_length.is_some() {
                    return Err(Error::DuplicateContentLength);
                }
                content_length = Some(parse_content_length(value)?);
            }
            17 if name.eq_ignore_ascii_case(b"transfer-encoding") => te.add(value),
            _ => {}
        }
    }
    if version == Version::Http11 && hosts == 0 {
        return Err(Error::MissingHost);
    }
    if hosts > 1 {
        return Err(Error::DuplicateHost);
    }
    let body = if te.seen {
        if version == Version::Http10 {
            return Err(Error::TransferEncodingInHttp10);
        }
        if content_length.is_some() {
            return Err(Error::LengthAndTransferEncoding);
        }
        if !te.chunked_last || te.chunked_count > 1 {
            return Err(Error::ChunkedNotLast);
        }
        if te.other {
            return Err(Error::UnsupportedTransferEncoding);
        }
        BodyKind::Chunked
    } else {
        BodyKind::Length(content_length.unwrap_or(0))
    };
    let keep_alive = match version {
        Version::Http11 => !connection.close,
        Version::Http10 => connection.keep_alive && !connection.close,
    };
    Ok(Some(RawHead {
        len,
        method: offsets(buf, method.as_bytes()),
        target: offsets(buf, target.as_bytes()),
        version,
        headers,
        keep_alive,
        expect_continue: expect_continue && version == Version::Http11,
        body,
    }))
}

/// An absolute-form target (`http://` or `https://`, any case) without its scheme.
fn strip_scheme(t: &[u8]) -> Option<&[u8]> {
    if t.len() > 7 && t[..7].eq_ignore_ascii_case(b"http://") {
        Some(&t[7..])
    } else if t.len() > 8 && t[..8].eq_ignore_ascii_case(b"https://") {
        Some(&t[8..])
    } else {
        None
    }
}
