//! The opening handshake, server side (RFC 6455 section 4.2): checking an
//! upgrade request's headers, computing `Sec-WebSocket-Accept`, and writing
//! the `101 Switching Protocols` head (or the refusal) into a caller buffer.

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use sha1::{Digest, Sha1};

use super::extensions::{
    deflate_offers, is_tchar, parse_extensions, DeflateOffer, PerMessageDeflate,
};
use super::HandshakeError;
use crate::http1::server::write_status_line;

/// The GUID RFC 6455 appends to the client's key before hashing it.
const GUID: &[u8] = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11";

/// A valid upgrade request: what the server needs to answer it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UpgradeRequest<'a> {
    /// `Sec-WebSocket-Key`, trimmed: 24 base64 characters.
    pub key: &'a [u8],
    /// `Sec-WebSocket-Protocol` offers, in the client's order.
    pub protocols: Vec<&'a str>,
    /// Valid permessage-deflate offers, in the client's order of preference.
    pub deflate_offers: Vec<DeflateOffer>,
}

impl UpgradeRequest<'_> {
    /// The `Sec-WebSocket-Accept` value answering this request's key.
    pub fn accept(&self) -> [u8; 28] {
        accept_key(self.key)
    }

    /// The first of `supported` (the server's order of preference) that the
    /// client offered; subprotocol names compare case-sensitively.
    pub fn select_protocol<'s>(&self, supported: &[&'s str]) -> Option<&'s str> {
        supported
            .iter()
            .copied()
            .find(|s| self.protocols.contains(s))
    }
}

/// `Sec-WebSocket-Accept` for a `Sec-WebSocket-Key`: base64(sha1(key + GUID)).
pub fn accept_key(key: &[u8]) -> [u8; 28] {
    let digest: [u8; 20] = Sha1::new()
        .chain_update(key)
        .chain_update(GUID)
        .finalize()
        .into();
    let mut out = [0u8; 28];
    STANDARD
        .encode_slice(digest, &mut out)
        .expect("20 bytes encode to 28");
    out
}

fn trim(v: &[u8]) -> &[u8] {
    let start = v
        .iter()
        .position(|b| !matches!(b, b' ' | b'\t'))
        .unwrap_or(v.len());
    let end = v
        .iter()
        .rposition(|b| !matches!(b, b' ' | b'\t'))
        .map_or(start, |i| i + 1);
    &v[start..end]
}

/// The elements of a comma-separated list, trimmed, empty ones skipped.
fn list(v: &[u8]) -> impl Iterator<Item = &[u8]> {
    v.split(|&b| b == b',').map(trim).filter(|e| !e.is_empty())
}

/// Check an upgrade request given its method and header fields, in the order
/// they came. Checked in this order, so the answer is the most useful one:
/// method, `Upgrade`, `Connection`, `Sec-WebSocket-Version`,
/// `Sec-WebSocket-Key`, `Sec-WebSocket-Protocol`, `Sec-WebSocket-Extensions`.
pub fn validate_request<'a, I>(
    method: &[u8],
    headers: I,
) -> Result<UpgradeRequest<'a>, HandshakeError>
where
    I: IntoIterator<Item = (&'a [u8], &'a [u8])>,
{
    if method != b"GET" {
        return Err(HandshakeError::NotGet);
    }
    let (mut upgrade, mut connection, mut version) = (false, false, None);
    let mut key: Option<&[u8]> = None;
    let mut keys = 0;
    let mut protocol_values = Vec::new();
    let mut extension_values = Vec::new();
    for (name, value) in headers {
        if name.eq_ignore_ascii_case(b"upgrade") {
            upgrade |= list(value).any(|p| p.eq_ignore_ascii_case(b"websocket"));
        } else if name.eq_ignore_ascii_case(b"connection") {
            connection |= list(value).any(|t| t.eq_ignore_ascii_case(b"upgrade"));
        } else if name.eq_ignore_ascii_case(b"sec-websocket-version") {
            // Repeated or listed versions are only right if they are all 13.
            let ok = version.unwrap_or(true) && trim(value) == b"13";
            version = Some(ok);
        } else if name.eq_ignore_ascii_case(b"sec-websocket-key") {
            keys += 1;
            key = Some(trim(value));
        } else if name.eq_ignore_ascii_case(b"sec-websocket-protocol") {
            protocol_values.push(value);
        } else if name.eq_ignore_ascii_case(b"sec-websocket-extensions") {
            extension_values.push(value);
        }
    }
    if !upgrade {
        return Err(HandshakeError::NotUpgrade);
    }
    if !connection {
        return Err(HandshakeError::NoConnectionUpgrade);
    }
    if version != Some(true) {
        return Err(HandshakeError::UnsupportedVersion);
    }
    let key = key.ok_or(HandshakeError::MissingKey)?;
    let mut raw = [0u8; 18];
    let valid_key =
        keys == 1 && key.len() == 24 && matches!(STANDARD.decode_slice(key, &mut raw), Ok(16));
    if !valid_key {
        return Err(HandshakeError::InvalidKey);
    }
    let mut protocols = Vec::new();
    for value in protocol_values {
        for p in list(value) {
            if !p.iter().all(|&b| is_tchar(b)) {
                return Err(HandshakeError::InvalidProtocol);
            }
            // Tokens are ASCII, hence UTF-8.
            protocols.push(std::str::from_utf8(p).map_err(|_| HandshakeError::InvalidProtocol)?);
        }
    }
    let mut extensions = Vec::new();
    for value in extension_values {
        parse_extensions(value, &mut extensions)?;
    }
    Ok(UpgradeRequest {
        key,
        protocols,
        deflate_offers: deflate_offers(&extensions),
    })
}

/// Append the `101 Switching Protocols` head answering `key`, with the chosen
/// subprotocol and permessage-deflate parameters if any, then `extra` header
/// fields (written as given: the caller vouches for them), then the blank line.
pub fn write_response(
    buf: &mut Vec<u8>,
    key: &[u8],
    protocol: Option<&str>,
    deflate: Option<&PerMessageDeflate>,
    extra: &[(&[u8], &[u8])],
) {
    write_status_line(buf, 101);
    buf.extend_from_slice(b"Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: ");
    buf.extend_from_slice(&accept_key(key));
    buf.extend_from_slice(b"\r\n");
    if let Some(p) = protocol {
        buf.extend_from_slice(b"Sec-WebSocket-Protocol: ");
        buf.extend_from_slice(p.as_bytes());
        buf.extend_from_slice(b"\r\n");
    }
    if let Some(d) = deflate {
        buf.extend_from_slice(b"Sec-WebSocket-Extensions: ");
        d.write_response_value(buf);
        buf.extend_from_slice(b"\r\n");
    }
    for (name, value) in extra {
        buf.extend_from_slice(name);
        buf.extend_from_slice(b": ");
        buf.extend_from_slice(value);
        buf.extend_from_slice(b"\r\n");
    }
    buf.extend_from_slice(b"\r\n");
}

/// Append a whole response refusing the upgrade: the error's status, its
/// headers, `Connection: close` and a short text body.
pub fn write_rejection(buf: &mut Vec<u8>, error: HandshakeError) {
    write_status_line(buf, error.status());
    for (name, value) in error.headers() {
        buf.extend_from_slice(name.as_bytes());
        buf.extend_from_slice(b": ");
        buf.extend_from_slice(value.as_bytes());
        buf.extend_from_slice(b"\r\n");
    }
    let body = error.message().as_bytes();
    buf.extend_from_slice(
        b"Content-Type: text/plain; charset=utf-8\r\nConnection: close\r\nContent-Length: ",
    );
    buf.extend_from_slice(itoa::Buffer::new().format(body.len() + 1).as_bytes());
    buf.extend_from_slice(b"\r\n\r\n");
    buf.extend_from_slice(body);
    buf.push(b'\n');
}
