//! Fuzz target for the PostgreSQL backend decoder (`surge_proto::pgwire`).
//!
//! Property checked, for any input bytes:
//! - framing, typing and walking every view (DataRow fields, RowDescription
//!   columns, error fields) never panic;
//! - a decoder fed the input whole, byte by byte, and in pieces cut at points
//!   derived from the input finds the same message ends and the same error
//!   (a prefix of a stream is never an error);
//! - the binary type decoders never panic on any field.
//!
//! Input layout: byte 0 seeds the cut points; the rest is the stream.

use surge_proto::pgwire::{read_frame, types, Error, Message, Status};

fn walk(m: &Message<'_>) {
    match m {
        Message::DataRow(d) => {
            for f in d.fields().flatten() {
                let _ = types::numeric_to_string(f);
                let _ = types::decode_interval(f);
                if let Ok((h, rest)) = types::decode_array_header(f) {
                    let _ = types::array_elements(rest, h.element_count());
                }
                let _ = types::decode_record(f);
                let _ = types::decode_range(f);
                let _ = types::decode_multirange(f);
                let _ = types::decode_hstore(f);
                let _ = types::decode_path(f);
                let _ = types::decode_polygon(f);
                let _ = types::decode_inet(f);
                let _ = types::decode_snapshot(f);
                let _ = types::decode_bits(f);
                let _ = types::decode_timetz(f);
                if let Ok(s) = std::str::from_utf8(f) {
                    let _ = types::parse_text_array(s);
                }
            }
        }
        Message::RowDescription(r) => assert_eq!(r.columns().count(), r.len()),
        Message::ErrorResponse(f) | Message::NoticeResponse(f) => {
            let _ = f.iter().count();
        }
        _ => {}
    }
}

fn run(stream: &[u8], cuts: &[usize]) -> (Vec<usize>, Option<Error>) {
    let mut ends = Vec::new();
    let mut start = 0;
    for &end in cuts.iter().chain(std::iter::once(&stream.len())) {
        loop {
            match read_frame(&stream[start..end]) {
                Ok(Status::Complete((f, n))) => {
                    match Message::parse(f) {
                        Ok(m) => walk(&m),
                        Err(e) => return (ends, Some(e)),
                    }
                    start += n;
                    ends.push(start);
                }
                Ok(Status::Partial) => break,
                Err(e) => return (ends, Some(e)),
            }
        }
    }
    (ends, None)
}

/// The property, for one input (the fuzz target and the corpus replay call it).
pub fn check(data: &[u8]) {
    let Some((&seed, stream)) = data.split_first() else {
        return;
    };
    crate::split::same_under_cuts(stream, seed, 32, run);
}
