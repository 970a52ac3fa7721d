//! Shared by the WebSocket integration tests: a decoder driven over some
//! feeds, its output recorded as plain comparable values, and a frame builder
//! written apart from the crate's encoder (so the two check each other).

#![allow(dead_code)]

use surge_proto::websocket::{Decoder, Error, Message, PerMessageDeflate, Role, Status};

/// How a decoder is set up.
#[derive(Clone, Copy, Debug)]
pub struct Setup {
    pub role: Role,
    pub deflate: Option<PerMessageDeflate>,
    pub max: Option<usize>,
}

impl Setup {
    pub fn server() -> Setup {
        Setup {
            role: Role::Server,
            deflate: None,
            max: None,
        }
    }

    pub fn client() -> Setup {
        Setup {
            role: Role::Client,
            ..Setup::server()
        }
    }

    pub fn deflate(self, d: PerMessageDeflate) -> Setup {
        Setup {
            deflate: Some(d),
            ..self
        }
    }

    pub fn max(self, n: usize) -> Setup {
        Setup {
            max: Some(n),
            ..self
        }
    }

    pub fn decoder(&self) -> Decoder {
        let d = Decoder::new(self.role, self.deflate);
        match self.max {
            Some(n) => d.with_max_message_size(n),
            None => d,
        }
    }
}

/// permessage-deflate with context takeover both ways, 32 KiB windows.
pub fn deflate() -> PerMessageDeflate {
    PerMessageDeflate::default()
}

/// One message, owned.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Msg {
    Text(String),
    Binary(Vec<u8>),
    Ping(Vec<u8>),
    Pong(Vec<u8>),
    Close(Option<(u16, String)>),
}

impl Msg {
    pub fn of(m: &Message<'_>) -> Msg {
        match *m {
            Message::Text(s) => Msg::Text(s.to_owned()),
            Message::Binary(b) => Msg::Binary(b.to_vec()),
            Message::Ping(b) => Msg::Ping(b.to_vec()),
            Message::Pong(b) => Msg::Pong(b.to_vec()),
            Message::Close(c) => Msg::Close(c.map(|c| (c.code, c.reason.to_owned()))),
        }
    }

    pub fn text(s: &str) -> Msg {
        Msg::Text(s.to_owned())
    }

    pub fn close(code: u16, reason: &str) -> Msg {
        Msg::Close(Some((code, reason.to_owned())))
    }
}

/// Everything a decoder produced for some input.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Outcome {
    pub msgs: Vec<Msg>,
    /// The error it stopped with, `None` if it waits for more (or closed).
    pub error: Option<Error>,
    pub closed: bool,
}

/// Feeds `parts` one after the other, polling dry after each; checks on the
/// way that poll makes progress, that a failed decoder stays failed, and that
/// no message is over the limit.
pub fn run_parts<'a>(setup: Setup, parts: impl IntoIterator<Item = &'a [u8]>) -> Outcome {
    let mut d = setup.decoder();
    let max = d.max_message_size();
    let (mut msgs, mut error, mut fed) = (Vec::new(), None, 0usize);
    'feeding: for p in parts {
        fed += p.len();
        d.feed(p);
        loop {
            match d.poll() {
                Ok(Status::Partial) => break,
                Ok(Status::Complete(m)) => {
                    match m {
                        Message::Text(s) => assert!(s.len() <= max),
                        Message::Binary(b) => assert!(b.len() <= max),
                        Message::Ping(b) | Message::Pong(b) => assert!(b.len() <= 125),
                        Message::Close(_) => {}
                    }
                    msgs.push(Msg::of(&m));
                    // Every message takes at least a 2-byte frame header.
                    assert!(2 * msgs.len() <= fed, "poll does not make progress");
                }
                Err(e) => {
                    assert_eq!(d.poll().err(), Some(e), "a failed decoder stays failed");
                    error = Some(e);
                    break 'feeding;
                }
            }
        }
    }
    Outcome {
        msgs,
        error,
        closed: d.is_closed(),
    }
}

pub fn run_whole(setup: Setup, input: &[u8]) -> Outcome {
    run_parts(setup, [input])
}

pub fn run_bytewise(setup: Setup, input: &[u8]) -> Outcome {
    run_parts(setup, input.chunks(1))
}

/// Splits `input` at the given offsets (any order, out of range ones ignored).
pub fn run_split(setup: Setup, input: &[u8], cuts: &[usize]) -> Outcome {
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
    run_parts(setup, parts)
}

/// Runs `input` whole, byte by byte (pieces of 97 for long inputs) and cut at
/// pseudo-random points; all must agree. Returns the outcome.
pub fn run(setup: Setup, input: &[u8]) -> Outcome {
    let whole = run_whole(setup, input);
    let piece = if input.len() <= 8192 { 1 } else { 97 };
    let pieces = run_parts(setup, input.chunks(piece));
    assert_eq!(whole, pieces, "fed whole vs in pieces of {piece}");
    let mut x: u32 = 0x9e37_79b9 ^ input.len() as u32;
    let mut cuts = Vec::new();
    let mut at = 0;
    while at < input.len() {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        at += (x % 23 + 1) as usize;
        cuts.push(at);
    }
    assert_eq!(whole, run_split(setup, input, &cuts), "fed whole vs cut");
    whole
}

/// The masking key of the RFC 6455 section 5.7 examples.
pub const KEY: [u8; 4] = [0x37, 0xfa, 0x21, 0x3d];

pub const CONT: u8 = 0x0;
pub const TEXT: u8 = 0x1;
pub const BINARY: u8 = 0x2;
pub const CLOSE: u8 = 0x8;
pub const PING: u8 = 0x9;
pub const PONG: u8 = 0xA;

/// A raw frame: any FIN, RSV bits (`rsv` in 0..8, RSV1 = 4) and opcode.
pub fn raw_frame(fin: bool, rsv: u8, opcode: u8, payload: &[u8], mask: Option<[u8; 4]>) -> Vec<u8> {
    let mut out = vec![(u8::from(fin) << 7) | (rsv << 4) | opcode];
    let m = if mask.is_some() { 0x80 } else { 0 };
    match payload.len() {
        n if n < 126 => out.push(m | n as u8),
        n if n <= 0xffff => {
            out.push(m | 126);
            out.extend_from_slice(&(n as u16).to_be_bytes());
        }
        n => {
            out.push(m | 127);
            out.extend_from_slice(&(n as u64).to_be_bytes());
        }
    }
    match mask {
        Some(k) => {
            out.extend_from_slice(&k);
            out.extend(payload.iter().enumerate().map(|(i, b)| b ^ k[i % 4]));
        }
        None => out.extend_from_slice(payload),
    }
    out
}

/// A client's frame (masked with [`KEY`]).
pub fn cf(fin: bool, opcode: u8, payload: &[u8]) -> Vec<u8> {
    raw_frame(fin, 0, opcode, payload, Some(KEY))
}

/// A client's compressed frame (RSV1 set, masked).
pub fn cf_z(fin: bool, opcode: u8, payload: &[u8]) -> Vec<u8> {
    raw_frame(fin, 4, opcode, payload, Some(KEY))
}

/// A close frame's payload.
pub fn close_payload(code: u16, reason: &[u8]) -> Vec<u8> {
    let mut p = code.to_be_bytes().to_vec();
    p.extend_from_slice(reason);
    p
}

/// Concatenate frames into one stream.
pub fn stream(frames: &[Vec<u8>]) -> Vec<u8> {
    frames.concat()
}
