//! The server's own response headers (`Date`, `Server`, and the headers a
//! deployment adds to every response: uvicorn's `--header`), encoded once
//! when serving starts and copied into every response head the server writes:
//! the surge `App`'s, ASGI's, WSGI's and the server's own error answers.
//!
//! They go first, right after the status line, as one block: the date line
//! (29 bytes of the per-second cached date, `date.rs`) when it is on, then the
//! pre-encoded lines. A header the app sets itself replaces ours of the same
//! name: the block's lines it names are cut out again after the app's
//! headers are written (a mask, one bit per line; rare, so a copy then is
//! cheaper than a check before every write). uvicorn sends both instead; two
//! `Date` fields break RFC 9110 (a single-value field), and two
//! `X-Frame-Options` values make browsers ignore the header altogether.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use surge_proto::http1::common::is_token;

use super::date::with_date;

/// Most headers a deployment may add (one bit each in a `u64` mask, bit 0
/// being the date).
pub const MAX_DEFAULT_HEADERS: usize = 62;

/// The date line's length: "date: " + an IMF-fixdate (29 bytes) + CRLF.
const DATE_LINE: usize = 6 + 29 + 2;

static SERIAL: AtomicU64 = AtomicU64::new(1);

/// The server's own response headers (see the module doc); made from
/// `surge.http.Limits` (`server_header`, `date_header`, `default_headers`).
#[pyclass(module = "surge._core", frozen)]
pub struct HeadDefaults {
    /// The lines after the date: "server: surge\r\n" (unless off or given)
    /// and the added headers, names lowercased.
    block: Vec<u8>,
    /// Each line of `block`: where it starts, where its name ends.
    lines: Vec<(usize, usize)>,
    date: bool,
    /// Any line besides `server`: names other than server/date must be looked up.
    added: bool,
    /// Tells apart two sets of defaults in one process (the ASGI head cache
    /// remembers which one its mask was computed for).
    pub serial: u64,
}

impl HeadDefaults {
    /// Surge's defaults: `date` and `server: surge`.
    pub fn standard() -> Self {
        Self::build(true, true, &[]).expect("the standard headers are valid")
    }

    /// `ours`, or surge's defaults (one shared copy) for the public head
    /// encoders called without a plan's.
    pub fn or_standard(ours: Option<&Self>) -> &Self {
        static STANDARD: OnceLock<HeadDefaults> = OnceLock::new();
        ours.unwrap_or_else(|| STANDARD.get_or_init(Self::standard))
    }

    // Plain `String` errors (not PyErr): the unit tests below run without libpython.
    fn build(server: bool, date: bool, headers: &[(String, String)]) -> Result<Self, String> {
        if headers.len() > MAX_DEFAULT_HEADERS {
            return Err(format!(
                "at most {MAX_DEFAULT_HEADERS} default headers, got {}",
                headers.len()
            ));
        }
        let mut added: Vec<(String, Vec<u8>)> = Vec::with_capacity(headers.len());
        for (name, value) in headers {
            if name.is_empty() || !is_token(name.as_bytes()) {
                return Err(format!("invalid header name {name:?}"));
            }
            if value.chars().any(|c| matches!(c, '\r' | '\n' | '\0')) {
                return Err(format!(
                    "header {name:?}: value may not contain CR, LF or NUL"
                ));
            }
            let name = name.to_ascii_lowercase();
            if name == "date" {
                return Err("header \"date\": the Date header is the server's (turn it off with date_header=False / --no-date-header)".to_string());
            }
            // Surrounding blanks are not part of a field value (RFC 9110 5.5).
            let value = value.trim_matches([' ', '\t']);
            let mut bytes = Vec::with_capacity(value.len());
            for c in value.chars() {
                match u8::try_from(u32::from(c)) {
                    Ok(b) => bytes.push(b),
                    Err(_) => return Err(format!("header {name:?}: value is not latin-1")),
                }
            }
            added.push((name, bytes));
        }
        let mut block = Vec::new();
        let mut lines = Vec::new();
        let mut push = |name: &[u8], value: &[u8]| {
            lines.push((block.len(), block.len() + name.len()));
            block.extend_from_slice(name);
            block.extend_from_slice(b": ");
            block.extend_from_slice(value);
            block.extend_from_slice(b"\r\n");
        };
        // A `server` header given replaces ours (as uvicorn).
        if server && !added.iter().any(|(n, _)| n == "server") {
            push(b"server", b"surge");
        }
        for (name, value) in &added {
            push(name.as_bytes(), value);
        }
        Ok(HeadDefaults {
            added: lines.len() > usize::from(server),
            block,
            lines,
            date,
            serial: SERIAL.fetch_add(1, Ordering::Relaxed),
        })
    }

    /// Appends the date line (if on) and the block; returns where they begin.
    #[inline]
    pub fn write(&self, out: &mut Vec<u8>) -> usize {
        let at = out.len();
        if self.date {
            out.extend_from_slice(b"date: ");
            with_date(|d| out.extend_from_slice(d));
            out.extend_from_slice(b"\r\n");
        }
        out.extend_from_slice(&self.block);
        at
    }

    /// The bit of our header an app's header `name` replaces, 0 for none.
    #[inline]
    pub fn which(&self, name: &[u8]) -> u64 {
        if self.date && name.eq_ignore_ascii_case(b"date") {
            return 1;
        }
        for (i, &(start, end)) in self.lines.iter().enumerate() {
            if name.eq_ignore_ascii_case(&self.block[start..end]) {
                return 1 << (i + 1);
            }
        }
        0
    }

    /// `which` for a header the caller classified: `server`, `date`, or
    /// another name (looked up only when headers were added).
    #[inline]
    pub fn which_known(&self, name: &[u8], server_or_date: bool) -> u64 {
        if server_or_date || self.added {
            self.which(name)
        } else {
            0
        }
    }

    /// Cuts the lines in `mask` out of the block written at `at` (`write`).
    pub fn remove(&self, out: &mut Vec<u8>, at: usize, mask: u64) {
        let base = at + if self.date { DATE_LINE } else { 0 };
        // From the last line back, so earlier offsets stay valid.
        for i in (0..self.lines.len()).rev() {
            if mask & (1 << (i + 1)) != 0 {
                let start = self.lines[i].0;
                let end = self.lines.get(i + 1).map_or(self.block.len(), |l| l.0);
                out.drain(base + start..base + end);
            }
        }
        if self.date && mask & 1 != 0 {
            out.drain(at..at + DATE_LINE);
        }
    }
}

#[pymethods]
impl HeadDefaults {
    /// `server`: send `server: surge`; `date`: send `Date`; `headers`: (name,
    /// value) pairs added to every response. Raises ValueError for a header
    /// that is not valid.
    #[new]
    #[pyo3(signature = (server=true, date=true, headers=Vec::new()))]
    fn new(server: bool, date: bool, headers: Vec<(String, String)>) -> PyResult<Self> {
        Self::build(server, date, &headers).map_err(PyValueError::new_err)
    }

    /// The lines as the next response would carry them (date included).
    fn lines<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        let mut out = Vec::with_capacity(DATE_LINE + self.block.len());
        self.write(&mut out);
        PyBytes::new(py, &out)
    }

    /// `response` (a whole response, head and body) with these headers after
    /// its status line, less those its own header lines replace: for the
    /// responses written whole outside the encoders (WebSocket handshakes and
    /// denials).
    fn insert<'py>(&self, py: Python<'py>, response: &[u8]) -> Bound<'py, PyBytes> {
        let Some(at) = response
            .windows(2)
            .position(|w| w == b"\r\n")
            .map(|i| i + 2)
        else {
            return PyBytes::new(py, response);
        };
        // The header lines: from after the status line to the blank line.
        let head_end = response[at - 2..]
            .windows(4)
            .position(|w| w == b"\r\n\r\n")
            .map_or(response.len(), |i| at + i);
        let mut replaced = 0;
        for line in response[at..head_end].split(|&b| b == b'\n') {
            if let Some(colon) = line.iter().position(|&b| b == b':') {
                replaced |= self.which(&line[..colon]);
            }
        }
        let mut out = Vec::with_capacity(response.len() + DATE_LINE + self.block.len());
        out.extend_from_slice(&response[..at]);
        self.write(&mut out);
        if replaced != 0 {
            self.remove(&mut out, at, replaced);
        }
        out.extend_from_slice(&response[at..]);
        PyBytes::new(py, &out)
    }

    fn __repr__(&self) -> String {
        format!(
            "<HeadDefaults date={} {:?}>",
            self.date,
            String::from_utf8_lossy(&self.block)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
        list.iter()
            .map(|(n, v)| (n.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn block_and_removal() {
        let d = HeadDefaults::build(true, false, &pairs(&[("X-A", " b "), ("x-c", "d")])).unwrap();
        assert_eq!(d.block, b"server: surge\r\nx-a: b\r\nx-c: d\r\n");
        let mut out = b"HTTP/1.1 200 OK\r\n".to_vec();
        let at = d.write(&mut out);
        let mask = d.which(b"X-A") | d.which(b"Server");
        assert_eq!(d.which(b"date"), 0);
        d.remove(&mut out, at, mask);
        assert_eq!(out, b"HTTP/1.1 200 OK\r\nx-c: d\r\n");
    }

    #[test]
    fn date_removal_and_server_given() {
        let d = HeadDefaults::build(true, true, &pairs(&[("Server", "mine")])).unwrap();
        assert_eq!(d.block, b"server: mine\r\n");
        let mut out = Vec::new();
        let at = d.write(&mut out);
        assert_eq!(out.len(), DATE_LINE + d.block.len());
        d.remove(&mut out, at, d.which(b"DATE"));
        assert_eq!(out, b"server: mine\r\n");
    }

    #[test]
    fn invalid() {
        assert!(HeadDefaults::build(true, true, &pairs(&[("x a", "b")])).is_err());
        assert!(HeadDefaults::build(true, true, &pairs(&[("x", "b\r\nc: d")])).is_err());
        assert!(HeadDefaults::build(true, true, &pairs(&[("date", "x")])).is_err());
        assert!(HeadDefaults::build(true, true, &pairs(&[("x", "\u{20ac}")])).is_err());
    }
}
