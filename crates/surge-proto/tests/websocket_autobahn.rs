//! The Autobahn testsuite's case families, at the codec level: what a server
//! built on this codec receives (messages, or the error and close code to
//! send) for the frames each family sends. Case numbers in the names follow
//! the suite (autobahn-testsuite `case/`); the echo itself is the server's job.

mod websocket_common;

use surge_proto::websocket::{Encoder, Error, MessageKind, PerMessageDeflate, SendOptions, Status};
use websocket_common::*;

fn server() -> Setup {
    Setup::server()
}

/// Messages and error for `frames` sent one after the other.
fn send(setup: Setup, frames: &[Vec<u8>]) -> (Vec<Msg>, Option<Error>) {
    let out = run(setup, &stream(frames));
    (out.msgs, out.error)
}

fn ok(msgs: Vec<Msg>) -> (Vec<Msg>, Option<Error>) {
    (msgs, None)
}

// 1.x framing: text and binary of every length form, whole and chopped.

#[test]
fn case_1_1_text_messages() {
    for len in [0usize, 125, 126, 127, 128, 65535, 65536] {
        let text = "*".repeat(len);
        assert_eq!(
            send(server(), &[cf(true, TEXT, text.as_bytes())]),
            ok(vec![Msg::Text(text)]),
            "{len}"
        );
    }
    // 1.1.8: 65536 bytes sent in chops of 997.
    let text = "*".repeat(65536);
    let frame = cf(true, TEXT, text.as_bytes());
    let out = run_parts(server(), frame.chunks(997));
    assert_eq!(out.msgs, [Msg::Text(text)]);
}

#[test]
fn case_1_2_binary_messages() {
    for len in [0usize, 125, 126, 127, 128, 65535, 65536] {
        let data = vec![0xfe; len];
        assert_eq!(
            send(server(), &[cf(true, BINARY, &data)]),
            ok(vec![Msg::Binary(data.clone())]),
            "{len}"
        );
    }
    let data = vec![0xfe; 65536];
    let out = run_parts(server(), cf(true, BINARY, &data).chunks(997));
    assert_eq!(out.msgs, [Msg::Binary(data)]);
}

// 2.x pings and pongs.

#[test]
fn case_2_pings_and_pongs() {
    // 2.1-2.4: pings without payload, with text, with binary, of 125 bytes.
    for payload in [
        &b""[..],
        b"Hello, world!",
        &[0x00, 0xff, 0xfe, 0xfd, 0xfc, 0xfb, 0x00, 0xff],
        &[0xfe; 125],
    ] {
        assert_eq!(
            send(server(), &[cf(true, PING, payload)]),
            ok(vec![Msg::Ping(payload.to_vec())])
        );
    }
    // 2.5: a ping of 126 bytes is a protocol error.
    let (msgs, e) = send(server(), &[cf(true, PING, &[0xfe; 126])]);
    assert_eq!((msgs.len(), e), (0, Some(Error::ControlTooLong)));
    assert_eq!(Error::ControlTooLong.close_code(), 1002);
    // 2.6: a 125-byte ping sent in chops of 1.
    let out = run_parts(server(), cf(true, PING, &[0xfe; 125]).chunks(1));
    assert_eq!(out.msgs, [Msg::Ping(vec![0xfe; 125])]);
    // 2.7, 2.8: unsolicited pongs are delivered (the server ignores them).
    assert_eq!(
        send(server(), &[cf(true, PONG, b"")]),
        ok(vec![Msg::Pong(vec![])])
    );
    assert_eq!(
        send(server(), &[cf(true, PONG, b"unsolicited pong payload")]),
        ok(vec![Msg::Pong(b"unsolicited pong payload".to_vec())])
    );
    // 2.9: a pong, then a ping.
    assert_eq!(
        send(
            server(),
            &[cf(true, PONG, b"pong"), cf(true, PING, b"ping")]
        ),
        ok(vec![
            Msg::Pong(b"pong".to_vec()),
            Msg::Ping(b"ping".to_vec())
        ])
    );
    // 2.10, 2.11: ten pings in a row, each delivered in order.
    let pings: Vec<Vec<u8>> = (0..10)
        .map(|i| cf(true, PING, format!("payload-{i}").as_bytes()))
        .collect();
    let want: Vec<Msg> = (0..10)
        .map(|i| Msg::Ping(format!("payload-{i}").into_bytes()))
        .collect();
    assert_eq!(send(server(), &pings), ok(want));
}

// 3.x reserved bits: each fails the connection, after what came before.

#[test]
fn case_3_reserved_bits() {
    let rows: &[(&str, u8, u8)] = &[
        ("3.1 RSV1 on text", 4, TEXT),
        ("3.2 RSV2 on text", 2, TEXT),
        ("3.3 RSV1+RSV2 on text", 6, TEXT),
        ("3.4 RSV3 on text", 1, TEXT),
        ("3.5 RSV1+RSV3 on binary", 5, BINARY),
        ("3.6 RSV2+RSV3 on ping", 3, PING),
        ("3.7 all RSV on close", 7, CLOSE),
    ];
    for (name, rsv, op) in rows {
        let frames = [
            cf(true, TEXT, b"Hello, world!"),
            raw_frame(true, *rsv, *op, b"Hello, world!", Some(KEY)),
            cf(true, PING, b""),
        ];
        assert_eq!(
            send(server(), &frames),
            (vec![Msg::text("Hello, world!")], Some(Error::ReservedBits)),
            "{name}"
        );
    }
}

// 4.x opcodes: reserved ones, data (3-7) and control (0xB-0xF).

#[test]
fn case_4_reserved_opcodes() {
    for op in (3..=7).chain(0xB..=0xF) {
        let frames = [
            cf(true, TEXT, b"Hello, world!"),
            raw_frame(true, 0, op, b"payload", Some(KEY)),
            cf(true, PING, b""),
        ];
        let (msgs, e) = send(server(), &frames);
        assert_eq!(
            (msgs, e),
            (
                vec![Msg::text("Hello, world!")],
                Some(Error::ReservedOpcode(op))
            )
        );
        assert_eq!(Error::ReservedOpcode(op).close_code(), 1002);
    }
}

// 5.x fragmentation.

#[test]
fn case_5_fragmentation() {
    let frag = |a: &[u8], b: &[u8]| vec![cf(false, TEXT, a), cf(true, CONT, b)];
    // 5.1, 5.2: fragmented ping / pong.
    for op in [PING, PONG] {
        let (m, e) = send(
            server(),
            &[cf(false, op, b"frag1"), cf(true, CONT, b"frag2")],
        );
        assert_eq!((m.len(), e), (0, Some(Error::FragmentedControl)));
    }
    // 5.3-5.5: a text message in two fragments, whole, chopped, byte by byte.
    assert_eq!(
        send(server(), &frag(b"fragment1", b"fragment2")),
        ok(vec![Msg::text("fragment1fragment2")])
    );
    // 5.6-5.8: a ping between the fragments is answered in the middle.
    let frames = [
        cf(false, TEXT, b"fragment1"),
        cf(true, PING, b"ping"),
        cf(true, CONT, b"fragment2"),
    ];
    assert_eq!(
        send(server(), &frames),
        ok(vec![
            Msg::Ping(b"ping".to_vec()),
            Msg::text("fragment1fragment2")
        ])
    );
    // 5.9-5.11: a continuation with nothing to continue.
    let frames = [
        cf(true, CONT, b"fragment1"),
        cf(true, TEXT, b"fragment2"),
        cf(true, PING, b""),
    ];
    assert_eq!(
        send(server(), &frames),
        (vec![], Some(Error::UnexpectedContinuation))
    );
    // 5.12-5.14: a non-FIN continuation with nothing to continue.
    let frames = [cf(false, CONT, b"fragment1"), cf(true, TEXT, b"fragment2")];
    assert_eq!(
        send(server(), &frames),
        (vec![], Some(Error::UnexpectedContinuation))
    );
    // 5.15: a message ends, then a continuation follows.
    let frames = [
        cf(false, TEXT, b"fragment1"),
        cf(true, CONT, b"fragment2"),
        cf(false, CONT, b"fragment3"),
        cf(true, TEXT, b"fragment4"),
    ];
    assert_eq!(
        send(server(), &frames),
        (
            vec![Msg::text("fragment1fragment2")],
            Some(Error::UnexpectedContinuation)
        )
    );
    // 5.16-5.18: a text frame where a continuation belongs.
    let frames = [cf(false, TEXT, b"fragment1"), cf(true, TEXT, b"fragment2")];
    assert_eq!(
        send(server(), &frames),
        (vec![], Some(Error::ExpectedContinuation))
    );
    // 5.19, 5.20: five fragments with pings between, in any chopping.
    let frames = [
        cf(false, TEXT, b"fragment1"),
        cf(false, CONT, b"fragment2"),
        cf(true, PING, b"pongme 1!"),
        cf(false, CONT, b"fragment3"),
        cf(false, CONT, b"fragment4"),
        cf(true, PING, b"pongme 2!"),
        cf(true, CONT, b"fragment5"),
    ];
    assert_eq!(
        send(server(), &frames),
        ok(vec![
            Msg::Ping(b"pongme 1!".to_vec()),
            Msg::Ping(b"pongme 2!".to_vec()),
            Msg::text("fragment1fragment2fragment3fragment4fragment5"),
        ])
    );
}

// 6.x UTF-8 handling.

/// Valid texts of Autobahn 6.2-6.3, 6.5 and the 6.x boundary cases.
const VALID: &[&[u8]] = &[
    b"",
    b"Hello-\xc2\xb5@\xc3\x9f\xc3\xb6\xc3\xa4\xc3\xbc\xc3\xa0\xc3\xa1-UTF-8!!",
    "κόσμε".as_bytes(),
    b"\x00",
    b"\x7f",
    b"\xc2\x80",
    b"\xdf\xbf",
    b"\xe0\xa0\x80",
    b"\xef\xbf\xbf",
    b"\xf0\x90\x80\x80",
    b"\xf4\x8f\xbf\xbf",
    b"\xed\x9f\xbf",
    b"\xee\x80\x80",
    b"\xef\xbf\xbd",
];

/// Invalid texts of Autobahn 6.3-6.23: bad starts and continuations, cut
/// sequences, overlong forms, surrogates, beyond U+10FFFF.
const INVALID: &[&[u8]] = &[
    b"\xce\xba\xe1\xbd\xb9\xcf\x83\xce\xbc\xce\xb5\xed\xa0\x80edited",
    b"\x80",
    b"\xbf",
    b"\x80\xbf\x80",
    b"\xc0 ",
    b"\xe0\x80",
    b"\xf0\x80\x80",
    b"\xdf",
    b"\xef\xbf",
    b"\xfe",
    b"\xff",
    b"\xfe\xfe\xff\xff",
    b"\xc0\xaf",
    b"\xe0\x80\xaf",
    b"\xf0\x80\x80\xaf",
    b"\xf8\x80\x80\x80\xaf",
    b"\xc1\xbf",
    b"\xe0\x9f\xbf",
    b"\xed\xa0\x80",
    b"\xed\xbf\xbf",
    b"\xed\xa0\x80\xed\xb0\x80",
    b"\xf4\x90\x80\x80",
    b"\xf7\xbf\xbf\xbf",
];

#[test]
fn case_6_utf8_whole_and_per_byte_fragments() {
    for text in VALID {
        let want = ok(vec![Msg::Text(String::from_utf8(text.to_vec()).unwrap())]);
        assert_eq!(send(server(), &[cf(true, TEXT, text)]), want, "{text:02x?}");
        // 6.x "fragmented into frames of 1 byte".
        let mut frames: Vec<Vec<u8>> = text
            .iter()
            .enumerate()
            .map(|(i, b)| cf(false, if i == 0 { TEXT } else { CONT }, &[*b]))
            .collect();
        frames.push(cf(true, if text.is_empty() { TEXT } else { CONT }, b""));
        assert_eq!(send(server(), &frames), want, "{text:02x?} per byte");
    }
    for text in INVALID {
        assert_eq!(
            send(server(), &[cf(true, TEXT, text)]),
            (vec![], Some(Error::InvalidUtf8)),
            "{text:02x?}"
        );
        let mut frames: Vec<Vec<u8>> = text
            .iter()
            .enumerate()
            .map(|(i, b)| cf(false, if i == 0 { TEXT } else { CONT }, &[*b]))
            .collect();
        frames.push(cf(true, CONT, b""));
        assert_eq!(
            send(server(), &frames),
            (vec![], Some(Error::InvalidUtf8)),
            "{text:02x?} per byte"
        );
    }
    assert_eq!(Error::InvalidUtf8.close_code(), 1007);
}

/// 6.4.1-6.4.4: fail fast. The error comes as soon as the bad byte is in,
/// before the message (or even its frame) is complete.
#[test]
fn case_6_4_fail_fast() {
    let good = "κόσμε".as_bytes();
    let bad = b"\xf4\x90\x80\x80";
    // 6.4.1 / 6.4.2: three fragments; the second holds the bad sequence.
    let mut d = server().decoder();
    d.feed(&cf(false, TEXT, good));
    assert_eq!(d.poll(), Ok(Status::Partial));
    d.feed(&cf(false, CONT, bad));
    assert_eq!(
        d.poll().err(),
        Some(Error::InvalidUtf8),
        "fails before fragment 3"
    );
    // 6.4.3 / 6.4.4: one frame, sent in three chops; fails on the second chop.
    let payload = [good, bad, b"edited"].concat();
    let frame = cf(true, TEXT, &payload);
    let head = 6;
    let mut d = server().decoder();
    d.feed(&frame[..head + good.len()]);
    assert_eq!(d.poll(), Ok(Status::Partial));
    d.feed(&frame[head + good.len()..head + good.len() + 2]);
    assert_eq!(
        d.poll().err(),
        Some(Error::InvalidUtf8),
        "fails inside the frame"
    );
}

// 7.x close handling.

#[test]
fn case_7_close() {
    // 7.1.1: a text message, then a close.
    assert_eq!(
        send(
            server(),
            &[
                cf(true, TEXT, b"Hello World!"),
                cf(true, CLOSE, &close_payload(1000, b""))
            ]
        ),
        ok(vec![Msg::text("Hello World!"), Msg::close(1000, "")])
    );
    // 7.1.2-7.1.4: after a close, a second close, a ping or a text are not read.
    for after in [
        cf(true, CLOSE, b""),
        cf(true, PING, b""),
        cf(true, TEXT, b"late"),
    ] {
        assert_eq!(
            send(server(), &[cf(true, CLOSE, b""), after]),
            ok(vec![Msg::Close(None)])
        );
    }
    // 7.1.5: a close in the middle of a fragmented message.
    let frames = [
        cf(false, TEXT, b"fragment1"),
        cf(true, CLOSE, b""),
        cf(true, CONT, b"fragment2"),
    ];
    assert_eq!(send(server(), &frames), ok(vec![Msg::Close(None)]));
    // 7.1.6: a large message, a ping, a close: all read in order.
    let big = "BAsd7&jh23".repeat(26214);
    let frames = [
        cf(true, TEXT, big.as_bytes()),
        cf(true, PING, b""),
        cf(true, CLOSE, b""),
    ];
    assert_eq!(
        send(server(), &frames),
        ok(vec![Msg::Text(big), Msg::Ping(vec![]), Msg::Close(None)])
    );
    // 7.3.1-7.3.6: close payloads: empty, 1 byte, code, code and reason, the
    // longest reason, 126 bytes.
    assert_eq!(
        send(server(), &[cf(true, CLOSE, b"")]),
        ok(vec![Msg::Close(None)])
    );
    assert_eq!(
        send(server(), &[cf(true, CLOSE, b"a")]),
        (vec![], Some(Error::CloseTooShort))
    );
    assert_eq!(
        send(server(), &[cf(true, CLOSE, &close_payload(1000, b""))]),
        ok(vec![Msg::close(1000, "")])
    );
    assert_eq!(
        send(
            server(),
            &[cf(true, CLOSE, &close_payload(1000, b"Hello World!"))]
        ),
        ok(vec![Msg::close(1000, "Hello World!")])
    );
    let reason = "*".repeat(123);
    assert_eq!(
        send(
            server(),
            &[cf(true, CLOSE, &close_payload(1000, reason.as_bytes()))]
        ),
        ok(vec![Msg::close(1000, &reason)])
    );
    let (m, e) = send(
        server(),
        &[cf(true, CLOSE, &close_payload(1000, &[b'*'; 124]))],
    );
    assert_eq!((m.len(), e), (0, Some(Error::ControlTooLong)));
    // 7.5.1: a reason that is not UTF-8.
    let bad = close_payload(
        1000,
        b"\xce\xba\xe1\xbd\xb9\xcf\x83\xce\xbc\xce\xb5\xed\xa0\x80edited",
    );
    assert_eq!(
        send(server(), &[cf(true, CLOSE, &bad)]),
        (vec![], Some(Error::InvalidCloseReason))
    );
    assert_eq!(Error::InvalidCloseReason.close_code(), 1007);
}

#[test]
fn case_7_7_valid_and_7_9_invalid_close_codes() {
    for code in [
        1000, 1001, 1002, 1003, 1007, 1008, 1009, 1010, 1011, 3000, 3999, 4000, 4999,
    ] {
        let frame = cf(true, CLOSE, &close_payload(code, b""));
        assert_eq!(
            send(server(), &[frame]),
            ok(vec![Msg::close(code, "")]),
            "7.7: {code}"
        );
    }
    // 7.9 (and 7.13: 5000, 65535 are invalid too).
    for code in [
        0, 999, 1004, 1005, 1006, 1015, 1016, 1100, 2000, 2999, 5000, 65535,
    ] {
        let frame = cf(true, CLOSE, &close_payload(code, b""));
        assert_eq!(
            send(server(), &[frame]),
            (vec![], Some(Error::InvalidCloseCode(code))),
            "7.9: {code}"
        );
        assert_eq!(Error::InvalidCloseCode(code).close_code(), 1002);
    }
}

// 9.x limits: large messages, whole, in fragments and chopped.

#[test]
fn case_9_large_messages() {
    // 9.1.x / 9.2.x: one frame of 64 KiB .. 16 MiB (the default limit).
    for len in [1 << 16, 1 << 18, 1 << 20, 16 << 20] {
        let data = vec![b'*'; len];
        let frame = cf(true, TEXT, &data);
        let out = run_whole(server(), &frame);
        assert!(
            matches!(&out.msgs[..], [Msg::Text(t)] if t.len() == len),
            "{len}"
        );
    }
    // One byte more is refused, on the header.
    let mut d = server().decoder();
    d.feed(&[0x82, 0xff, 0, 0, 0, 0, 0x01, 0, 0, 1]);
    d.feed(&KEY);
    assert_eq!(d.poll().err(), Some(Error::MessageTooBig));
    // 9.3.x / 9.4.x: 1 MiB in fragments of 64 B .. 1 MiB.
    let data = vec![0xab; 1 << 20];
    for frag in [64, 256, 1 << 12, 1 << 16, 1 << 20] {
        let mut buf = Vec::new();
        let how = SendOptions {
            compress: false,
            fragment_size: frag,
        };
        Encoder::client(None, [1; 32]).message(&mut buf, MessageKind::Binary, &data, how);
        let out = run_whole(server(), &buf);
        assert_eq!(out.msgs.len(), 1, "{frag}");
        assert_eq!(out.msgs[0], Msg::Binary(data.clone()), "{frag}");
    }
    // 9.5.x / 9.6.x: 1 MiB chopped into reads of 64 B .. 64 KiB.
    let frame = cf(true, BINARY, &data);
    for chop in [64, 1 << 10, 1 << 16] {
        let out = run_parts(server(), frame.chunks(chop));
        assert_eq!(out.msgs, [Msg::Binary(data.clone())], "{chop}");
    }
}

// 12.x / 13.x compression: several messages each way (Autobahn sends 1000;
// a few show context carried over), every agreement Autobahn tries,
// auto-fragmented or not.

fn agreements() -> Vec<(&'static str, PerMessageDeflate)> {
    let d = PerMessageDeflate::default();
    let bits = |n| PerMessageDeflate {
        server_max_window_bits: Some(n),
        client_max_window_bits: Some(n),
        ..d
    };
    let nct = |p: PerMessageDeflate| PerMessageDeflate {
        server_no_context_takeover: true,
        client_no_context_takeover: true,
        ..p
    };
    vec![
        ("13.1 defaults", d),
        ("13.2 no context takeover", nct(d)),
        ("13.3 window 8", bits(8)),
        ("13.4 window 15", bits(15)),
        ("13.5 no context takeover, window 8", nct(bits(8))),
        ("13.6 no context takeover, window 15", nct(bits(15))),
        ("window 9", bits(9)),
        ("window 12", bits(12)),
    ]
}

#[test]
fn case_12_13_compressed_echo() {
    // JSON-like text, as in 13.x's data set, at 12.x's sizes.
    let corpus: String = (0..4000)
        .map(|i| {
            format!(
                "{{\"id\":{i},\"name\":\"user{}\",\"tags\":[\"a\",\"b{}\"]}},",
                i % 97,
                i % 13
            )
        })
        .collect();
    for (name, agreed) in agreements() {
        for (size, frag) in [
            (16, 0),
            (256, 0),
            (4096, 0),
            (16384, 0),
            (8192, 256),
            (32768, 4096),
        ] {
            let mut client = Encoder::client(Some(agreed), [7; 32]);
            let mut server_enc = Encoder::server(Some(agreed));
            let mut to_server = Vec::new();
            let mut to_client = Vec::new();
            let mut sent = Vec::new();
            let mut at = 0;
            for _ in 0..4 {
                let msg = &corpus[at..at + size];
                at = (at + size) % (corpus.len() - size);
                let how = SendOptions {
                    compress: true,
                    fragment_size: frag,
                };
                client.message(&mut to_server, MessageKind::Text, msg.as_bytes(), how);
                server_enc.message(&mut to_client, MessageKind::Text, msg.as_bytes(), how);
                sent.push(Msg::text(msg));
            }
            let up = run_whole(Setup::server().deflate(agreed), &to_server);
            assert_eq!(
                (up.msgs, up.error),
                (sent.clone(), None),
                "{name} {size}/{frag} up"
            );
            let down = run_parts(Setup::client().deflate(agreed), to_client.chunks(1000));
            assert_eq!(
                (down.msgs, down.error),
                (sent, None),
                "{name} {size}/{frag} down"
            );
        }
    }
}
