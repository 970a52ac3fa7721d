//! Header field rules shared by the request (server) and response (client)
//! sides: offsets into head bytes, list and token syntax (RFC 9110 5.6), and
//! the two framing headers both sides read the same way, Connection and
//! Transfer-Encoding.

/// RFC 9110 tchar: the bytes a token (a method, a header name) is made of.
#[inline]
pub(crate) fn is_tchar(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

/// A non-empty RFC 9110 token.
pub fn is_token(s: &[u8]) -> bool {
    !s.is_empty() && s.iter().all(|&b| is_tchar(b))
}

/// The bytes of `r` (a start and end offset) in `bytes`.
#[inline]
pub(crate) fn slice(bytes: &[u8], r: (u32, u32)) -> &[u8] {
    &bytes[r.0 as usize..r.1 as usize]
}

/// Where `part`, a sub-slice of `base`, sits in it.
pub(crate) fn offsets(base: &[u8], part: &[u8]) -> (u32, u32) {
    let start = part.as_ptr() as usize - base.as_ptr() as usize;
    (start as u32, (start + part.len()) as u32)
}

/// Strips optional whitespace (SP, HTAB) at both ends (RFC 9110 5.6.3).
pub(crate) fn trim(mut v: &[u8]) -> &[u8] {
    while let [b' ' | b'\t', rest @ ..] = v {
        v = rest;
    }
    while let [rest @ .., b' ' | b'\t'] = v {
        v = rest;
    }
    v
}

/// Comma-separated list elements, trimmed, empty ones skipped (RFC 9110 5.6.1).
pub(crate) fn list_items(v: &[u8]) -> impl Iterator<Item = &[u8]> {
    v.split(|&b| b == b',').map(trim).filter(|s| !s.is_empty())
}

/// A Content-Length value: 1 to 19 decimal digits and nothing else, after OWS.
pub(crate) fn parse_length(v: &[u8]) -> Option<u64> {
    let v = trim(v);
    if v.is_empty() || v.len() > 19 || !v.iter().all(u8::is_ascii_digit) {
        return None;
    }
    Some(v.iter().fold(0u64, |n, d| n * 10 + u64::from(d - b'0')))
}

/// The `close` and `keep-alive` options of every Connection field of a head.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct ConnectionOptions {
    pub close: bool,
    pub keep_alive: bool,
}

impl ConnectionOptions {
    /// Reads one Connection field value.
    pub fn add(&mut self, value: &[u8]) {
        for token in list_items(value) {
            if token.eq_ignore_ascii_case(b"close") {
                self.close = true;
            } else if token.eq_ignore_ascii_case(b"keep-alive") {
                self.keep_alive = true;
            }
        }
    }
}

/// The transfer codings of every Transfer-Encoding field of a head, in order.
/// Each side decides from these what it accepts.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct TransferCodings {
    /// A Transfer-Encoding field was present.
    pub seen: bool,
    /// The last coding is `chunked`.
    pub chunked_last: bool,
    /// How many times `chunked` appears.
    pub chunked_count: u32,
    /// A coding other than `chunked` appears.
    pub other: bool,
}

impl TransferCodings {
    /// Reads one Transfer-Encoding field value.
    pub fn add(&mut self, value: &[u8]) {
        self.seen = true;
        for coding in list_items(value) {
            if coding.eq_ignore_ascii_case(b"chunked") {
                self.chunked_count += 1;
                self.chunked_last = true;
            } else {
                self.other = true;
                self.chunked_last = false;
            }
        }
    }
}
