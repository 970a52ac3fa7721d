//! Shared by the HTTP/1 client tests and fuzz target: drives a
//! [`ResponseParser`] over some feeds (and maybe the end of the stream) and
//! records what came out as plain, comparable values.

#![allow(dead_code)]

use surge_proto::http1::client::{
    Expect, ResponseError, ResponseEvent, ResponseHead, ResponseLimits, ResponseParser,
};
use surge_proto::http1::common::Version;

/// One response as the parser reported it, body concatenated over `Data`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Resp {
    pub status: u16,
    pub reason: Vec<u8>,
    pub version: Version,
    pub keep_alive: bool,
    pub content_length: Option<u64>,
    pub headers: Vec<(Vec<u8>, Vec<u8>)>,
    pub body: Vec<u8>,
    pub complete: bool,
}

impl Resp {
    fn from_head(h: &ResponseHead) -> Resp {
        Resp {
            status: h.status,
            reason: h.reason().to_vec(),
            version: h.version,
            keep_alive: h.keep_alive,
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

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Outcome {
    pub resps: Vec<Resp>,
    /// The error the parser stopped with, `None` if waiting for more (or done).
    pub error: Option<ResponseError>,
}

/// Feeds a parser and polls it dry after every feed, checking that poll makes
/// progress and that events come in order.
pub struct Driver {
    pub parser: ResponseParser,
    pub resps: Vec<Resp>,
    pub error: Option<ResponseError>,
    fed: usize,
    events: usize,
}

impl Driver {
    pub fn new(limits: ResponseLimits, expects: &[Expect]) -> Driver {
        let mut parser = ResponseParser::new(limits);
        for &e in expects {
            parser.expect(e);
        }
        Driver {
            parser,
            resps: Vec::new(),
            error: None,
            fed: 0,
            events: 0,
        }
    }

    pub fn feed(&mut self, data: &[u8]) {
        self.fed += data.len();
        self.parser.feed(data);
        self.drain();
    }

    pub fn eof(&mut self) {
        self.parser.feed_eof();
        self.drain();
    }

    pub fn drain(&mut self) {
        if self.error.is_some() {
            return;
        }
        loop {
            match self.parser.poll() {
                Ok(None) => return,
                Ok(Some(ev)) => {
                    self.events += 1;
                    assert!(
                        self.events <= 2 * self.fed + 1,
                        "{} events from {} bytes: poll does not make progress",
                        self.events,
                        self.fed
                    );
                    match ev {
                        ResponseEvent::Head(h) => {
                            assert!(
                                self.resps.last().is_none_or(|r| r.complete),
                                "Head before the End of the previous response"
                            );
                            self.resps.push(Resp::from_head(&h));
                        }
                        ResponseEvent::Data(d) => {
                            assert!(!d.is_empty(), "empty Data event");
                            let r = self.resps.last_mut().expect("Data before Head");
                            assert!(!r.complete, "Data after End");
                            r.body.extend_from_slice(&d);
                        }
                        ResponseEvent::End => {
                            let r = self.resps.last_mut().expect("End before Head");
                            assert!(!r.complete, "End twice");
                            r.complete = true;
                        }
                    }
                }
                Err(e) => {
                    assert_eq!(
                        self.parser.poll().err(),
                        Some(e),
                        "a failed parser stays failed"
                    );
                    self.error = Some(e);
                    return;
                }
            }
        }
    }

    pub fn outcome(self) -> Outcome {
        Outcome {
            resps: self.resps,
            error: self.error,
        }
    }
}

/// Feeds `parts` one after the other, then the end of the stream if `eof`.
pub fn run_parts<'a>(
    limits: ResponseLimits,
    expects: &[Expect],
    parts: impl IntoIterator<Item = &'a [u8]>,
    eof: bool,
) -> Outcome {
    let mut d = Driver::new(limits, expects);
    for p in parts {
        d.feed(p);
    }
    if eof {
        d.eof();
    }
    d.outcome()
}

pub fn run_whole(limits: ResponseLimits, expects: &[Expect], input: &[u8], eof: bool) -> Outcome {
    run_parts(limits, expects, [input], eof)
}

pub fn run_bytewise(
    limits: ResponseLimits,
    expects: &[Expect],
    input: &[u8],
    eof: bool,
) -> Outcome {
    run_parts(limits, expects, input.chunks(1), eof)
}

/// Splits `input` at the given offsets (any order, out of range ones ignored).
pub fn run_split(
    limits: ResponseLimits,
    expects: &[Expect],
    input: &[u8],
    cuts: &[usize],
    eof: bool,
) -> Outcome {
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
    run_parts(limits, expects, parts, eof)
}

/// Small limits, so short inputs reach every limit.
pub fn small_limits() -> ResponseLimits {
    ResponseLimits {
        max_head: 128,
        max_headers: 4,
        max_body: 64,
        max_chunk_line: 16,
        max_interim: 2,
    }
}
