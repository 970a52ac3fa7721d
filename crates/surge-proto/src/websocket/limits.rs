//! Limits of the WebSocket codec. Every limit has a documented default, and
//! breaking one yields an [`Error`](super::Error) that names the close code to
//! send ([`Error::close_code`](super::Error::close_code)).

/// Largest message accepted, in bytes, after decompression and after joining
/// its fragments: 16 MiB. Over it the decoder fails with
/// [`Error::MessageTooBig`](super::Error::MessageTooBig): send close 1009. It
/// also bounds the memory one connection's decoder can be made to hold.
pub const DEFAULT_MAX_MESSAGE_SIZE: usize = 16 * 1024 * 1024;

/// Largest payload of a control frame (close, ping, pong): 125 bytes, fixed by
/// RFC 6455 section 5.5. Over it: close 1002.
pub const MAX_CONTROL_PAYLOAD: usize = 125;

/// Longest close reason: the control payload less the 2-byte status code.
pub const MAX_CLOSE_REASON: usize = MAX_CONTROL_PAYLOAD - 2;

/// zlib level the encoder compresses at unless told otherwise: 6, zlib's own
/// default (levels 1..=9; 1 is fastest).
pub const DEFAULT_COMPRESSION_LEVEL: u32 = 6;

/// A compressed message may take a little more room on the wire than
/// uncompressed (deflate's stored blocks cost 5 bytes per 64 KiB), so its
/// compressed payload may exceed the message limit by 1/1024 of it plus this
/// much before it is refused: the decompressed size is what the limit bounds.
pub const COMPRESSED_SLACK: usize = 1024;
