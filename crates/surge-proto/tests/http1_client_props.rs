//! Property tests of the HTTP/1 response parser.
//!
//! (a) A valid pipelined stream of responses (Content-Length, chunked, no-body
//!     statuses, HEAD answers, interim 1xx, a close-delimited last one) gives
//!     back the responses it was made from, whether fed whole, cut at arbitrary
//!     points or byte by byte.
//! (b) For any bytes at all (random, or a valid stream mutated), with or
//!     without the end of the stream, fed whole or in pieces, the outcome is the
//!     same and poll never panics or spins: fragmentation never changes what a
//!     response means.

mod client_common;

use client_common::{run_bytewise, run_split, run_whole, small_limits};
use proptest::collection::vec;
use proptest::prelude::*;
use surge_proto::http1::client::{Expect, ResponseLimits};

#[derive(Clone, Debug)]
enum Body {
    Length(Vec<u8>),
    Chunked(Vec<Vec<u8>>),
    /// Status 204 or 304, or a HEAD answer with a misleading Content-Length.
    Empty(u16),
    Head(u64),
}

#[derive(Clone, Debug)]
struct Response {
    status: u16,
    interim: usize,
    extra: Vec<(String, String)>,
    body: Body,
}

impl Response {
    fn encode(&self, out: &mut Vec<u8>) {
        for _ in 0..self.interim {
            out.extend_from_slice(b"HTTP/1.1 100 Continue\r\n\r\n");
        }
        let status = match self.body {
            Body::Empty(s) => s,
            _ => self.status,
        };
        out.extend_from_slice(format!("HTTP/1.1 {status} Reason Here\r\n").as_bytes());
        for (n, v) in &self.extra {
            out.extend_from_slice(format!("{n}: {v}\r\n").as_bytes());
        }
        match &self.body {
            Body::Length(b) => {
                out.extend_from_slice(format!("Content-Length: {}\r\n\r\n", b.len()).as_bytes());
                out.extend_from_slice(b);
            }
            Body::Chunked(chunks) => {
                out.extend_from_slice(b"Transfer-Encoding: chunked\r\n\r\n");
                for c in chunks {
                    out.extend_from_slice(format!("{:x};e=1\r\n", c.len()).as_bytes());
                    out.extend_from_slice(c);
                    out.extend_from_slice(b"\r\n");
                }
                out.extend_from_slice(b"0\r\nX-Trailer: t\r\n\r\n");
            }
            Body::Empty(_) => out.extend_from_slice(b"Content-Length: 7\r\n\r\n"),
            Body::Head(n) => {
                out.extend_from_slice(format!("Content-Length: {n}\r\n\r\n").as_bytes())
            }
        }
    }

    fn expect(&self) -> Expect {
        match self.body {
            Body::Head(_) => Expect::Head,
            _ => Expect::Normal,
        }
    }

    fn body(&self) -> Vec<u8> {
        match &self.body {
            Body::Length(b) => b.clone(),
            Body::Chunked(c) => c.concat(),
            Body::Empty(_) | Body::Head(_) => Vec::new(),
        }
    }
}

fn header() -> impl Strategy<Value = (String, String)> {
    ("[A-Za-z][A-Za-z0-9-]{0,10}", "[ -~]{0,20}")
        .prop_filter("no framing headers", |(n, _)| {
            let n = n.to_ascii_lowercase();
            n != "content-length" && n != "transfer-encoding" && n != "connection"
        })
        .prop_map(|(n, v)| (n, v.trim().to_string()))
}

fn response() -> impl Strategy<Value = Response> {
    let body = prop_oneof![
        vec(any::<u8>(), 0..40).prop_map(Body::Length),
        vec(vec(any::<u8>(), 1..20), 0..4).prop_map(Body::Chunked),
        prop_oneof![Just(204u16), Just(304u16)].prop_map(Body::Empty),
        (0u64..1000).prop_map(Body::Head),
    ];
    (200u16..600, 0usize..3, vec(header(), 0..4), body).prop_map(
        |(status, interim, extra, body)| Response {
            // 204 and 304 have no body: they are generated as `Body::Empty`.
            status: if status == 204 || status == 304 {
                200
            } else {
                status
            },
            interim,
            extra,
            body,
        },
    )
}

/// Cut points (those past the end are ignored).
fn cuts() -> impl Strategy<Value = Vec<usize>> {
    vec(0usize..2000, 0..12)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    #[test]
    fn valid_streams_round_trip(resps in vec(response(), 1..6), close_body in proptest::option::of(vec(any::<u8>(), 0..30)), cuts in cuts()) {
        let mut input = Vec::new();
        let mut expects = Vec::new();
        for r in &resps {
            r.encode(&mut input);
            expects.push(r.expect());
        }
        if let Some(b) = &close_body {
            input.extend_from_slice(b"HTTP/1.0 200 OK\r\n\r\n");
            input.extend_from_slice(b);
            expects.push(Expect::Normal);
        }
        let limits = ResponseLimits::default();
        let whole = run_whole(limits, &expects, &input, true);
        prop_assert_eq!(whole.error, None);
        prop_assert_eq!(whole.resps.len(), resps.len() + usize::from(close_body.is_some()));
        for (got, want) in whole.resps.iter().zip(&resps) {
            prop_assert_eq!(got.status, match want.body { Body::Empty(s) => s, _ => want.status });
            prop_assert_eq!(&got.body, &want.body());
            prop_assert!(got.complete);
            prop_assert!(got.keep_alive);
        }
        if let Some(b) = &close_body {
            let last = whole.resps.last().unwrap();
            prop_assert_eq!(&last.body, b);
            prop_assert!(last.complete && !last.keep_alive);
        }
        prop_assert_eq!(&run_split(limits, &expects, &input, &cuts, true), &whole);
        prop_assert_eq!(&run_bytewise(limits, &expects, &input, true), &whole);
    }

    #[test]
    fn mutated_streams_agree(resps in vec(response(), 1..4), flips in vec((0usize..2000, any::<u8>()), 1..4), cuts in cuts(), small in any::<bool>(), eof in any::<bool>()) {
        let mut input = Vec::new();
        let mut expects = Vec::new();
        for r in &resps {
            r.encode(&mut input);
            expects.push(r.expect());
        }
        for (at, b) in flips {
            if !input.is_empty() {
                let i = at % input.len();
                input[i] = b;
            }
        }
        let limits = if small { small_limits() } else { ResponseLimits::default() };
        let whole = run_whole(limits, &expects, &input, eof);
        prop_assert_eq!(&run_split(limits, &expects, &input, &cuts, eof), &whole);
        prop_assert_eq!(&run_bytewise(limits, &expects, &input, eof), &whole);
    }

    #[test]
    fn random_bytes_agree(input in vec(any::<u8>(), 0..300), cuts in cuts(), small in any::<bool>(), eof in any::<bool>()) {
        let limits = if small { small_limits() } else { ResponseLimits::default() };
        let mut stream = b"HTTP/1.1 200 OK\r\n".to_vec();
        stream.extend_from_slice(&input);
        for s in [&input[..], &stream[..]] {
            let whole = run_whole(limits, &[], s, eof);
            prop_assert_eq!(&run_split(limits, &[], s, &cuts, eof), &whole);
            prop_assert_eq!(&run_bytewise(limits, &[], s, eof), &whole);
        }
    }
}
