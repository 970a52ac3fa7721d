//! Table-driven tests of the HTTP/1 request parser: bytes in, requests or an
//! error (with the status to answer) out. Every row is run fed whole, and
//! again fed in small pieces, and both must give the same result.

mod common;

use common::{run_parts, run_whole, Driver, Outcome, Req};
use surge_proto::http1::common::Version;
use surge_proto::http1::server::{Error, Event, Limits, Parser};

const D: fn() -> Limits = Limits::default;

/// Runs `input` whole and in pieces (single bytes for short inputs, 97-byte
/// pieces for long ones: the head is parsed again on every poll) and checks
/// that both agree.
fn run(limits: Limits, input: &[u8]) -> Outcome {
    let (whole, pieces) = run_both(limits, input);
    assert_eq!(
        whole,
        pieces,
        "fed whole vs fed in pieces: {:?}",
        show(input)
    );
    whole
}

fn run_both(limits: Limits, input: &[u8]) -> (Outcome, Outcome) {
    let whole = run_whole(limits, input);
    let piece = if input.len() <= 4096 { 1 } else { 97 };
    (whole, run_parts(limits, input.chunks(piece)))
}

fn show(b: &[u8]) -> String {
    let s = String::from_utf8_lossy(&b[..b.len().min(300)]).into_owned();
    if b.len() > 300 {
        format!("{s}... ({} bytes)", b.len())
    } else {
        s
    }
}

/// What a row expects of one request; fields left `None` are not checked.
struct Want {
    method: &'static str,
    target: &'static str,
    version: Version,
    keep_alive: bool,
    body: &'static [u8],
    headers: Option<&'static [(&'static str, &'static str)]>,
    expect_continue: bool,
}

const fn get(target: &'static str) -> Want {
    Want {
        method: "GET",
        target,
        version: Version::Http11,
        keep_alive: true,
        body: b"",
        headers: None,
        expect_continue: false,
    }
}

const fn post(target: &'static str, body: &'static [u8]) -> Want {
    Want {
        method: "POST",
        body,
        ..get(target)
    }
}

fn check(want: &Want, got: &Req, row: &str) {
    assert_eq!(got.method, want.method.as_bytes(), "{row}: method");
    assert_eq!(got.target, want.target.as_bytes(), "{row}: target");
    assert_eq!(got.version, want.version, "{row}: version");
    assert_eq!(got.keep_alive, want.keep_alive, "{row}: keep_alive");
    assert_eq!(
        got.expect_continue, want.expect_continue,
        "{row}: expect_continue"
    );
    assert_eq!(got.body, want.body, "{row}: body");
    assert!(got.complete, "{row}: request not ended");
    if let Some(headers) = want.headers {
        let headers: Vec<(Vec<u8>, Vec<u8>)> = headers
            .iter()
            .map(|(n, v)| (n.as_bytes().to_vec(), v.as_bytes().to_vec()))
            .collect();
        assert_eq!(got.headers, headers, "{row}: headers");
    }
}

#[test]
fn valid_requests() {
    let rows: &[(&str, &[u8], &[Want])] = &[
        ("simple GET", b"GET / HTTP/1.1\r\nHost: a\r\n\r\n", &[get("/")]),
        (
            "headers kept in order, values trimmed",
            b"GET /p?q=1 HTTP/1.1\r\nHost: a\r\nX-One:  1 \r\nx-two:\t2\t\r\nX-Empty:\r\n\r\n",
            &[Want {
                headers: Some(&[("Host", "a"), ("X-One", "1"), ("x-two", "2"), ("X-Empty", "")]),
                ..get("/p?q=1")
            }],
        ),
        (
            "HTTP/1.0 closes by default",
            b"GET /old HTTP/1.0\r\n\r\n",
            &[Want { version: Version::Http10, keep_alive: false, ..get("/old") }],
        ),
        (
            "HTTP/1.0 with keep-alive",
            b"GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n",
            &[Want { version: Version::Http10, keep_alive: true, ..get("/") }],
        ),
        (
            "HTTP/1.0 with keep-alive and close",
            b"GET / HTTP/1.0\r\nConnection: keep-alive, close\r\n\r\n",
            &[Want { version: Version::Http10, keep_alive: false, ..get("/") }],
        ),
        (
            "HTTP/1.0 body by Content-Length",
            b"POST /f HTTP/1.0\r\nContent-Length: 3\r\n\r\nabc",
            &[Want { version: Version::Http10, keep_alive: false, ..post("/f", b"abc") }],
        ),
        (
            "HTTP/1.1 Connection: close",
            b"GET / HTTP/1.1\r\nHost: a\r\nConnection: upgrade, CLOSE\r\n\r\n",
            &[Want { keep_alive: false, ..get("/") }],
        ),
        (
            "Content-Length body",
            b"POST /echo HTTP/1.1\r\nHost: a\r\nContent-Length: 11\r\n\r\nhello world",
            &[post("/echo", b"hello world")],
        ),
        (
            "Content-Length with whitespace and leading zeros",
            b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length:  005 \r\n\r\nhello",
            &[post("/", b"hello")],
        ),
        (
            "Content-Length: 0",
            b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 0\r\n\r\n",
            &[post("/", b"")],
        ),
        (
            "chunked with extensions and trailers",
            b"POST /up HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n\
              5;name=value\r\nhello\r\n\
              6 ; a ; b=\"c d\"\r\n world\r\n\
              A\r\n0123456789\r\n\
              0;last\r\nX-Checksum: abc\r\nX-More: 1\r\n\r\n",
            &[post("/up", b"hello world0123456789")],
        ),
        (
            "chunked, upper-case hex and no trailers",
            b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: Chunked\r\n\r\n1F\r\n0123456789abcdef0123456789abcde\r\n0\r\n\r\n",
            &[post("/", b"0123456789abcdef0123456789abcde")],
        ),
        (
            "chunked after an empty list element",
            b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: , chunked\r\n\r\n0\r\n\r\n",
            &[post("/", b"")],
        ),
        (
            "leading CRLF before the request line",
            b"\r\n\r\nGET /after HTTP/1.1\r\nHost: a\r\n\r\n",
            &[get("/after")],
        ),
        (
            "Expect: 100-continue",
            b"PUT /x HTTP/1.1\r\nHost: a\r\nExpect: 100-Continue\r\nContent-Length: 2\r\n\r\nok",
            &[Want { method: "PUT", expect_continue: true, ..post("/x", b"ok") }],
        ),
        (
            "Expect ignored in HTTP/1.0",
            b"PUT /x HTTP/1.0\r\nExpect: 100-continue\r\n\r\n",
            &[Want {
                method: "PUT",
                version: Version::Http10,
                keep_alive: false,
                expect_continue: false,
                ..get("/x")
            }],
        ),
        (
            "other methods and targets",
            b"OPTIONS * HTTP/1.1\r\nHost: a\r\n\r\nCONNECT h:443 HTTP/1.1\r\nHost: h:443\r\n\r\n\
              M-SEARCH http://h/p?q HTTP/1.1\r\nHost: h\r\n\r\n",
            &[
                Want { method: "OPTIONS", ..get("*") },
                Want { method: "CONNECT", ..get("h:443") },
                Want { method: "M-SEARCH", ..get("http://h/p?q") },
            ],
        ),
        (
            "pipelined, bodies of both kinds",
            b"GET /1 HTTP/1.1\r\nHost: a\r\n\r\n\
              POST /2 HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nfirst\
              POST /3 HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nsec\r\n3\r\nond\r\n0\r\n\r\n\
              GET /4 HTTP/1.1\r\nHost: a\r\n\r\n\
              GET /5 HTTP/1.0\r\n\r\n",
            &[
                get("/1"),
                post("/2", b"first"),
                post("/3", b"second"),
                get("/4"),
                Want { version: Version::Http10, keep_alive: false, ..get("/5") },
            ],
        ),
        (
            "a body that looks like a request is a body",
            b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 27\r\n\r\nGET / HTTP/1.1\r\nHost: b\r\n\r\n",
            &[post("/", b"GET / HTTP/1.1\r\nHost: b\r\n\r\n")],
        ),
    ];
    for (name, input, want) in rows {
        let out = run(D(), input);
        assert_eq!(out.error, None, "{name}");
        assert_eq!(out.reqs.len(), want.len(), "{name}: {:?}", out.reqs);
        for (w, g) in want.iter().zip(&out.reqs) {
            check(w, g, name);
        }
    }
}

#[test]
fn head_accessors() {
    let mut p = Parser::new(D());
    p.feed(b"GET /a/b?x=1&y=2 HTTP/1.1\r\nHost: h\r\nCONTENT-length: 0\r\n\r\n");
    let Ok(Some(Event::Head(h))) = p.poll() else {
        panic!("no head")
    };
    assert_eq!(h.method(), b"GET");
    assert_eq!(h.path(), b"/a/b");
    assert_eq!(h.query(), b"x=1&y=2");
    assert_eq!(h.header(b"content-length"), Some(&b"0"[..]));
    assert_eq!(h.header(b"HOST"), Some(&b"h"[..]));
    assert_eq!(h.header(b"missing"), None);
    assert_eq!(h.content_length(), Some(0));
    assert!(matches!(p.poll(), Ok(Some(Event::End))));
    assert!(p.is_idle());
}

/// (target, path, query, authority)
type TargetCase = (
    &'static str,
    &'static [u8],
    &'static [u8],
    Option<&'static [u8]>,
);

#[test]
fn target_forms() {
    let cases: [TargetCase; 9] = [
        ("/a?x=1#frag", b"/a", b"x=1", None),
        ("/a#frag?not-a-query", b"/a", b"", None),
        (
            "http://example.com/p?q=1",
            b"/p",
            b"q=1",
            Some(b"example.com"),
        ),
        (
            "HTTPS://Example.com:8443/p",
            b"/p",
            b"",
            Some(b"Example.com:8443"),
        ),
        ("http://example.com?q=2", b"/", b"q=2", Some(b"example.com")),
        ("http://example.com", b"/", b"", Some(b"example.com")),
        (
            "http://user:pw@example.com/x",
            b"/x",
            b"",
            Some(b"example.com"),
        ),
        ("http://example.com#f", b"/", b"", Some(b"example.com")),
        ("*", b"*", b"", None),
    ];
    for (target, path, query, authority) in cases {
        let mut p = Parser::new(D());
        p.feed(format!("OPTIONS {target} HTTP/1.1\r\nHost: h\r\n\r\n").as_bytes());
        let Ok(Some(Event::Head(h))) = p.poll() else {
            panic!("no head for {target}")
        };
        assert_eq!(h.path(), path, "{target}");
        assert_eq!(h.query(), query, "{target}");
        assert_eq!(h.authority(), authority, "{target}");
    }
}

fn head_with(extra: &str) -> Vec<u8> {
    format!("GET / HTTP/1.1\r\nHost: a\r\n{extra}\r\n").into_bytes()
}

fn post_with(headers: &str, body: &str) -> Vec<u8> {
    format!("POST / HTTP/1.1\r\nHost: a\r\n{headers}\r\n{body}").into_bytes()
}

fn chunked(body: &str) -> Vec<u8> {
    post_with("Transfer-Encoding: chunked\r\n", body)
}

/// One row per error, each with a minimal input that triggers it.
fn error_rows() -> Vec<(&'static str, Vec<u8>, Error, u16)> {
    use Error::*;
    let long = "a".repeat(8 * 1024);
    let many: String = (0..100).map(|i| format!("X-{i}: v\r\n")).collect();
    vec![
        (
            "request line too long",
            format!("GET /{long} HTTP/1.1\r\nHost: a\r\n\r\n").into_bytes(),
            RequestLineTooLong,
            414,
        ),
        (
            "request line too long, no line end yet",
            format!("GET /{long}aaaaaaaaaa").into_bytes(),
            RequestLineTooLong,
            414,
        ),
        (
            "header line too long",
            head_with(&format!("X-Long: {long}\r\n")),
            HeaderLineTooLong,
            431,
        ),
        (
            "header line too long, no line end yet",
            format!("GET / HTTP/1.1\r\nHost: a\r\nX-Long: {long}").into_bytes(),
            HeaderLineTooLong,
            431,
        ),
        ("101 headers", head_with(&many), TooManyHeaders, 431),
        (
            "garbage request line",
            b"GARBAGE\r\n\r\n".to_vec(),
            BadRequestLine,
            400,
        ),
        (
            "request line of two words",
            b"GET /\r\nHost: a\r\n\r\n".to_vec(),
            BadRequestLine,
            400,
        ),
        (
            "two spaces in the request line",
            b"GET  / HTTP/1.1\r\n\r\n".to_vec(),
            BadRequestLine,
            400,
        ),
        (
            "lowercase version",
            b"GET / http/1.1\r\n\r\n".to_vec(),
            BadRequestLine,
            400,
        ),
        (
            "NUL in the target",
            b"GET /\0 HTTP/1.1\r\n\r\n".to_vec(),
            BadRequestLine,
            400,
        ),
        (
            "CR without LF after the request line",
            b"GET / HTTP/1.1\rHost: a\r\n\r\n".to_vec(),
            BadRequestLine,
            400,
        ),
        (
            "HTTP/2.0",
            b"GET / HTTP/2.0\r\nHost: a\r\n\r\n".to_vec(),
            UnsupportedVersion,
            505,
        ),
        (
            "HTTP/1.2",
            b"GET / HTTP/1.2\r\nHost: a\r\n\r\n".to_vec(),
            UnsupportedVersion,
            505,
        ),
        (
            "space before colon",
            b"GET / HTTP/1.1\r\nHost : a\r\n\r\n".to_vec(),
            InvalidHeaderName,
            400,
        ),
        (
            "empty header name",
            head_with(": v\r\n"),
            InvalidHeaderName,
            400,
        ),
        (
            "no colon",
            head_with("X-No-Colon\r\n"),
            InvalidHeaderName,
            400,
        ),
        (
            "bracket in header name",
            head_with("X(y): v\r\n"),
            InvalidHeaderName,
            400,
        ),
        (
            "control char in value",
            head_with("X: a\x01b\r\n"),
            InvalidHeaderValue,
            400,
        ),
        (
            "DEL in value",
            head_with("X: a\x7fb\r\n"),
            InvalidHeaderValue,
            400,
        ),
        (
            "CR in value",
            head_with("X: a\rb\r\n"),
            InvalidHeaderValue,
            400,
        ),
        ("obs-fold", head_with("X: a\r\n b\r\n"), ObsFold, 400),
        (
            "obs-fold with a tab",
            head_with("X: a\r\n\tb\r\n"),
            ObsFold,
            400,
        ),
        (
            "missing Host in HTTP/1.1",
            b"GET / HTTP/1.1\r\n\r\n".to_vec(),
            MissingHost,
            400,
        ),
        (
            "duplicate Host",
            head_with("host: b\r\n"),
            DuplicateHost,
            400,
        ),
        (
            "Content-Length and Transfer-Encoding",
            post_with(
                "Transfer-Encoding: chunked\r\nContent-Length: 5\r\n",
                "0\r\n\r\n",
            ),
            LengthAndTransferEncoding,
            400,
        ),
        (
            "duplicate Content-Length",
            post_with("Content-Length: 5\r\nContent-Length: 5\r\n", "hello"),
            DuplicateContentLength,
            400,
        ),
        (
            "Content-Length +5",
            post_with("Content-Length: +5\r\n", "hello"),
            InvalidContentLength,
            400,
        ),
        (
            "Content-Length 5,5",
            post_with("Content-Length: 5,5\r\n", "hello"),
            InvalidContentLength,
            400,
        ),
        (
            "Content-Length -1",
            post_with("Content-Length: -1\r\n", ""),
            InvalidContentLength,
            400,
        ),
        (
            "Content-Length empty",
            post_with("Content-Length:\r\n", ""),
            InvalidContentLength,
            400,
        ),
        (
            "Content-Length hex",
            post_with("Content-Length: 0x5\r\n", ""),
            InvalidContentLength,
            400,
        ),
        (
            "Content-Length 5 5",
            post_with("Content-Length: 5 5\r\n", ""),
            InvalidContentLength,
            400,
        ),
        (
            "Content-Length over u64",
            post_with("Content-Length: 18446744073709551616\r\n", ""),
            InvalidContentLength,
            400,
        ),
        (
            "Content-Length of 20 digits",
            post_with("Content-Length: 00000000000000000005\r\n", "hello"),
            InvalidContentLength,
            400,
        ),
        (
            "TE gzip",
            post_with("Transfer-Encoding: gzip\r\n", ""),
            ChunkedNotLast,
            400,
        ),
        (
            "TE chunked, gzip",
            post_with("Transfer-Encoding: chunked, gzip\r\n", ""),
            ChunkedNotLast,
            400,
        ),
        (
            "TE empty",
            post_with("Transfer-Encoding:\r\n", ""),
            ChunkedNotLast,
            400,
        ),
        (
            "TE chunked, chunked",
            post_with("Transfer-Encoding: chunked, chunked\r\n", ""),
            ChunkedNotLast,
            400,
        ),
        (
            "TE chunked in two fields",
            post_with(
                "Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n",
                "",
            ),
            ChunkedNotLast,
            400,
        ),
        (
            "TE gzip, chunked",
            post_with("Transfer-Encoding: gzip, chunked\r\n", ""),
            UnsupportedTransferEncoding,
            501,
        ),
        (
            "TE gzip then chunked in two fields",
            post_with(
                "Transfer-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n",
                "",
            ),
            UnsupportedTransferEncoding,
            501,
        ),
        (
            "TE in HTTP/1.0",
            b"POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n".to_vec(),
            TransferEncodingInHttp10,
            400,
        ),
        (
            "body over the limit by Content-Length",
            post_with("Content-Length: 1048577\r\n", ""),
            BodyTooLarge,
            413,
        ),
        (
            "one chunk over the body limit",
            chunked("100001\r\n"),
            BodyTooLarge,
            413,
        ),
        (
            "chunk size not hex",
            chunked("zz\r\n"),
            InvalidChunkSize,
            400,
        ),
        (
            "chunk size negative",
            chunked("-1\r\n"),
            InvalidChunkSize,
            400,
        ),
        (
            "chunk size with 0x",
            chunked("0x5\r\nhello\r\n"),
            InvalidChunkSize,
            400,
        ),
        ("chunk size empty", chunked("\r\n"), InvalidChunkSize, 400),
        (
            "chunk size after a space",
            chunked(" 5\r\nhello\r\n"),
            InvalidChunkSize,
            400,
        ),
        (
            "chunk size then garbage",
            chunked("5 x\r\nhello\r\n"),
            InvalidChunkSize,
            400,
        ),
        (
            "chunk size with bare LF",
            chunked("5\nhello\r\n"),
            InvalidChunkSize,
            400,
        ),
        (
            "chunk size over u64",
            chunked("10000000000000000\r\n"),
            InvalidChunkSize,
            400,
        ),
        (
            "chunk extension with a control char",
            chunked("5;a\x01\r\nhello\r\n"),
            InvalidChunkSize,
            400,
        ),
        (
            "chunk-size line too long",
            chunked(&format!("5;{}\r\nhello\r\n", "e".repeat(4096))),
            InvalidChunkSize,
            400,
        ),
        (
            "chunk-size line too long, no line end yet",
            chunked(&format!("5;{}", "e".repeat(4096))),
            InvalidChunkSize,
            400,
        ),
        (
            "missing CRLF after chunk data",
            chunked("5\r\nhelloX\r\n0\r\n\r\n"),
            InvalidChunkTerminator,
            400,
        ),
        (
            "LF only after chunk data",
            chunked("5\r\nhello\n0\r\n\r\n"),
            InvalidChunkTerminator,
            400,
        ),
        (
            "chunk data too long",
            chunked("3\r\nhello\r\n0\r\n\r\n"),
            InvalidChunkTerminator,
            400,
        ),
        (
            "space in a trailer name",
            chunked("0\r\nBad Name: v\r\n\r\n"),
            InvalidTrailers,
            400,
        ),
        (
            "control char in a trailer",
            chunked("0\r\nX: \x01\r\n\r\n"),
            InvalidTrailers,
            400,
        ),
        (
            "obs-fold in trailers",
            chunked("0\r\nX: a\r\n b\r\n\r\n"),
            InvalidTrailers,
            400,
        ),
        (
            "trailer section too large",
            chunked(&format!("0\r\nX: {}\r\n", "t".repeat(4096))),
            InvalidTrailers,
            400,
        ),
    ]
}

#[test]
fn every_error_with_its_status() {
    let rows = error_rows();
    let mut failed = Vec::new();
    for (name, input, error, status) in &rows {
        let (whole, pieces) = run_both(D(), input);
        if whole.error != Some(*error) || pieces.error != Some(*error) {
            failed.push(format!(
                "{name}: want {error:?}, fed whole {:?}, in pieces {:?}: {:?}",
                whole.error,
                pieces.error,
                show(input)
            ));
        }
        assert_eq!(error.status(), *status, "{name}");
        assert!(!error.message().is_empty());
        assert_eq!(error.to_string(), format!("{} ({status})", error.message()));
    }
    assert!(
        failed.is_empty(),
        "{} rows failed:\n{}",
        failed.len(),
        failed.join("\n")
    );
    // Every variant of error.rs has a row.
    use Error::*;
    let all = [
        RequestLineTooLong,
        HeaderLineTooLong,
        TooManyHeaders,
        HeadTooLarge,
        BadRequestLine,
        UnsupportedVersion,
        InvalidHeaderName,
        InvalidHeaderValue,
        ObsFold,
        MissingHost,
        DuplicateHost,
        LengthAndTransferEncoding,
        DuplicateContentLength,
        InvalidContentLength,
        ChunkedNotLast,
        UnsupportedTransferEncoding,
        TransferEncodingInHttp10,
        BodyTooLarge,
        InvalidChunkSize,
        InvalidChunkTerminator,
        InvalidTrailers,
    ];
    for e in all {
        let covered = rows.iter().any(|r| r.2 == e) || e == HeadTooLarge; // see head_too_large_*
        assert!(covered, "no row for {e:?}");
    }
}

/// The requests before a bad one are all delivered; the error comes after.
#[test]
fn error_after_good_pipelined_requests() {
    let mut input = b"GET /ok HTTP/1.1\r\nHost: a\r\n\r\nPOST /ok2 HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\n\r\nx".to_vec();
    input.extend_from_slice(
        b"GET / HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\nx",
    );
    let out = run(D(), &input);
    assert_eq!(out.reqs.len(), 2);
    check(&get("/ok"), &out.reqs[0], "first");
    check(&post("/ok2", b"x"), &out.reqs[1], "second");
    assert_eq!(out.error, Some(Error::DuplicateContentLength));
}

fn big_head(headers: usize, value_len: usize) -> Vec<u8> {
    let v = "v".repeat(value_len);
    let fields: String = (0..headers).map(|i| format!("X-{i:03}: {v}\r\n")).collect();
    head_with(&fields)
}

/// A head over 64 KiB made of lines that each respect the line limit.
#[test]
fn head_too_large_whole() {
    let input = big_head(70, 1000);
    assert!(input.len() > 64 * 1024);
    let out = run(D(), &input);
    assert_eq!(out.error, Some(Error::HeadTooLarge));
    assert_eq!(Error::HeadTooLarge.status(), 431);
}

/// Fed in many small reads, without the end of the head ever arriving: the
/// parser refuses it once 64 KiB are buffered, not later.
#[test]
fn head_too_large_across_many_small_feeds() {
    let input = big_head(99, 1000);
    let input = &input[..input.len() - 2]; // no empty line: never complete
    let mut d = Driver::new(D());
    let mut fed = 0;
    for piece in input.chunks(100) {
        d.feed(piece);
        fed += piece.len();
        if d.error.is_some() {
            break;
        }
        assert!(
            d.parser.buffered() <= 64 * 1024,
            "{} bytes buffered",
            d.parser.buffered()
        );
    }
    assert_eq!(d.error, Some(Error::HeadTooLarge));
    assert!(fed <= 64 * 1024 + 100, "refused only after {fed} bytes");
    assert_eq!(d.parser.buffered(), 0, "a failed parser keeps no buffer");
}

/// An exactly-at-the-limit head and body pass; one byte more does not.
#[test]
fn limits_are_inclusive() {
    let limits = common::small_limits();
    // Request line of exactly max_request_line bytes (CRLF excluded).
    let line = |n: usize| format!("GET /{} HTTP/1.1\r\nHost: a\r\n\r\n", "a".repeat(n - 14));
    assert_eq!(line(64).find('\r'), Some(64));
    assert_eq!(run(limits, line(64).as_bytes()).error, None);
    assert_eq!(
        run(limits, line(65).as_bytes()).error,
        Some(Error::RequestLineTooLong)
    );
    // Header line of exactly max_header_line bytes.
    let header = |n: usize| head_with(&format!("X: {}\r\n", "h".repeat(n - 3)));
    assert_eq!(run(limits, &header(64)).error, None);
    assert_eq!(
        run(limits, &header(65)).error,
        Some(Error::HeaderLineTooLong)
    );
    // Body of exactly max_body bytes.
    let body = |n: usize| post_with(&format!("Content-Length: {n}\r\n"), &"b".repeat(n));
    assert_eq!(run(limits, &body(128)).error, None);
    assert_eq!(run(limits, &body(129)).error, Some(Error::BodyTooLarge));
    let chunked_body = |n: usize| chunked(&format!("{n:x}\r\n{}\r\n0\r\n\r\n", "b".repeat(n)));
    assert_eq!(run(limits, &chunked_body(128)).error, None);
    assert_eq!(
        run(limits, &chunked_body(129)).error,
        Some(Error::BodyTooLarge)
    );
    // Exactly max_headers fields.
    let fields = |n: usize| head_with(&(1..n).map(|i| format!("X{i}: v\r\n")).collect::<String>());
    assert_eq!(run(limits, &fields(8)).error, None);
    assert_eq!(run(limits, &fields(9)).error, Some(Error::TooManyHeaders));
}

#[test]
fn body_limit_by_content_length_is_refused_before_the_body() {
    let mut p = Parser::new(D());
    p.feed(b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 2000000\r\n\r\n");
    assert!(matches!(p.poll(), Ok(Some(Event::Head(_)))));
    assert_eq!(p.poll().err(), Some(Error::BodyTooLarge));
}

#[test]
fn body_limit_by_chunks_adds_up() {
    // Four chunks of 300 KiB: the fourth goes over 1 MiB.
    let chunk = "c".repeat(300 * 1024);
    let size = format!("{:x}", chunk.len());
    let body = format!("{size}\r\n{chunk}\r\n").repeat(4) + "0\r\n\r\n";
    let out = run(D(), &chunked(&body));
    assert_eq!(out.error, Some(Error::BodyTooLarge));
    assert_eq!(out.reqs[0].body.len(), 3 * 300 * 1024);
}

/// A route raises the body limit for its request only; the next request on
/// the connection is back to the default.
#[test]
fn set_body_limit_applies_to_one_request() {
    let two_mib = 2 * 1024 * 1024;
    let body = "b".repeat(1024 * 1024 + 1);
    let mut input = post_with(&format!("Content-Length: {}\r\n", body.len()), &body);
    input.extend(chunked(&format!("{:x}\r\n{body}\r\n0\r\n\r\n", body.len())));

    // The default refuses the first request.
    assert_eq!(run_whole(D(), &input).error, Some(Error::BodyTooLarge));

    // Raised for the first request only: the second (chunked) is refused.
    let mut p = Parser::new(D());
    p.feed(&input);
    let mut bodies = vec![0usize; 0];
    let mut heads = 0;
    let result = loop {
        match p.poll() {
            Ok(Some(Event::Head(_))) => {
                heads += 1;
                bodies.push(0);
                if heads == 1 {
                    p.set_body_limit(two_mib);
                }
            }
            Ok(Some(Event::Data(d))) => *bodies.last_mut().unwrap() += d.len(),
            Ok(Some(Event::End)) => {}
            other => break other,
        }
    };
    assert_eq!(result.err(), Some(Error::BodyTooLarge));
    assert_eq!(heads, 2);
    assert_eq!(bodies[0], body.len());

    // Raised for every request: both pass.
    let mut d = Driver::new(D());
    d.body_limit = Some(two_mib);
    d.feed(&input);
    let out = d.outcome();
    assert_eq!(out.error, None);
    assert_eq!(out.reqs.len(), 2);
    assert!(out
        .reqs
        .iter()
        .all(|r| r.body.len() == body.len() && r.complete));
}

/// Lowering the limit works too (a route that takes no body).
#[test]
fn set_body_limit_can_lower() {
    let mut d = Driver::new(D());
    d.body_limit = Some(4);
    d.feed(&post_with("Content-Length: 4\r\n", "1234"));
    d.feed(&chunked("3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n"));
    let out = d.outcome();
    assert_eq!(out.reqs.len(), 2);
    assert_eq!(out.reqs[0].body, b"1234");
    assert_eq!(out.reqs[1].body, b"abc");
    assert_eq!(out.error, Some(Error::BodyTooLarge));
}

#[test]
fn a_failed_parser_stays_failed() {
    let mut p = Parser::new(D());
    p.feed(b"GET / HTTP/1.1\r\n\r\n");
    assert_eq!(p.poll().err(), Some(Error::MissingHost));
    for _ in 0..3 {
        assert_eq!(p.poll().err(), Some(Error::MissingHost));
    }
    // Even a valid request fed afterwards cannot revive it.
    p.feed(b"GET / HTTP/1.1\r\nHost: a\r\n\r\n");
    assert_eq!(p.poll().err(), Some(Error::MissingHost));
    assert!(!p.is_idle());
}

#[test]
fn idle_and_in_head() {
    let mut p = Parser::new(D());
    assert!(p.is_idle() && !p.in_head());
    assert!(matches!(p.poll(), Ok(None)));
    p.feed(b"GET / HT");
    assert!(matches!(p.poll(), Ok(None)));
    assert!(p.in_head() && !p.is_idle());
    p.feed(b"TP/1.1\r\nHost: a\r\nContent-Length: 2\r\n\r\nh");
    assert!(matches!(p.poll(), Ok(Some(Event::Head(_)))));
    assert!(!p.in_head() && !p.is_idle());
    assert!(matches!(p.poll(), Ok(Some(Event::Data(d))) if &d[..] == b"h"));
    assert!(matches!(p.poll(), Ok(None)));
    p.feed(b"i");
    assert!(matches!(p.poll(), Ok(Some(Event::Data(d))) if &d[..] == b"i"));
    assert!(matches!(p.poll(), Ok(Some(Event::End))));
    assert!(p.is_idle());
    assert_eq!(p.buffered(), 0);
}

/// A bare CR in a head fed in pieces fails as it does fed whole (found by the
/// property test `any_bytes_agree_whole_and_cut`: the partial-head shortcut
/// used to wait for more instead).
#[test]
fn bare_cr_fails_the_same_whole_and_byte_by_byte() {
    for input in [
        &b"GET /_ HTTP/1.1\r\nHost: example.com:80\r\n\r0"[..],
        &b"GET /_ HTTP/1.1\r\nHost: exa\rmple\r\n\r\n"[..],
        &b"GET /_ HTTP/1.1\r\nX-A\rB: 1\r\n\r\n"[..],
    ] {
        let mut whole = Parser::new(D());
        whole.feed(input);
        let whole_err = whole.poll().is_err();
        let mut bytewise = Parser::new(D());
        let mut bytewise_err = false;
        for b in input {
            bytewise.feed(std::slice::from_ref(b));
            if bytewise.poll().is_err() {
                bytewise_err = true;
                break;
            }
        }
        assert!(whole_err, "{:?}", String::from_utf8_lossy(input));
        assert_eq!(
            whole_err,
            bytewise_err,
            "{:?}",
            String::from_utf8_lossy(input)
        );
    }
}
