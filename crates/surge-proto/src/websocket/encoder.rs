//! The sending side: messages appended as frames to a buffer the caller owns,
//! so any number of messages (and the pongs and closes between them) leave in
//! one write.

use sha2::{Digest, Sha256};

use super::close::{self, CloseFrame};
use super::deflate::Deflater;
use super::extensions::PerMessageDeflate;
use super::frame::{apply_mask, write_header, MessageKind, Opcode, Role};
use super::limits::{DEFAULT_COMPRESSION_LEVEL, MAX_CONTROL_PAYLOAD};
use super::Error;

/// Masking keys for a client's frames: unpredictable to anyone who does not
/// know the seed (RFC 6455 section 10.3 wants them unpredictable so a
/// hostile page cannot choose the bytes an intermediary sees). The caller
/// seeds it once per connection from the OS's entropy; keys are SHA-256 of
/// the seed and a counter, eight keys per hash.
#[derive(Clone, Debug)]
pub struct MaskKeys {
    seed: [u8; 32],
    counter: u64,
    block: [u8; 32],
    used: usize,
}

impl MaskKeys {
    pub fn new(seed: [u8; 32]) -> MaskKeys {
        MaskKeys {
            seed,
            counter: 0,
            block: [0; 32],
            used: 32,
        }
    }

    /// The next key.
    pub fn next_key(&mut self) -> [u8; 4] {
        if self.used == self.block.len() {
            let mut h = Sha256::new();
            h.update(self.seed);
            h.update(self.counter.to_le_bytes());
            self.block = h.finalize().into();
            self.counter += 1;
            self.used = 0;
        }
        let k = &self.block[self.used..self.used + 4];
        self.used += 4;
        [k[0], k[1], k[2], k[3]]
    }
}

/// How to send one data message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SendOptions {
    /// Compress it, if permessage-deflate was agreed (ignored otherwise).
    pub compress: bool,
    /// Split its payload (compressed, when compressed) into frames of at most
    /// this many bytes; 0 sends one frame.
    pub fragment_size: usize,
}

impl Default for SendOptions {
    /// Compressed when agreed, in one frame.
    fn default() -> Self {
        SendOptions {
            compress: true,
            fragment_size: 0,
        }
    }
}

/// A WebSocket frame encoder for one connection.
pub struct Encoder {
    keys: Option<MaskKeys>,
    /// The agreed window bits and reset rule of this side's compressor.
    deflate: Option<(u8, bool)>,
    deflater: Option<Deflater>,
    /// Compressed payloads, before they are framed (reused).
    scratch: Vec<u8>,
}

impl Encoder {
    /// A server's encoder: frames unmasked, compressed with the server's
    /// agreed parameters at [`DEFAULT_COMPRESSION_LEVEL`].
    pub fn server(deflate: Option<PerMessageDeflate>) -> Encoder {
        Encoder::new(deflate.map(|d| d.sender(Role::Server)), None)
    }

    /// A client's encoder: every frame masked with a fresh key from `mask_seed`
    /// (32 bytes from the OS's entropy, per connection).
    pub fn client(deflate: Option<PerMessageDeflate>, mask_seed: [u8; 32]) -> Encoder {
        Encoder::new(
            deflate.map(|d| d.sender(Role::Client)),
            Some(MaskKeys::new(mask_seed)),
        )
    }

    /// The same encoder compressing at `level` (1..=9; 1 is fastest). Call it
    /// before the first message: it starts a fresh compressor.
    pub fn with_compression_level(mut self, level: u32) -> Encoder {
        self.deflater = self
            .deflate
            .and_then(|(bits, reset)| Deflater::new(level, bits, reset));
        self
    }

    fn new(deflate: Option<(u8, bool)>, keys: Option<MaskKeys>) -> Encoder {
        Encoder {
            keys,
            deflate,
            deflater: deflate
                .and_then(|(bits, reset)| Deflater::new(DEFAULT_COMPRESSION_LEVEL, bits, reset)),
            scratch: Vec::new(),
        }
    }

    /// True when messages go compressed: permessage-deflate was agreed, with a
    /// window of 9 bits or more for this side.
    pub fn compresses(&self) -> bool {
        self.deflater.is_some()
    }

    /// A text message, with the [`SendOptions`] defaults.
    pub fn text(&mut self, buf: &mut Vec<u8>, text: &str) {
        self.message(
            buf,
            MessageKind::Text,
            text.as_bytes(),
            SendOptions::default(),
        );
    }

    /// A binary message, with the [`SendOptions`] defaults.
    pub fn binary(&mut self, buf: &mut Vec<u8>, data: &[u8]) {
        self.message(buf, MessageKind::Binary, data, SendOptions::default());
    }

    /// A data message (for text the caller vouches the payload is UTF-8),
    /// compressed and fragmented as `how` says.
    pub fn message(
        &mut self,
        buf: &mut Vec<u8>,
        kind: MessageKind,
        payload: &[u8],
        how: SendOptions,
    ) {
        let opcode = kind.opcode();
        let mut scratch = std::mem::take(&mut self.scratch);
        let (payload, rsv1) = match self.deflater.as_mut() {
            Some(z) if how.compress => {
                scratch.clear();
                z.compress(payload, &mut scratch);
                (&scratch[..], true)
            }
            _ => (payload, false),
        };
        let size = if how.fragment_size == 0 {
            payload.len().max(1)
        } else {
            how.fragment_size
        };
        let mut chunks = payload.chunks(size).peekable();
        let mut first = true;
        loop {
            let chunk = chunks.next().unwrap_or(&[]);
            let fin = chunks.peek().is_none();
            let op = if first { opcode } else { Opcode::Continuation };
            self.frame(buf, fin, rsv1 && first, op, chunk);
            first = false;
            if fin {
                break;
            }
        }
        // Keep a small scratch buffer, not the largest message ever sent.
        scratch.clear();
        scratch.shrink_to(64 * 1024);
        self.scratch = scratch;
    }

    /// A ping; its payload is at most 125 bytes.
    pub fn ping(&mut self, buf: &mut Vec<u8>, payload: &[u8]) -> Result<(), Error> {
        self.control(buf, Opcode::Ping, payload)
    }

    /// A pong (answer a ping with its payload).
    pub fn pong(&mut self, buf: &mut Vec<u8>, payload: &[u8]) -> Result<(), Error> {
        self.control(buf, Opcode::Pong, payload)
    }

    /// A close frame: a code that may be sent and a reason of at most 123
    /// bytes, or nothing.
    pub fn close(&mut self, buf: &mut Vec<u8>, close: Option<CloseFrame<'_>>) -> Result<(), Error> {
        let mut payload = Vec::with_capacity(MAX_CONTROL_PAYLOAD);
        close::write_payload(&mut payload, close)?;
        self.control(buf, Opcode::Close, &payload)
    }

    fn control(&mut self, buf: &mut Vec<u8>, opcode: Opcode, payload: &[u8]) -> Result<(), Error> {
        if payload.len() > MAX_CONTROL_PAYLOAD {
            return Err(Error::ControlTooLong);
        }
        self.frame(buf, true, false, opcode, payload);
        Ok(())
    }

    fn frame(&mut self, buf: &mut Vec<u8>, fin: bool, rsv1: bool, opcode: Opcode, payload: &[u8]) {
        let mask = self.keys.as_mut().map(MaskKeys::next_key);
        write_header(buf, fin, rsv1, opcode, payload.len(), mask);
        let start = buf.len();
        buf.extend_from_slice(payload);
        if let Some(key) = mask {
            apply_mask(&mut buf[start..], key, 0);
        }
    }
}
