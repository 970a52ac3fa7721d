//! Frame boundaries: writing a header with a patched size, reading one frame.

use super::{key, Error, MAX_FRAME_SIZE};
use crate::msgpack::{read_token, skip_value, write_map_len, write_uint, Token};

pub use crate::status::Status;

/// One decoded frame header; `body` borrows the read buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Frame<'a> {
    /// Bytes the whole frame takes at the front of the buffer.
    pub len: usize,
    pub code: u32,
    pub sync: u64,
    pub schema_version: u64,
    pub stream_id: u64,
    pub body: &'a [u8],
}

/// Append a frame's size placeholder and header map; returns the frame start for
/// [`finish_frame`]. Then write the body (a map) and call `finish_frame`.
pub fn start_frame(buf: &mut Vec<u8>, code: u32, sync: u64, stream_id: u64) -> usize {
    let start = buf.len();
    // Size as uint32 (0xce + 4 bytes) so it can be patched without moving the body.
    buf.extend_from_slice(&[0xce, 0, 0, 0, 0]);
    write_map_len(buf, if stream_id != 0 { 3 } else { 2 });
    write_uint(buf, key::REQUEST_TYPE);
    write_uint(buf, code as u64);
    write_uint(buf, key::SYNC);
    write_uint(buf, sync);
    if stream_id != 0 {
        write_uint(buf, key::STREAM_ID);
        write_uint(buf, stream_id);
    }
    start
}

/// Patch the size of the frame begun at `start`.
pub fn finish_frame(buf: &mut [u8], start: usize) {
    let len = (buf.len() - start - 5) as u32;
    buf[start + 1..start + 5].copy_from_slice(&len.to_be_bytes());
}

fn as_u64(t: Token<'_>) -> Result<u64, Error> {
    match t {
        Token::Uint(u) => Ok(u),
        Token::Int(i) if i >= 0 => Ok(i as u64),
        _ => Err(Error::BadHeader),
    }
}

/// The whole length (size prefix included) of the frame at the front of `buf`,
/// once its size prefix is there; `None` while the prefix itself is incomplete.
pub fn frame_len(buf: &[u8]) -> Result<Option<usize>, Error> {
    let mut pos = 0;
    match read_token(buf, &mut pos) {
        Ok(Token::Uint(n)) if n <= MAX_FRAME_SIZE as u64 => Ok(Some(pos + n as usize)),
        Ok(Token::Uint(n)) => Err(Error::FrameTooLarge(n)),
        Ok(_) => Err(Error::BadSize),
        Err(crate::msgpack::Error::Truncated) => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// Decode the frame at the front of `buf`, if it is all there.
pub fn decode_frame(buf: &[u8]) -> Result<Status<Frame<'_>>, Error> {
    let mut pos = 0;
    let size = match read_token(buf, &mut pos) {
        Ok(Token::Uint(n)) => n,
        Ok(_) => return Err(Error::BadSize),
        Err(crate::msgpack::Error::Truncated) => return Ok(Status::Partial),
        Err(e) => return Err(e.into()),
    };
    if size > MAX_FRAME_SIZE as u64 {
        return Err(Error::FrameTooLarge(size));
    }
    let end = pos + size as usize;
    if buf.len() < end {
        return Ok(Status::Partial);
    }
    let frame = &buf[pos..end];
    let mut p = 0;
    let Token::Map(n) = read_token(frame, &mut p)? else {
        return Err(Error::BadHeader);
    };
    let (mut code, mut sync, mut schema_version, mut stream_id) = (None, 0, 0, 0);
    for _ in 0..n {
        let k = as_u64(read_token(frame, &mut p)?)?;
        match k {
            key::REQUEST_TYPE => code = Some(as_u64(read_token(frame, &mut p)?)? as u32),
            key::SYNC => sync = as_u64(read_token(frame, &mut p)?)?,
            key::SCHEMA_VERSION => schema_version = as_u64(read_token(frame, &mut p)?)?,
            key::STREAM_ID => stream_id = as_u64(read_token(frame, &mut p)?)?,
            _ => skip_value(frame, &mut p)?,
        }
    }
    Ok(Status::Complete(Frame {
        len: end,
        code: code.ok_or(Error::BadHeader)?,
        sync,
        schema_version,
        stream_id,
        body: &frame[p..],
    }))
}

/// The parts of a body this client uses, as undecoded MessagePack values.
/// `data`, when it is the body's last key (a DML or call reply's only one),
/// runs to the end of the body: its decoder reads the one value it starts with.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Body<'a> {
    pub data: Option<&'a [u8]>,
    pub error_24: Option<&'a [u8]>,
    pub error: Option<&'a [u8]>,
    pub metadata: Option<&'a [u8]>,
    pub sql_info: Option<&'a [u8]>,
    pub stmt_id: Option<u64>,
    pub bind_count: Option<u64>,
    pub bind_metadata: Option<&'a [u8]>,
    pub version: Option<u64>,
    pub features: Option<&'a [u8]>,
    pub event_key: Option<&'a [u8]>,
    pub event_data: Option<&'a [u8]>,
}

/// Split a body map into its known keys (an empty body is an empty map).
pub fn decode_body(body: &[u8]) -> Result<Body<'_>, Error> {
    let mut out = Body::default();
    if body.is_empty() {
        return Ok(out);
    }
    let mut p = 0;
    let Token::Map(n) = read_token(body, &mut p)? else {
        return Err(Error::BadHeader);
    };
    for i in 0..n {
        let k = as_u64(read_token(body, &mut p)?)?;
        let start = p;
        // The data of a reply is the body's last (most often only) value and
        // the one its caller decodes anyway, item by item: taken as the rest of
        // the body rather than walked twice (~200 of a select's ~19k client
        // instructions for one 2-field tuple; the walk grows with the rows).
        // Its decoder reads one value and judges it, truncation included.
        if k == key::DATA && i + 1 == n {
            out.data = Some(&body[start..]);
            break;
        }
        skip_value(body, &mut p)?;
        let v = &body[start..p];
        match k {
            key::DATA => out.data = Some(v),
            key::ERROR_24 => out.error_24 = Some(v),
            key::ERROR => out.error = Some(v),
            key::METADATA => out.metadata = Some(v),
            key::SQL_INFO => out.sql_info = Some(v),
            key::BIND_METADATA => out.bind_metadata = Some(v),
            key::STMT_ID => out.stmt_id = Some(as_u64(read_token(v, &mut 0)?)?),
            key::BIND_COUNT => out.bind_count = Some(as_u64(read_token(v, &mut 0)?)?),
            key::VERSION => out.version = Some(as_u64(read_token(v, &mut 0)?)?),
            key::FEATURES => out.features = Some(v),
            key::EVENT_KEY => out.event_key = Some(v),
            key::EVENT_DATA => out.event_data = Some(v),
            _ => {}
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::super::request;
    use super::*;

    #[test]
    fn frame_round_trip_and_partial_input() {
        let mut buf = Vec::new();
        let s = start_frame(&mut buf, request::PING, 7, 0);
        write_map_len(&mut buf, 0);
        finish_frame(&mut buf, s);
        // Two frames back to back, decoded one at a time, every prefix is Partial.
        let one = buf.clone();
        buf.extend_from_slice(&one);
        for cut in 0..one.len() {
            assert_eq!(decode_frame(&buf[..cut]).unwrap(), Status::Partial);
        }
        let Status::Complete(f) = decode_frame(&buf).unwrap() else {
            panic!()
        };
        assert_eq!(
            (f.len, f.code, f.sync, f.body),
            (one.len(), request::PING, 7, &[0x80][..])
        );
        assert_eq!(
            one,
            [0xce, 0, 0, 0, 6, 0x82, 0x00, 0x40, 0x01, 0x07, 0x80],
            "ping with sync 7"
        );
    }

    #[test]
    fn rejects_garbage() {
        assert_eq!(decode_frame(&[0xa1, b'x']), Err(Error::BadSize));
        assert_eq!(
            decode_frame(&[0xcf, 0xff, 0, 0, 0, 0, 0, 0, 0]),
            Err(Error::FrameTooLarge(0xff00_0000_0000_0000))
        );
        assert_eq!(decode_frame(&[0x02, 0x91, 0x00]), Err(Error::BadHeader));
        assert_eq!(decode_frame(&[0x01, 0x80]), Err(Error::BadHeader));
    }

    #[test]
    fn data_last_is_the_rest_of_the_body() {
        // {DATA: [[1, "a"]]}: the value, as it is.
        let only = [0x81, 0x30, 0x91, 0x92, 0x01, 0xa1, b'a'];
        assert_eq!(decode_body(&only).unwrap().data, Some(&only[2..]));
        // {DATA: [1], ERROR_24: "e"}: DATA not last, cut at its end as before.
        let first = [0x82, 0x30, 0x91, 0x01, 0x31, 0xa1, b'e'];
        let b = decode_body(&first).unwrap();
        assert_eq!(
            (b.data, b.error_24),
            (Some(&first[2..4]), Some(&first[5..]))
        );
        // A truncated last DATA is its decoder's to refuse (it reads one value).
        let cut = [0x81, 0x30, 0x92, 0x01];
        assert_eq!(decode_body(&cut).unwrap().data, Some(&cut[2..]));
        // Anything else that is truncated still fails here.
        assert!(decode_body(&[0x82, 0x31, 0x92, 0x01]).is_err());
    }
}
