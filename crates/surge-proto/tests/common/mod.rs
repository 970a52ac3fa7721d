//! Shared by the HTTP/1 integration tests: drives a [`Parser`] over some
//! feeds and records what came out as plain, comparable values.

#![allow(dead_code)]

use surge_proto::http1::common::Version;
use surge_proto::http1::server::{Error, Event, Limits, Parser, RequestHead};

/// One request as the parser reported it: its head, its body concatenated
/// over all `Data` events, and whether `End` was seen.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Req {
    pub method: Vec<u8>,
    pub target: Vec<u8>,
    pub version: Version,
    pub keep_alive: bool,
    pub expect_continue: bool,
    /// `None` for chunked.
    pub content_length: Option<u64>,
    pub headers: Vec<(Vec<u8>, Vec<u8>)>,
    pub body: Vec<u8>,
    pub complete: bool,
}

impl Req {
    fn from_head(h: &RequestHead) -> Req {
        Req {
            method: h.method().to_vec(),
            target: h.target().to_vec(),
            version: h.version,
            keep_alive: h.keep_alive,
            expect_continue: h.expect_continue,
            content_length: h.content_length(),
            headers: h
                .headers
                .iter()
                .map(|i| (h.header_name(i).to_vec(), h.header_value(i).to_vec()))
                .collect(),
            body: Vec::new(),
            complete: false,
        }
    }
}

/// Everything a parser produced for some input.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Outcome {
    pub reqs: Vec<Req>,
    /// The error the parser stopped with, `None` if it is waiting for more.
    pub error: Option<Error>,
}

/// Feeds a parser and polls it dry after every feed, checking on the way
/// that poll terminates: every event but `End` consumes at least one byte,
/// and `End` follows a `Head` or consumes the last CRLF, so a run can never
/// yield more than two events per byte fed.
pub struct Driver {
    pub parser: Parser,
    pub reqs: Vec<Req>,
    pub error: Option<Error>,
    fed: usize,
    events: usize,
    /// Body limit to set after each `Head`, if any.
    pub body_limit: Option<u64>,
}

impl Driver {
    pub fn new(limits: Limits) -> Driver {
        Driver {
            parser: Parser::new(limits),
            reqs: Vec::new(),
            error: None,
            fed: 0,
            events: 0,
            body_limit: None,
        }
    }

    pub fn feed(&mut self, data: &[u8]) {
        self.fed += data.len();
        self.parser.feed(data);
        self.drain();
    }

    pub fn drain(&mut self) {
        loop {
            match self.parser.poll() {
                Ok(None) => return,
                Ok(Some(ev)) => {
                    self.events += 1;
                    assert!(
                        self.events <= 2 * self.fed,
                        "{} events from {} bytes: poll does not make progress",
                        self.events,
                        self.fed
                    );
                    match ev {
                        Event::Head(h) => {
                            assert!(
                                self.reqs.last().is_none_or(|r| r.complete),
                                "Head before the End of the previous request"
                            );
                            self.reqs.push(Req::from_head(&h));
                            if let Some(limit) = self.body_limit {
                                self.parser.set_body_limit(limit);
                            }
                        }
                        Event::Data(d) => {
                            assert!(!d.is_empty(), "empty Data event");
                            let r = self.reqs.last_mut().expect("Data before Head");
                            assert!(!r.complete, "Data after End");
                            r.body.extend_from_slice(&d);
                        }
                        Event::End => {
                            let r = self.reqs.last_mut().expect("End before Head");
                            assert!(!r.complete, "End twice");
                            r.complete = true;
                        }
                    }
                }
                Err(e) => {
                    // A failed parser stays failed, with the same error.
                    assert_eq!(self.parser.poll().err(), Some(e));
                    assert_eq!(self.parser.poll().err(), Some(e));
                    self.error = Some(e);
                    return;
                }
            }
        }
    }

    pub fn outcome(self) -> Outcome {
        Outcome {
            reqs: self.reqs,
            error: self.error,
        }
    }
}

/// Feeds `parts` one after the other, polling dry after each.
pub fn run_parts<'a>(limits: Limits, parts: impl IntoIterator<Item = &'a [u8]>) -> Outcome {
    let mut d = Driver::new(limits);
    for p in parts {
        d.feed(p);
    }
    d.outcome()
}

pub fn run_whole(limits: Limits, input: &[u8]) -> Outcome {
    run_parts(limits, [input])
}

pub fn run_bytewise(limits: Limits, input: &[u8]) -> Outcome {
    run_parts(limits, input.chunks(1))
}

/// Splits `input` at the given offsets (any order, out of range ones ignored).
pub fn run_split(limits: Limits, input: &[u8], cuts: &[usize]) -> Outcome {
    let mut cuts: Vec<usize> = cuts.iter().copied().filter(|&c| c <= input.len()).collect();
    cuts.sort_unstable();
    cuts.dedup();
    let mut parts = Vec::with_capacity(cuts.len() + 1);
    let mut start = 0;
    for c in cuts {
        parts.push(&input[start..c]);
        start = c;
    }
    parts.push(&input[start..]);
    run_parts(limits, parts)
}

/// Small limits, so short inputs reach every limit.
pub fn small_limits() -> Limits {
    Limits {
        max_request_line: 64,
        max_header_line: 64,
        max_headers: 8,
        max_head: 256,
        max_body: 128,
        max_chunk_line: 32,
    }
}
