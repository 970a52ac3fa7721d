//! The response head: parsed by httparse, then framed by RFC 9112 section 6.3.
//! Names and values stay as offsets into the head bytes, as on the server side,
//! so nothing is decoded or copied until someone asks for it.

use std::mem::MaybeUninit;

use bytes::Bytes;

use super::{ResponseError, ResponseLimits};
use crate::http1::common::{
    find_header, list_items, offsets, parse_length, slice, ConnectionOptions, HeaderIndex,
    TransferCodings, Version, MAX_HEADERS_CAP,
};

/// How the body of a response is framed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ResponseBody {
    /// No body whatever the headers say: a response to HEAD, 204 or 304.
    Empty,
    /// Content-Length bytes.
    Length(u64),
    /// The chunked transfer coding.
    Chunked,
    /// Everything until the server closes the connection.
    UntilClose,
}

/// A parsed, framed final response head.
#[derive(Clone, Debug)]
pub struct ResponseHead {
    /// The head as received, status line to the empty line.
    pub bytes: Bytes,
    pub status: u16,
    pub reason: (u32, u32),
    pub version: Version,
    pub headers: Vec<HeaderIndex>,
    /// Whether the connection may carry another request after this response.
    pub keep_alive: bool,
    pub body: ResponseBody,
}

impl ResponseHead {
    pub fn reason(&self) -> &[u8] {
        slice(&self.bytes, self.reason)
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

    /// The declared body length: `Some(0)` for no body, `None` when unknown
    /// in advance (chunked, until close).
    pub fn content_length(&self) -> Option<u64> {
        match self.body {
            ResponseBody::Empty => Some(0),
            ResponseBody::Length(n) => Some(n),
            ResponseBody::Chunked | ResponseBody::UntilClose => None,
        }
    }
}

/// What the head at the start of the buffer turned out to be.
pub(crate) enum Parsed {
    /// An interim (1xx) response of this many bytes, to skip.
    Interim(usize),
    /// A final response head of `len` bytes, before it is split off the buffer.
    Final(RawHead),
}

pub(crate) struct RawHead {
    pub len: usize,
    pub status: u16,
    pub reason: (u32, u32),
    pub version: Version,
    pub headers: Vec<HeaderIndex>,
    pub keep_alive: bool,
    pub body: ResponseBody,
}

impl RawHead {
    pub fn into_head(self, bytes: Bytes) -> ResponseHead {
        ResponseHead {
            bytes,
            status: self.status,
            reason: self.reason,
            version: self.version,
            headers: self.headers,
            keep_alive: self.keep_alive,
            body: self.body,
        }
    }
}

fn parse_decimal(v: &[u8]) -> Result<u64, ResponseError> {
    parse_length(v).ok_or(ResponseError::InvalidContentLength)
}

fn map_httparse(e: httparse::Error, buf: &[u8]) -> ResponseError {
    match e {
        httparse::Error::HeaderName | httparse::Error::HeaderValue => ResponseError::InvalidHeader,
        httparse::Error::TooManyHeaders => ResponseError::TooManyHeaders,
        httparse::Error::Version => {
            // httparse refuses the version at its first wrong byte; "HTTP/"
            // and a digit is a version we do not speak, anything else garbage.
            let start = buf.iter().position(|&b| b != b'\r' && b != b'\n');
            match start.map(|i| &buf[i..]) {
                Some([b'H', b'T', b'T', b'P', b'/', d, ..]) if d.is_ascii_digit() => {
                    ResponseError::UnsupportedVersion
                }
                _ => ResponseError::BadStatusLine,
            }
        }
        _ => ResponseError::BadStatusLine,
    }
}

/// Parses the head at the start of `buf`: `Ok(None)` when more bytes are
/// needed. `head_request` says whether it answers a HEAD request.
///
/// Only the first `max_head` bytes are ever looked at, so the answer (a head,
/// an error, or "need more") is the same however the bytes were cut into reads.
pub(crate) fn parse_head(
    buf: &[u8],
    limits: &ResponseLimits,
    head_request: bool,
) -> Result<Option<Parsed>, ResponseError> {
    let window = &buf[..buf.len().min(limits.max_head)];
    let mut storage: [MaybeUninit<httparse::Header<'_>>; MAX_HEADERS_CAP] =
        [const { MaybeUninit::uninit() }; MAX_HEADERS_CAP];
    let max_headers = limits.max_headers.min(MAX_HEADERS_CAP);
    let mut resp = httparse::Response::new(&mut []);
    let status = httparse::ParserConfig::default().parse_response_with_uninit_headers(
        &mut resp,
        window,
        &mut storage[..max_headers],
    );
    let len = match status {
        Ok(httparse::Status::Complete(len)) => len,
        Ok(httparse::Status::Partial) if window.len() >= limits.max_head => {
            return Err(ResponseError::HeadTooLarge)
        }
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(e) => return Err(map_httparse(e, window)),
    };
    let code = resp.code.expect("complete response has a status");
    if !(100..=999).contains(&code) {
        return Err(ResponseError::BadStatusLine);
    }
    if code == 101 {
        return Err(ResponseError::UnexpectedSwitchingProtocols);
    }
    if code < 200 {
        return Ok(Some(Parsed::Interim(len)));
    }
    let version = if resp.version == Some(0) {
        Version::Http10
    } else {
        Version::Http11
    };

    let mut headers = Vec::with_capacity(resp.headers.len());
    let mut content_length: Option<u64> = None;
    let mut te = TransferCodings::default();
    let mut connection = ConnectionOptions::default();
    for h in resp.headers.iter() {
        let name = h.name.as_bytes();
        let value = h.value;
        headers.push(HeaderIndex {
            name: offsets(buf, name),
            value: offsets(buf, value),
        });
        match name.len() {
            10 if name.eq_ignore_ascii_case(b"connection") => connection.add(value),
            14 if name.eq_ignore_ascii_case(b"content-length") => {
                // RFC 9110 8.6: a list of one repeated value may be taken as
                // that value; values that differ cannot frame anything.
                let mut items = list_items(value).peekable();
                if items.peek().is_none() {
                    return Err(ResponseError::InvalidContentLength);
                }
                for item in items {
                    let n = parse_decimal(item)?;
                    if content_length.is_some_and(|m| m != n) {
                        return Err(ResponseError::ConflictingContentLength);
                    }
                    content_length = Some(n);
                }
            }
            17 if name.eq_ignore_ascii_case(b"transfer-encoding") => te.add(value),
            _ => {}
        }
    }

    let body = if head_request || code == 204 || code == 304 {
        ResponseBody::Empty
    } else if te.seen {
        if version == Version::Http10 {
            return Err(ResponseError::TransferEncodingInHttp10);
        }
        if content_length.is_some() {
            return Err(ResponseError::LengthAndTransferEncoding);
        }
        // We ask for no coding but chunked: anything else (gzip, a repeated
        // chunked) would hand the caller bytes it cannot read.
        if !te.chunked_last || te.chunked_count > 1 || te.other {
            return Err(ResponseError::UnsupportedTransferEncoding);
        }
        ResponseBody::Chunked
    } else if let Some(n) = content_length {
        ResponseBody::Length(n)
    } else {
        ResponseBody::UntilClose
    };
    let keep_alive = !connection.close
        && body != ResponseBody::UntilClose
        && (version == Version::Http11 || connection.keep_alive);
    let reason = resp.reason.unwrap_or("");
    let reason = if reason.is_empty() {
        (0, 0)
    } else {
        offsets(buf, reason.as_bytes())
    };
    Ok(Some(Parsed::Final(RawHead {
        len,
        status: code,
        reason,
        version,
        headers,
        keep_alive,
        body,
    })))
}
