//! Fuzz target for the HTTP/1 request parser (`surge_proto::http1::server::Parser`).
//!
//! Property checked, for any input bytes:
//! - feeding and polling never panics, and poll always returns: at most two
//!   events per byte fed (every event but `End` consumes a byte);
//! - events come in order (`Head`, `Data`*, `End`), no empty `Data`;
//! - every error answers 400, 413, 414, 431, 501 or 505, and a failed parser
//!   keeps returning the same error;
//! - the bytes fed whole, byte by byte, and cut at points derived from the
//!   input give the same requests (heads, concatenated bodies, ends) and the
//!   same final error or the same "need more".
//!
//! Input layout: byte 0 picks the limits (bit 0 set: small limits, so short
//! inputs reach every limit) and seeds the cut points; the rest is the stream.

use surge_proto::http1::server::Limits;

use crate::common::{run_bytewise, run_parts, run_whole, small_limits, Outcome};
use crate::split::pieces;

const STATUSES: [u16; 6] = [400, 413, 414, 431, 501, 505];

fn check_status(out: &Outcome) {
    if let Some(e) = out.error {
        assert!(
            STATUSES.contains(&e.status()),
            "{e:?} answers {}",
            e.status()
        );
    }
}

/// The property, for one input (the fuzz target and the corpus replay call it).
pub fn check(data: &[u8]) {
    let Some((&control, stream)) = data.split_first() else {
        return;
    };
    let limits = if control & 1 == 1 {
        small_limits()
    } else {
        Limits::default()
    };

    let whole = run_whole(limits, stream);
    check_status(&whole);
    let bytewise = run_bytewise(limits, stream);
    assert_eq!(whole, bytewise, "fed whole vs byte by byte");
    let cut = run_parts(limits, pieces(stream, control));
    assert_eq!(whole, cut, "fed whole vs cut");
}
