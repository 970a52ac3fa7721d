//! Byte tables for the HTTP/1 response parser: each input is fed whole, byte by
//! byte and cut at every offset, and all must give the expected responses
//! (status, body, complete) and error.

mod client_common;

use client_common::{run_bytewise, run_split, run_whole, small_limits, Outcome};
use surge_proto::http1::client::{Expect, ResponseError as E, ResponseLimits};
use surge_proto::http1::common::Version;

fn agree(limits: ResponseLimits, expects: &[Expect], input: &[u8], eof: bool) -> Outcome {
    let whole = run_whole(limits, expects, input, eof);
    let show = String::from_utf8_lossy(input);
    assert_eq!(
        run_bytewise(limits, expects, input, eof),
        whole,
        "byte by byte vs whole: {show:?}"
    );
    for cut in 1..input.len() {
        assert_eq!(
            run_split(limits, expects, input, &[cut], eof),
            whole,
            "cut at {cut} vs whole: {show:?}"
        );
    }
    whole
}

/// (status, body, complete) of each response, and the error.
type Summary = (Vec<(u16, Vec<u8>, bool)>, Option<E>);

fn summary(o: &Outcome) -> Summary {
    (
        o.resps
            .iter()
            .map(|r| (r.status, r.body.clone(), r.complete))
            .collect(),
        o.error,
    )
}

fn check(input: &str, eof: bool, expected: &[(u16, &str, bool)], error: Option<E>) {
    check_with(ResponseLimits::default(), &[], input, eof, expected, error);
}

fn check_with(
    limits: ResponseLimits,
    expects: &[Expect],
    input: &str,
    eof: bool,
    expected: &[(u16, &str, bool)],
    error: Option<E>,
) {
    let out = agree(limits, expects, input.as_bytes(), eof);
    let want: Summary = (
        expected
            .iter()
            .map(|&(s, b, c)| (s, b.as_bytes().to_vec(), c))
            .collect(),
        error,
    );
    assert_eq!(summary(&out), want, "input {input:?} eof {eof}");
}

#[test]
fn content_length() {
    check(
        "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello",
        false,
        &[(200, "hello", true)],
        None,
    );
    check(
        "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n",
        false,
        &[(200, "", true)],
        None,
    );
    check(
        "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhel",
        false,
        &[(200, "hel", false)],
        None,
    );
    check(
        "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhel",
        true,
        &[(200, "hel", false)],
        Some(E::IncompleteBody),
    );
    // A repeated identical value is that value (RFC 9110 8.6); different ones are not.
    check(
        "HTTP/1.1 200 OK\r\nContent-Length: 2, 2\r\n\r\nok",
        false,
        &[(200, "ok", true)],
        None,
    );
    check(
        "HTTP/1.1 200 OK\r\nContent-Length: 2\r\ncontent-length: 2\r\n\r\nok",
        false,
        &[(200, "ok", true)],
        None,
    );
    check(
        "HTTP/1.1 200 OK\r\nContent-Length: 2, 3\r\n\r\nok",
        false,
        &[],
        Some(E::ConflictingContentLength),
    );
    check(
        "HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n",
        false,
        &[],
        Some(E::InvalidContentLength),
    );
    check(
        "HTTP/1.1 200 OK\r\nContent-Length: 0x10\r\n\r\n",
        false,
        &[],
        Some(E::InvalidContentLength),
    );
    check(
        "HTTP/1.1 200 OK\r\nContent-Length:\r\n\r\n",
        false,
        &[],
        Some(E::InvalidContentLength),
    );
    check(
        "HTTP/1.1 200 OK\r\nContent-Length: 99999999999999999999\r\n\r\n",
        false,
        &[],
        Some(E::InvalidContentLength),
    );
}

#[test]
fn chunked() {
    let head = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n";
    check(
        &format!("{head}5\r\nhello\r\n6;x=y\r\n world\r\n0\r\n\r\n"),
        false,
        &[(200, "hello world", true)],
        None,
    );
    check(
        &format!("{head}0\r\nTrailer: 1\r\n\r\n"),
        false,
        &[(200, "", true)],
        None,
    );
    check(
        &format!("{head}5\r\nhel"),
        true,
        &[(200, "hel", false)],
        Some(E::IncompleteBody),
    );
    check(
        &format!("{head}5\r\nhello\r\n"),
        true,
        &[(200, "hello", false)],
        Some(E::IncompleteBody),
    );
    check(
        &format!("{head}z\r\n"),
        false,
        &[(200, "", false)],
        Some(E::InvalidChunkSize),
    );
    check(
        &format!("{head}5\r\nhelloXX"),
        false,
        &[(200, "hello", false)],
        Some(E::InvalidChunkTerminator),
    );
    check(
        &format!("{head}5\nhello\r\n"),
        false,
        &[(200, "", false)],
        Some(E::InvalidChunkSize),
    );
    check(
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n",
        false,
        &[],
        Some(E::UnsupportedTransferEncoding),
    );
    check(
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked, chunked\r\n\r\n",
        false,
        &[],
        Some(E::UnsupportedTransferEncoding),
    );
    check(
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n",
        false,
        &[],
        Some(E::LengthAndTransferEncoding),
    );
    check(
        "HTTP/1.0 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n",
        false,
        &[],
        Some(E::TransferEncodingInHttp10),
    );
}

#[test]
fn until_close() {
    check(
        "HTTP/1.1 200 OK\r\n\r\nsome bytes",
        false,
        &[(200, "some bytes", false)],
        None,
    );
    check(
        "HTTP/1.1 200 OK\r\n\r\nsome bytes",
        true,
        &[(200, "some bytes", true)],
        None,
    );
    check("HTTP/1.0 200 OK\r\n\r\n", true, &[(200, "", true)], None);
    let out = run_whole(
        ResponseLimits::default(),
        &[],
        b"HTTP/1.1 200 OK\r\n\r\nx",
        true,
    );
    assert!(
        !out.resps[0].keep_alive,
        "a close-delimited body ends the connection"
    );
}

#[test]
fn no_body() {
    // HEAD, 204 and 304 have no body whatever the framing headers say.
    check_with(
        ResponseLimits::default(),
        &[Expect::Head, Expect::Normal],
        "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
        false,
        &[(200, "", true), (200, "ok", true)],
        None,
    );
    check_with(
        ResponseLimits::default(),
        &[Expect::Head],
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n",
        false,
        &[(200, "", true)],
        None,
    );
    check(
        "HTTP/1.1 204 No Content\r\nContent-Length: 5\r\n\r\n",
        false,
        &[(204, "", true)],
        None,
    );
    check(
        "HTTP/1.1 304 Not Modified\r\nTransfer-Encoding: chunked\r\n\r\n",
        false,
        &[(304, "", true)],
        None,
    );
}

#[test]
fn interim_skipped() {
    check(
        "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\nHTTP/1.1 201 Created\r\nContent-Length: 1\r\n\r\nx",
        false,
        &[(201, "x", true)],
        None,
    );
    // The interim response does not use up the HEAD expectation.
    check_with(
        ResponseLimits::default(),
        &[Expect::Head],
        "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\n",
        false,
        &[(200, "", true)],
        None,
    );
    check(
        "HTTP/1.1 101 Switching Protocols\r\n\r\n",
        false,
        &[],
        Some(E::UnexpectedSwitchingProtocols),
    );
    check_with(
        small_limits(),
        &[],
        "HTTP/1.1 100 A\r\n\r\nHTTP/1.1 100 A\r\n\r\nHTTP/1.1 100 A\r\n\r\n",
        false,
        &[],
        Some(E::TooManyInterim),
    );
}

#[test]
fn pipelined() {
    check(
        "HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\naHTTP/1.1 404 Not Found\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nb\r\n0\r\n\r\nHTTP/1.1 500 Oops\r\ncontent-length: 0\r\n\r\n",
        false,
        &[(200, "a", true), (404, "b", true), (500, "", true)],
        None,
    );
}

#[test]
fn heads() {
    let out = run_whole(
        ResponseLimits::default(),
        &[],
        b"HTTP/1.0 200 Fine Thanks\r\nConnection: keep-alive\r\nX-A: b c\r\ncontent-length: 0\r\n\r\n",
        false,
    );
    let r = &out.resps[0];
    assert_eq!(r.reason, b"Fine Thanks");
    assert_eq!(r.version, Version::Http10);
    assert!(r.keep_alive);
    assert_eq!(r.headers[1], (b"X-A".to_vec(), b"b c".to_vec()));
    let out = run_whole(
        ResponseLimits::default(),
        &[],
        b"HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n",
        false,
    );
    assert!(!out.resps[0].keep_alive, "HTTP/1.0 closes unless asked");
    let out = run_whole(
        ResponseLimits::default(),
        &[],
        b"HTTP/1.1 200 OK\r\nConnection: Keep-Alive, CLOSE\r\nContent-Length: 0\r\n\r\n",
        false,
    );
    assert!(!out.resps[0].keep_alive);
    // A status line without a reason phrase.
    let out = run_whole(
        ResponseLimits::default(),
        &[],
        b"HTTP/1.1 200\r\nContent-Length: 0\r\n\r\n",
        false,
    );
    assert_eq!(
        (out.resps[0].status, out.resps[0].reason.as_slice()),
        (200, &b""[..])
    );
}

#[test]
fn malformed_heads() {
    check(
        "HTTP/2 200 OK\r\n\r\n",
        false,
        &[],
        Some(E::UnsupportedVersion),
    );
    check(
        "HTTP/1.2 200 OK\r\n\r\n",
        false,
        &[],
        Some(E::UnsupportedVersion),
    );
    check("SSH-2.0-OpenSSH\r\n", false, &[], Some(E::BadStatusLine));
    check(
        "HTTP/1.1 2000 OK\r\n\r\n",
        false,
        &[],
        Some(E::BadStatusLine),
    );
    check(
        "HTTP/1.1 099 Low\r\n\r\n",
        false,
        &[],
        Some(E::BadStatusLine),
    );
    check("HTTP/1.1 OK\r\n\r\n", false, &[], Some(E::BadStatusLine));
    check(
        "HTTP/1.1 200 OK\r\nBad Name: x\r\n\r\n",
        false,
        &[],
        Some(E::InvalidHeader),
    );
    check(
        "HTTP/1.1 200 OK\r\nA: x\r\n folded\r\n\r\n",
        false,
        &[],
        Some(E::InvalidHeader),
    );
    check(
        "HTTP/1.1 200 OK\r\nA: x\0y\r\n\r\n",
        false,
        &[],
        Some(E::InvalidHeader),
    );
    check(
        "HTTP/1.1 200 OK\r\nContent-",
        true,
        &[],
        Some(E::IncompleteHead),
    );
    // A clean close between responses is no error.
    check("", true, &[], None);
}

#[test]
fn limits() {
    let l = small_limits();
    let many = "HTTP/1.1 200 OK\r\nA: 1\r\nB: 2\r\nC: 3\r\nD: 4\r\nE: 5\r\n\r\n";
    check_with(l, &[], many, false, &[], Some(E::TooManyHeaders));
    let big = format!("HTTP/1.1 200 OK\r\nA: {}\r\n\r\n", "x".repeat(200));
    check_with(l, &[], &big, false, &[], Some(E::HeadTooLarge));
    // The head comes first, so a caller may raise the limit to stream the body.
    check_with(
        l,
        &[],
        "HTTP/1.1 200 OK\r\nContent-Length: 65\r\n\r\n",
        false,
        &[(200, "", false)],
        Some(E::BodyTooLarge),
    );
    check_with(
        l,
        &[],
        "HTTP/1.1 200 OK\r\nContent-Length: 64\r\n\r\n",
        false,
        &[(200, "", false)],
        None,
    );
    let chunked = format!(
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n20\r\n{0}\r\n21\r\n{0}x\r\n",
        "y".repeat(32)
    );
    let out = agree(l, &[], chunked.as_bytes(), false);
    assert_eq!(out.error, Some(E::BodyTooLarge));
    assert_eq!(out.resps[0].body.len(), 32);
    // Until close: exactly max_body bytes come out, then the error.
    let close = format!("HTTP/1.1 200 OK\r\n\r\n{}", "z".repeat(100));
    let out = agree(l, &[], close.as_bytes(), true);
    assert_eq!(out.error, Some(E::BodyTooLarge));
    assert_eq!(out.resps[0].body.len(), 64);
    let long_chunk_line = format!(
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1;{}\r\n",
        "e".repeat(40)
    );
    check_with(
        l,
        &[],
        &long_chunk_line,
        false,
        &[(200, "", false)],
        Some(E::InvalidChunkSize),
    );
}

#[test]
fn raised_body_limit_for_streaming() {
    let mut p = surge_proto::http1::client::ResponseParser::new(small_limits());
    p.feed(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n");
    assert!(matches!(
        p.poll(),
        Ok(Some(surge_proto::http1::client::ResponseEvent::Head(_)))
    ));
    p.set_body_limit(u64::MAX);
    p.feed(&[b'a'; 100]);
    assert!(
        matches!(p.poll(), Ok(Some(surge_proto::http1::client::ResponseEvent::Data(d))) if d.len() == 100)
    );
    assert!(matches!(
        p.poll(),
        Ok(Some(surge_proto::http1::client::ResponseEvent::End))
    ));
    assert!(p.is_idle());
}
