//! Fuzz target for the WebSocket decoder (`surge_proto::websocket::Decoder`,
//! and `parse_header` under it).
//!
//! Property checked, for any input bytes:
//! - feeding and polling never panics, and poll always returns: every message
//!   takes at least a 2-byte frame header, and a failed decoder keeps
//!   returning the same error;
//! - limits hold: no message over the decoder's maximum size (decompressed),
//!   no control payload over 125 bytes, whatever the frames announce;
//! - every error names a close code the connection may send (1002, 1007 or
//!   1009);
//! - the bytes fed whole, byte by byte, and cut at points derived from the
//!   input give the same messages, the same final error (or the same "need
//!   more"), and the same closed state;
//! - `parse_header` on every prefix of the stream never panics, and a prefix
//!   of a complete header is `Partial`, never an error.
//!
//! Input layout: byte 0 picks the setup (bit 0: client role, else server;
//! bit 1: permessage-deflate agreed; bit 2: a 64-byte message limit, so short
//! inputs reach it; bit 3: no context takeover) and seeds the cut points; the
//! rest is the stream.

use surge_proto::websocket::{parse_header, PerMessageDeflate, Role, Status};

use crate::split::pieces;
use crate::websocket_common::{run_bytewise, run_parts, run_whole, Outcome, Setup};

fn setup(pick: u8) -> Setup {
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
    s
}

fn check_outcome(o: &Outcome) {
    if let Some(e) = o.error {
        assert!(matches!(e.close_code(), 1002 | 1007 | 1009), "{e:?}");
    }
}

/// The property, for one input (the fuzz target and the corpus replay call it).
pub fn check(data: &[u8]) {
    let Some((&pick, stream)) = data.split_first() else {
        return;
    };
    let s = setup(pick);
    // Limits and progress are asserted inside run_parts.
    let whole = run_whole(s, stream);
    check_outcome(&whole);
    assert_eq!(run_bytewise(s, stream), whole, "byte by byte");
    assert_eq!(run_parts(s, pieces(stream, pick)), whole, "in pieces");

    let role = if pick & 1 == 0 {
        Role::Server
    } else {
        Role::Client
    };
    if let Ok(Status::Complete(h)) = parse_header(stream, role, pick & 2 != 0) {
        for cut in 0..h.header_len {
            assert_eq!(
                parse_header(&stream[..cut], role, pick & 2 != 0),
                Ok(Status::Partial)
            );
        }
    }
}
