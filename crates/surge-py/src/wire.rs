//! The byte buffers every driver codec keeps: requests encoded back to back until
//! the engine takes them (one `transport.write` per loop iteration), and replies
//! received but not yet decoded. One type each, shared by the Redis, Tarantool,
//! PostgreSQL and HTTP client codecs.

use std::ops::{Deref, DerefMut};

use pyo3::prelude::*;
use pyo3::types::PyBytes;

/// Room reserved for a batch of requests (most batches fit; larger ones grow it).
const WRITE_CAPACITY: usize = 64 * 1024;
/// Decoded bytes at the front of a read buffer are dropped once they pass this
/// (or at once when everything was decoded): the copy is paid rarely, and a long
/// pipelined stream cannot grow the buffer without bound.
const READ_COMPACT_THRESHOLD: usize = 64 * 1024;

/// Encoded requests waiting for the engine's next flush. Encoders write into it
/// as a `Vec<u8>` (it derefs to one); a request that fails half-encoded is cut
/// off again with `truncate(mark)` where `mark` is the length before it.
pub struct WriteBuf(Vec<u8>);

impl WriteBuf {
    pub fn new() -> Self {
        Self(Vec::with_capacity(WRITE_CAPACITY))
    }

    /// The buffered requests as one bytes object, leaving the buffer empty.
    pub fn take<'py>(&mut self, py: Python<'py>) -> Bound<'py, PyBytes> {
        let b = PyBytes::new(py, &self.0);
        self.0.clear();
        b
    }
}

impl Default for WriteBuf {
    fn default() -> Self {
        Self::new()
    }
}

impl Deref for WriteBuf {
    type Target = Vec<u8>;
    fn deref(&self) -> &Vec<u8> {
        &self.0
    }
}

impl DerefMut for WriteBuf {
    fn deref_mut(&mut self) -> &mut Vec<u8> {
        &mut self.0
    }
}

/// Received bytes and how far they have been decoded.
#[derive(Default)]
pub struct ReadBuf {
    buf: Vec<u8>,
    pos: usize,
}

impl ReadBuf {
    /// Appends received bytes.
    pub fn extend(&mut self, data: &[u8]) {
        self.buf.extend_from_slice(data);
    }

    /// The bytes not decoded yet.
    pub fn unread(&self) -> &[u8] {
        &self.buf[self.pos..]
    }

    /// Whether everything received has been decoded.
    pub fn is_drained(&self) -> bool {
        self.pos == self.buf.len()
    }

    /// The whole buffer, decoded prefix included (for decoders that take
    /// absolute positions).
    pub fn bytes(&self) -> &[u8] {
        &self.buf
    }

    /// Where decoding stands, as an index into `bytes()`.
    pub fn pos(&self) -> usize {
        self.pos
    }

    /// Marks `n` more bytes decoded.
    pub fn advance(&mut self, n: usize) {
        self.set_pos(self.pos + n);
    }

    /// Marks everything before `pos` decoded.
    pub fn set_pos(&mut self, pos: usize) {
        debug_assert!(pos <= self.buf.len());
        self.pos = pos;
    }

    /// Drops the decoded prefix when it is all there is, or large (see
    /// `READ_COMPACT_THRESHOLD`); call once per feed, after decoding.
    pub fn compact(&mut self) {
        if self.pos == self.buf.len() {
            self.buf.clear();
            self.pos = 0;
        } else if self.pos >= READ_COMPACT_THRESHOLD {
            self.buf.drain(..self.pos);
            self.pos = 0;
        }
    }

    /// Forgets everything (a new connection).
    pub fn clear(&mut self) {
        self.buf.clear();
        self.pos = 0;
    }
}
