//! `Sec-WebSocket-Extensions` (RFC 6455 section 9.1) and the negotiation of
//! permessage-deflate (RFC 7692 section 7.1).
//!
//! An offer of permessage-deflate with an unknown, repeated or out-of-range
//! parameter is declined (skipped), as RFC 7692 section 5 asks; only a header
//! that does not parse at all fails the handshake.

use std::borrow::Cow;

use super::{HandshakeError, Role};

/// The extension's registered name.
pub const PERMESSAGE_DEFLATE: &str = "permessage-deflate";

/// An extension parameter: its name and its value, if any, unquoted.
pub type Param<'a> = (&'a [u8], Option<Cow<'a, [u8]>>);

/// One extension of an extension list: its name and its parameters, values
/// unquoted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Extension<'a> {
    pub name: &'a [u8],
    pub params: Vec<Param<'a>>,
}

/// What a client offered for permessage-deflate.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DeflateOffer {
    pub server_no_context_takeover: bool,
    pub client_no_context_takeover: bool,
    /// The largest window the server may compress with (8..=15).
    pub server_max_window_bits: Option<u8>,
    /// The client may be told a window to compress with; a value is the
    /// largest it will use anyway (the bare parameter stands for 15).
    pub client_max_window_bits: Option<u8>,
}

/// What the server wants of permessage-deflate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DeflateConfig {
    /// Reset the server's compressor after each message: saves keeping its
    /// state between messages, costs compression ratio. Default false.
    pub server_no_context_takeover: bool,
    /// Ask the client to do the same. Default false.
    pub client_no_context_takeover: bool,
    /// Largest window the server compresses with, 8..=15. Default 15 (32 KiB);
    /// 8 agrees to compression but sends uncompressed (see [`negotiate`]).
    pub server_max_window_bits: u8,
}

impl Default for DeflateConfig {
    fn default() -> Self {
        DeflateConfig {
            server_no_context_takeover: false,
            client_no_context_takeover: false,
            server_max_window_bits: 15,
        }
    }
}

/// The agreed permessage-deflate parameters, as the server's response states
/// them (`None`: the parameter is absent, which means 15).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PerMessageDeflate {
    pub server_no_context_takeover: bool,
    pub client_no_context_takeover: bool,
    pub server_max_window_bits: Option<u8>,
    pub client_max_window_bits: Option<u8>,
}

impl PerMessageDeflate {
    /// Append the response's extension value, e.g.
    /// `permessage-deflate; server_no_context_takeover`.
    pub fn write_response_value(&self, buf: &mut Vec<u8>) {
        buf.extend_from_slice(PERMESSAGE_DEFLATE.as_bytes());
        if self.server_no_context_takeover {
            buf.extend_from_slice(b"; server_no_context_takeover");
        }
        if self.client_no_context_takeover {
            buf.extend_from_slice(b"; client_no_context_takeover");
        }
        for (name, bits) in [
            (
                &b"; server_max_window_bits="[..],
                self.server_max_window_bits,
            ),
            (
                &b"; client_max_window_bits="[..],
                self.client_max_window_bits,
            ),
        ] {
            if let Some(bits) = bits {
                buf.extend_from_slice(name);
                buf.extend_from_slice(itoa::Buffer::new().format(bits).as_bytes());
            }
        }
    }

    /// The window (bits) and reset rule one side compresses with.
    pub(crate) fn sender(&self, role: Role) -> (u8, bool) {
        if role == Role::Server {
            (
                self.server_max_window_bits.unwrap_or(15),
                self.server_no_context_takeover,
            )
        } else {
            (
                self.client_max_window_bits.unwrap_or(15),
                self.client_no_context_takeover,
            )
        }
    }
}

/// Accept the first offer (the client lists them by preference), or none if
/// there is none. Every valid offer can be honoured: a server asked for an
/// 8-bit window agrees to it and then sends its messages uncompressed (zlib
/// cannot write raw DEFLATE with a 256-byte window; RFC 7692 lets any message
/// go uncompressed), while the client's direction is still compressed.
pub fn negotiate(offers: &[DeflateOffer], config: &DeflateConfig) -> Option<PerMessageDeflate> {
    let ours = config.server_max_window_bits.clamp(8, 15);
    offers.first().map(|o| {
        let server_max_window_bits = match o.server_max_window_bits {
            Some(n) => Some(n.min(ours)),
            None if ours < 15 => Some(ours),
            None => None,
        };
        PerMessageDeflate {
            server_no_context_takeover: o.server_no_context_takeover
                || config.server_no_context_takeover,
            client_no_context_takeover: o.client_no_context_takeover
                || config.client_no_context_takeover,
            server_max_window_bits,
            // Our inflater always keeps a 32 KiB window: no need to ask less.
            client_max_window_bits: None,
        }
    })
}

/// The permessage-deflate offers among `extensions`, invalid ones dropped.
pub fn deflate_offers(extensions: &[Extension<'_>]) -> Vec<DeflateOffer> {
    extensions
        .iter()
        .filter(|e| e.name.eq_ignore_ascii_case(PERMESSAGE_DEFLATE.as_bytes()))
        .filter_map(|e| deflate_offer(&e.params))
        .collect()
}

fn deflate_offer(params: &[Param<'_>]) -> Option<DeflateOffer> {
    let mut o = DeflateOffer::default();
    let mut seen = [false; 4];
    for (name, value) in params {
        let value = value.as_deref();
        let which = [
            &b"server_no_context_takeover"[..],
            b"client_no_context_takeover",
            b"server_max_window_bits",
            b"client_max_window_bits",
        ]
        .iter()
        .position(|p| name.eq_ignore_ascii_case(p))?;
        if std::mem::replace(&mut seen[which], true) {
            return None; // repeated
        }
        match (which, value) {
            (0, None) => o.server_no_context_takeover = true,
            (1, None) => o.client_no_context_takeover = true,
            (2, Some(v)) => o.server_max_window_bits = Some(window_bits(v)?),
            (3, None) => o.client_max_window_bits = Some(15),
            (3, Some(v)) => o.client_max_window_bits = Some(window_bits(v)?),
            _ => return None,
        }
    }
    Some(o)
}

/// 8..=15 in decimal, without leading zeros.
fn window_bits(v: &[u8]) -> Option<u8> {
    match v {
        [d @ b'8'..=b'9'] => Some(d - b'0'),
        [b'1', d @ b'0'..=b'5'] => Some(10 + d - b'0'),
        _ => None,
    }
}

/// RFC 9110 tchar.
pub(crate) fn is_tchar(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

struct Cursor<'a> {
    s: &'a [u8],
    at: usize,
}

impl<'a> Cursor<'a> {
    fn peek(&self) -> Option<u8> {
        self.s.get(self.at).copied()
    }

    fn skip_ows(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t')) {
            self.at += 1;
        }
    }

    fn token(&mut self) -> Result<&'a [u8], HandshakeError> {
        let start = self.at;
        while self.peek().is_some_and(is_tchar) {
            self.at += 1;
        }
        if self.at == start {
            return Err(HandshakeError::InvalidExtensions);
        }
        Ok(&self.s[start..self.at])
    }

    /// A quoted-string's content, escapes resolved (borrowed when it has none).
    fn quoted(&mut self) -> Result<Cow<'a, [u8]>, HandshakeError> {
        self.at += 1; // the opening quote
        let start = self.at;
        let mut owned: Option<Vec<u8>> = None;
        loop {
            match self.peek() {
                None => return Err(HandshakeError::InvalidExtensions),
                Some(b'"') => {
                    let raw = &self.s[start..self.at];
                    self.at += 1;
                    return Ok(owned.map_or(Cow::Borrowed(raw), Cow::Owned));
                }
                Some(b'\\') => {
                    let v = owned.get_or_insert_with(|| self.s[start..self.at].to_vec());
                    match self.s.get(self.at + 1) {
                        Some(&c) if c == b'\t' || c >= 0x20 && c != 0x7f => v.push(c),
                        _ => return Err(HandshakeError::InvalidExtensions),
                    }
                    self.at += 2;
                }
                Some(c) if c == b'\t' || c >= 0x20 && c != 0x7f => {
                    if let Some(v) = owned.as_mut() {
                        v.push(c);
                    }
                    self.at += 1;
                }
                Some(_) => return Err(HandshakeError::InvalidExtensions),
            }
        }
    }
}

/// Parse one `Sec-WebSocket-Extensions` value, appending its extensions to
/// `out` (the header may come several times; their lists join). Empty list
/// elements are allowed, as RFC 9110 section 5.6.1 asks of recipients.
pub fn parse_extensions<'a>(
    value: &'a [u8],
    out: &mut Vec<Extension<'a>>,
) -> Result<(), HandshakeError> {
    let mut c = Cursor { s: value, at: 0 };
    loop {
        c.skip_ows();
        match c.peek() {
            None => return Ok(()),
            Some(b',') => {
                c.at += 1;
                continue;
            }
            Some(_) => {}
        }
        let name = c.token()?;
        let mut params = Vec::new();
        loop {
            c.skip_ows();
            match c.peek() {
                None | Some(b',') => break,
                Some(b';') => c.at += 1,
                Some(_) => return Err(HandshakeError::InvalidExtensions),
            }
            c.skip_ows();
            let pname = c.token()?;
            c.skip_ows();
            let mut value = None;
            if c.peek() == Some(b'=') {
                c.at += 1;
                c.skip_ows();
                value = Some(match c.peek() {
                    Some(b'"') => c.quoted()?,
                    _ => Cow::Borrowed(c.token()?),
                });
            }
            params.push((pname, value));
        }
        out.push(Extension { name, params });
    }
}
