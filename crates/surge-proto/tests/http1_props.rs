//! Property tests of the HTTP/1 request parser.
//!
//! (a) A valid pipelined stream gives the requests it was made from, and the
//!     same heads and bodies whether fed whole, cut at arbitrary points or fed
//!     byte by byte.
//! (b) Arbitrary bytes (random, or a valid stream mutated) never panic, poll
//!     always returns (at most two events per byte fed, checked by `Driver`),
//!     and a failed parser keeps failing with the same error.
//! (c) Every error names a status in {400, 413, 414, 431, 501, 505}.
//! (d) An endless head is refused with 414 or 431 before more than
//!     max_head + max_request_line bytes are buffered.
//! (e) For any bytes at all, fed whole or in pieces, the outcome is the same:
//!     segmentation by the network never changes what a request means.

mod common;

use common::{run_bytewise, run_split, run_whole, small_limits, Driver, Outcome, Req};
use proptest::collection::vec;
use proptest::prelude::*;
use surge_proto::http1::common::Version;
use surge_proto::http1::server::Limits;

// ---------------------------------------------------------------------------
// A model of valid requests, and its encoding.

#[derive(Clone, Debug)]
enum Body {
    None,
    Length(Vec<u8>),
    /// Chunks (none empty), whether to add extensions, and trailer fields.
    Chunked(Vec<Vec<u8>>, bool, Vec<(String, String)>),
}

#[derive(Clone, Debug)]
struct Request {
    leading_empty_lines: usize,
    method: String,
    target: String,
    http10: bool,
    /// Header fields in order, framing fields included.
    headers: Vec<(String, String)>,
    body: Body,
    /// Bare LF instead of CRLF at the end of the head lines.
    bare_lf: bool,
    /// Upper-case hex and leading zeros in chunk sizes.
    hex_upper: bool,
    zeros: usize,
}

impl Request {
    fn encode(&self, out: &mut Vec<u8>) {
        let eol: &[u8] = if self.bare_lf { b"\n" } else { b"\r\n" };
        for _ in 0..self.leading_empty_lines {
            out.extend_from_slice(b"\r\n");
        }
        let version = if self.http10 { "HTTP/1.0" } else { "HTTP/1.1" };
        out.extend_from_slice(format!("{} {} {version}", self.method, self.target).as_bytes());
        out.extend_from_slice(eol);
        for (n, v) in &self.headers {
            out.extend_from_slice(format!("{n}: {v}").as_bytes());
            out.extend_from_slice(eol);
        }
        out.extend_from_slice(eol);
        match &self.body {
            Body::None => {}
            Body::Length(b) => out.extend_from_slice(b),
            Body::Chunked(chunks, ext, trailers) => {
                let size = |n: usize| {
                    let hex = if self.hex_upper {
                        format!("{n:X}")
                    } else {
                        format!("{n:x}")
                    };
                    format!("{}{hex}", "0".repeat(self.zeros))
                };
                for c in chunks {
                    out.extend_from_slice(size(c.len()).as_bytes());
                    if *ext {
                        out.extend_from_slice(b" ; name=\"v; x\";flag");
                    }
                    out.extend_from_slice(b"\r\n");
                    out.extend_from_slice(c);
                    out.extend_from_slice(b"\r\n");
                }
                out.extend_from_slice(size(0).as_bytes());
                if *ext {
                    out.extend_from_slice(b";last");
                }
                out.extend_from_slice(b"\r\n");
                for (n, v) in trailers {
                    out.extend_from_slice(format!("{n}: {v}\r\n").as_bytes());
                }
                out.extend_from_slice(b"\r\n");
            }
        }
    }

    /// What the parser should report for this request.
    fn expected(&self) -> Req {
        let has = |name: &str, token: &str| {
            self.headers.iter().any(|(n, v)| {
                n.eq_ignore_ascii_case(name)
                    && v.split(',').any(|t| t.trim().eq_ignore_ascii_case(token))
            })
        };
        let close = has("connection", "close");
        let (content_length, body) = match &self.body {
            Body::None => (Some(0), Vec::new()),
            Body::Length(b) => (Some(b.len() as u64), b.clone()),
            Body::Chunked(chunks, ..) => (None, chunks.concat()),
        };
        Req {
            method: self.method.clone().into_bytes(),
            target: self.target.clone().into_bytes(),
            version: if self.http10 {
                Version::Http10
            } else {
                Version::Http11
            },
            keep_alive: if self.http10 {
                has("connection", "keep-alive") && !close
            } else {
                !close
            },
            expect_continue: !self.http10 && has("expect", "100-continue"),
            content_length,
            headers: self
                .headers
                .iter()
                .map(|(n, v)| (n.clone().into_bytes(), v.clone().into_bytes()))
                .collect(),
            body,
            complete: true,
        }
    }
}

fn method() -> impl Strategy<Value = String> {
    prop_oneof![
        prop::sample::select(vec![
            "GET", "POST", "PUT", "DELETE", "PATCH", "HEAD", "OPTIONS"
        ])
        .prop_map(String::from),
        "[A-Za-z0-9!#$%&'*+.^_`|~-]{1,12}",
    ]
}

fn target() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => "/[A-Za-z0-9._~%/!$&'()*+,;=:@-]{0,40}(\\?[A-Za-z0-9=&%/?-]{0,20})?",
        1 => Just("*".to_string()),
        1 => "http://[a-z]{1,8}(:[0-9]{1,4})?/[a-z]{0,8}",
    ]
}

/// Header values: visible characters, with inner spaces and tabs.
fn value() -> impl Strategy<Value = String> {
    prop_oneof![Just(String::new()), "[!-~]", "[!-~][ \t!-~]{0,40}[!-~]",]
}

fn extra_header() -> impl Strategy<Value = (String, String)> {
    ("X-[A-Za-z0-9!#$%&'*+.^_`|~-]{1,12}", value())
}

fn body(http10: bool) -> BoxedStrategy<Body> {
    let bytes = vec(any::<u8>(), 0..300);
    let chunk = vec(any::<u8>(), 1..80);
    let trailer = ("[A-Za-z][A-Za-z0-9-]{0,10}", value());
    let length = bytes.prop_map(Body::Length);
    if http10 {
        prop_oneof![Just(Body::None), length].boxed()
    } else {
        prop_oneof![
            1 => Just(Body::None),
            2 => length,
            2 => (vec(chunk, 0..6), any::<bool>(), vec(trailer, 0..3))
                .prop_map(|(c, e, t)| Body::Chunked(c, e, t)),
        ]
        .boxed()
    }
}

fn request() -> impl Strategy<Value = Request> {
    any::<bool>().prop_flat_map(|http10| {
        (
            (0usize..3, method(), target()),
            vec(extra_header(), 0..6),
            prop::option::of(prop::sample::select(vec![
                "close",
                "keep-alive",
                "Keep-Alive, Upgrade",
                "upgrade,  close",
            ])),
            any::<bool>(),
            body(http10),
            (any::<prop::sample::Index>(), any::<prop::sample::Index>()),
            (prop::bool::weighted(0.2), any::<bool>(), 0usize..3),
            prop::sample::select(vec!["Host", "host", "HOST"]),
        )
            .prop_map(
                move |(
                    (leading_empty_lines, method, target),
                    mut headers,
                    connection,
                    expect,
                    body,
                    (host_at, framing_at),
                    (bare_lf, hex_upper, zeros),
                    host,
                )| {
                    if !http10 || host_at.index(2) == 0 {
                        let at = host_at.index(headers.len() + 1);
                        headers.insert(at, (host.to_string(), "example.com:80".to_string()));
                    }
                    if let Some(c) = connection {
                        headers.push(("Connection".to_string(), c.to_string()));
                    }
                    if expect {
                        headers.push(("Expect".to_string(), "100-continue".to_string()));
                    }
                    let framing = match &body {
                        Body::None => None,
                        Body::Length(b) => Some(("Content-Length", b.len().to_string())),
                        Body::Chunked(..) => Some(("Transfer-Encoding", "chunked".to_string())),
                    };
                    if let Some((n, v)) = framing {
                        let at = framing_at.index(headers.len() + 1);
                        headers.insert(at, (n.to_string(), v));
                    }
                    Request {
                        leading_empty_lines,
                        method,
                        target,
                        http10,
                        headers,
                        body,
                        bare_lf,
                        hex_upper,
                        zeros,
                    }
                },
            )
    })
}

/// A pipelined stream: its bytes and the requests it should parse into.
fn stream() -> impl Strategy<Value = (Vec<u8>, Vec<Req>)> {
    vec(request(), 1..6).prop_map(|reqs| {
        let mut bytes = Vec::new();
        for r in &reqs {
            r.encode(&mut bytes);
        }
        (bytes, reqs.iter().map(Request::expected).collect())
    })
}

// ---------------------------------------------------------------------------
// Mutations of valid streams, to get past the request line into every state.

#[derive(Clone, Debug)]
enum Mutation {
    Set(prop::sample::Index, u8),
    Insert(prop::sample::Index, u8),
    Delete(prop::sample::Index),
    /// Repeats a short slice many times (long lines, many headers).
    Repeat(prop::sample::Index, usize, usize),
}

fn interesting_byte() -> impl Strategy<Value = u8> {
    prop_oneof![
        3 => prop::sample::select(b"\r\n \t:;,0123456789aAfFxX-+\"=\x00\x7f\x80\xff".to_vec()),
        1 => any::<u8>(),
    ]
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        (any::<prop::sample::Index>(), interesting_byte()).prop_map(|(i, b)| Mutation::Set(i, b)),
        (any::<prop::sample::Index>(), interesting_byte())
            .prop_map(|(i, b)| Mutation::Insert(i, b)),
        any::<prop::sample::Index>().prop_map(Mutation::Delete),
        (any::<prop::sample::Index>(), 1usize..12, 2usize..200)
            .prop_map(|(i, len, times)| Mutation::Repeat(i, len, times)),
    ]
}

fn mutate(mut bytes: Vec<u8>, muts: &[Mutation]) -> Vec<u8> {
    for m in muts {
        if bytes.is_empty() {
            break;
        }
        match *m {
            Mutation::Set(ref i, b) => {
                let i = i.index(bytes.len());
                bytes[i] = b;
            }
            Mutation::Insert(ref i, b) => bytes.insert(i.index(bytes.len() + 1), b),
            Mutation::Delete(ref i) => {
                bytes.remove(i.index(bytes.len()));
            }
            Mutation::Repeat(ref i, len, times) => {
                let start = i.index(bytes.len());
                let piece = bytes[start..(start + len).min(bytes.len())].to_vec();
                let tail = bytes.split_off(start);
                for _ in 0..times {
                    bytes.extend_from_slice(&piece);
                }
                bytes.extend_from_slice(&tail);
            }
        }
    }
    bytes
}

/// Any bytes: random ones, or a valid stream with a few mutations.
fn any_input() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        1 => vec(any::<u8>(), 0..400),
        1 => vec(interesting_byte(), 0..400),
        4 => (stream(), vec(mutation(), 1..4)).prop_map(|((bytes, _), m)| mutate(bytes, &m)),
    ]
}

fn limits() -> impl Strategy<Value = Limits> {
    prop_oneof![Just(Limits::default()), Just(small_limits())]
}

const STATUSES: [u16; 6] = [400, 413, 414, 431, 501, 505];

fn check_status(out: &Outcome) -> Result<(), TestCaseError> {
    if let Some(e) = out.error {
        prop_assert!(
            STATUSES.contains(&e.status()),
            "{e:?} answers {}",
            e.status()
        );
    }
    Ok(())
}

fn cuts() -> impl Strategy<Value = Vec<prop::sample::Index>> {
    vec(any::<prop::sample::Index>(), 0..12)
}

fn at(cuts: &[prop::sample::Index], len: usize) -> Vec<usize> {
    cuts.iter().map(|c| c.index(len + 1)).collect()
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 512,
        // A failure prints its shrunk input; it then becomes a row of
        // http1_segmentation.rs or http1_table.rs rather than a seed file.
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    /// (a) Valid streams parse into their requests however they are cut.
    #[test]
    fn valid_stream_parses_the_same_however_cut((bytes, want) in stream(), cuts in cuts()) {
        let want = Outcome { reqs: want, error: None };
        let limits = Limits::default();
        prop_assert_eq!(&run_whole(limits, &bytes), &want, "fed whole");
        prop_assert_eq!(&run_split(limits, &bytes, &at(&cuts, bytes.len())), &want, "cut");
        prop_assert_eq!(&run_bytewise(limits, &bytes), &want, "byte by byte");
    }

    /// (b), (c) and (e): anything at all, under default and small limits.
    #[test]
    fn any_bytes_agree_whole_and_cut(bytes in any_input(), limits in limits(), cuts in cuts()) {
        let whole = run_whole(limits, &bytes);
        check_status(&whole)?;
        let cut = run_split(limits, &bytes, &at(&cuts, bytes.len()));
        check_status(&cut)?;
        let bytewise = run_bytewise(limits, &bytes);
        check_status(&bytewise)?;
        prop_assert_eq!(&whole, &cut, "fed whole vs cut");
        prop_assert_eq!(&whole, &bytewise, "fed whole vs byte by byte");
    }

    /// (d) An endless head is refused before it fills memory.
    #[test]
    fn endless_head_is_bounded(
        kind in 0..5u8,
        pieces in vec(1usize..3000, 1..40),
        small in any::<bool>(),
        seed in "[a-z0-9]{1,20}",
    ) {
        let limits = if small { small_limits() } else { Limits::default() };
        let bound = limits.max_head + limits.max_request_line;
        // An endless source of one kind of head bytes, none of them invalid.
        let unit: Vec<u8> = match kind {
            0 => seed.clone().into_bytes(),                               // request target
            1 => format!("X-{seed}: {seed}\r\n").into_bytes(),           // many headers
            2 => seed.clone().into_bytes(),                               // one header value
            3 => b"\r\n".to_vec(),                                        // leading empty lines
            _ => format!("X-{seed}: {}\r\n", seed.repeat(40)).into_bytes(), // long headers
        };
        let prefix: &[u8] = match kind {
            0 => b"GET /",
            1 | 4 => b"GET / HTTP/1.1\r\n",
            2 => b"GET / HTTP/1.1\r\nX-Endless: ",
            _ => b"",
        };
        let mut d = Driver::new(limits);
        d.feed(prefix);
        let mut source = unit.iter().copied().cycle();
        let mut fed = prefix.len();
        let mut i = 0;
        while d.error.is_none() {
            let n = pieces[i % pieces.len()];
            i += 1;
            let piece: Vec<u8> = source.by_ref().take(n).collect();
            d.feed(&piece);
            fed += n;
            if d.error.is_none() {
                prop_assert!(
                    d.parser.buffered() <= bound,
                    "{} bytes buffered, bound {bound}", d.parser.buffered()
                );
            }
            prop_assert!(fed <= bound + 3000, "no error after {fed} bytes");
        }
        let e = d.error.unwrap();
        prop_assert!([414, 431].contains(&e.status()), "{:?}", e);
        prop_assert!(d.reqs.is_empty());
        prop_assert_eq!(d.parser.buffered(), 0);
    }
}
