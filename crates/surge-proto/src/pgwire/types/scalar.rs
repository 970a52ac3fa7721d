//! Fixed-size scalars (ints, floats, bool, uuid), jsonb and jsonpath, and the
//! small system types built from them (tid, txid_snapshot/pg_snapshot, bit strings).

use super::reader::Reader;
use crate::pgwire::Error;

macro_rules! fixed {
    ($name:ident, $t:ty, $n:expr, $what:expr) => {
        #[inline]
        pub fn $name(b: &[u8]) -> Result<$t, Error> {
            let a: [u8; $n] = b.try_into().map_err(|_| Error::BadValue($what))?;
            Ok(<$t>::from_be_bytes(a))
        }
    };
}
fixed!(decode_i16, i16, 2, "int2");
fixed!(decode_i32, i32, 4, "int4");
fixed!(decode_i64, i64, 8, "int8");
fixed!(decode_u32, u32, 4, "oid");
fixed!(decode_f32, f32, 4, "float4");
fixed!(decode_f64, f64, 8, "float8");

pub fn decode_bool(b: &[u8]) -> Result<bool, Error> {
    match b {
        [0] => Ok(false),
        [1] => Ok(true),
        _ => Err(Error::BadValue("bool")),
    }
}

/// A bool in the text format (`boolout`: "t" or "f").
pub fn parse_bool_text(b: &[u8]) -> Result<bool, Error> {
    match b {
        b"f" => Ok(false),
        b"t" => Ok(true),
        _ => Err(Error::BadValue("bool text")),
    }
}

/// A `"char"` in the text format (`charout`): "" for the zero byte, the byte
/// itself, or (PostgreSQL 15+, a byte with the high bit set) `\ooo` in octal.
pub fn parse_char_text(b: &[u8]) -> Result<u8, Error> {
    match b {
        [] => Ok(0),
        [c] => Ok(*c),
        [b'\\', o @ ..] if o.len() == 3 && o.iter().all(|d| (b'0'..=b'7').contains(d)) => {
            let v = o.iter().fold(0u32, |acc, d| acc * 8 + u32::from(d - b'0'));
            u8::try_from(v).map_err(|_| Error::BadValue("char text"))
        }
        _ => Err(Error::BadValue("char text")),
    }
}

pub fn decode_uuid(b: &[u8]) -> Result<[u8; 16], Error> {
    b.try_into().map_err(|_| Error::BadValue("uuid"))
}

/// jsonb's binary form is a version byte (1) and the JSON text.
pub fn decode_jsonb(b: &[u8]) -> Result<&[u8], Error> {
    match b.split_first() {
        Some((1, rest)) => Ok(rest),
        _ => Err(Error::BadValue("jsonb")),
    }
}

pub fn encode_jsonb(buf: &mut Vec<u8>, text: &[u8]) {
    buf.push(1);
    buf.extend_from_slice(text);
}

fixed!(decode_u64, u64, 8, "xid8");

/// jsonpath's binary form is, like jsonb's, a version byte (1) and the text.
pub fn decode_jsonpath(b: &[u8]) -> Result<&[u8], Error> {
    match b.split_first() {
        Some((1, rest)) => Ok(rest),
        _ => Err(Error::BadValue("jsonpath")),
    }
}

/// A tuple id: (block number, offset in the block).
pub fn decode_tid(b: &[u8]) -> Result<(u32, u16), Error> {
    let mut r = Reader::new(b, "tid");
    let v = (r.u32()?, r.u16()?);
    r.finish()?;
    Ok(v)
}

pub fn encode_tid(buf: &mut Vec<u8>, block: u32, offset: u16) {
    buf.extend_from_slice(&block.to_be_bytes());
    buf.extend_from_slice(&offset.to_be_bytes());
}

/// txid_snapshot / pg_snapshot: xmin, xmax and the transactions in progress.
pub fn decode_snapshot(b: &[u8]) -> Result<(u64, u64, Vec<u64>), Error> {
    let mut r = Reader::new(b, "snapshot");
    let n = r.count(8)?;
    let (xmin, xmax) = (r.u64()?, r.u64()?);
    let xip = (0..n).map(|_| r.u64()).collect::<Result<Vec<_>, _>>()?;
    r.finish()?;
    Ok((xmin, xmax, xip))
}

pub fn encode_snapshot(buf: &mut Vec<u8>, xmin: u64, xmax: u64, xip: &[u64]) {
    buf.extend_from_slice(&(xip.len() as i32).to_be_bytes());
    buf.extend_from_slice(&xmin.to_be_bytes());
    buf.extend_from_slice(&xmax.to_be_bytes());
    for x in xip {
        buf.extend_from_slice(&x.to_be_bytes());
    }
}

/// bit / varbit: the length in bits, then the bits, most significant first,
/// padded with zero bits to a whole byte.
pub fn decode_bits(b: &[u8]) -> Result<(usize, &[u8]), Error> {
    let mut r = Reader::new(b, "bit string");
    let n = r.i32()?;
    let data = r.rest();
    if n < 0 || (n as usize).div_ceil(8) != data.len() {
        return Err(Error::BadValue("bit string"));
    }
    Ok((n as usize, data))
}

pub fn encode_bits(buf: &mut Vec<u8>, bits: usize, data: &[u8]) -> Result<(), Error> {
    if bits.div_ceil(8) != data.len() || bits > i32::MAX as usize {
        return Err(Error::BadValue("bit string"));
    }
    buf.extend_from_slice(&(bits as i32).to_be_bytes());
    buf.extend_from_slice(data);
    Ok(())
}
