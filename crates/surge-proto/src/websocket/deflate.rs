//! permessage-deflate's compression (RFC 7692 section 7.2): raw DEFLATE, each
//! message ended by a sync flush whose empty stored block (`00 00 ff ff`) is
//! cut off by the sender and put back by the receiver.
//!
//! The inflater writes into the message buffer in steps and stops as soon as
//! the output passes the message limit, so a small compressed message cannot
//! make the decoder allocate more than the limit (plus one step).

use flate2::{Compress, Compression, Decompress, FlushCompress, FlushDecompress, Status};

use super::Error;

/// The tail a sender removes from each message, put back before inflating.
pub(crate) const TAIL: [u8; 4] = [0x00, 0x00, 0xff, 0xff];

/// Output room added per inflate step: enough that large messages take few
/// steps, small enough that the overshoot past the limit stays small.
const INFLATE_STEP: usize = 64 * 1024;

/// Decompresses the messages of one direction.
pub(crate) struct Inflater {
    z: Decompress,
    /// The peer resets its compressor after each message: so can we.
    reset_each_message: bool,
    /// The stream ended in a BFINAL block: the next message starts a new one.
    ended: bool,
}

impl Inflater {
    /// Always with a 32 KiB window: it reads what any smaller window wrote.
    pub(crate) fn new(reset_each_message: bool) -> Inflater {
        Inflater {
            z: Decompress::new(false),
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
        loop {
            // Room for a few times the input (deflate rarely does better on
            // small messages), at most one step: a 20-byte message must not
            // leave a 64 KiB buffer behind on every connection.
            let step = input.len().saturating_mul(4).clamp(1024, INFLATE_STEP);
            let want = out.len().saturating_add(step).min(limit.saturating_add(1));
            if want > out.len() {
                out.reserve(want - out.len());
            }
            let (in0, out0) = (self.z.total_in(), out.len());
            let status = self.z.decompress_vec(input, out, FlushDecompress::Sync);
            // Past the limit is the first fault in stream order, whatever follows.
            if out.len() > limit {
                return Err(Error::MessageTooBig);
            }
            let status = status.map_err(|_| Error::BadCompressedData)?;
            let consumed = (self.z.total_in() - in0) as usize;
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
        if self.ended || self.reset_each_message {
            self.z.reset(false);
            self.ended = false;
        }
        Ok(())
    }
}

/// Compresses the messages of one direction.
pub(crate) struct Deflater {
    z: Compress,
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
            z: Compress::new_with_window_bits(
                Compression::new(level.min(9)),
                false,
                window_bits.min(15),
            ),
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
        let start = out.len();
        out.reserve(input.len() / 2 + 64);
        loop {
            let in0 = self.z.total_in();
            self.z
                .compress_vec(input, out, FlushCompress::Sync)
                .expect("deflate with valid parameters does not fail");
            input = &input[(self.z.total_in() - in0) as usize..];
            if input.is_empty() && out.len() < out.capacity() {
                break;
            }
            out.reserve(out.capacity().max(64));
        }
        if out[start..].ends_with(&TAIL) {
            out.truncate(out.len() - TAIL.len());
        }
        if self.reset_each_message {
            self.z.reset();
        }
    }
}
