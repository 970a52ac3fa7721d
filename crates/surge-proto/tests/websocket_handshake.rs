//! The opening handshake: upgrade requests in, an `UpgradeRequest` or a
//! refusal (status and headers to answer) out; `Sec-WebSocket-Extensions`
//! parsing and permessage-deflate negotiation as tables; the 101 head's bytes.

use std::borrow::Cow;

use surge_proto::websocket::{
    accept_key, deflate_offers, negotiate, parse_extensions, validate_request, write_rejection,
    write_response, DeflateConfig, DeflateOffer, Extension, HandshakeError, PerMessageDeflate,
    UpgradeRequest,
};

/// The RFC 6455 section 1.3 request's headers.
const BASE: &[(&str, &str)] = &[
    ("Host", "server.example.com"),
    ("Upgrade", "websocket"),
    ("Connection", "Upgrade"),
    ("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ=="),
    ("Origin", "http://example.com"),
    ("Sec-WebSocket-Protocol", "chat, superchat"),
    ("Sec-WebSocket-Version", "13"),
];

fn check<'a>(
    method: &str,
    headers: &'a [(&'a str, &'a str)],
) -> Result<UpgradeRequest<'a>, HandshakeError> {
    validate_request(
        method.as_bytes(),
        headers.iter().map(|(n, v)| (n.as_bytes(), v.as_bytes())),
    )
}

/// BASE with `name` replaced by `value` (removed when `None`), plus `extra`.
fn with(
    name: &'static str,
    value: Option<&'static str>,
    extra: &[(&'static str, &'static str)],
) -> Vec<(&'static str, &'static str)> {
    let mut h: Vec<_> = BASE
        .iter()
        .filter(|(n, _)| !n.eq_ignore_ascii_case(name))
        .copied()
        .collect();
    if let Some(v) = value {
        h.push((name, v));
    }
    h.extend_from_slice(extra);
    h
}

#[test]
fn rfc6455_accept_key() {
    assert_eq!(
        &accept_key(b"dGhlIHNhbXBsZSBub25jZQ=="),
        b"s3pPLMBiTxaQ9kYGzzhZRbK+xOo="
    );
}

#[test]
fn rfc6455_request_and_response() {
    let req = check("GET", BASE).unwrap();
    assert_eq!(req.key, b"dGhlIHNhbXBsZSBub25jZQ==");
    assert_eq!(req.protocols, ["chat", "superchat"]);
    assert!(req.deflate_offers.is_empty());
    assert_eq!(&req.accept(), b"s3pPLMBiTxaQ9kYGzzhZRbK+xOo=");
    assert_eq!(
        req.select_protocol(&["superchat", "chat"]),
        Some("superchat")
    );
    assert_eq!(req.select_protocol(&["mqtt"]), None);
    let mut buf = Vec::new();
    write_response(&mut buf, req.key, req.select_protocol(&["chat"]), None, &[]);
    assert_eq!(
        String::from_utf8(buf).unwrap(),
        "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
         Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\nSec-WebSocket-Protocol: chat\r\n\r\n"
    );
}

#[test]
fn response_with_deflate_and_extra_headers() {
    let d = PerMessageDeflate {
        server_no_context_takeover: true,
        server_max_window_bits: Some(10),
        ..PerMessageDeflate::default()
    };
    let mut buf = Vec::new();
    write_response(
        &mut buf,
        b"dGhlIHNhbXBsZSBub25jZQ==",
        None,
        Some(&d),
        &[(b"Server", b"surge")],
    );
    assert_eq!(
        String::from_utf8(buf).unwrap(),
        "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
         Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n\
         Sec-WebSocket-Extensions: permessage-deflate; server_no_context_takeover; server_max_window_bits=10\r\n\
         Server: surge\r\n\r\n"
    );
}

#[test]
fn header_names_and_tokens_ignore_case() {
    let h = [
        ("UPGRADE", "WebSocket"),
        ("connection", "keep-alive, UPGRADE"),
        ("sec-websocket-key", "  dGhlIHNhbXBsZSBub25jZQ==\t"),
        ("SEC-WEBSOCKET-VERSION", "13"),
    ];
    let req = check("GET", &h).unwrap();
    assert_eq!(req.key, b"dGhlIHNhbXBsZSBub25jZQ==");
    assert!(req.protocols.is_empty());
    // Lists spread over several header lines, empty elements skipped.
    let h = with(
        "Connection",
        Some("keep-alive"),
        &[("Connection", "upgrade"), ("Upgrade", "h2c, websocket")],
    );
    assert!(check("GET", &h).is_ok());
    let h = with(
        "Sec-WebSocket-Protocol",
        Some("a,,b"),
        &[("Sec-WebSocket-Protocol", " c ")],
    );
    assert_eq!(check("GET", &h).unwrap().protocols, ["a", "b", "c"]);
}

/// Fields an answer carries.
type Fields = &'static [(&'static str, &'static str)];

/// Header fields of a request.
type Headers = Vec<(&'static str, &'static str)>;

/// A row: its name, the method, the headers, the error they provoke.
type ErrorRow = (&'static str, &'static str, Headers, HandshakeError);

fn error_rows() -> Vec<ErrorRow> {
    use HandshakeError::*;
    vec![
        ("POST", "POST", BASE.to_vec(), NotGet),
        ("lower-case method", "get", BASE.to_vec(), NotGet),
        ("no Upgrade", "GET", with("Upgrade", None, &[]), NotUpgrade),
        (
            "Upgrade: h2c",
            "GET",
            with("Upgrade", Some("h2c"), &[]),
            NotUpgrade,
        ),
        (
            "Upgrade: websocket2",
            "GET",
            with("Upgrade", Some("websocket2"), &[]),
            NotUpgrade,
        ),
        (
            "no Connection",
            "GET",
            with("Connection", None, &[]),
            NoConnectionUpgrade,
        ),
        (
            "Connection: keep-alive",
            "GET",
            with("Connection", Some("keep-alive"), &[]),
            NoConnectionUpgrade,
        ),
        (
            "Connection: upgraded",
            "GET",
            with("Connection", Some("upgraded"), &[]),
            NoConnectionUpgrade,
        ),
        (
            "no version",
            "GET",
            with("Sec-WebSocket-Version", None, &[]),
            UnsupportedVersion,
        ),
        (
            "version 8",
            "GET",
            with("Sec-WebSocket-Version", Some("8"), &[]),
            UnsupportedVersion,
        ),
        (
            "version 13, 8",
            "GET",
            with("Sec-WebSocket-Version", Some("13, 8"), &[]),
            UnsupportedVersion,
        ),
        (
            "versions 13 and 8",
            "GET",
            with(
                "Sec-WebSocket-Version",
                Some("13"),
                &[("Sec-WebSocket-Version", "8")],
            ),
            UnsupportedVersion,
        ),
        (
            "no key",
            "GET",
            with("Sec-WebSocket-Key", None, &[]),
            MissingKey,
        ),
        (
            "key of 15 bytes",
            "GET",
            with("Sec-WebSocket-Key", Some("AAAAAAAAAAAAAAAAAAAA"), &[]),
            InvalidKey,
        ),
        (
            "key of 17 bytes",
            "GET",
            with("Sec-WebSocket-Key", Some("AAAAAAAAAAAAAAAAAAAAAAA="), &[]),
            InvalidKey,
        ),
        (
            "key without padding",
            "GET",
            with("Sec-WebSocket-Key", Some("dGhlIHNhbXBsZSBub25jZQ"), &[]),
            InvalidKey,
        ),
        (
            "key not base64",
            "GET",
            with("Sec-WebSocket-Key", Some("dGhlIHNhbXBsZSBub25jZ!=="), &[]),
            InvalidKey,
        ),
        (
            "key with stray bits",
            "GET",
            with("Sec-WebSocket-Key", Some("dGhlIHNhbXBsZSBub25jZR=="), &[]),
            InvalidKey,
        ),
        (
            "two keys",
            "GET",
            with(
                "Sec-WebSocket-Key",
                Some("dGhlIHNhbXBsZSBub25jZQ=="),
                &[("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==")],
            ),
            InvalidKey,
        ),
        (
            "protocol with a space",
            "GET",
            with("Sec-WebSocket-Protocol", Some("chat, super chat"), &[]),
            InvalidProtocol,
        ),
        (
            "protocol with a slash",
            "GET",
            with("Sec-WebSocket-Protocol", Some("a/b"), &[]),
            InvalidProtocol,
        ),
        (
            "extensions not a list",
            "GET",
            with(
                "Sec-WebSocket-Extensions",
                Some("permessage-deflate; =15"),
                &[],
            ),
            InvalidExtensions,
        ),
        (
            "unterminated quoted value",
            "GET",
            with(
                "Sec-WebSocket-Extensions",
                Some("permessage-deflate; a=\"15"),
                &[],
            ),
            InvalidExtensions,
        ),
    ]
}

#[test]
fn every_handshake_error_with_its_answer() {
    let rows = error_rows();
    for (name, method, headers, error) in &rows {
        assert_eq!(check(method, headers).err(), Some(*error), "{name}");
    }
    use HandshakeError::*;
    let answers: &[(HandshakeError, u16, Fields)] = &[
        (NotGet, 405, &[("Allow", "GET")]),
        (NotUpgrade, 426, &[("Upgrade", "websocket")]),
        (NoConnectionUpgrade, 400, &[]),
        (
            UnsupportedVersion,
            426,
            &[("Upgrade", "websocket"), ("Sec-WebSocket-Version", "13")],
        ),
        (MissingKey, 400, &[]),
        (InvalidKey, 400, &[]),
        (InvalidProtocol, 400, &[]),
        (InvalidExtensions, 400, &[]),
    ];
    for (e, status, headers) in answers {
        assert_eq!(e.status(), *status, "{e:?}");
        assert_eq!(e.headers(), *headers, "{e:?}");
        assert!(rows.iter().any(|r| r.3 == *e), "no row for {e:?}");
        assert_eq!(e.to_string(), format!("{} ({status})", e.message()));
    }
}

#[test]
fn rejection_response() {
    let mut buf = Vec::new();
    write_rejection(&mut buf, HandshakeError::UnsupportedVersion);
    let body = "unsupported Sec-WebSocket-Version (want 13)\n";
    assert_eq!(
        String::from_utf8(buf).unwrap(),
        format!(
            "HTTP/1.1 426 \r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\n\
             Content-Type: text/plain; charset=utf-8\r\nConnection: close\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        )
    );
}

fn extensions(value: &str) -> Vec<Extension<'_>> {
    let mut out = Vec::new();
    parse_extensions(value.as_bytes(), &mut out).unwrap();
    out
}

#[test]
fn extension_lists_parse() {
    let b = |s: &'static str| Some(Cow::Borrowed(s.as_bytes()));
    let ext = extensions(
        r#"foo, permessage-deflate; client_max_window_bits ; server_max_window_bits="10",, bar;x=y"#,
    );
    assert_eq!(
        ext,
        [
            Extension {
                name: b"foo",
                params: vec![]
            },
            Extension {
                name: b"permessage-deflate",
                params: vec![
                    (&b"client_max_window_bits"[..], None),
                    (&b"server_max_window_bits"[..], b("10"))
                ],
            },
            Extension {
                name: b"bar",
                params: vec![(&b"x"[..], b("y"))]
            },
        ]
    );
    // Escapes in quoted values are resolved; commas inside quotes stay.
    let ext = extensions(r#"x; a="1\,\"2", y"#);
    assert_eq!(ext[0].params[0].1.as_deref(), Some(&b"1,\"2"[..]));
    assert_eq!(ext[1].name, b"y");
    assert!(extensions("").is_empty());
    assert!(extensions(" , ,").is_empty());
    for bad in [
        "a b",
        "a;",
        "a;b=",
        "a;b=c d",
        ";a",
        "a,\"b\"",
        "a;b=\"\\\u{1}\"",
    ] {
        let mut out = Vec::new();
        assert_eq!(
            parse_extensions(bad.as_bytes(), &mut out),
            Err(HandshakeError::InvalidExtensions),
            "{bad:?}"
        );
    }
}

#[test]
fn deflate_offers_are_validated() {
    let o = |snc, cnc, smwb, cmwb| DeflateOffer {
        server_no_context_takeover: snc,
        client_no_context_takeover: cnc,
        server_max_window_bits: smwb,
        client_max_window_bits: cmwb,
    };
    let rows: &[(&str, &[DeflateOffer])] = &[
        ("permessage-deflate", &[o(false, false, None, None)]),
        ("PerMessage-Deflate; Client_Max_Window_Bits", &[o(false, false, None, Some(15))]),
        (
            "permessage-deflate; server_no_context_takeover; client_no_context_takeover; server_max_window_bits=8; client_max_window_bits=15",
            &[o(true, true, Some(8), Some(15))],
        ),
        ("permessage-deflate; client_max_window_bits=\"9\"", &[o(false, false, None, Some(9))]),
        // Declined: bad values, repeats, unknown parameters, values where none go.
        ("permessage-deflate; server_max_window_bits", &[]),
        ("permessage-deflate; server_max_window_bits=7", &[]),
        ("permessage-deflate; server_max_window_bits=16", &[]),
        ("permessage-deflate; server_max_window_bits=010", &[]),
        ("permessage-deflate; client_max_window_bits=x", &[]),
        ("permessage-deflate; server_no_context_takeover=1", &[]),
        ("permessage-deflate; server_no_context_takeover; server_no_context_takeover", &[]),
        ("permessage-deflate; mystery", &[]),
        // A declined offer leaves the next one.
        (
            "permessage-deflate; server_max_window_bits=99, permessage-deflate; client_max_window_bits",
            &[o(false, false, None, Some(15))],
        ),
        ("x-webkit-deflate-frame", &[]),
    ];
    for (value, want) in rows {
        assert_eq!(deflate_offers(&extensions(value)), *want, "{value}");
    }
    // Through the request: offers from every Sec-WebSocket-Extensions line.
    let h = [
        ("Upgrade", "websocket"),
        ("Connection", "Upgrade"),
        ("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ=="),
        ("Sec-WebSocket-Version", "13"),
        (
            "Sec-WebSocket-Extensions",
            "permessage-deflate; client_max_window_bits",
        ),
        ("Sec-WebSocket-Extensions", "permessage-deflate"),
    ];
    let req = check("GET", &h).unwrap();
    assert_eq!(
        req.deflate_offers,
        [o(false, false, None, Some(15)), o(false, false, None, None)]
    );
}

fn response(offer: &str, config: DeflateConfig) -> Option<String> {
    let offers = deflate_offers(&extensions(offer));
    negotiate(&offers, &config).map(|d| {
        let mut buf = Vec::new();
        d.write_response_value(&mut buf);
        String::from_utf8(buf).unwrap()
    })
}

/// Offers as Autobahn's 13.x cases and browsers send them, and the answers.
#[test]
fn deflate_negotiation() {
    let d = DeflateConfig::default();
    let rows: &[(&str, DeflateConfig, Option<&str>)] = &[
        ("", d, None),
        ("x-other", d, None),
        ("permessage-deflate", d, Some("permessage-deflate")),
        // Chrome and Firefox.
        ("permessage-deflate; client_max_window_bits", d, Some("permessage-deflate")),
        // 13.2: the client will not take context over, and asks the server not to either.
        (
            "permessage-deflate; client_no_context_takeover; client_max_window_bits; server_no_context_takeover",
            d,
            Some("permessage-deflate; server_no_context_takeover; client_no_context_takeover"),
        ),
        // 13.3 / 13.5: an 8-bit window for the server is agreed (and honoured by not compressing).
        (
            "permessage-deflate; client_no_context_takeover; client_max_window_bits; server_max_window_bits=8",
            d,
            Some("permessage-deflate; client_no_context_takeover; server_max_window_bits=8"),
        ),
        // 13.4: 15 offered must be echoed to be accepted.
        (
            "permessage-deflate; server_max_window_bits=15",
            d,
            Some("permessage-deflate; server_max_window_bits=15"),
        ),
        // The server's own wishes.
        (
            "permessage-deflate",
            DeflateConfig {
                server_no_context_takeover: true,
                client_no_context_takeover: true,
                server_max_window_bits: 11,
            },
            Some("permessage-deflate; server_no_context_takeover; client_no_context_takeover; server_max_window_bits=11"),
        ),
        (
            "permessage-deflate; server_max_window_bits=10",
            DeflateConfig { server_max_window_bits: 12, ..d },
            Some("permessage-deflate; server_max_window_bits=10"),
        ),
        (
            "permessage-deflate; server_max_window_bits=13",
            DeflateConfig { server_max_window_bits: 12, ..d },
            Some("permessage-deflate; server_max_window_bits=12"),
        ),
        // 13.7: the first valid offer wins.
        (
            "permessage-deflate; server_max_window_bits=20, permessage-deflate; server_no_context_takeover, permessage-deflate",
            d,
            Some("permessage-deflate; server_no_context_takeover"),
        ),
    ];
    for (offer, config, want) in rows {
        assert_eq!(response(offer, *config).as_deref(), *want, "{offer}");
    }
}
