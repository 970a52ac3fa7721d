//! WebSocket (RFC 6455) with permessage-deflate (RFC 7692), sans-IO.
//!
//! Theory of operation. A connection starts as an HTTP/1.1 request. The server
//! hands its method and header fields to [`validate_request`], which either
//! refuses it with a [`HandshakeError`] naming the status and headers to answer
//! ([`write_rejection`] writes that response) or returns an
//! [`UpgradeRequest`]: the key, the subprotocols offered and the valid
//! permessage-deflate offers. The server picks a subprotocol
//! ([`UpgradeRequest::select_protocol`]) and a compression agreement
//! ([`negotiate`] against its [`DeflateConfig`]), and [`write_response`]
//! appends the `101` head with the `Sec-WebSocket-Accept` ([`accept_key`]).
//!
//! From then on bytes flow as frames. A [`Decoder`] is fed what is read and
//! polled for whole [`Message`]s: it parses each frame header
//! ([`parse_header`]), checks the rules a header alone can break (reserved
//! bits and opcodes, masking by [`Role`], lengths, control frames short and
//! unfragmented), and then, for data frames, moves the payload into the message
//! as it arrives: unmasked, inflated when the message is compressed, its size
//! held under the limit and its UTF-8 checked, so a bad message fails at the
//! first bad byte and memory stays bounded. Control frames may come between the
//! fragments of a message and are returned at once. A one-frame message that
//! arrived whole is unmasked in place and returned without a copy. Every
//! failure is an [`Error`] that names the close code to send
//! ([`Error::close_code`]); "need more bytes" is [`Status::Partial`], never an
//! error. After a close frame the decoder reads nothing more.
//!
//! An [`Encoder`] appends frames to a buffer the caller owns: messages
//! (compressed and fragmented as [`SendOptions`] asks), pings, pongs and closes. A
//! server's frames go unmasked; a client's are masked with keys drawn from a
//! per-connection seed ([`MaskKeys`]). With permessage-deflate, each direction
//! keeps one raw DEFLATE stream, flushed at the end of every message and reset
//! after it when "no context takeover" was agreed.

pub mod close;
mod decoder;
mod deflate;
mod encoder;
mod error;
mod extensions;
mod frame;
mod handshake;
mod limits;
mod utf8;

pub use crate::Status;
pub use close::CloseFrame;
pub use decoder::{Decoder, Message};
pub use encoder::{Encoder, MaskKeys, SendOptions};
pub use error::{Error, HandshakeError};
pub use extensions::{
    deflate_offers, negotiate, parse_extensions, DeflateConfig, DeflateOffer, Extension, Param,
    PerMessageDeflate, PERMESSAGE_DEFLATE,
};
pub use frame::{
    apply_mask, parse_header, write_frame, write_header, FrameHeader, MessageKind, Opcode, Role,
};
pub use handshake::{
    accept_key, validate_request, write_rejection, write_response, UpgradeRequest,
};
pub use limits::*;
