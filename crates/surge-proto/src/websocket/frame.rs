//! One frame's header (RFC 6455 section 5.2), masking, and writing a frame.
//!
//! ```text
//!  byte 0: FIN RSV1 RSV2 RSV3 opcode(4)
//!  byte 1: MASK len(7)          len 126: 2 more length bytes, 127: 8 more
//!  then the 4-byte masking key when MASK is set, then the payload
//! ```

use super::limits::MAX_CONTROL_PAYLOAD;
use super::{Error, Status};

/// Which end of the connection this codec serves. A server reads masked frames
/// and writes unmasked ones; a client the other way round.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    Server,
    Client,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Opcode {
    Continuation,
    Text,
    Binary,
    Close,
    Ping,
    Pong,
}

impl Opcode {
    /// The opcode of a 4-bit value, or the reserved value it is.
    pub fn from_bits(bits: u8) -> Result<Opcode, Error> {
        Ok(match bits {
            0x0 => Opcode::Continuation,
            0x1 => Opcode::Text,
            0x2 => Opcode::Binary,
            0x8 => Opcode::Close,
            0x9 => Opcode::Ping,
            0xA => Opcode::Pong,
            other => return Err(Error::ReservedOpcode(other)),
        })
    }

    pub fn bits(self) -> u8 {
        match self {
            Opcode::Continuation => 0x0,
            Opcode::Text => 0x1,
            Opcode::Binary => 0x2,
            Opcode::Close => 0x8,
            Opcode::Ping => 0x9,
            Opcode::Pong => 0xA,
        }
    }

    /// Close, ping and pong: at most 125 bytes, never fragmented.
    pub fn is_control(self) -> bool {
        matches!(self, Opcode::Close | Opcode::Ping | Opcode::Pong)
    }
}

/// What a data message holds: UTF-8 text or bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MessageKind {
    Text,
    Binary,
}

impl MessageKind {
    /// The opcode of the message's first frame.
    pub fn opcode(self) -> Opcode {
        match self {
            MessageKind::Text => Opcode::Text,
            MessageKind::Binary => Opcode::Binary,
        }
    }
}

/// A parsed frame header. The payload follows it in the stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FrameHeader {
    pub fin: bool,
    /// "Compressed" under permessage-deflate.
    pub rsv1: bool,
    pub opcode: Opcode,
    pub mask: Option<[u8; 4]>,
    pub payload_len: u64,
    /// Bytes the header takes: 2 to 14.
    pub header_len: usize,
}

/// Parse the frame header at the front of `buf`, checking what a header alone
/// can break: reserved bits (`rsv1_allowed` when permessage-deflate is in use),
/// reserved opcodes, masking against `role`, the 64-bit length's top bit, and
/// control frames' size and FIN. A prefix of a valid header is `Partial`.
pub fn parse_header(
    buf: &[u8],
    role: Role,
    rsv1_allowed: bool,
) -> Result<Status<FrameHeader>, Error> {
    let [b0, b1, ..] = *buf else {
        return Ok(Status::Partial);
    };
    let fin = b0 & 0x80 != 0;
    let rsv1 = b0 & 0x40 != 0;
    if b0 & 0x30 != 0 || (rsv1 && !rsv1_allowed) {
        return Err(Error::ReservedBits);
    }
    let opcode = Opcode::from_bits(b0 & 0x0F)?;
    if opcode.is_control() {
        if rsv1 {
            return Err(Error::ReservedBits);
        }
        if !fin {
            return Err(Error::FragmentedControl);
        }
        if usize::from(b1 & 0x7F) > MAX_CONTROL_PAYLOAD {
            return Err(Error::ControlTooLong);
        }
    }
    let masked = b1 & 0x80 != 0;
    match (role, masked) {
        (Role::Server, false) => return Err(Error::UnmaskedFrame),
        (Role::Client, true) => return Err(Error::MaskedFrame),
        _ => {}
    }
    let (payload_len, mut at) = match b1 & 0x7F {
        126 => match buf.get(2..4) {
            Some(b) => (u64::from(u16::from_be_bytes([b[0], b[1]])), 4),
            None => return Ok(Status::Partial),
        },
        127 => match buf.get(2..10) {
            Some(b) => {
                let n = u64::from_be_bytes(b.try_into().expect("8 bytes"));
                if n >> 63 != 0 {
                    return Err(Error::LengthOverflow);
                }
                (n, 10)
            }
            None => return Ok(Status::Partial),
        },
        n => (u64::from(n), 2),
    };
    let mask = if masked {
        match buf.get(at..at + 4) {
            Some(k) => {
                at += 4;
                Some([k[0], k[1], k[2], k[3]])
            }
            None => return Ok(Status::Partial),
        }
    } else {
        None
    };
    Ok(Status::Complete(FrameHeader {
        fin,
        rsv1,
        opcode,
        mask,
        payload_len,
        header_len: at,
    }))
}

/// XOR `data` with `key`, as if `data` started `offset` bytes into the
/// payload (so a payload can be unmasked piece by piece as it arrives).
pub fn apply_mask(data: &mut [u8], key: [u8; 4], offset: usize) {
    let mut key = key;
    key.rotate_left(offset % 4);
    // Eight bytes at a time: the key repeated twice, as one word.
    let wide = u64::from_ne_bytes([
        key[0], key[1], key[2], key[3], key[0], key[1], key[2], key[3],
    ]);
    let mut chunks = data.chunks_exact_mut(8);
    for chunk in &mut chunks {
        let word = u64::from_ne_bytes(chunk.try_into().expect("8 bytes")) ^ wide;
        chunk.copy_from_slice(&word.to_ne_bytes());
    }
    for (i, b) in chunks.into_remainder().iter_mut().enumerate() {
        *b ^= key[i % 4];
    }
}

/// Append a frame header for a payload of `len` bytes.
pub fn write_header(
    buf: &mut Vec<u8>,
    fin: bool,
    rsv1: bool,
    opcode: Opcode,
    len: usize,
    mask: Option<[u8; 4]>,
) {
    buf.push(u8::from(fin) << 7 | u8::from(rsv1) << 6 | opcode.bits());
    let mask_bit = if mask.is_some() { 0x80 } else { 0 };
    if len < 126 {
        buf.push(mask_bit | len as u8);
    } else if let Ok(n) = u16::try_from(len) {
        buf.push(mask_bit | 126);
        buf.extend_from_slice(&n.to_be_bytes());
    } else {
        buf.push(mask_bit | 127);
        buf.extend_from_slice(&(len as u64).to_be_bytes());
    }
    if let Some(key) = mask {
        buf.extend_from_slice(&key);
    }
}

/// Append a whole frame, masking its payload with `mask` when given. The
/// caller keeps to the protocol (control frames short and unfragmented).
pub fn write_frame(
    buf: &mut Vec<u8>,
    fin: bool,
    rsv1: bool,
    opcode: Opcode,
    payload: &[u8],
    mask: Option<[u8; 4]>,
) {
    write_header(buf, fin, rsv1, opcode, payload.len(), mask);
    let start = buf.len();
    buf.extend_from_slice(payload);
    if let Some(key) = mask {
        apply_mask(&mut buf[start..], key, 0);
    }
}
