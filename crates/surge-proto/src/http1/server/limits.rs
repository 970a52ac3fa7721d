//! Size limits of the request parser. Every limit has a documented default and
//! breaking it yields an [`Error`](super::Error) that names the status to answer.

/// Longest request line (method, target, version), in bytes. Over it: 414.
pub const DEFAULT_MAX_REQUEST_LINE: usize = 8 * 1024;
/// Longest single header line, in bytes. Over it: 431.
pub const DEFAULT_MAX_HEADER_LINE: usize = 8 * 1024;
/// Most header fields in one request. Over it: 431.
pub const DEFAULT_MAX_HEADERS: usize = 100;
/// Largest header block (request line included), counted across reads. Over it: 431.
pub const DEFAULT_MAX_HEAD: usize = 64 * 1024;
/// Largest request body unless the route raises it. Over it: 413.
pub const DEFAULT_MAX_BODY: u64 = 1024 * 1024;
/// Longest chunk-size line (with extensions) or trailer section, in bytes. Over it: 400.
pub const DEFAULT_MAX_CHUNK_LINE: usize = 4 * 1024;

/// The parser's limits; `Limits::default()` gives the documented defaults.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    pub max_request_line: usize,
    pub max_header_line: usize,
    pub max_headers: usize,
    pub max_head: usize,
    pub max_body: u64,
    pub max_chunk_line: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_request_line: DEFAULT_MAX_REQUEST_LINE,
            max_header_line: DEFAULT_MAX_HEADER_LINE,
            max_headers: DEFAULT_MAX_HEADERS,
            max_head: DEFAULT_MAX_HEAD,
            max_body: DEFAULT_MAX_BODY,
            max_chunk_line: DEFAULT_MAX_CHUNK_LINE,
        }
    }
}
