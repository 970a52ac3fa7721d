//! Tarantool's binary protocol (IPROTO), sans-IO.
//!
//! Theory of operation: every message is `size (msgpack uint) | header map | body map`.
//! Encoders append whole frames to a caller-owned buffer ([`start_frame`] writes a
//! 5-byte size placeholder and the header, [`finish_frame`] patches the size), so a
//! batch of requests is one buffer and one write. The decoder ([`decode_frame`]) looks
//! at the front of a read buffer and answers `Partial` until a whole frame is there;
//! replies are matched to requests by the header's `sync`. Messages without a caller
//! (IPROTO_EVENT from watchers, IPROTO_CHUNK pushes) carry their own request type.
//!
//! Servers older than 2.10 (Debian ships 2.6) know nothing of IPROTO_ID, streams,
//! transactions over IPROTO or watchers; those encoders are tested against byte
//! fixtures built from the protocol documentation only.

mod constants;
mod error;
mod frame;
mod greeting;
mod requests;

pub use constants::*;
pub use error::Error;
pub use frame::{
    decode_body, decode_frame, finish_frame, frame_len, start_frame, Body, Frame, Status,
};
pub use greeting::{parse_greeting, scramble, Greeting, GREETING_SIZE};
pub use requests::*;
