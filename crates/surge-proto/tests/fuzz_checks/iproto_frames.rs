//! Fuzz target for the IPROTO reply decoder (`surge_proto::iproto`) and the
//! MessagePack reader under it.
//!
//! Property checked, for any input bytes:
//! - `frame_len`, `decode_frame`, `decode_body`, the value walker and the
//!   extension decoders never panic;
//! - a complete frame takes exactly the bytes `frame_len` announced, and every
//!   shorter prefix of it is `Partial`, never an error: the client buffers
//!   only a frame split across reads on that promise (crates/surge-py
//!   `IprotoCodec::feed`);
//! - cutting the stream anywhere and completing the buffered frame with just the
//!   bytes it still needs (what the client does) finds the same frames and the
//!   same error as decoding it whole.
//!
//! Input layout: byte 0 seeds the cut points; the rest is the stream.

use surge_proto::iproto::{decode_body, decode_frame, frame_len, Status};
use surge_proto::msgpack::ext::{
    decode_datetime, decode_decimal, decode_error_stack, decode_interval,
};
use surge_proto::msgpack::{read_token, skip_value, Token};

/// Walks every value of `buf` token by token, decoding extension payloads.
fn walk(buf: &[u8]) {
    let mut pos = 0;
    while pos < buf.len() {
        let before = pos;
        match read_token(buf, &mut pos) {
            Ok(Token::Ext(_, data)) => {
                let _ = decode_decimal(data);
                let _ = decode_datetime(data);
                let _ = decode_interval(data);
                let _ = decode_error_stack(data);
            }
            Ok(_) => {}
            Err(_) => break,
        }
        assert!(pos > before, "read_token made no progress");
    }
    let mut p = 0;
    while p < buf.len() && skip_value(buf, &mut p).is_ok() {}
}

/// Frame ends and the final outcome (Some: the error text).
fn whole(stream: &[u8]) -> (Vec<usize>, Option<String>) {
    let mut ends = Vec::new();
    let mut at = 0;
    loop {
        match decode_frame(&stream[at..]) {
            Ok(Status::Complete(f)) => {
                let announced = frame_len(&stream[at..]).expect("frame_len errs on a good frame");
                assert_eq!(announced, Some(f.len));
                for k in 0..f.len {
                    assert!(
                        matches!(decode_frame(&stream[at..at + k]), Ok(Status::Partial)),
                        "a {k}-byte prefix of a {}-byte frame is not Partial",
                        f.len
                    );
                }
                if let Ok(body) = decode_body(f.body) {
                    for part in [body.data, body.error, body.error_24, body.metadata] {
                        walk(part.unwrap_or_default());
                    }
                }
                walk(f.body);
                at += f.len;
                ends.push(at);
            }
            Ok(Status::Partial) => return (ends, None),
            Err(e) => return (ends, Some(e.to_string())),
        }
    }
}

/// The client's way: a buffer that holds at most one split frame.
fn cut(stream: &[u8], cuts: &[usize]) -> (Vec<usize>, Option<String>) {
    let (mut ends, mut buf, mut base) = (Vec::new(), Vec::<u8>::new(), 0);
    let mut start = 0;
    for &end in cuts.iter().chain(std::iter::once(&stream.len())) {
        let mut data = &stream[start..end.max(start)];
        start = end.max(start);
        if !buf.is_empty() {
            let take = match frame_len(&buf) {
                Ok(Some(total)) => total.saturating_sub(buf.len()).min(data.len()),
                Ok(None) => data.len(),
                Err(e) => return (ends, Some(e.to_string())),
            };
            buf.extend_from_slice(&data[..take]);
            data = &data[take..];
            let mut used = 0;
            loop {
                match decode_frame(&buf[used..]) {
                    Ok(Status::Complete(f)) => {
                        used += f.len;
                        ends.push(base + used);
                    }
                    Ok(Status::Partial) => break,
                    Err(e) => return (ends, Some(e.to_string())),
                }
            }
            base += used;
            buf.drain(..used);
            if !buf.is_empty() {
                buf.extend_from_slice(data);
                continue;
            }
        }
        let mut used = 0;
        loop {
            match decode_frame(&data[used..]) {
                Ok(Status::Complete(f)) => {
                    used += f.len;
                    ends.push(base + used);
                }
                Ok(Status::Partial) => break,
                Err(e) => return (ends, Some(e.to_string())),
            }
        }
        base += used;
        buf.extend_from_slice(&data[used..]);
    }
    (ends, None)
}

/// The property, for one input (the fuzz target and the corpus replay call it).
pub fn check(data: &[u8]) {
    let Some((&seed, stream)) = data.split_first() else {
        return;
    };
    // `whole` is the reference decoder; `cut` feeds the same decoder in reads.
    assert_eq!(cut(stream, &[]), whole(stream), "fed in one read");
    crate::split::same_under_cuts(stream, seed, 64, cut);
}
