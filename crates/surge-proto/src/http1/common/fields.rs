//! Small helpers over header field bytes, shared by the request (server) and
//! response (client) head parsers.

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
