//! Close codes (RFC 6455 section 7.4 and the IANA registry) and the close
//! frame's payload: an optional 2-byte code, then a UTF-8 reason.

use super::limits::MAX_CLOSE_REASON;
use super::Error;

/// 1000: the purpose of the connection is fulfilled.
pub const NORMAL: u16 = 1000;
/// 1001: the endpoint is going away (server shutdown, page left).
pub const GOING_AWAY: u16 = 1001;
/// 1002: the peer broke the protocol.
pub const PROTOCOL_ERROR: u16 = 1002;
/// 1003: a kind of data the endpoint cannot accept (e.g. binary only).
pub const UNSUPPORTED_DATA: u16 = 1003;
/// 1005: no code was given. Reported locally, never sent.
pub const NO_STATUS: u16 = 1005;
/// 1006: the connection dropped without a close frame. Never sent.
pub const ABNORMAL: u16 = 1006;
/// 1007: data inconsistent with its message type (text not UTF-8).
pub const INVALID_DATA: u16 = 1007;
/// 1008: a message violates the endpoint's policy.
pub const POLICY_VIOLATION: u16 = 1008;
/// 1009: a message too big to process.
pub const MESSAGE_TOO_BIG: u16 = 1009;
/// 1010: (client) the server did not negotiate an extension it needs.
pub const MANDATORY_EXTENSION: u16 = 1010;
/// 1011: (server) an unexpected condition kept it from serving the request.
pub const INTERNAL_ERROR: u16 = 1011;
/// 1012: (IANA) the service is restarting.
pub const SERVICE_RESTART: u16 = 1012;
/// 1013: (IANA) try again later.
pub const TRY_AGAIN_LATER: u16 = 1013;
/// 1014: (IANA) a gateway got a bad answer upstream.
pub const BAD_GATEWAY: u16 = 1014;
/// 1015: the TLS handshake failed. Never sent.
pub const TLS_HANDSHAKE: u16 = 1015;

/// True for a code that may appear in a close frame: 1000-1003, 1007-1014
/// (1012-1014 are IANA-registered since RFC 6455), and 3000-4999 (libraries
/// and applications). 1004-1006 and 1015 are reserved or local-only; 0-999,
/// the rest of 1016-2999 and 5000 up are not assigned.
pub fn is_valid(code: u16) -> bool {
    matches!(code, 1000..=1003 | 1007..=1014 | 3000..=4999)
}

/// A close frame's parsed payload; `None` when it carried no code.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CloseFrame<'a> {
    pub code: u16,
    pub reason: &'a str,
}

/// Parse a close frame payload (already unmasked), checking the code and the
/// reason's UTF-8.
pub fn parse(payload: &[u8]) -> Result<Option<CloseFrame<'_>>, Error> {
    match payload {
        [] => Ok(None),
        [_] => Err(Error::CloseTooShort),
        [hi, lo, reason @ ..] => {
            let code = u16::from_be_bytes([*hi, *lo]);
            if !is_valid(code) {
                return Err(Error::InvalidCloseCode(code));
            }
            let reason = std::str::from_utf8(reason).map_err(|_| Error::InvalidCloseReason)?;
            Ok(Some(CloseFrame { code, reason }))
        }
    }
}

/// Append a close payload: the code and the reason, or nothing for `None`.
/// The code must be one that may be sent and the reason at most 123 bytes.
pub fn write_payload(buf: &mut Vec<u8>, close: Option<CloseFrame<'_>>) -> Result<(), Error> {
    if let Some(CloseFrame { code, reason }) = close {
        if !is_valid(code) {
            return Err(Error::InvalidCloseCode(code));
        }
        if reason.len() > MAX_CLOSE_REASON {
            return Err(Error::ControlTooLong);
        }
        buf.extend_from_slice(&code.to_be_bytes());
        buf.extend_from_slice(reason.as_bytes());
    }
    Ok(())
}
