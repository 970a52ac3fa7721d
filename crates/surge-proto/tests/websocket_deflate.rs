//! permessage-deflate (RFC 7692): the section 7.2.3 examples byte for byte,
//! context takeover and its absence, window sizes, and decompression bounded
//! by the message limit.

mod websocket_common;

use flate2::{Compress, Compression, Decompress, FlushCompress, FlushDecompress};
use surge_proto::websocket::{
    Encoder, Error, MessageKind, PerMessageDeflate, SendOptions, DEFAULT_MAX_MESSAGE_SIZE,
};
use websocket_common::*;

fn no_takeover() -> PerMessageDeflate {
    PerMessageDeflate {
        server_no_context_takeover: true,
        client_no_context_takeover: true,
        ..deflate()
    }
}

/// Server frames (unmasked) read by a client that agreed to deflate.
fn client(d: PerMessageDeflate) -> Setup {
    Setup::client().deflate(d)
}

fn sf(fin: bool, rsv1: bool, opcode: u8, payload: &[u8]) -> Vec<u8> {
    raw_frame(fin, if rsv1 { 4 } else { 0 }, opcode, payload, None)
}

const HELLO_Z: [u8; 7] = [0xf2, 0x48, 0xcd, 0xc9, 0xc9, 0x07, 0x00];

#[test]
fn rfc7692_section_7_2_3_examples() {
    let hello = Msg::text("Hello");
    let rows: Vec<(&str, Vec<u8>)> = vec![
        // 7.2.3.1: one compressed frame, and the same message in two fragments.
        (
            "7.2.3.1 one frame",
            vec![0xc1, 0x07, 0xf2, 0x48, 0xcd, 0xc9, 0xc9, 0x07, 0x00],
        ),
        (
            "7.2.3.1 fragmented",
            vec![
                0x41, 0x03, 0xf2, 0x48, 0xcd, 0x80, 0x04, 0xc9, 0xc9, 0x07, 0x00,
            ],
        ),
        // 7.2.3.3: a stored (uncompressed) DEFLATE block.
        (
            "7.2.3.3 no compression",
            vec![
                0xc1, 0x0b, 0x00, 0x05, 0x00, 0xfa, 0xff, 0x48, 0x65, 0x6c, 0x6c, 0x6f, 0x00,
            ],
        ),
        // 7.2.3.4: a block with BFINAL set.
        (
            "7.2.3.4 BFINAL",
            vec![0xc1, 0x08, 0xf3, 0x48, 0xcd, 0xc9, 0xc9, 0x07, 0x00, 0x00],
        ),
        // 7.2.3.5: two DEFLATE blocks in one message.
        (
            "7.2.3.5 two blocks",
            vec![
                0xc1, 0x0d, 0xf2, 0x48, 0x05, 0x00, 0x00, 0x00, 0xff, 0xff, 0xca, 0xc9, 0xc9, 0x07,
                0x00,
            ],
        ),
    ];
    for (name, input) in rows {
        let out = run(client(deflate()), &input);
        assert_eq!((out.msgs, out.error), (vec![hello.clone()], None), "{name}");
    }
    // 7.2.3.2: the second "Hello" refers back to the first, across messages.
    let shared = [
        &[0xc1, 0x07][..],
        &HELLO_Z,
        &[0xc1, 0x05, 0xf2, 0x00, 0x11, 0x00, 0x00],
    ]
    .concat();
    let out = run(client(deflate()), &shared);
    assert_eq!(
        (out.msgs, out.error),
        (vec![hello.clone(), hello.clone()], None)
    );
    // Without context takeover the reference points before the window.
    let out = run(client(no_takeover()), &shared);
    assert_eq!(
        (out.msgs, out.error),
        (vec![hello.clone()], Some(Error::BadCompressedData))
    );
    // The same message after a BFINAL block: a new stream starts.
    let after_final = [
        &[0xc1, 0x08, 0xf3, 0x48, 0xcd, 0xc9, 0xc9, 0x07, 0x00, 0x00][..],
        &[0xc1, 0x07],
        &HELLO_Z,
    ]
    .concat();
    let out = run(client(deflate()), &after_final);
    assert_eq!(out.msgs, [hello.clone(), hello]);
}

/// The encoder writes the RFC's bytes: "Hello", then with context takeover a
/// second "Hello" as a back-reference; without, the same bytes again.
#[test]
fn encoder_writes_rfc7692_bytes() {
    let mut e = Encoder::server(Some(deflate()));
    let mut buf = Vec::new();
    e.text(&mut buf, "Hello");
    assert_eq!(buf, [&[0xc1, 0x07][..], &HELLO_Z].concat());
    buf.clear();
    e.text(&mut buf, "Hello");
    assert_eq!(buf, [0xc1, 0x05, 0xf2, 0x00, 0x11, 0x00, 0x00]);
    let mut e = Encoder::server(Some(no_takeover()));
    for _ in 0..3 {
        buf.clear();
        e.text(&mut buf, "Hello");
        assert_eq!(buf, [&[0xc1, 0x07][..], &HELLO_Z].concat());
    }
    // Empty: a single 0x00 (RFC 7692 section 7.2.3.6).
    buf.clear();
    e.binary(&mut buf, b"");
    assert_eq!(buf, [0xc2, 0x01, 0x00]);
    let out = run(client(deflate()), &buf);
    assert_eq!(out.msgs, [Msg::Binary(vec![])]);
}

#[test]
fn uncompressed_messages_pass_in_a_deflate_session() {
    let input = stream(&[
        sf(true, false, TEXT, b"plain"),
        sf(true, true, TEXT, &HELLO_Z),
        sf(true, false, BINARY, b"raw"),
        sf(true, false, PING, b"p"),
    ]);
    let out = run(client(deflate()), &input);
    assert_eq!(
        out.msgs,
        [
            Msg::text("plain"),
            Msg::text("Hello"),
            Msg::Binary(b"raw".to_vec()),
            Msg::Ping(b"p".to_vec())
        ]
    );
}

#[test]
fn rsv1_rules() {
    let rows: Vec<(&str, Setup, Vec<u8>)> = vec![
        (
            "RSV1 without deflate",
            Setup::client(),
            sf(true, true, TEXT, &HELLO_Z),
        ),
        (
            "RSV1 on a continuation",
            client(deflate()),
            stream(&[
                sf(false, true, TEXT, &HELLO_Z[..3]),
                sf(true, true, CONT, &HELLO_Z[3..]),
            ]),
        ),
        (
            "RSV1 on a ping",
            client(deflate()),
            sf(true, true, PING, b""),
        ),
        (
            "RSV1 on a close",
            client(deflate()),
            sf(true, true, CLOSE, b""),
        ),
    ];
    for (name, setup, input) in rows {
        assert_eq!(
            run(setup, &input).error,
            Some(Error::ReservedBits),
            "{name}"
        );
    }
}

/// Raw DEFLATE of `data`, sync-flushed, tail removed: what a peer would send.
fn compress(data: &[u8], level: u32) -> Vec<u8> {
    let mut z = Compress::new(Compression::new(level), false);
    let mut out = Vec::with_capacity(data.len() / 2 + 1024);
    loop {
        let done = z.total_in() as usize;
        z.compress_vec(&data[done..], &mut out, FlushCompress::Sync)
            .unwrap();
        if z.total_in() as usize == data.len() && out.len() < out.capacity() {
            break;
        }
        out.reserve(out.capacity());
    }
    assert!(out.ends_with(&[0, 0, 0xff, 0xff]));
    out.truncate(out.len() - 4);
    out
}

/// A small message that inflates past the limit fails as too big, fed whole
/// or in pieces, and never grows the decoder past the limit by much.
#[test]
fn zip_bombs_are_refused() {
    // 17 MiB of zeros: 1 MiB compressed, its blocks repeated (each copy goes
    // on from the zeros before it).
    let mut mib = compress(&vec![0u8; 1 << 20], 9);
    mib.extend_from_slice(&[0, 0, 0xff, 0xff]);
    let bomb = mib.repeat(17);
    assert!(bomb.len() < 64 * 1024, "{}", bomb.len());
    let input = cf_z(true, BINARY, &bomb);
    let s = Setup::server().deflate(deflate());
    assert_eq!(run_whole(s, &input).error, Some(Error::MessageTooBig));
    let pieces = run_parts(s, input.chunks(4096));
    assert_eq!(
        (pieces.msgs.len(), pieces.error),
        (0, Some(Error::MessageTooBig))
    );
    // 16 MiB exactly is still a message.
    let at = cf_z(true, BINARY, &mib.repeat(16));
    let out = run_whole(s, &at);
    assert_eq!(out.error, None);
    assert!(matches!(&out.msgs[..], [Msg::Binary(b)] if b.len() == DEFAULT_MAX_MESSAGE_SIZE));
    assert_eq!(Error::MessageTooBig.close_code(), 1009);
    // Exactly at a small limit passes; one byte over does not.
    let s = Setup::server().deflate(deflate()).max(1000);
    let at = cf_z(true, BINARY, &compress(&[b'a'; 1000], 6));
    assert_eq!(run(s, &at).msgs, [Msg::Binary(vec![b'a'; 1000])]);
    let over = cf_z(true, BINARY, &compress(&[b'a'; 1001], 6));
    assert_eq!(run(s, &over).error, Some(Error::MessageTooBig));
    // Too big across fragments too.
    let z = compress(&[b'a'; 1001], 6);
    let (a, b) = z.split_at(z.len() / 2);
    let input = stream(&[cf_z(false, TEXT, a), cf(true, CONT, b)]);
    assert_eq!(run(s, &input).error, Some(Error::MessageTooBig));
}

/// With a window of N bits agreed, the encoder never refers further back than
/// 2^N bytes: a decompressor with that window reads what it wrote.
#[test]
fn window_bits_bound_back_references() {
    // Text whose repeats are far apart: a 32 KiB window would use them.
    let unit: Vec<u8> = (0..3000u32)
        .map(|i| (i.wrapping_mul(2654435761) >> 13) as u8)
        .collect();
    let data = [&unit[..], &unit, &unit].concat();
    let mut sizes = Vec::new();
    for bits in 9..=15u8 {
        let d = PerMessageDeflate {
            server_max_window_bits: Some(bits),
            ..deflate()
        };
        let mut e = Encoder::server(Some(d));
        let mut buf = Vec::new();
        e.binary(&mut buf, &data);
        e.binary(&mut buf, &data);
        // Read it back with a decompressor of exactly that window.
        let mut z = Decompress::new_with_window_bits(false, bits);
        let mut pos = 0;
        for _ in 0..2 {
            let len = match buf[pos + 1] {
                126 => {
                    pos += 2;
                    u16::from_be_bytes([buf[pos], buf[pos + 1]]) as usize
                }
                n => n as usize,
            };
            pos += 2;
            let mut payload = buf[pos..pos + len].to_vec();
            pos += len;
            payload.extend_from_slice(&[0, 0, 0xff, 0xff]);
            let mut out = Vec::with_capacity(data.len() + 64);
            z.decompress_vec(&payload, &mut out, FlushDecompress::Sync)
                .unwrap_or_else(|e| panic!("{bits} bits: {e}"));
            assert_eq!(out, data, "{bits} bits");
        }
        sizes.push(buf.len());
        let out = run(client(d), &buf);
        assert_eq!(
            out.msgs,
            [Msg::Binary(data.clone()), Msg::Binary(data.clone())]
        );
    }
    // Only the 4 KiB window and up see the repeats 3000 bytes apart.
    assert!(sizes[3] < sizes[2] / 2, "{sizes:?}");
    // 8 bits agreed: zlib cannot honour it, so the server does not compress.
    let d = PerMessageDeflate {
        server_max_window_bits: Some(8),
        ..deflate()
    };
    let mut e = Encoder::server(Some(d));
    assert!(!e.compresses());
    let mut buf = Vec::new();
    e.text(&mut buf, "Hello");
    assert_eq!(buf, [0x81, 0x05, b'H', b'e', b'l', b'l', b'o']);
}

/// Compressed and fragmented: RSV1 on the first frame only, each later frame
/// a continuation, and the message whole again on the other side.
#[test]
fn compressed_and_fragmented() {
    let text = "Ein Gespenst geht um in Europa. ".repeat(40);
    let mut e = Encoder::client(Some(deflate()), [3; 32]);
    let mut buf = Vec::new();
    let how = SendOptions {
        compress: true,
        fragment_size: 16,
    };
    e.message(&mut buf, MessageKind::Text, text.as_bytes(), how);
    assert_eq!(buf[0], 0x41, "first frame: text, RSV1, no FIN");
    assert_eq!(buf[1] & 0x7f, 16);
    assert_eq!(
        buf[2 + 4 + 16],
        0x00,
        "second frame: continuation without RSV1"
    );
    let out = run(Setup::server().deflate(deflate()), &buf);
    assert_eq!(out.msgs, [Msg::Text(text)]);
}
