//! Fuzz target for the HTTP/1 response parser
//! (`surge_proto::http1::client::ResponseParser`).
//!
//! Property checked, for any input bytes:
//! - feeding, polling and ending the stream never panics, and poll always
//!   returns (checked by the driver: a bounded number of events per byte);
//! - events come in order (`Head`, `Data`*, `End`), no empty `Data`, and a
//!   failed parser keeps returning the same error;
//! - the bytes fed whole, byte by byte, and cut at points derived from the
//!   input give the same responses (heads, concatenated bodies, ends) and the
//!   same final error or the same "need more", with and without the end of
//!   the stream.
//!
//! Input layout: byte 0 picks the limits (bit 0: small limits, so short inputs
//! reach every limit), whether the stream ends (bit 1), which responses answer
//! HEAD (bits 2..8: response i answers HEAD when bit 2 + i is set) and seeds the
//! cut points; the rest is the stream.

use surge_proto::http1::client::{Expect, ResponseLimits};

use crate::client_common::{run_bytewise, run_parts, run_whole, small_limits};
use crate::split::pieces;

/// The property, for one input (the fuzz target and the corpus replay call it).
pub fn check(data: &[u8]) {
    let Some((&control, stream)) = data.split_first() else {
        return;
    };
    let limits = if control & 1 == 1 {
        small_limits()
    } else {
        ResponseLimits::default()
    };
    let eof = control & 2 != 0;
    let expects: Vec<Expect> = (2..8)
        .map(|bit| {
            if control & (1 << bit) != 0 {
                Expect::Head
            } else {
                Expect::Normal
            }
        })
        .collect();

    let whole = run_whole(limits, &expects, stream, eof);
    let bytewise = run_bytewise(limits, &expects, stream, eof);
    assert_eq!(whole, bytewise, "fed whole vs byte by byte");
    let cut = run_parts(limits, &expects, pieces(stream, control), eof);
    assert_eq!(whole, cut, "fed whole vs in pieces");
}
