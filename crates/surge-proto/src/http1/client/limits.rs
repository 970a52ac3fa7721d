//! Size limits of the response parser. Every limit has a documented default;
//! breaking one fails the response with a [`ResponseError`](super::ResponseError)
//! and the connection must be closed.

/// Largest response head (status line and header fields), counted across reads.
pub const DEFAULT_MAX_HEAD: usize = 64 * 1024;
/// Most header fields in one response head.
pub const DEFAULT_MAX_HEADERS: usize = 100;
/// Largest body the parser accepts (declared length or chunks so far). Streaming
/// callers lift it per response with `set_body_limit`.
pub const DEFAULT_MAX_BODY: u64 = 64 * 1024 * 1024;
/// Longest chunk-size line (extensions included) or trailer section.
pub const DEFAULT_MAX_CHUNK_LINE: usize = 4 * 1024;
/// Most interim (1xx) responses skipped before a final one.
pub const DEFAULT_MAX_INTERIM: usize = 16;

/// The response parser's limits; `ResponseLimits::default()` gives the defaults.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ResponseLimits {
    pub max_head: usize,
    pub max_headers: usize,
    pub max_body: u64,
    pub max_chunk_line: usize,
    pub max_interim: usize,
}

impl Default for ResponseLimits {
    fn default() -> Self {
        ResponseLimits {
            max_head: DEFAULT_MAX_HEAD,
            max_headers: DEFAULT_MAX_HEADERS,
            max_body: DEFAULT_MAX_BODY,
            max_chunk_line: DEFAULT_MAX_CHUNK_LINE,
            max_interim: DEFAULT_MAX_INTERIM,
        }
    }
}
