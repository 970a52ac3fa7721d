//! The connection-level request parser.
//!
//! Theory of operation: bytes are appended with [`Parser::feed`]; [`Parser::poll`]
//! then yields events until it needs more. Each request is `Head`, zero or more
//! `Data`, `End`. Between `Head` and the first `Data` the caller may change the
//! body limit for that one request (routes may raise it). Pipelined requests
//! simply follow each other in the buffer. After an error the parser stays
//! failed: the stream cannot be framed any more and the connection must close.
//!
//! | state         | input                      | next state / event        |
//! |---------------|----------------------------|---------------------------|
//! | Head          | complete head              | Length(n) or Chunked, Head|
//! | Length(0)     | -                          | Head, End                 |
//! | Length(n)     | k bytes                    | Length(n-k), Data         |
//! | Chunked(..)   | see `common/chunked.rs`    | Chunked(..), Data / End   |
//! | Failed(e)     | anything                   | Failed(e), error e        |

use bytes::{Bytes, BytesMut};

use super::head::{parse_head, BodyKind, RequestHead};
use super::{Error, Limits};
use crate::http1::common::{is_tchar, Chunked, Step};

#[derive(Debug)]
pub enum Event {
    Head(RequestHead),
    Data(Bytes),
    End,
}

#[derive(Clone, Copy, Debug)]
enum State {
    Head,
    Length(u64),
    Chunked(Chunked),
    Failed(Error),
}

pub struct Parser {
    buf: BytesMut,
    limits: Limits,
    state: State,
    body_limit: u64,
    body_seen: u64,
    /// Buffer length at the last parse of an incomplete head (0: none).
    head_scanned: usize,
    /// Where the last incomplete line of that head starts.
    head_line_start: usize,
    /// That head's request line has ended.
    head_in_fields: bool,
}

impl Parser {
    pub fn new(limits: Limits) -> Self {
        Parser {
            buf: BytesMut::with_capacity(16 * 1024),
            limits,
            state: State::Head,
            body_limit: limits.max_body,
            body_seen: 0,
            head_scanned: 0,
            head_line_start: 0,
            head_in_fields: false,
        }
    }

    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// Appends received bytes.
    pub fn feed(&mut self, data: &[u8]) {
        if matches!(self.state, State::Failed(_)) {
            return; // nothing after an error can be framed: don't hold it
        }
        self.buf.extend_from_slice(data);
    }

    /// Bytes received and not yet returned in an event.
    pub fn buffered(&self) -> usize {
        self.buf.len()
    }

    /// Takes the bytes received and not yet parsed, e.g. the first frames of a
    /// protocol the connection was upgraded to after the last request.
    pub fn take_buffered(&mut self) -> BytesMut {
        std::mem::take(&mut self.buf)
    }

    /// True between requests (no request partly received).
    pub fn is_idle(&self) -> bool {
        matches!(self.state, State::Head) && self.buf.is_empty()
    }

    /// True when the next event would begin a new request (its head), whether or
    /// not any of it is buffered yet.
    pub fn at_message_start(&self) -> bool {
        matches!(self.state, State::Head)
    }

    /// True while a request head has arrived in part.
    pub fn in_head(&self) -> bool {
        matches!(self.state, State::Head) && !self.buf.is_empty()
    }

    /// Sets the body limit of the request whose `Head` was just returned.
    pub fn set_body_limit(&mut self, limit: u64) {
        self.body_limit = limit;
    }

    /// True when bytes added since the last partial parse of the head cannot
    /// change its outcome: they continue a header field's name or value with
    /// bytes valid there, no line ended and no limit can have been reached.
    /// Re-parsing the whole head on every read would make a head trickled in
    /// small pieces cost the square of its size; the request line is always
    /// re-parsed (it is short and its grammar has more states).
    fn head_still_partial(&mut self) -> bool {
        let len = self.buf.len();
        if !self.head_in_fields || self.head_scanned == 0 || self.head_scanned > len {
            return false;
        }
        let line_limit = self
            .limits
            .max_request_line
            .min(self.limits.max_header_line);
        if len > self.limits.max_head || len - self.head_line_start > line_limit {
            return false;
        }
        let line = &self.buf[self.head_line_start..self.head_scanned];
        let new = &self.buf[self.head_scanned..];
        // A CR already in the line must be followed by LF, which only the full
        // parse checks: never take the shortcut past one.
        if memchr::memchr(b'\r', line).is_some() {
            return false;
        }
        let continues = if memchr::memchr(b':', line).is_some() {
            new.iter()
                .all(|&b| b == b'\t' || (0x20..0x7f).contains(&b) || b >= 0x80)
        } else {
            // A field name in progress: tokens only (no obs-fold, no stray bytes).
            line.iter().chain(new).all(|&b| is_tchar(b))
        };
        if continues {
            self.head_scanned = len;
        }
        continues
    }

    fn note_partial_head(&mut self) {
        self.head_scanned = self.buf.len();
        self.head_line_start = memchr::memrchr(b'\n', &self.buf).map_or(0, |i| i + 1);
        // In the header fields once a non-empty line (the request line) has ended.
        let start = self
            .buf
            .iter()
            .position(|&b| b != b'\r' && b != b'\n')
            .unwrap_or(self.buf.len());
        self.head_in_fields = memchr::memchr(b'\n', &self.buf[start..]).is_some();
    }

    fn fail(&mut self, e: Error) -> Error {
        self.head_scanned = 0;
        self.state = State::Failed(e);
        self.buf.clear();
        e
    }

    /// The next event, `Ok(None)` when more bytes are needed.
    pub fn poll(&mut self) -> Result<Option<Event>, Error> {
        match self.state {
            State::Failed(e) => Err(e),
            State::Head => {
                if self.buf.is_empty() {
                    return Ok(None);
                }
                if self.head_still_partial() {
                    return Ok(None);
                }
                let raw = match parse_head(&self.buf, &self.limits) {
                    Ok(Some(raw)) => raw,
                    Ok(None) => {
                        self.note_partial_head();
                        return Ok(None);
                    }
                    Err(e) => return Err(self.fail(e)),
                };
                self.head_scanned = 0;
                let bytes = self.buf.split_to(raw.len).freeze();
                let head = raw.into_head(bytes);
                self.body_limit = self.limits.max_body;
                self.body_seen = 0;
                self.state = match head.body {
                    BodyKind::Length(n) => State::Length(n),
                    BodyKind::Chunked => State::Chunked(Chunked::Size),
                };
                Ok(Some(Event::Head(head)))
            }
            State::Length(0) => {
                self.state = State::Head;
                Ok(Some(Event::End))
            }
            State::Length(left) => {
                if self.body_seen == 0 && left > self.body_limit {
                    return Err(self.fail(Error::BodyTooLarge));
                }
                if self.buf.is_empty() {
                    return Ok(None);
                }
                let n = (self.buf.len() as u64).min(left) as usize;
                self.body_seen += n as u64;
                self.state = State::Length(left - n as u64);
                Ok(Some(Event::Data(self.buf.split_to(n).freeze())))
            }
            State::Chunked(mut c) => {
                let step = c.step(
                    &mut self.buf,
                    &mut self.body_seen,
                    self.body_limit,
                    self.limits.max_chunk_line,
                );
                match step {
                    Err(e) => Err(self.fail(e.into())),
                    Ok(Step::NeedMore) => {
                        self.state = State::Chunked(c);
                        Ok(None)
                    }
                    Ok(Step::Data(d)) => {
                        self.state = State::Chunked(c);
                        Ok(Some(Event::Data(d)))
                    }
                    Ok(Step::End) => {
                        self.state = State::Head;
                        Ok(Some(Event::End))
                    }
                }
            }
        }
    }
}
