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
//! | Chunked(..)   | see `chunked.rs`           | Chunked(..), Data / End   |
//! | Failed(e)     | anything                   | Failed(e), error e        |

use bytes::{Bytes, BytesMut};

use super::chunked::{Chunked, Step};
use super::head::{parse_head, BodyKind, RequestHead};
use super::{Error, Limits};

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
}

impl Parser {
    pub fn new(limits: Limits) -> Self {
        Parser {
            buf: BytesMut::with_capacity(16 * 1024),
            limits,
            state: State::Head,
            body_limit: limits.max_body,
            body_seen: 0,
        }
    }

    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// Appends received bytes.
    pub fn feed(&mut self, data: &[u8]) {
        self.buf.extend_from_slice(data);
    }

    /// Bytes received and not yet returned in an event.
    pub fn buffered(&self) -> usize {
        self.buf.len()
    }

    /// True between requests (no request partly received).
    pub fn is_idle(&self) -> bool {
        matches!(self.state, State::Head) && self.buf.is_empty()
    }

    /// True while a request head has arrived in part.
    pub fn in_head(&self) -> bool {
        matches!(self.state, State::Head) && !self.buf.is_empty()
    }

    /// Sets the body limit of the request whose `Head` was just returned.
    pub fn set_body_limit(&mut self, limit: u64) {
        self.body_limit = limit;
    }

    fn fail(&mut self, e: Error) -> Error {
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
                let raw = match parse_head(&self.buf, &self.limits) {
                    Ok(Some(raw)) => raw,
                    Ok(None) => return Ok(None),
                    Err(e) => return Err(self.fail(e)),
                };
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
                    &self.limits,
                );
                match step {
                    Err(e) => Err(self.fail(e)),
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
