//! The chunked transfer coding (RFC 9112 section 7.1), decoded strictly: every
//! line ends in CRLF, sizes are hex without sign or spaces, extensions are
//! skipped, trailers are parsed and dropped. One decoder for request bodies
//! (server) and response bodies (client); each side turns a [`ChunkError`]
//! into its own error.

use bytes::{Bytes, BytesMut};

/// Why a chunked body cannot be framed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ChunkError {
    /// The chunks so far add up to more than the body limit.
    BodyTooLarge,
    /// A chunk-size line does not parse or is too long.
    InvalidChunkSize,
    /// Chunk data is not followed by CRLF.
    InvalidChunkTerminator,
    /// The trailer section does not parse or is too large.
    InvalidTrailers,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Chunked {
    /// Expecting a chunk-size line.
    Size,
    /// Inside chunk data, with this many bytes left.
    Data(u64),
    /// Expecting the CRLF after chunk data.
    DataEnd,
    /// After the last chunk: trailer fields, then an empty line.
    Trailers,
}

pub(crate) enum Step {
    Data(Bytes),
    End,
    NeedMore,
}

fn parse_size_line(line: &[u8]) -> Result<u64, ChunkError> {
    // `line` excludes the CRLF.
    let digits_end = line
        .iter()
        .position(|b| !b.is_ascii_hexdigit())
        .unwrap_or(line.len());
    if digits_end == 0 || digits_end > 16 {
        return Err(ChunkError::InvalidChunkSize);
    }
    let rest = &line[digits_end..];
    if !rest.is_empty() {
        // chunk-ext = *( BWS ";" BWS ext-name [ BWS "=" BWS ext-val ] )
        let ext = rest.trim_ascii_start();
        if !ext.starts_with(b";") || ext.iter().any(|&b| (b < 0x20 && b != b'\t') || b == 0x7f) {
            return Err(ChunkError::InvalidChunkSize);
        }
    }
    let mut n: u64 = 0;
    for &d in &line[..digits_end] {
        let v = match d {
            b'0'..=b'9' => d - b'0',
            b'a'..=b'f' => d - b'a' + 10,
            _ => d - b'A' + 10,
        };
        n = n.checked_mul(16).ok_or(ChunkError::InvalidChunkSize)? + u64::from(v);
    }
    Ok(n)
}

impl Chunked {
    /// Advances over `buf`; `seen` counts body bytes so far, checked against
    /// `limit`. `max_chunk_line` bounds a chunk-size line (extensions
    /// included) and the trailer section.
    pub(crate) fn step(
        &mut self,
        buf: &mut BytesMut,
        seen: &mut u64,
        limit: u64,
        max_chunk_line: usize,
    ) -> Result<Step, ChunkError> {
        loop {
            match *self {
                Chunked::Size => {
                    let Some(nl) = memchr::memchr(b'\n', buf) else {
                        if buf.len() > max_chunk_line {
                            return Err(ChunkError::InvalidChunkSize);
                        }
                        return Ok(Step::NeedMore);
                    };
                    if nl == 0 || buf[nl - 1] != b'\r' || nl > max_chunk_line {
                        return Err(ChunkError::InvalidChunkSize);
                    }
                    let size = parse_size_line(&buf[..nl - 1])?;
                    let _ = buf.split_to(nl + 1);
                    if size == 0 {
                        *self = Chunked::Trailers;
                    } else {
                        if seen.saturating_add(size) > limit {
                            return Err(ChunkError::BodyTooLarge);
                        }
                        *self = Chunked::Data(size);
                    }
                }
                Chunked::Data(left) => {
                    if buf.is_empty() {
                        return Ok(Step::NeedMore);
                    }
                    let n = (buf.len() as u64).min(left) as usize;
                    *seen += n as u64;
                    *self = if left == n as u64 {
                        Chunked::DataEnd
                    } else {
                        Chunked::Data(left - n as u64)
                    };
                    return Ok(Step::Data(buf.split_to(n).freeze()));
                }
                Chunked::DataEnd => {
                    if buf.len() < 2 {
                        if buf.first().is_some_and(|&b| b != b'\r') {
                            return Err(ChunkError::InvalidChunkTerminator);
                        }
                        return Ok(Step::NeedMore);
                    }
                    if &buf[..2] != b"\r\n" {
                        return Err(ChunkError::InvalidChunkTerminator);
                    }
                    let _ = buf.split_to(2);
                    *self = Chunked::Size;
                }
                Chunked::Trailers => {
                    if buf.starts_with(b"\r\n") {
                        let _ = buf.split_to(2);
                        return Ok(Step::End);
                    }
                    let mut fields = [httparse::EMPTY_HEADER; 32];
                    match httparse::parse_headers(buf, &mut fields) {
                        Ok(httparse::Status::Complete((n, _))) => {
                            if n > max_chunk_line {
                                return Err(ChunkError::InvalidTrailers);
                            }
                            // httparse takes a bare LF for a line end; we do not.
                            if memchr::memchr_iter(b'\n', &buf[..n])
                                .any(|i| i == 0 || buf[i - 1] != b'\r')
                            {
                                return Err(ChunkError::InvalidTrailers);
                            }
                            let _ = buf.split_to(n);
                            return Ok(Step::End);
                        }
                        Ok(httparse::Status::Partial) => {
                            if buf.len() > max_chunk_line {
                                return Err(ChunkError::InvalidTrailers);
                            }
                            return Ok(Step::NeedMore);
                        }
                        Err(_) => return Err(ChunkError::InvalidTrailers),
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn size_lines() {
        assert_eq!(parse_size_line(b"1a"), Ok(26));
        assert_eq!(parse_size_line(b"FF;name=value"), Ok(255));
        assert_eq!(parse_size_line(b"0 ;ext"), Ok(0));
        assert_eq!(parse_size_line(b""), Err(ChunkError::InvalidChunkSize));
        assert_eq!(parse_size_line(b"-1"), Err(ChunkError::InvalidChunkSize));
        assert_eq!(parse_size_line(b"0x10"), Err(ChunkError::InvalidChunkSize));
        assert_eq!(
            parse_size_line(b"10 garbage"),
            Err(ChunkError::InvalidChunkSize)
        );
        assert_eq!(
            parse_size_line(b"11111111111111111"),
            Err(ChunkError::InvalidChunkSize)
        );
    }
}
