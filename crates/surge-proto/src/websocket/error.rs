//! Errors. A frame or message error names the close code to send before
//! closing the connection ([`Error::close_code`]); a handshake error names the
//! HTTP status to answer and the headers that go with it
//! ([`HandshakeError::status`], [`HandshakeError::headers`]). After either, the
//! stream cannot be trusted any more: the connection ends.

use std::fmt;

use super::close;

/// Why frames or messages could not be decoded (or, for the few variants the
/// encoder returns, why a frame cannot be sent).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Error {
    /// RSV2 or RSV3 set; RSV1 set without permessage-deflate, on a control
    /// frame or on a continuation frame (1002).
    ReservedBits,
    /// An opcode RFC 6455 reserves (3-7, 0xB-0xF) (1002).
    ReservedOpcode(u8),
    /// A server received a frame without a mask (1002).
    UnmaskedFrame,
    /// A client received a masked frame (1002).
    MaskedFrame,
    /// A 64-bit payload length with its most significant bit set (1002).
    LengthOverflow,
    /// A control frame payload over 125 bytes, or a close reason over 123
    /// (1002).
    ControlTooLong,
    /// A control frame without FIN (1002).
    FragmentedControl,
    /// A continuation frame with no message to continue (1002).
    UnexpectedContinuation,
    /// A text or binary frame while a fragmented message is still open (1002).
    ExpectedContinuation,
    /// A message over the decoder's maximum size, decompressed (1009).
    MessageTooBig,
    /// A text message that is not UTF-8 (1007).
    InvalidUtf8,
    /// A compressed message that does not inflate (1007).
    BadCompressedData,
    /// A close frame with a 1-byte payload (1002).
    CloseTooShort,
    /// A close code that may not be sent on the wire (1002).
    InvalidCloseCode(u16),
    /// A close reason that is not UTF-8 (1007).
    InvalidCloseReason,
}

impl Error {
    /// The close code to send before closing the connection.
    pub fn close_code(self) -> u16 {
        use Error::*;
        match self {
            MessageTooBig => close::MESSAGE_TOO_BIG,
            InvalidUtf8 | BadCompressedData | InvalidCloseReason => close::INVALID_DATA,
            _ => close::PROTOCOL_ERROR,
        }
    }

    /// A short description, safe to send as the close reason.
    pub fn message(self) -> &'static str {
        use Error::*;
        match self {
            ReservedBits => "reserved bits set",
            ReservedOpcode(_) => "reserved opcode",
            UnmaskedFrame => "client frame not masked",
            MaskedFrame => "server frame masked",
            LengthOverflow => "payload length over 2^63",
            ControlTooLong => "control frame payload over 125 bytes",
            FragmentedControl => "fragmented control frame",
            UnexpectedContinuation => "continuation frame without a message",
            ExpectedContinuation => "new message inside a fragmented one",
            MessageTooBig => "message too big",
            InvalidUtf8 => "text message is not UTF-8",
            BadCompressedData => "compressed message does not inflate",
            CloseTooShort => "close frame payload of 1 byte",
            InvalidCloseCode(_) => "invalid close code",
            InvalidCloseReason => "close reason is not UTF-8",
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::ReservedOpcode(op) => {
                write!(f, "websocket: reserved opcode 0x{op:x} (close 1002)")
            }
            Error::InvalidCloseCode(c) => {
                write!(f, "websocket: invalid close code {c} (close 1002)")
            }
            e => write!(f, "websocket: {} (close {})", e.message(), e.close_code()),
        }
    }
}

impl std::error::Error for Error {}

/// Why an upgrade request was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HandshakeError {
    /// The method is not GET (405, with `Allow: GET`).
    NotGet,
    /// No `Upgrade: websocket` (426, with `Upgrade: websocket`).
    NotUpgrade,
    /// `Connection` does not list `upgrade` (400).
    NoConnectionUpgrade,
    /// `Sec-WebSocket-Version` missing or not 13 (426, with
    /// `Sec-WebSocket-Version: 13`).
    UnsupportedVersion,
    /// No `Sec-WebSocket-Key` (400).
    MissingKey,
    /// `Sec-WebSocket-Key` repeated, or not the base64 of 16 bytes (400).
    InvalidKey,
    /// `Sec-WebSocket-Protocol` is not a list of tokens (400).
    InvalidProtocol,
    /// `Sec-WebSocket-Extensions` does not parse (400).
    InvalidExtensions,
}

impl HandshakeError {
    /// The status code to answer with.
    pub fn status(self) -> u16 {
        match self {
            HandshakeError::NotGet => 405,
            HandshakeError::NotUpgrade | HandshakeError::UnsupportedVersion => 426,
            _ => 400,
        }
    }

    /// The headers the answer must carry besides the usual ones.
    pub fn headers(self) -> &'static [(&'static str, &'static str)] {
        match self {
            HandshakeError::NotGet => &[("Allow", "GET")],
            HandshakeError::NotUpgrade => &[("Upgrade", "websocket")],
            HandshakeError::UnsupportedVersion => {
                &[("Upgrade", "websocket"), ("Sec-WebSocket-Version", "13")]
            }
            _ => &[],
        }
    }

    /// A short description, safe to send to the client.
    pub fn message(self) -> &'static str {
        match self {
            HandshakeError::NotGet => "websocket upgrade must use GET",
            HandshakeError::NotUpgrade => "expected Upgrade: websocket",
            HandshakeError::NoConnectionUpgrade => "Connection header lacks upgrade",
            HandshakeError::UnsupportedVersion => "unsupported Sec-WebSocket-Version (want 13)",
            HandshakeError::MissingKey => "missing Sec-WebSocket-Key",
            HandshakeError::InvalidKey => "invalid Sec-WebSocket-Key",
            HandshakeError::InvalidProtocol => "invalid Sec-WebSocket-Protocol",
            HandshakeError::InvalidExtensions => "invalid Sec-WebSocket-Extensions",
        }
    }
}

impl fmt::Display for HandshakeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.message(), self.status())
    }
}

impl std::error::Error for HandshakeError {}
