//! WebSocket frames as bytes <-> messages, one table per family, every input
//! fed whole, byte by byte and cut at random points (all must agree); every
//! decoder error with the close code it asks for; the encoder's bytes.

mod websocket_common;

use surge_proto::websocket::{
    apply_mask, close, parse_header, write_frame, CloseFrame, Encoder, Error, FrameHeader,
    MaskKeys, MessageKind, Opcode, Role, SendOptions, Status, DEFAULT_MAX_MESSAGE_SIZE,
    MAX_CLOSE_REASON, MAX_CONTROL_PAYLOAD,
};
use websocket_common::*;

fn messages(setup: Setup, input: &[u8]) -> Vec<Msg> {
    let out = run(setup, input);
    assert_eq!(out.error, None, "{input:02x?}");
    out.msgs
}

/// Every example of RFC 6455 section 5.7, byte for byte, both ways.
#[test]
fn rfc6455_section_5_7_examples() {
    let hello = Msg::text("Hello");
    // A single-frame unmasked text message (server to client).
    let unmasked = [0x81, 0x05, 0x48, 0x65, 0x6c, 0x6c, 0x6f];
    assert_eq!(messages(Setup::client(), &unmasked), vec![hello.clone()]);
    // A single-frame masked text message (client to server).
    let masked = [
        0x81, 0x85, 0x37, 0xfa, 0x21, 0x3d, 0x7f, 0x9f, 0x4d, 0x51, 0x58,
    ];
    assert_eq!(messages(Setup::server(), &masked), vec![hello.clone()]);
    // A fragmented unmasked text message.
    let fragmented = [0x01, 0x03, 0x48, 0x65, 0x6c, 0x80, 0x02, 0x6c, 0x6f];
    assert_eq!(messages(Setup::client(), &fragmented), [hello]);
    // Unmasked ping, masked pong (its answer), both "Hello".
    let ping = [0x89, 0x05, 0x48, 0x65, 0x6c, 0x6c, 0x6f];
    assert_eq!(
        messages(Setup::client(), &ping),
        [Msg::Ping(b"Hello".to_vec())]
    );
    let pong = [
        0x8a, 0x85, 0x37, 0xfa, 0x21, 0x3d, 0x7f, 0x9f, 0x4d, 0x51, 0x58,
    ];
    assert_eq!(
        messages(Setup::server(), &pong),
        [Msg::Pong(b"Hello".to_vec())]
    );
    // 256 bytes binary in one unmasked frame: 16-bit length.
    let data: Vec<u8> = (0..=255).collect();
    let mut big = vec![0x82, 0x7e, 0x01, 0x00];
    big.extend_from_slice(&data);
    assert_eq!(messages(Setup::client(), &big), [Msg::Binary(data.clone())]);
    // 64 KiB binary in one unmasked frame: 64-bit length.
    let data64: Vec<u8> = (0..65536u32).map(|i| (i * 7) as u8).collect();
    let mut huge = vec![0x82, 0x7f, 0, 0, 0, 0, 0, 1, 0, 0];
    huge.extend_from_slice(&data64);
    assert_eq!(
        messages(Setup::client(), &huge),
        [Msg::Binary(data64.clone())]
    );

    // The writer gives the same bytes.
    let mut buf = Vec::new();
    write_frame(&mut buf, true, false, Opcode::Text, b"Hello", None);
    assert_eq!(buf, unmasked);
    buf.clear();
    write_frame(&mut buf, true, false, Opcode::Text, b"Hello", Some(KEY));
    assert_eq!(buf, masked);
    buf.clear();
    write_frame(&mut buf, false, false, Opcode::Text, b"Hel", None);
    write_frame(&mut buf, true, false, Opcode::Continuation, b"lo", None);
    assert_eq!(buf, fragmented);
    buf.clear();
    write_frame(&mut buf, true, false, Opcode::Pong, b"Hello", Some(KEY));
    assert_eq!(buf, pong);
    buf.clear();
    let mut server = Encoder::server(None);
    server.ping(&mut buf, b"Hello").unwrap();
    assert_eq!(buf, ping);
    buf.clear();
    server.binary(&mut buf, &data);
    assert_eq!(buf, big);
    buf.clear();
    server.binary(&mut buf, &data64);
    assert_eq!(buf, huge);
    buf.clear();
    server.message(
        &mut buf,
        MessageKind::Text,
        b"Hello",
        SendOptions {
            compress: false,
            fragment_size: 3,
        },
    );
    assert_eq!(buf, fragmented);
}

#[test]
fn headers_parse_with_every_length_form() {
    let rows: &[(&[u8], FrameHeader)] = &[
        (
            &[0x81, 0x05],
            FrameHeader {
                fin: true,
                rsv1: false,
                opcode: Opcode::Text,
                mask: None,
                payload_len: 5,
                header_len: 2,
            },
        ),
        (
            &[0x02, 0x7e, 0x00, 0x05],
            FrameHeader {
                fin: false,
                rsv1: false,
                opcode: Opcode::Binary,
                mask: None,
                payload_len: 5, // not minimal: accepted
                header_len: 4,
            },
        ),
        (
            &[0x80, 0x7f, 0x7f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff],
            FrameHeader {
                fin: true,
                rsv1: false,
                opcode: Opcode::Continuation,
                mask: None,
                payload_len: i64::MAX as u64,
                header_len: 10,
            },
        ),
    ];
    for (bytes, want) in rows {
        assert_eq!(
            parse_header(bytes, Role::Client, false),
            Ok(Status::Complete(*want))
        );
        for cut in 0..bytes.len() {
            assert_eq!(
                parse_header(&bytes[..cut], Role::Client, false),
                Ok(Status::Partial)
            );
        }
    }
    let masked = [0x89, 0xfe, 0x00, 0x7d, 1, 2, 3, 4];
    assert_eq!(
        parse_header(&masked, Role::Server, false),
        Err(Error::ControlTooLong),
        "a control length in extended form over 125 is refused from byte 1"
    );
}

#[test]
fn data_frames() {
    let s = Setup::server();
    let rows: Vec<(&str, Vec<u8>, Vec<Msg>)> = vec![
        ("empty text", cf(true, TEXT, b""), vec![Msg::text("")]),
        (
            "empty binary",
            cf(true, BINARY, b""),
            vec![Msg::Binary(vec![])],
        ),
        (
            "125 bytes",
            cf(true, BINARY, &[7; 125]),
            vec![Msg::Binary(vec![7; 125])],
        ),
        (
            "126 bytes",
            cf(true, BINARY, &[7; 126]),
            vec![Msg::Binary(vec![7; 126])],
        ),
        (
            "127 bytes",
            cf(true, BINARY, &[7; 127]),
            vec![Msg::Binary(vec![7; 127])],
        ),
        (
            "65535 bytes",
            cf(true, BINARY, &[7; 65535]),
            vec![Msg::Binary(vec![7; 65535])],
        ),
        (
            "65536 bytes",
            cf(true, BINARY, &[7; 65536]),
            vec![Msg::Binary(vec![7; 65536])],
        ),
        (
            "non-minimal 16-bit length",
            [
                &[0x81, 0xfe, 0x00, 0x02][..],
                &KEY,
                &[b'o' ^ KEY[0], b'k' ^ KEY[1]],
            ]
            .concat(),
            vec![Msg::text("ok")],
        ),
        (
            "non-minimal 64-bit length",
            [
                &[0x81, 0xff, 0, 0, 0, 0, 0, 0, 0, 0x02][..],
                &KEY,
                &[b'o' ^ KEY[0], b'k' ^ KEY[1]],
            ]
            .concat(),
            vec![Msg::text("ok")],
        ),
        (
            "three fragments",
            stream(&[
                cf(false, TEXT, b"a"),
                cf(false, CONT, b"b"),
                cf(true, CONT, b"c"),
            ]),
            vec![Msg::text("abc")],
        ),
        (
            "empty fragments",
            stream(&[
                cf(false, BINARY, b""),
                cf(false, CONT, b""),
                cf(true, CONT, b""),
            ]),
            vec![Msg::Binary(vec![])],
        ),
        (
            "a character cut across fragments",
            stream(&[cf(false, TEXT, &[0xce]), cf(true, CONT, &[0xba])]),
            vec![Msg::text("κ")],
        ),
        (
            "ping between fragments",
            stream(&[
                cf(false, TEXT, b"he"),
                cf(true, PING, b"p"),
                cf(true, CONT, b"llo"),
            ]),
            vec![Msg::Ping(b"p".to_vec()), Msg::text("hello")],
        ),
        (
            "pipelined messages",
            stream(&[
                cf(true, TEXT, b"1"),
                cf(true, BINARY, b"2"),
                cf(true, PONG, b""),
                cf(true, TEXT, b"3"),
            ]),
            vec![
                Msg::text("1"),
                Msg::Binary(b"2".to_vec()),
                Msg::Pong(vec![]),
                Msg::text("3"),
            ],
        ),
        (
            "a zero mask",
            raw_frame(true, 0, TEXT, b"plain", Some([0; 4])),
            vec![Msg::text("plain")],
        ),
    ];
    for (name, input, want) in rows {
        assert_eq!(messages(s, &input), want, "{name}");
    }
}

#[test]
fn close_frames() {
    let s = Setup::server();
    let rows: Vec<(&str, Vec<u8>, Msg)> = vec![
        ("no payload", cf(true, CLOSE, b""), Msg::Close(None)),
        (
            "code only",
            cf(true, CLOSE, &close_payload(1000, b"")),
            Msg::close(1000, ""),
        ),
        (
            "code and reason",
            cf(true, CLOSE, &close_payload(1001, "bye ✓".as_bytes())),
            Msg::close(1001, "bye ✓"),
        ),
        (
            "longest reason",
            cf(true, CLOSE, &close_payload(4999, &[b'r'; 123])),
            Msg::close(4999, &"r".repeat(123)),
        ),
    ];
    for (name, input, want) in rows {
        let out = run(s, &input);
        assert_eq!(out.msgs, [want], "{name}");
        assert!(out.closed, "{name}");
    }
    // After a close, nothing more is read: not a message, not an error.
    let input = stream(&[cf(true, CLOSE, b""), cf(true, TEXT, b"late"), vec![0xff; 9]]);
    let out = run(s, &input);
    assert_eq!((out.msgs, out.error), (vec![Msg::Close(None)], None));
}

/// Every decoder error: a row that provokes it, and the close code it names.
fn error_rows() -> Vec<(&'static str, Setup, Vec<u8>, Error, u16)> {
    use Error::*;
    let s = Setup::server();
    vec![
        (
            "RSV2 set",
            s,
            raw_frame(true, 2, TEXT, b"", Some(KEY)),
            ReservedBits,
            1002,
        ),
        (
            "RSV1 without deflate",
            s,
            raw_frame(true, 4, TEXT, b"", Some(KEY)),
            ReservedBits,
            1002,
        ),
        (
            "opcode 3",
            s,
            raw_frame(true, 0, 3, b"", Some(KEY)),
            ReservedOpcode(3),
            1002,
        ),
        (
            "opcode 0xB",
            s,
            raw_frame(true, 0, 0xB, b"", Some(KEY)),
            ReservedOpcode(0xB),
            1002,
        ),
        (
            "unmasked from a client",
            s,
            raw_frame(true, 0, TEXT, b"x", None),
            UnmaskedFrame,
            1002,
        ),
        (
            "masked from a server",
            Setup::client(),
            raw_frame(true, 0, TEXT, b"x", Some(KEY)),
            MaskedFrame,
            1002,
        ),
        (
            "64-bit length with its top bit",
            s,
            vec![0x82, 0xff, 0x80, 0, 0, 0, 0, 0, 0, 0],
            LengthOverflow,
            1002,
        ),
        (
            "ping of 126 bytes",
            s,
            cf(true, PING, &[0; 126]),
            ControlTooLong,
            1002,
        ),
        (
            "fragmented ping",
            s,
            cf(false, PING, b""),
            FragmentedControl,
            1002,
        ),
        (
            "continuation first",
            s,
            cf(true, CONT, b"x"),
            UnexpectedContinuation,
            1002,
        ),
        (
            "text inside a fragmented message",
            s,
            stream(&[cf(false, TEXT, b"a"), cf(true, TEXT, b"b")]),
            ExpectedContinuation,
            1002,
        ),
        (
            "over the limit",
            s.max(10),
            cf(true, BINARY, &[0; 11]),
            MessageTooBig,
            1009,
        ),
        (
            "fragments over the limit",
            s.max(10),
            stream(&[cf(false, BINARY, &[0; 6]), cf(true, CONT, &[0; 5])]),
            MessageTooBig,
            1009,
        ),
        (
            "text not UTF-8",
            s,
            cf(true, TEXT, &[0xff]),
            InvalidUtf8,
            1007,
        ),
        (
            "text ending inside a character",
            s,
            stream(&[cf(false, TEXT, b"a"), cf(true, CONT, &[0xe2, 0x82])]),
            InvalidUtf8,
            1007,
        ),
        (
            "compressed data that does not inflate",
            s.deflate(deflate()),
            cf_z(true, BINARY, &[0xff, 0xff, 0xff]),
            BadCompressedData,
            1007,
        ),
        (
            "close of 1 byte",
            s,
            cf(true, CLOSE, &[0x03]),
            CloseTooShort,
            1002,
        ),
        (
            "close code 1005",
            s,
            cf(true, CLOSE, &close_payload(1005, b"")),
            InvalidCloseCode(1005),
            1002,
        ),
        (
            "close reason not UTF-8",
            s,
            cf(true, CLOSE, &close_payload(1000, &[0xce, 0xba, 0xff])),
            InvalidCloseReason,
            1007,
        ),
    ]
}

#[test]
fn every_error_with_its_close_code() {
    let rows = error_rows();
    for (name, setup, input, error, code) in &rows {
        let out = run(*setup, input);
        assert_eq!(out.error, Some(*error), "{name}");
        assert_eq!(error.close_code(), *code, "{name}");
        assert!(!error.message().is_empty());
        assert!(
            error.to_string().contains(&format!("close {code}")),
            "{error}"
        );
    }
    use Error::*;
    let all = [
        ReservedBits,
        ReservedOpcode(3),
        UnmaskedFrame,
        MaskedFrame,
        LengthOverflow,
        ControlTooLong,
        FragmentedControl,
        UnexpectedContinuation,
        ExpectedContinuation,
        MessageTooBig,
        InvalidUtf8,
        BadCompressedData,
        CloseTooShort,
        InvalidCloseCode(1005),
        InvalidCloseReason,
    ];
    for e in all {
        let same_kind = |r: &Error| std::mem::discriminant(r) == std::mem::discriminant(&e);
        assert!(rows.iter().any(|r| same_kind(&r.3)), "no row for {e:?}");
    }
}

/// The messages before a bad frame are all delivered; the error comes after,
/// and the decoder stays failed.
#[test]
fn error_after_good_messages() {
    let input = stream(&[
        cf(true, TEXT, b"one"),
        cf(true, PING, b""),
        raw_frame(true, 0, 7, b"", Some(KEY)),
    ]);
    let out = run(Setup::server(), &input);
    assert_eq!(out.msgs, [Msg::text("one"), Msg::Ping(vec![])]);
    assert_eq!(out.error, Some(Error::ReservedOpcode(7)));
}

/// An oversized frame fails on its header, before its payload is read.
#[test]
fn too_big_fails_on_the_header() {
    let mut d = Setup::server().decoder();
    d.feed(&[0x82, 0xff, 0, 0, 0, 0, 0x01, 0, 0, 1]); // 16 MiB + 1 announced
    d.feed(&KEY);
    assert_eq!(d.poll().err(), Some(Error::MessageTooBig));
    assert_eq!(DEFAULT_MAX_MESSAGE_SIZE, 16 * 1024 * 1024);
}

#[test]
fn close_code_validity() {
    let valid = |c: u16| {
        (1000..=1003).contains(&c) || (1007..=1014).contains(&c) || (3000..=4999).contains(&c)
    };
    for code in 0..=u16::MAX {
        assert_eq!(close::is_valid(code), valid(code), "{code}");
    }
    for code in [
        0u16, 999, 1004, 1005, 1006, 1015, 1016, 1100, 2000, 2999, 5000, 65535,
    ] {
        assert_eq!(
            close::parse(&code.to_be_bytes()),
            Err(Error::InvalidCloseCode(code))
        );
    }
    assert_eq!(close::NORMAL, 1000);
    assert_eq!(close::PROTOCOL_ERROR, 1002);
    assert_eq!(close::INVALID_DATA, 1007);
    assert_eq!(close::MESSAGE_TOO_BIG, 1009);
}

#[test]
fn encoder_control_frames() {
    let mut e = Encoder::server(None);
    let mut buf = Vec::new();
    assert_eq!(
        e.ping(&mut buf, &[0; MAX_CONTROL_PAYLOAD + 1]),
        Err(Error::ControlTooLong)
    );
    assert_eq!(
        e.pong(&mut buf, &[0; MAX_CONTROL_PAYLOAD + 1]),
        Err(Error::ControlTooLong)
    );
    let long = "x".repeat(MAX_CLOSE_REASON + 1);
    let close = |code, reason| Some(CloseFrame { code, reason });
    assert_eq!(
        e.close(&mut buf, close(1000, &long)),
        Err(Error::ControlTooLong)
    );
    assert_eq!(
        e.close(&mut buf, close(1005, "")),
        Err(Error::InvalidCloseCode(1005))
    );
    assert!(buf.is_empty(), "a refused frame writes nothing");
    e.close(&mut buf, close(1000, &long[1..])).unwrap();
    e.close(&mut buf, None).unwrap();
    e.pong(&mut buf, &[1; 125]).unwrap();
    let out = run(Setup::client(), &buf);
    assert_eq!(out.msgs, [Msg::close(1000, &long[1..])]);
    assert_eq!(&buf[buf.len() - 127 - 2..][..2], [0x88, 0x00]);
}

#[test]
fn client_frames_are_masked_with_fresh_keys() {
    let mut e = Encoder::client(None, [9; 32]);
    let mut buf = Vec::new();
    e.text(&mut buf, "hello");
    e.text(&mut buf, "hello");
    e.ping(&mut buf, b"p").unwrap();
    e.close(
        &mut buf,
        Some(CloseFrame {
            code: 1000,
            reason: "done",
        }),
    )
    .unwrap();
    assert_eq!(buf[1] & 0x80, 0x80, "masked");
    let (k1, k2) = (&buf[2..6], &buf[13..17]);
    assert_ne!(k1, k2, "each frame has its own key");
    let out = run(Setup::server(), &buf);
    assert_eq!(
        out.msgs,
        [
            Msg::text("hello"),
            Msg::text("hello"),
            Msg::Ping(b"p".to_vec()),
            Msg::close(1000, "done")
        ]
    );
    // Keys come from the seed alone: the same seed, the same keys; another, others.
    let keys = |seed| {
        let mut k = MaskKeys::new(seed);
        (0..20).map(|_| k.next_key()).collect::<Vec<_>>()
    };
    assert_eq!(keys([1; 32]), keys([1; 32]));
    assert_ne!(keys([1; 32]), keys([2; 32]));
    let ks = keys([1; 32]);
    let distinct: std::collections::HashSet<_> = ks.iter().collect();
    assert_eq!(distinct.len(), ks.len());
}

#[test]
fn fragmenting_encoder() {
    let mut e = Encoder::server(None);
    let mut buf = Vec::new();
    let how = SendOptions {
        compress: false,
        fragment_size: 4,
    };
    e.message(&mut buf, MessageKind::Binary, b"0123456789", how);
    assert_eq!(
        buf,
        stream(&[
            raw_frame(false, 0, BINARY, b"0123", None),
            raw_frame(false, 0, CONT, b"4567", None),
            raw_frame(true, 0, CONT, b"89", None),
        ])
    );
    buf.clear();
    e.message(&mut buf, MessageKind::Text, b"", how);
    assert_eq!(buf, [0x81, 0x00]);
}

#[test]
fn masking_resumes_at_any_offset() {
    let data: Vec<u8> = (0..100u8).collect();
    let mut whole = data.clone();
    apply_mask(&mut whole, KEY, 0);
    for cut in 0..data.len() {
        let mut parts = data.clone();
        let (a, b) = parts.split_at_mut(cut);
        apply_mask(a, KEY, 0);
        apply_mask(b, KEY, cut);
        assert_eq!(parts, whole, "cut at {cut}");
    }
    let mut back = whole.clone();
    apply_mask(&mut back, KEY, 0);
    assert_eq!(back, data);
}
