//! Properties of the WebSocket codec:
//! - whatever is encoded (any payload, fragmentation, masking, compression
//!   agreement, pings between) decodes to the same messages;
//! - any stream, valid, damaged or random, decodes the same fed whole, byte by
//!   byte and cut into random pieces, never panics, and keeps to the limits;
//! - UTF-8 is judged as `std::str::from_utf8` judges the whole message, however
//!   it is fragmented;
//! - the handshake's header parsers never panic.

mod websocket_common;

use proptest::prelude::*;
use surge_proto::websocket::{
    close, parse_extensions, validate_request, CloseFrame, Encoder, Error, MessageKind,
    PerMessageDeflate, SendOptions,
};
use websocket_common::*;

#[derive(Clone, Debug)]
enum Item {
    Text(String, SendOptions),
    Binary(Vec<u8>, SendOptions),
    Ping(Vec<u8>),
}

fn send() -> impl Strategy<Value = SendOptions> {
    (any::<bool>(), prop_oneof![Just(0usize), 1usize..40]).prop_map(|(compress, fragment_size)| {
        SendOptions {
            compress,
            fragment_size,
        }
    })
}

fn item() -> impl Strategy<Value = Item> {
    prop_oneof![
        (".{0,60}", send()).prop_map(|(s, h)| Item::Text(s, h)),
        (proptest::collection::vec(any::<u8>(), 0..300), send())
            .prop_map(|(b, h)| Item::Binary(b, h)),
        proptest::collection::vec(any::<u8>(), 0..=125).prop_map(Item::Ping),
    ]
}

fn agreement() -> impl Strategy<Value = Option<PerMessageDeflate>> {
    prop_oneof![
        Just(None),
        (any::<bool>(), any::<bool>(), 8u8..=15, 8u8..=15).prop_map(|(snc, cnc, sb, cb)| {
            Some(PerMessageDeflate {
                server_no_context_takeover: snc,
                client_no_context_takeover: cnc,
                server_max_window_bits: Some(sb),
                client_max_window_bits: Some(cb),
            })
        }),
    ]
}

fn cuts(len: usize, picks: &[prop::sample::Index]) -> Vec<usize> {
    picks.iter().map(|i| i.index(len + 1)).collect()
}

/// Setups the random-input properties run under: each role, with and without
/// deflate, with a small limit.
fn setup(pick: u8) -> Setup {
    let s = if pick & 1 == 0 {
        Setup::server()
    } else {
        Setup::client()
    };
    let s = if pick & 2 == 0 {
        s
    } else {
        s.deflate(deflate())
    };
    if pick & 4 == 0 {
        s
    } else {
        s.max(64)
    }
}

fn agree(setup: Setup, input: &[u8], picks: &[prop::sample::Index]) -> Result<(), TestCaseError> {
    let whole = run_whole(setup, input);
    prop_assert_eq!(&run_bytewise(setup, input), &whole, "byte by byte");
    prop_assert_eq!(
        &run_split(setup, input, &cuts(input.len(), picks)),
        &whole,
        "cut"
    );
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn encode_then_decode_round_trips(
        items in proptest::collection::vec(item(), 1..8),
        deflate in agreement(),
        from_client in any::<bool>(),
        seed in any::<[u8; 32]>(),
        picks in proptest::collection::vec(any::<prop::sample::Index>(), 0..16),
    ) {
        let (mut enc, setup) = if from_client {
            (Encoder::client(deflate, seed), Setup::server())
        } else {
            (Encoder::server(deflate), Setup::client())
        };
        let setup = Setup { deflate, ..setup };
        let mut buf = Vec::new();
        let mut want = Vec::new();
        for it in &items {
            match it {
                Item::Text(s, how) => {
                    enc.message(&mut buf, MessageKind::Text, s.as_bytes(), *how);
                    want.push(Msg::Text(s.clone()));
                }
                Item::Binary(b, how) => {
                    enc.message(&mut buf, MessageKind::Binary, b, *how);
                    want.push(Msg::Binary(b.clone()));
                }
                Item::Ping(p) => {
                    enc.ping(&mut buf, p).unwrap();
                    want.push(Msg::Ping(p.clone()));
                }
            }
        }
        enc.close(&mut buf, Some(CloseFrame { code: 1000, reason: "done" })).unwrap();
        want.push(Msg::close(1000, "done"));
        let whole = run_whole(setup, &buf);
        prop_assert_eq!(&whole.msgs, &want);
        prop_assert_eq!(whole.error, None);
        prop_assert!(whole.closed);
        agree(setup, &buf, &picks)?;
    }

    #[test]
    fn random_bytes_agree_however_cut(
        pick in any::<u8>(),
        head in proptest::collection::vec(any::<u8>(), 0..4),
        data in proptest::collection::vec(any::<u8>(), 0..200),
        picks in proptest::collection::vec(any::<prop::sample::Index>(), 0..12),
    ) {
        // Lead with a plausible header so more inputs get past the first byte.
        let mut input = vec![0x81 | (head.first().copied().unwrap_or(0) & 0x7f), 0x80 | (data.len().min(125) as u8)];
        input.extend_from_slice(&head);
        input.extend_from_slice(&data);
        agree(setup(pick), &input, &picks)?;
        agree(setup(pick), &data, &picks)?;
    }

    #[test]
    fn damaged_streams_agree_however_cut(
        items in proptest::collection::vec(item(), 1..5),
        deflate in agreement(),
        damage in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..4),
        max in prop_oneof![Just(None), (0usize..200).prop_map(Some)],
        picks in proptest::collection::vec(any::<prop::sample::Index>(), 0..12),
    ) {
        let mut enc = Encoder::client(deflate, [5; 32]);
        let mut buf = Vec::new();
        for it in &items {
            match it {
                Item::Text(s, how) => enc.message(&mut buf, MessageKind::Text, s.as_bytes(), *how),
                Item::Binary(b, how) => enc.message(&mut buf, MessageKind::Binary, b, *how),
                Item::Ping(p) => enc.ping(&mut buf, p).unwrap(),
            }
        }
        for (at, x) in &damage {
            let i = at.index(buf.len());
            buf[i] ^= x;
        }
        let setup = Setup { deflate, max, ..Setup::server() };
        agree(setup, &buf, &picks)?;
    }

    #[test]
    fn utf8_judged_as_std_judges_the_whole(
        bytes in proptest::collection::vec(prop_oneof![
            4 => any::<u8>(),
            4 => 0x80u8..0xc0,
            2 => 0xc0u8..0xf8,
            6 => 0x20u8..0x7f,
        ], 0..40),
        sizes in proptest::collection::vec(1usize..6, 0..10),
    ) {
        let mut frames = Vec::new();
        let mut at = 0;
        for s in sizes {
            let end = (at + s).min(bytes.len());
            frames.push(cf(false, if frames.is_empty() { TEXT } else { CONT }, &bytes[at..end]));
            at = end;
        }
        frames.push(cf(true, if frames.is_empty() { TEXT } else { CONT }, &bytes[at..]));
        let out = run(Setup::server(), &stream(&frames));
        match std::str::from_utf8(&bytes) {
            Ok(s) => prop_assert_eq!(out.msgs, vec![Msg::text(s)]),
            Err(_) => prop_assert_eq!((out.msgs.len(), out.error), (0, Some(Error::InvalidUtf8))),
        }
    }

    #[test]
    fn close_payloads_round_trip(code in any::<u16>(), reason in ".{0,40}") {
        let mut buf = Vec::new();
        let frame = CloseFrame { code, reason: &reason };
        match close::write_payload(&mut buf, Some(frame)) {
            Ok(()) => prop_assert_eq!(close::parse(&buf), Ok(Some(frame))),
            Err(e) => prop_assert!(
                !close::is_valid(code) && e == Error::InvalidCloseCode(code)
                    || reason.len() > 123 && e == Error::ControlTooLong
            ),
        }
    }

    #[test]
    fn handshake_parsers_never_panic(
        value in proptest::collection::vec(prop_oneof![
            Just(b'a'), Just(b'='), Just(b';'), Just(b','), Just(b'"'), Just(b'\\'), Just(b' '),
            Just(b'1'), any::<u8>(),
        ], 0..40),
    ) {
        let mut out = Vec::new();
        let _ = parse_extensions(&value, &mut out);
        let headers = [
            (&b"Upgrade"[..], &b"websocket"[..]),
            (b"Connection", b"upgrade"),
            (b"Sec-WebSocket-Version", b"13"),
            (b"Sec-WebSocket-Key", &value[..]),
            (b"Sec-WebSocket-Protocol", &value[..]),
            (b"Sec-WebSocket-Extensions", &value[..]),
        ];
        let _ = validate_request(b"GET", headers);
    }
}

/// The fuzz target's seeds, under the fuzz target's setup byte, hold its
/// property on stable too; and they decode to what they were written to show.
#[test]
fn fuzz_seeds_hold_the_property() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/seeds/websocket_frames");
    let mut seen = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let data = std::fs::read(&path).unwrap();
        let (&pick, stream) = data.split_first().unwrap();
        let mut s = if pick & 1 == 0 {
            Setup::server()
        } else {
            Setup::client()
        };
        if pick & 2 != 0 {
            let nct = pick & 8 != 0;
            s = s.deflate(PerMessageDeflate {
                server_no_context_takeover: nct,
                client_no_context_takeover: nct,
                ..PerMessageDeflate::default()
            });
        }
        if pick & 4 != 0 {
            s = s.max(64);
        }
        let out = run(s, stream);
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let want_error = match name.as_str() {
            "server_bad_utf8" => Some(Error::InvalidUtf8),
            "small_limit" => Some(Error::MessageTooBig),
            _ => None,
        };
        assert_eq!(out.error, want_error, "{name}");
        assert!(want_error.is_some() || !out.msgs.is_empty(), "{name}");
        seen += 1;
    }
    assert!(seen >= 5, "seeds in {}", dir.display());
}
