//! permessage-deflate's compression (RFC 7692 section 7.2): raw DEFLATE, each
//! message ended by a sync flush whose empty stored block (`00 00 ff ff`) is
//! cut off by the sender and put back by the receiver.
//!
//! The inflater writes into the message buffer in steps and stops as soon as
//! the output passes the message limit, so a small compressed message cannot
//! make the decoder allocate more than the limit (plus one step).
//!
//! Memory per connection: a zlib context is made on the first message that
//! needs it (a connection that never sends compressed messages has no
//! compressor), dropped after each message when the side resets its context
//! anyway (`*_no_context_takeover`), and the compressor is made with a smaller
//! `memLevel` ([`DEFLATE_MEM_LEVEL`]) than zlib's default, which flate2 does not
//! expose: hence zlib-rs (flate2's own backend) for the compressor.

use flate2::{Decompress, FlushDecompress, Status};
use zlib_rs::{DeflateConfig, DeflateFlush};

use super::Error;

/// The tail a sender removes from each message, put back before inflating.
pub(crate) const TAIL: [u8; 4] = [0x00, 0x00, 0xff, 0xff];

/// Output room added per inflate step: enough that large messages take few
/// steps, small enough that the overshoot past the limit stays small.
const INFLATE_STEP: usize = 64 * 1024;

/// zlib's `memLevel` for our compressors: 4 KiB of symbol buffer instead of
/// zlib's default 8 (16 KiB of symbols, 64 KiB of pending output), which saves
/// about 100 KiB per compressing connection. WebSocket messages are mostly
/// small: a block boundary every 1024 symbols costs little ratio (the
/// websockets library's default is 5 for the same reason).
pub const DEFLATE_MEM_LEVEL: i32 = 4;

/// Decompresses the messages of one direction.
pub(crate) struct Inflater {
    /// Made on the first compressed message (see the module docstring).
    z: Option<Decompress>,
    /// The peer resets its compressor after each message: so can we.
    reset_each_message: bool,
    /// The stream ended in a BFINAL block: the next message starts a new one.
    ended: bool,
}

impl Inflater {
    /// Always with a 32 KiB window: it reads what any smaller window wrote.
    pub(crate) fn new(reset_each_message: bool) -> Inflater {
        Inflater {
            z: None,
            reset_each_message,
            ended: false,
        }
    }

    /// Inflate a piece of a message's compressed payload, appending to `out`;
    /// fails once `out` would hold more than `limit` bytes.
    pub(crate) fn inflate(
        &mut self,
        mut input: &[u8],
        out: &mut Vec<u8>,
        limit: usize,
    ) -> Result<(), Error> {
        if self.ended {
            // Whatever follows a final block in the same message is ignored.
            return Ok(());
        }
        let z = self.z.get_or_insert_with(|| Decompress::new(false));
        loop {
            // Room for a few times the input (deflate rarely does better on
            // small messages), at most one step: a 20-byte message must not
            // leave a 64 KiB buffer behind on every connection.
            let step = input.len().saturating_mul(4).clamp(1024, INFLATE_STEP);
            let want = out.len().saturating_add(step).min(limit.saturating_add(1));
            if want > out.len() {
                out.reserve(want - out.len());
            }
            let (in0, out0) = (z.total_in(), out.len());
            let status = z.decompress_vec(input, out, FlushDecompress::Sync);
            // Past the limit is the first fault in stream order, whatever follows.
            if out.len() > limit {
                return Err(Error::MessageTooBig);
            }
            let status = status.map_err(|_| Error::BadCompressedData)?;
            let consumed = (z.total_in() - in0) as usize;
            input = &input[consumed..];
            match status {
                Status::StreamEnd => {
                    self.ended = true;
                    return Ok(());
                }
                Status::Ok | Status::BufError => {
                    let room_left = out.len() < out.capacity();
                    if input.is_empty() && room_left {
                        return Ok(());
                    }
                    if consumed == 0 && out.len() == out0 && room_left {
                        // No progress with input and room to spare.
                        return Err(Error::BadCompressedData);
                    }
                }
            }
        }
    }

    /// End a message: put back the flush tail and inflate what it releases.
    pub(crate) fn finish(&mut self, out: &mut Vec<u8>, limit: usize) -> Result<(), Error> {
        self.inflate(&TAIL, out, limit)?;
        if self.reset_each_message {
            // Nothing of this context is needed again: free its window.
            self.z = None;
        } else if self.ended {
            if let Some(z) = self.z.as_mut() {
                z.reset(false);
            }
        }
        self.ended = false;
        Ok(())
    }
}

/// Compresses the messages of one direction.
pub(crate) struct Deflater {
    /// Made on the first non-empty message (see the module docstring).
    z: Option<zlib_rs::Deflate>,
    config: DeflateConfig,
    reset_each_message: bool,
}

impl Deflater {
    /// A compressor for a window of `window_bits`, or none for 8: zlib cannot
    /// write raw DEFLATE with a 256-byte window, so such messages go
    /// uncompressed.
    pub(crate) fn new(level: u32, window_bits: u8, reset_each_message: bool) -> Option<Deflater> {
        if window_bits < 9 {
            return None;
        }
        Some(Deflater {
            z: None,
            config: DeflateConfig {
                level: level.min(9) as i32,
                // Negative: raw DEFLATE, no zlib header.
                window_bits: -i32::from(window_bits.min(15)),
                mem_level: DEFLATE_MEM_LEVEL,
                ..DeflateConfig::default()
            },
            reset_each_message,
        })
    }

    /// Append the compressed form of a whole message to `out`, without the
    /// flush tail.
    pub(crate) fn compress(&mut self, mut input: &[u8], out: &mut Vec<u8>) {
        if input.is_empty() {
            // An empty stored block, less its tail (RFC 7692 section 7.2.3.6);
            // it leaves the compressor's state as it was.
            out.push(0x00);
            return;
        }
        let config = self.config;
        let z = self
            .z
            .get_or_insert_with(|| zlib_rs::Deflate::new_with_config(config));
        let start = out.len();
        let mut room = input.len() / 2 + 64;
        loop {
            // Compress into zeroed room at the end of `out` (no unsafe spare
            // capacity), then keep what was written.
            let at = out.len();
            out.resize(at + room, 0);
            let (in0, out0) = (z.total_in(), z.total_out());
            z.compress(input, &mut out[at..], DeflateFlush::SyncFlush)
                .expect("deflate with valid parameters does not fail");
            let written = (z.total_out() - out0) as usize;
            input = &input[(z.total_in() - in0) as usize..];
            out.truncate(at + written);
            // Done once the input is taken and the flush fitted with room to spare.
            if input.is_empty() && written < room {
                break;
            }
            room = room.max(64) * 2;
        }
        if out[start..].ends_with(&TAIL) {
            out.truncate(out.len() - TAIL.len());
        }
        if self.reset_each_message {
            // Nothing of this context is needed again: free it.
            self.z = None;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip(deflater: &mut Deflater, inflater: &mut Inflater, message: &[u8]) {
        let mut packed = Vec::new();
        deflater.compress(message, &mut packed);
        let mut out = Vec::new();
        inflater.inflate(&packed, &mut out, usize::MAX).unwrap();
        inflater.finish(&mut out, usize::MAX).unwrap();
        assert_eq!(out, message);
    }

    #[test]
    fn contexts_are_made_on_first_use_and_freed_when_reset() {
        for (bits, reset) in [(15, false), (9, false), (12, true)] {
            let mut d = Deflater::new(6, bits, reset).unwrap();
            let mut i = Inflater::new(reset);
            assert!(d.z.is_none() && i.z.is_none());
            let mut empty = Vec::new();
            d.compress(b"", &mut empty);
            assert!(d.z.is_none(), "an empty message needs no context");
            let big: Vec<u8> = (0..200_000u32)
                .flat_map(|n| (n % 251).to_le_bytes())
                .collect();
            for message in [&b"hello hello hello"[..], &big, b"hello again", b"x"] {
                round_trip(&mut d, &mut i, message);
                assert_eq!(d.z.is_none(), reset);
                assert_eq!(i.z.is_none(), reset);
            }
        }
    }
}
