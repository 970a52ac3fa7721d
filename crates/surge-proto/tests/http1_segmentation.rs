//! The same bytes mean the same thing however the network cut them into
//! reads. Each test here feeds one input whole, byte by byte and at every
//! single cut point, and expects one answer from all of them; each was found
//! by `http1_props.rs` or the fuzz target and failed before its fix.

mod common;

use common::{run_bytewise, run_split, run_whole, small_limits, Outcome};
use surge_proto::http1::server::{Error, Limits};

/// Runs `input` whole, byte by byte and cut once at every offset; all must
/// agree. Returns the common outcome.
fn agree(limits: Limits, input: &[u8]) -> Outcome {
    let whole = run_whole(limits, input);
    let show = String::from_utf8_lossy(input);
    assert_eq!(
        run_bytewise(limits, input),
        whole,
        "byte by byte vs whole: {show:?}"
    );
    for cut in 1..input.len() {
        assert_eq!(
            run_split(limits, input, &[cut]),
            whole,
            "cut at {cut} vs whole: {show:?}"
        );
    }
    whole
}

fn error(limits: Limits, input: &[u8]) -> Option<Error> {
    agree(limits, input).error
}

fn chunked(rest: &str) -> Vec<u8> {
    format!("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n{rest}").into_bytes()
}

/// The trailer section is CRLF-strict like the rest of the chunked coding.
/// A bare LF ending it was refused when it arrived alone and accepted when
/// the next request came in the same read; inside a trailer field it passed.
#[test]
fn trailer_lines_end_in_crlf() {
    let d = Limits::default();
    let next = "GET / HTTP/1.1\r\nHost: a\r\n\r\n";
    assert_eq!(
        error(d, &chunked(&format!("0\r\n\n{next}"))),
        Some(Error::InvalidTrailers)
    );
    assert_eq!(error(d, &chunked("0\r\n\n")), Some(Error::InvalidTrailers));
    assert_eq!(
        error(d, &chunked("0\r\nX: a\n\r\n")),
        Some(Error::InvalidTrailers)
    );
    let ok = agree(d, &chunked("3\r\nabc\r\n0\r\nX: a\r\nY: b\r\n\r\n"));
    assert_eq!(ok.error, None);
    assert_eq!(ok.reqs[0].body, b"abc");
}

/// The trailer section limit held only while the section was incomplete, so
/// a large section arriving in one read passed.
#[test]
fn trailer_section_limit_holds_when_fed_whole() {
    let l = small_limits(); // max_chunk_line: 32
    let section = |n: usize| format!("0\r\nX: {}\r\n\r\n", "t".repeat(n - 7));
    assert_eq!(section(32).len(), 32 + 3);
    assert_eq!(error(l, &chunked(&section(32))), None);
    assert_eq!(
        error(l, &chunked(&section(33))),
        Some(Error::InvalidTrailers)
    );
    assert_eq!(
        error(l, &chunked(&section(60))),
        Some(Error::InvalidTrailers)
    );
}

/// httparse refuses "HTTP/2" before the version is complete, and the error
/// was mapped from the whole line: 505 when it had arrived, 400 when not.
#[test]
fn unsupported_version_whatever_the_cut() {
    let d = Limits::default();
    let line = |v: &str| format!("GET / {v}\r\nHost: a\r\n\r\n").into_bytes();
    for v in ["HTTP/2.0", "HTTP/3", "HTTP/1.2", "HTTP/0.9", "HTTP/10.0"] {
        assert_eq!(error(d, &line(v)), Some(Error::UnsupportedVersion), "{v}");
    }
    for v in [
        "HTTP/1.x",
        "HTTP/1",
        "HTTPS/1.1",
        "HTTP/x.1",
        "http/1.1",
        "HTTP/",
        "H",
    ] {
        assert_eq!(error(d, &line(v)), Some(Error::BadRequestLine), "{v}");
    }
}

/// The first bad header line decides the error. A folded line anywhere in
/// the head made it obs-fold, but only once that line had arrived.
#[test]
fn first_bad_header_line_decides() {
    let d = Limits::default();
    let head = |lines: &str| format!("GET / HTTP/1.1\r\nHost: a\r\n{lines}\r\n").into_bytes();
    assert_eq!(
        error(d, &head("Bad Name: x\r\nX: a\r\n b\r\n")),
        Some(Error::InvalidHeaderName)
    );
    assert_eq!(
        error(d, &head("X: a\r\n b\r\nBad Name: x\r\n")),
        Some(Error::ObsFold)
    );
    assert_eq!(error(d, &head(" X: a\r\n")), Some(Error::ObsFold));
    assert_eq!(error(d, &head("X: a\r\n\tb\r\n")), Some(Error::ObsFold));
}

/// Head size limits are decided by the shortest prefix that breaks one.
/// Before, a complete head was measured one way (a header line as name and
/// value, head size first, syntax before size) and an incomplete one another
/// (raw line length, last line only, the request line only when no empty
/// line preceded it), so the answer, even acceptance, depended on the cuts.
#[test]
fn head_limits_whatever_the_cut() {
    let l = small_limits(); // request and header lines: 64, head: 256
    let filler = "X: 0123456789012345678901234567890123456789\r\n".repeat(6);
    let long = "a".repeat(100);
    let cases = [
        // Whitespace around a value counts towards its line.
        (
            format!(
                "GET / HTTP/1.1\r\nHost: a\r\nX:{}v\r\n\r\n",
                " ".repeat(100)
            ),
            Error::HeaderLineTooLong,
        ),
        // A long request line after an empty line is a long request line.
        (
            format!("\r\nGET /{long} HTTP/1.1\r\nHost: a\r\n\r\n"),
            Error::RequestLineTooLong,
        ),
        // The first limit broken wins over a later one...
        (
            format!("GET /{long} HTTP/1.1\r\nHost: a\r\n{filler}\r\n"),
            Error::RequestLineTooLong,
        ),
        (
            format!("GET / HTTP/1.1\r\nX: {long}\r\nHost: a\r\n{filler}\r\n"),
            Error::HeaderLineTooLong,
        ),
        // ...and over a syntax error after it,
        (
            format!("GET /{long}\x01 HTTP/1.1\r\nHost: a\r\n\r\n"),
            Error::RequestLineTooLong,
        ),
        // but not over one before it.
        (
            format!("GET /\x01{long} HTTP/1.1\r\nHost: a\r\n\r\n"),
            Error::BadRequestLine,
        ),
        (
            format!("GET / HTTP/1.1\r\nX{long}\r\nHost: a\r\n\r\n"),
            Error::HeaderLineTooLong,
        ),
        (
            format!("GET / HTTP/1.1\r\nX {long}\r\nHost: a\r\n\r\n"),
            Error::InvalidHeaderName,
        ),
        // Endless empty lines are a head too large.
        ("\r\n".repeat(200), Error::HeadTooLarge),
    ];
    for (input, want) in cases {
        assert_eq!(error(l, input.as_bytes()), Some(want), "{input:?}");
    }
    // A head of exactly max_head bytes passes, one more byte does not.
    let head = |n: usize| {
        let mut h = format!(
            "GET / HTTP/1.1\r\nHost: a\r\n{}",
            "X: 01234567890123456789012345678\r\n".repeat(6)
        );
        h.push_str(&format!("Y: {}\r\n\r\n", "y".repeat(n - h.len() - 7)));
        assert_eq!(h.len(), n);
        h
    };
    assert_eq!(error(l, head(256).as_bytes()), None);
    assert_eq!(error(l, head(257).as_bytes()), Some(Error::HeadTooLarge));
}
