//! Properties of IPROTO frame boundaries: `frame_len` announces exactly the bytes
//! `decode_frame` takes, every shorter prefix of a frame is `Partial` (never an
//! error), and arbitrary bytes never panic either function. The client's read
//! path (crates/surge-py `IprotoCodec::feed`) buffers only a frame split across
//! reads, relying on all three.

use proptest::prelude::*;
use surge_proto::iproto::{decode_frame, finish_frame, frame_len, start_frame, Status};
use surge_proto::msgpack::{write_bin, write_map_len, write_uint};

/// A reply frame: header (code, sync, optional stream) and a body map holding
/// one IPROTO_DATA (0x30) binary of `payload`.
fn frame(code: u32, sync: u64, stream: u64, payload: &[u8]) -> Vec<u8> {
    let mut buf = Vec::new();
    let start = start_frame(&mut buf, code, sync, stream);
    write_map_len(&mut buf, 1);
    write_uint(&mut buf, 0x30);
    write_bin(&mut buf, payload);
    finish_frame(&mut buf, start);
    buf
}

fn frames() -> impl Strategy<Value = Vec<(u32, u64, u64, Vec<u8>)>> {
    prop::collection::vec(
        (
            0u32..0x9000,
            any::<u64>(),
            0u64..3,
            prop::collection::vec(any::<u8>(), 0..3000),
        ),
        1..8,
    )
}

proptest! {
    #[test]
    fn frame_len_matches_decode_and_prefixes_are_incomplete(parts in frames()) {
        for (code, sync, stream, payload) in parts {
            let buf = frame(code, sync, stream, &payload);
            let Ok(Status::Complete(f)) = decode_frame(&buf) else {
                panic!("a well-formed frame does not decode");
            };
            prop_assert_eq!(f.len, buf.len());
            prop_assert_eq!((f.code, f.sync), (code, sync));
            prop_assert_eq!(frame_len(&buf).unwrap(), Some(buf.len()));
            for k in (0..buf.len()).step_by(1 + buf.len() / 64) {
                prop_assert!(matches!(decode_frame(&buf[..k]), Ok(Status::Partial)));
                let announced = frame_len(&buf[..k]).unwrap();
                prop_assert!(announced.is_none() || announced == Some(buf.len()));
            }
        }
    }

    #[test]
    fn a_stream_decodes_the_same_whole_and_cut(parts in frames(), cuts in prop::collection::vec(any::<prop::sample::Index>(), 0..10)) {
        let bufs: Vec<Vec<u8>> = parts.iter().map(|(c, s, st, p)| frame(*c, *s, *st, p)).collect();
        let stream = bufs.concat();
        let mut cut_at: Vec<usize> = cuts.iter().map(|i| i.index(stream.len())).collect();
        cut_at.sort_unstable();
        // The client's way: complete a buffered frame with just the bytes it needs.
        let (mut syncs, mut pending) = (Vec::new(), Vec::<u8>::new());
        let mut start = 0;
        for end in cut_at.into_iter().chain(std::iter::once(stream.len())) {
            let mut data = &stream[start..end];
            start = end;
            if !pending.is_empty() {
                let take = match frame_len(&pending).unwrap() {
                    Some(total) => (total - pending.len()).min(data.len()),
                    None => data.len(),
                };
                pending.extend_from_slice(&data[..take]);
                data = &data[take..];
                let mut used = 0;
                while let Status::Complete(f) = decode_frame(&pending[used..]).unwrap() {
                    syncs.push(f.sync);
                    used += f.len;
                }
                pending.drain(..used);
                if !pending.is_empty() {
                    prop_assert!(data.is_empty());
                    continue;
                }
            }
            let mut used = 0;
            while let Status::Complete(f) = decode_frame(&data[used..]).unwrap() {
                syncs.push(f.sync);
                used += f.len;
            }
            pending.extend_from_slice(&data[used..]);
        }
        prop_assert!(pending.is_empty());
        let want: Vec<u64> = parts.iter().map(|p| p.1).collect();
        prop_assert_eq!(syncs, want);
    }

    #[test]
    fn arbitrary_bytes_never_panic(data in prop::collection::vec(any::<u8>(), 0..256)) {
        let _ = frame_len(&data);
        if let Ok(Status::Complete(f)) = decode_frame(&data) {
            prop_assert_eq!(frame_len(&data).unwrap(), Some(f.len));
        }
    }
}
