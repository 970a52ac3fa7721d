//! The access log's formatting: a format compiled from gunicorn's atoms, the
//! request headers it reads found in one pass, and the escaping that keeps a
//! line one line (see `access_log` for the log itself).

use base64::Engine;
use memchr::memmem;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use surge_proto::http1::common::Version;
use surge_proto::http1::server::RequestHead;

/// One piece of a compiled format.
pub(super) enum Atom {
    Literal(Vec<u8>),
    RemoteAddr,
    Dash,
    /// `%(u)s`: the user of a Basic Authorization header (its slot).
    User(usize),
    Time,
    RequestLine,
    Method,
    Path,
    Query,
    Protocol,
    Status,
    /// `%(b)s`: the body bytes sent.
    BodyBytes,
    Seconds,
    Millis,
    Micros,
    DecimalSeconds,
    Pid,
    /// A request header, by its slot in `Wanted` (`%(f)s`, `%(a)s`, `%({name})i`).
    RequestHeader(usize),
    ResponseHeader(Vec<u8>),
}

/// The request headers a format reads, lowercase, each given a slot: a line
/// looks them all up in one pass over the request's headers (a lookup per
/// atom scanned the headers once per atom).
pub(super) struct Wanted {
    names: Vec<Vec<u8>>,
    /// Each name is made of lowercase letters, digits and `-` (see `same_name`).
    simple: Vec<bool>,
    /// By name length (`LONG` and over together): the slots (bits, the first
    /// `MAX_SLOTS`) whose name has that length.
    by_len: [u32; LONG + 1],
}

/// Name lengths from here on share one entry of `Wanted::by_len`.
pub(super) const LONG: usize = 64;

impl Default for Wanted {
    fn default() -> Self {
        Wanted {
            names: Vec::new(),
            simple: Vec::new(),
            by_len: [0; LONG + 1],
        }
    }
}

/// A request header's name against a wanted (lowercase) one of the same
/// length. Eight bytes at a time with the ASCII case bit set: for a name
/// httparse accepted (token characters only), `b | 0x20` equals a lowercase
/// letter, a digit or `-` only when `b` is that character in either case, so
/// the fast form is exact for wanted names made of those; others take
/// `eq_ignore_ascii_case` (a byte at a time, ~13 instructions a byte).
pub(super) fn same_name(name: &[u8], wanted: &[u8], simple: bool) -> bool {
    const CASE: u64 = u64::from_ne_bytes([0x20; 8]);
    if !simple {
        return name.eq_ignore_ascii_case(wanted);
    }
    let mut name_chunks = name.chunks_exact(8);
    let mut wanted_chunks = wanted.chunks_exact(8);
    for (a, b) in (&mut name_chunks).zip(&mut wanted_chunks) {
        if load8(a) | CASE != load8(b) {
            return false;
        }
    }
    name_chunks
        .remainder()
        .iter()
        .zip(wanted_chunks.remainder())
        .all(|(&a, &b)| a | 0x20 == b)
}

/// Slots filled per line on the stack; a format naming more request headers
/// than this looks the rest up one by one.
pub(super) const MAX_SLOTS: usize = 8;

impl Wanted {
    pub(super) fn slot(&mut self, name: &[u8]) -> usize {
        let name = name.to_ascii_lowercase();
        match self.names.iter().position(|n| *n == name) {
            Some(i) => i,
            None => {
                let simple = name
                    .iter()
                    .all(|&b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
                let slot = self.names.len();
                if slot < MAX_SLOTS {
                    self.by_len[name.len().min(LONG)] |= 1 << slot;
                }
                self.names.push(name);
                self.simple.push(simple);
                slot
            }
        }
    }

    /// The values of the wanted headers of `head` (the first of each name).
    pub(super) fn find<'a>(&self, head: Option<&'a RequestHead>) -> [Option<&'a [u8]>; MAX_SLOTS] {
        let mut found = [None; MAX_SLOTS];
        let Some(head) = head else {
            return found;
        };
        // Slots still to fill, as bits.
        let mut missing: u32 = (1 << self.names.len().min(MAX_SLOTS)) - 1;
        for h in &head.headers {
            let name = head.header_name(h);
            // Most headers have a length no wanted name has.
            let mut candidates = self.by_len[name.len().min(LONG)] & missing;
            while candidates != 0 {
                let slot = candidates.trailing_zeros() as usize;
                candidates &= candidates - 1;
                let wanted = &self.names[slot];
                if wanted.len() == name.len() && same_name(name, wanted, self.simple[slot]) {
                    found[slot] = Some(head.header_value(h));
                    missing &= !(1 << slot);
                    if missing == 0 {
                        return found;
                    }
                    break;
                }
            }
        }
        found
    }

    pub(super) fn value<'a>(
        &self,
        head: Option<&'a RequestHead>,
        found: &[Option<&'a [u8]>; MAX_SLOTS],
        slot: usize,
    ) -> Option<&'a [u8]> {
        match found.get(slot) {
            Some(v) => *v,
            None => head.and_then(|h| h.header(&self.names[slot])),
        }
    }
}

pub(super) fn atom(name: &str, wanted: &mut Wanted) -> PyResult<Atom> {
    Ok(match name {
        "h" => Atom::RemoteAddr,
        "l" => Atom::Dash,
        "u" => Atom::User(wanted.slot(b"authorization")),
        "t" => Atom::Time,
        "r" => Atom::RequestLine,
        "m" => Atom::Method,
        "U" => Atom::Path,
        "q" => Atom::Query,
        "H" => Atom::Protocol,
        "s" => Atom::Status,
        "b" | "B" => Atom::BodyBytes,
        "f" => Atom::RequestHeader(wanted.slot(b"referer")),
        "a" => Atom::RequestHeader(wanted.slot(b"user-agent")),
        "T" => Atom::Seconds,
        "M" => Atom::Millis,
        "D" => Atom::Micros,
        "L" => Atom::DecimalSeconds,
        "p" => Atom::Pid,
        _ if name.len() > 3 && name.starts_with('{') && name.ends_with("}i") => {
            Atom::RequestHeader(wanted.slot(&name.as_bytes()[1..name.len() - 2]))
        }
        _ if name.len() > 3 && name.starts_with('{') && name.ends_with("}o") => {
            Atom::ResponseHeader(name[1..name.len() - 2].to_ascii_lowercase().into_bytes())
        }
        _ => {
            return Err(PyValueError::new_err(format!(
                "unknown access log atom %({name})s (known: h l u t r m U q H s b B f a T M D \
                 L p, {{header}}i, {{header}}o)"
            )))
        }
    })
}

/// Compiles a gunicorn-style format: `%(name)s` atoms, `%%` for a percent sign.
pub(super) fn compile(format: &str, wanted: &mut Wanted) -> PyResult<Vec<Atom>> {
    let mut atoms = Vec::new();
    let mut lit = Vec::new();
    let mut rest = format;
    while let Some(i) = rest.find('%') {
        lit.extend_from_slice(&rest.as_bytes()[..i]);
        let after = &rest[i + 1..];
        if let Some(r) = after.strip_prefix('%') {
            lit.push(b'%');
            rest = r;
            continue;
        }
        let Some(body) = after.strip_prefix('(') else {
            return Err(PyValueError::new_err(format!(
                "access log format: '%' must start %(name)s or %%, at {:?}",
                &rest[i..]
            )));
        };
        let Some(end) = body.find(")s") else {
            return Err(PyValueError::new_err(format!(
                "access log format: unterminated atom at {:?}",
                &rest[i..]
            )));
        };
        if !lit.is_empty() {
            atoms.push(Atom::Literal(std::mem::take(&mut lit)));
        }
        atoms.push(atom(&body[..end], wanted)?);
        rest = &body[end + 2..];
    }
    lit.extend_from_slice(rest.as_bytes());
    if !lit.is_empty() {
        atoms.push(Atom::Literal(lit));
    }
    Ok(atoms)
}

pub(super) const HEX: &[u8; 16] = b"0123456789abcdef";

/// Bytes a log line never carries raw: controls (a forged newline would forge
/// a line), DEL, the quote and the backslash (they would break the quoting).
pub(super) fn needs_escape(b: u8) -> bool {
    b < 0x20 || b == 0x7f || b == b'"' || b == b'\\'
}

/// Which bytes of the eight in `w` need escaping: a bit in the lowest such
/// byte and none below it (bits above it may be spurious).
///
/// Hand-written because it runs on every atom of every line, where almost
/// every value is clean: eight bytes are checked at a time (SWAR) instead of
/// four comparisons a byte (callgrind, benchmarks/ops). For each test,
/// `(x - 0x01..) & !x & 0x80..` flags the lowest zero byte of `x` exactly (the
/// borrow only runs upwards), and `(w - 0x20..) & !w & 0x80..` the lowest byte
/// below 0x20; the lowest bit of the union is the first byte to escape.
#[inline]
pub(super) fn escape_bits(w: u64) -> u64 {
    const ONES: u64 = u64::from_ne_bytes([0x01; 8]);
    const HIGH: u64 = u64::from_ne_bytes([0x80; 8]);
    let zero_byte = |x: u64| x.wrapping_sub(ONES) & !x & HIGH;
    (w.wrapping_sub(ONES * 0x20) & !w & HIGH)
        | zero_byte(w ^ (ONES * 0x7f))
        | zero_byte(w ^ (ONES * u64::from(b'"')))
        | zero_byte(w ^ (ONES * u64::from(b'\\')))
}

pub(super) fn load8(bytes: &[u8]) -> u64 {
    u64::from_le_bytes(bytes[..8].try_into().unwrap_or([0; 8]))
}

/// The index of the first byte of `value` that `needs_escape`.
pub(super) fn first_escape(value: &[u8]) -> Option<usize> {
    first_hit::<false>(value)
}

/// The index of the first byte of `value` that `needs_escape` or is not
/// ASCII (where JSON's UTF-8 check must begin).
pub(super) fn first_json_special(value: &[u8]) -> Option<usize> {
    first_hit::<true>(value)
}

/// `escape_bits`, with the bytes >= 0x80 flagged too when `NON_ASCII` (their
/// high bit: exact, and never below a byte flagged already).
#[inline]
fn hit_bits<const NON_ASCII: bool>(w: u64) -> u64 {
    const HIGH: u64 = u64::from_ne_bytes([0x80; 8]);
    if NON_ASCII {
        escape_bits(w) | (w & HIGH)
    } else {
        escape_bits(w)
    }
}

#[inline]
fn first_hit<const NON_ASCII: bool>(value: &[u8]) -> Option<usize> {
    let n = value.len();
    if n < 4 {
        return value
            .iter()
            .position(|&b| needs_escape(b) || (NON_ASCII && b >= 0x80));
    }
    if n < 8 {
        // Two overlapping 4-byte words as one 8-byte one: byte i < 4 is
        // value[i], byte i >= 4 is value[n + i - 8].
        let lo = u32::from_le_bytes(value[..4].try_into().unwrap_or([0; 4]));
        let hi = u32::from_le_bytes(value[n - 4..].try_into().unwrap_or([0; 4]));
        let hits = hit_bits::<NON_ASCII>(u64::from(lo) | (u64::from(hi) << 32));
        return (hits != 0).then(|| {
            let i = (hits.trailing_zeros() / 8) as usize;
            if i < 4 {
                i
            } else {
                n + i - 8
            }
        });
    }
    let mut at = 0;
    while at + 8 <= n {
        let hits = hit_bits::<NON_ASCII>(load8(&value[at..]));
        if hits != 0 {
            return Some(at + (hits.trailing_zeros() / 8) as usize);
        }
        at += 8;
    }
    if at < n {
        // The last eight bytes, overlapping ones already found clean.
        let hits = hit_bits::<NON_ASCII>(load8(&value[n - 8..]));
        if hits != 0 {
            return Some(n - 8 + (hits.trailing_zeros() / 8) as usize);
        }
    }
    None
}

pub(super) fn escape_into(out: &mut Vec<u8>, mut value: &[u8]) {
    // Quotes, backslashes and control bytes are escaped as \xHH (as nginx
    // does), so a client cannot forge a line or break the quoting. Clean runs
    // are copied whole: almost every value is one.
    while let Some(i) = first_escape(value) {
        out.extend_from_slice(&value[..i]);
        let b = value[i];
        out.extend_from_slice(&[b'\\', b'x', HEX[(b >> 4) as usize], HEX[(b & 15) as usize]]);
        value = &value[i + 1..];
    }
    out.extend_from_slice(value);
}

pub(super) fn json_string(out: &mut Vec<u8>, value: &[u8]) {
    // Clean runs are copied whole. ASCII (almost every value) is escaped as it
    // is scanned; from the first byte >= 0x80 on the rest is checked as UTF-8,
    // invalid sequences becoming U+FFFD (a log line must stay valid JSON): a
    // check of every value cost about a hundred instructions each.
    out.push(b'"');
    let mut rest = value;
    while let Some(i) = first_json_special(rest) {
        out.extend_from_slice(&rest[..i]);
        if rest[i] >= 0x80 {
            let text = String::from_utf8_lossy(&rest[i..]);
            let mut text = text.as_bytes();
            while let Some(j) = first_escape(text) {
                out.extend_from_slice(&text[..j]);
                json_escape(out, text[j]);
                text = &text[j + 1..];
            }
            out.extend_from_slice(text);
            out.push(b'"');
            return;
        }
        json_escape(out, rest[i]);
        rest = &rest[i + 1..];
    }
    out.extend_from_slice(rest);
    out.push(b'"');
}

/// A byte that `needs_escape`, escaped for a JSON string.
fn json_escape(out: &mut Vec<u8>, c: u8) {
    match c {
        b'"' => out.extend_from_slice(b"\\\""),
        b'\\' => out.extend_from_slice(b"\\\\"),
        c => out.extend_from_slice(&[
            b'\\',
            b'u',
            b'0',
            b'0',
            HEX[(c >> 4) as usize],
            HEX[(c & 15) as usize],
        ]),
    }
}

pub(super) fn json_opt(out: &mut Vec<u8>, value: Option<&[u8]>) {
    match value {
        Some(v) => json_string(out, v),
        None => out.extend_from_slice(b"null"),
    }
}

pub(super) fn push_int(out: &mut Vec<u8>, n: impl itoa::Integer) {
    out.extend_from_slice(itoa::Buffer::new().format(n).as_bytes());
}

/// `micros` as seconds with six decimals (gunicorn's `%(L)s`).
pub(super) fn push_decimal_seconds(out: &mut Vec<u8>, micros: u64) {
    push_int(out, micros / 1_000_000);
    out.push(b'.');
    let mut buf = itoa::Buffer::new();
    let frac = buf.format(micros % 1_000_000).as_bytes();
    out.extend(std::iter::repeat_n(b'0', 6 - frac.len()));
    out.extend_from_slice(frac);
}

/// The user name of a `Basic` Authorization header value (gunicorn's `%(u)s`).
pub(super) fn basic_user(value: &[u8]) -> Option<Vec<u8>> {
    let (scheme, creds) = value.split_at(value.iter().position(|&b| b == b' ')?);
    if !scheme.eq_ignore_ascii_case(b"basic") {
        return None;
    }
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(creds.trim_ascii())
        .ok()?;
    let end = decoded
        .iter()
        .position(|&b| b == b':')
        .unwrap_or(decoded.len());
    Some(decoded[..end].to_vec())
}

/// A header of an encoded response head, by lowercase name.
pub(super) fn response_header<'a>(head: &'a [u8], name: &[u8]) -> Option<&'a [u8]> {
    let mut lines = head.split(|&b| b == b'\n').skip(1);
    lines.find_map(|line| {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        let colon = line.iter().position(|&b| b == b':')?;
        line[..colon]
            .eq_ignore_ascii_case(name)
            .then(|| line[colon + 1..].trim_ascii())
    })
}

pub(super) fn protocol(head: &RequestHead) -> &'static [u8] {
    match head.version {
        Version::Http11 => b"HTTP/1.1",
        Version::Http10 => b"HTTP/1.0",
    }
}

/// The status of an encoded response head (`HTTP/1.x NNN ...`), 0 if none.
pub(super) fn head_status(data: &[u8]) -> u16 {
    match data.get(9..12) {
        Some(&[a, b, c]) if a.is_ascii_digit() && b.is_ascii_digit() && c.is_ascii_digit() => {
            u16::from(a - b'0') * 100 + u16::from(b - b'0') * 10 + u16::from(c - b'0')
        }
        _ => 0,
    }
}

/// Status and body length of an encoded response (head and body), for
/// responses rendered in Python.
pub(super) fn parse_response(data: &[u8]) -> (u16, u64, &[u8]) {
    let status = head_status(data);
    match memmem::find(data, b"\r\n\r\n") {
        Some(i) => (status, (data.len() - i - 4) as u64, &data[..i + 2]),
        None => (status, 0, data),
    }
}

/// The JSON form's request headers, by slot (see `Wanted`).
pub(super) const JSON_REFERER: usize = 0;
pub(super) const JSON_USER_AGENT: usize = 1;
pub(super) const JSON_REQUEST_ID: usize = 2;
pub(super) const JSON_AUTHORIZATION: usize = 3;

#[cfg(test)]
mod tests {
    use super::*;

    fn naive(value: &[u8]) -> Option<usize> {
        value.iter().position(|&b| needs_escape(b))
    }

    #[test]
    fn first_escape_agrees_with_a_byte_by_byte_scan() {
        // Every byte value at every position of lengths around the 8-byte
        // chunks, in a clean run and after other bytes that need escaping.
        for len in 0..20 {
            for at in 0..len {
                for b in 0..=255u8 {
                    let mut v = vec![b'a'; len];
                    v[at] = b;
                    assert_eq!(first_escape(&v), naive(&v), "{v:?}");
                    let mut high = vec![0xffu8; len];
                    high[at] = b;
                    assert_eq!(first_escape(&high), naive(&high), "{high:?}");
                    if at + 1 < len {
                        v[at + 1] = b'"';
                        assert_eq!(first_escape(&v), naive(&v), "{v:?}");
                    }
                }
            }
        }
    }

    /// `json_string` as it was written first: the whole value through
    /// `from_utf8_lossy`, then escaped.
    fn json_naive(value: &[u8]) -> Vec<u8> {
        let text = String::from_utf8_lossy(value);
        let mut out = vec![b'"'];
        for &b in text.as_bytes() {
            if needs_escape(b) {
                json_escape(&mut out, b);
            } else {
                out.push(b);
            }
        }
        out.push(b'"');
        out
    }

    #[test]
    fn json_string_agrees_with_a_whole_value_utf8_check() {
        let pieces: [&[u8]; 8] = [
            b"a",
            b"\"",
            b"\\",
            b"\n",
            b"\xc3\xa9",
            b"\xff",
            b"\xe2\x82",
            b"\xf0\x9f\x98\x80",
        ];
        for len in 0..20 {
            for at in 0..len {
                for piece in pieces {
                    for b in [0u8, 0x1f, b' ', b'~', 0x7f, 0x80, 0xc3, 0xff] {
                        let mut v = vec![b'x'; len];
                        v.splice(at..at, piece.iter().copied());
                        if at + 2 < v.len() {
                            v[at + 2] = b;
                        }
                        let mut out = Vec::new();
                        json_string(&mut out, &v);
                        assert_eq!(out, json_naive(&v), "{v:?}");
                    }
                }
            }
        }
    }

    #[test]
    fn header_names() {
        let mut wanted = Wanted::default();
        for name in ["user-agent", "x-request-id2", "x_odd"] {
            wanted.slot(name.as_bytes());
        }
        for (slot, candidate, same) in [
            (0, "User-Agent", true),
            (0, "USER-AGENT", true),
            (0, "user-agenT", true),
            (0, "user_agent", false),
            (0, "user-agenu", false),
            (1, "X-Request-ID2", true),
            (1, "X-Request-ID3", false),
            (2, "X_Odd", true),
            (2, "X^Odd", false),
        ] {
            let w = &wanted.names[slot];
            let got = same_name(candidate.as_bytes(), w, wanted.simple[slot]);
            assert_eq!(got, same, "{candidate} vs {:?}", String::from_utf8_lossy(w));
        }
    }

    #[test]
    fn escaping() {
        let mut out = Vec::new();
        escape_into(&mut out, b"plain/path?x=1 and more than eight");
        assert_eq!(out, b"plain/path?x=1 and more than eight");
        out.clear();
        escape_into(&mut out, b"a\"b\\c\nd\x7f\x80");
        assert_eq!(out, b"a\\x22b\\x5cc\\x0ad\\x7f\x80");
        out.clear();
        json_string(&mut out, b"q\"uo\\te\tx\xff");
        assert_eq!(out, "\"q\\\"uo\\\\te\\u0009x\u{fffd}\"".as_bytes());
    }

    #[test]
    fn responses() {
        let data = b"HTTP/1.1 404 Not Found\r\nContent-Length: 5\r\n\r\nnope!";
        let (status, sent, head) = parse_response(data);
        assert_eq!((status, sent), (404, 5));
        assert_eq!(head, b"HTTP/1.1 404 Not Found\r\nContent-Length: 5\r\n");
        assert_eq!(parse_response(b"HTTP/1.1 2x0 ?\r\n\r\n").0, 0);
        assert_eq!(parse_response(b"short").0, 0);
        let mut decimal = Vec::new();
        push_decimal_seconds(&mut decimal, 1_000_042);
        assert_eq!(decimal, b"1.000042");
    }
}
