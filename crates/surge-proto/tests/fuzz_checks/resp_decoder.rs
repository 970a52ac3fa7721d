//! Fuzz target for the RESP decoder (`surge_proto::resp`).
//!
//! Property checked, for any input bytes:
//! - decoding and scanning never panic, and every limit holds (no reply deeper
//!   than `MAX_NESTING`, no allocation from an announced count alone);
//! - a `Scanner` fed the input whole, byte by byte, and in pieces cut at points
//!   derived from the input finds the same reply boundaries and the same error;
//! - each reply the scanner finds decodes, and takes exactly the bytes found.
//!
//! Input layout: byte 0 seeds the cut points; the rest is the stream.

use surge_proto::resp::{decode, Error, Scanner, Status};

/// Reply ends and the final outcome (None: needs more; Some(e): error).
fn run(stream: &[u8], cuts: &[usize]) -> (Vec<usize>, Option<Error>) {
    let mut ends = Vec::new();
    let mut start = 0;
    let mut s = Scanner::new();
    for &end in cuts.iter().chain(std::iter::once(&stream.len())) {
        while start < end {
            match s.scan(&stream[start..end]) {
                Ok(Status::Complete(n)) => {
                    match decode(&stream[start..]) {
                        Ok(Status::Complete((_, m))) => assert_eq!(m, n),
                        other => panic!("scanned reply does not decode: {other:?}"),
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
