//! The connection-level response parser.
//!
//! Theory of operation: bytes are appended with [`ResponseParser::feed`] and
//! the end of the stream announced with [`ResponseParser::feed_eof`];
//! [`ResponseParser::poll`] then yields events until it needs more. Each final
//! response is `Head`, zero or more `Data`, `End`; interim (1xx) responses are
//! skipped. Whether a response can have a body depends on the request it
//! answers, so the caller calls [`ResponseParser::expect`] once per request
//! sent, in order (a caller that never sends HEAD may skip it). Between `Head`
//! and the first `Data` the caller may change the body limit of that one
//! response (to stream a large body). After an error the parser stays failed:
//! the stream cannot be framed any more and the connection must close.
//!
//! | state        | input                         | next state / event           |
//! |--------------|-------------------------------|------------------------------|
//! | Head         | interim head                  | Head, -                      |
//! | Head         | final head                    | by framing, Head             |
//! | Head         | end of stream, nothing buffered | Head, need more (clean close) |
//! | Head         | end of stream mid-head        | Failed(IncompleteHead)       |
//! | Length(0)    | -                             | Head, End                    |
//! | Length(n)    | k bytes                       | Length(n-k), Data            |
//! | Length(n)    | end of stream                 | Failed(IncompleteBody)       |
//! | Chunked(..)  | see `http1/common/chunked.rs` | Chunked(..), Data / End      |
//! | UntilClose   | k bytes                       | UntilClose, Data             |
//! | UntilClose   | end of stream                 | Head, End                    |
//! | Failed(e)    | anything                      | Failed(e), error e           |

use std::collections::VecDeque;

use bytes::{Bytes, BytesMut};

use super::head::{parse_head, Parsed, ResponseBody, ResponseHead};
use super::{ResponseError, ResponseLimits};
use crate::http1::common::{Chunked, Step};

#[derive(Debug)]
pub enum ResponseEvent {
    Head(ResponseHead),
    Data(Bytes),
    End,
}

/// What a request lets its response carry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Expect {
    /// Any request but HEAD: the headers frame the body.
    Normal,
    /// HEAD: the response never has a body, whatever its headers say.
    Head,
}

#[derive(Clone, Copy, Debug)]
enum State {
    Head,
    Length(u64),
    Chunked(Chunked),
    UntilClose,
    Failed(ResponseError),
}

pub struct ResponseParser {
    buf: BytesMut,
    limits: ResponseLimits,
    state: State,
    expects: VecDeque<Expect>,
    body_limit: u64,
    body_seen: u64,
    interim: usize,
    eof: bool,
}

impl ResponseParser {
    pub fn new(limits: ResponseLimits) -> Self {
        ResponseParser {
            buf: BytesMut::with_capacity(16 * 1024),
            limits,
            state: State::Head,
            expects: VecDeque::new(),
            body_limit: limits.max_body,
            body_seen: 0,
            interim: 0,
            eof: false,
        }
    }

    pub fn limits(&self) -> &ResponseLimits {
        &self.limits
    }

    /// Notes that a request was sent; call once per request, in order.
    pub fn expect(&mut self, e: Expect) {
        self.expects.push_back(e);
    }

    /// Requests noted with `expect` whose final response head has not arrived.
    pub fn expected(&self) -> usize {
        self.expects.len()
    }

    /// Appends received bytes.
    pub fn feed(&mut self, data: &[u8]) {
        self.buf.extend_from_slice(data);
    }

    /// The peer closed its side: no more bytes will come.
    pub fn feed_eof(&mut self) {
        self.eof = true;
    }

    /// Bytes received and not yet returned in an event.
    pub fn buffered(&self) -> usize {
        self.buf.len()
    }

    /// True between responses (no response partly received).
    pub fn is_idle(&self) -> bool {
        matches!(self.state, State::Head) && self.buf.is_empty()
    }

    /// Sets the body limit of the response whose `Head` was just returned.
    pub fn set_body_limit(&mut self, limit: u64) {
        self.body_limit = limit;
    }

    /// Forgets everything: a new connection starts.
    pub fn reset(&mut self) {
        self.buf.clear();
        self.state = State::Head;
        self.expects.clear();
        self.body_seen = 0;
        self.interim = 0;
        self.eof = false;
    }

    fn fail(&mut self, e: ResponseError) -> ResponseError {
        self.state = State::Failed(e);
        self.buf.clear();
        e
    }

    /// The next event, `Ok(None)` when more bytes are needed (or, after the
    /// end of the stream, when there is nothing more).
    pub fn poll(&mut self) -> Result<Option<ResponseEvent>, ResponseError> {
        loop {
            match self.state {
                State::Failed(e) => return Err(e),
                State::Head => {
                    if self.buf.is_empty() {
                        return Ok(None);
                    }
                    let head_request = self.expects.front() == Some(&Expect::Head);
                    let parsed = match parse_head(&self.buf, &self.limits, head_request) {
                        Ok(Some(p)) => p,
                        Ok(None) if self.eof => {
                            return Err(self.fail(ResponseError::IncompleteHead))
                        }
                        Ok(None) => return Ok(None),
                        Err(e) => return Err(self.fail(e)),
                    };
                    let raw = match parsed {
                        Parsed::Interim(len) => {
                            self.interim += 1;
                            if self.interim > self.limits.max_interim {
                                return Err(self.fail(ResponseError::TooManyInterim));
                            }
                            let _ = self.buf.split_to(len);
                            continue;
                        }
                        Parsed::Final(raw) => raw,
                    };
                    self.expects.pop_front();
                    self.interim = 0;
                    let bytes = self.buf.split_to(raw.len).freeze();
                    let head = raw.into_head(bytes);
                    self.body_limit = self.limits.max_body;
                    self.body_seen = 0;
                    self.state = match head.body {
                        ResponseBody::Empty => State::Length(0),
                        ResponseBody::Length(n) => State::Length(n),
                        ResponseBody::Chunked => State::Chunked(Chunked::Size),
                        ResponseBody::UntilClose => State::UntilClose,
                    };
                    return Ok(Some(ResponseEvent::Head(head)));
                }
                State::Length(0) => {
                    self.state = State::Head;
                    return Ok(Some(ResponseEvent::End));
                }
                State::Length(left) => {
                    if self.body_seen == 0 && left > self.body_limit {
                        return Err(self.fail(ResponseError::BodyTooLarge));
                    }
                    if self.buf.is_empty() {
                        if self.eof {
                            return Err(self.fail(ResponseError::IncompleteBody));
                        }
                        return Ok(None);
                    }
                    let n = (self.buf.len() as u64).min(left) as usize;
                    self.body_seen += n as u64;
                    self.state = State::Length(left - n as u64);
                    return Ok(Some(ResponseEvent::Data(self.buf.split_to(n).freeze())));
                }
                State::UntilClose => {
                    if self.buf.is_empty() {
                        if self.eof {
                            self.state = State::Head;
                            return Ok(Some(ResponseEvent::End));
                        }
                        return Ok(None);
                    }
                    // Hand out exactly up to the limit, so the body seen before
                    // the error does not depend on how reads were cut.
                    let room = self.body_limit.saturating_sub(self.body_seen);
                    if room == 0 {
                        return Err(self.fail(ResponseError::BodyTooLarge));
                    }
                    let n = (self.buf.len() as u64).min(room) as usize;
                    self.body_seen += n as u64;
                    return Ok(Some(ResponseEvent::Data(self.buf.split_to(n).freeze())));
                }
                State::Chunked(mut c) => {
                    let step = c.step(
                        &mut self.buf,
                        &mut self.body_seen,
                        self.body_limit,
                        self.limits.max_chunk_line,
                    );
                    return match step {
                        Err(e) => Err(self.fail(e.into())),
                        Ok(Step::NeedMore) if self.eof => {
                            Err(self.fail(ResponseError::IncompleteBody))
                        }
                        Ok(Step::NeedMore) => {
                            self.state = State::Chunked(c);
                            Ok(None)
                        }
                        Ok(Step::Data(d)) => {
                            self.state = State::Chunked(c);
                            Ok(Some(ResponseEvent::Data(d)))
                        }
                        Ok(Step::End) => {
                            self.state = State::Head;
                            Ok(Some(ResponseEvent::End))
                        }
                    };
                }
            }
        }
    }
}
