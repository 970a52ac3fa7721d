//! Tarantool's MessagePack extension types, as plain Rust values.
//!
//! | type | name     | payload |
//! |------|----------|---------|
//! | 1    | decimal  | msgpack int scale, then packed BCD digits with a sign nibble last |
//! | 2    | uuid     | 16 bytes, RFC 4122 order |
//! | 3    | error    | msgpack map {0: [ {0: type, 1: file, 2: line, 3: message, 4: errno, 5: code, 6: fields}, ... ]} |
//! | 4    | datetime | i64 LE seconds, then optionally i32 LE nsec, i16 LE tzoffset (minutes), i16 LE tzindex |
//! | 6    | interval | u8 count, then `count` pairs of msgpack (field id, int); fields in [`INTERVAL_FIELDS`] |

use super::{read_token, skip_value, write_int, write_uint, Error, Token};

pub const EXT_DECIMAL: i8 = 1;
pub const EXT_UUID: i8 = 2;
pub const EXT_ERROR: i8 = 3;
pub const EXT_DATETIME: i8 = 4;
pub const EXT_INTERVAL: i8 = 6;

/// Deepest nesting the decoders accept; deeper input is refused, not recursed into.
pub const MAX_DEPTH: usize = 256;

/// Decimal as sign, decimal digits (each 0..=9, most significant first) and scale
/// (digits after the point; negative for trailing zeros before it).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Decimal {
    pub negative: bool,
    pub digits: Vec<u8>,
    pub scale: i64,
}

/// Tarantool holds decimals of at most 38 digits.
pub const DECIMAL_MAX_DIGITS: usize = 38;

pub fn encode_decimal(buf: &mut Vec<u8>, d: &Decimal) -> Result<(), Error> {
    if d.digits.len() > DECIMAL_MAX_DIGITS || d.digits.iter().any(|&x| x > 9) {
        return Err(Error::BadExt(EXT_DECIMAL));
    }
    let mut payload = Vec::with_capacity(4 + d.digits.len() / 2 + 1);
    write_int(&mut payload, d.scale);
    let digits: &[u8] = if d.digits.is_empty() { &[0] } else { &d.digits };
    let sign = if d.negative { 0x0d } else { 0x0c };
    // Nibbles: digits then sign; pad with a leading zero nibble to a whole byte count.
    let mut nibbles = Vec::with_capacity(digits.len() + 2);
    if digits.len().is_multiple_of(2) {
        nibbles.push(0);
    }
    nibbles.extend_from_slice(digits);
    nibbles.push(sign);
    for pair in nibbles.chunks(2) {
        payload.push((pair[0] << 4) | pair[1]);
    }
    super::write_ext(buf, EXT_DECIMAL, &payload);
    Ok(())
}

pub fn decode_decimal(data: &[u8]) -> Result<Decimal, Error> {
    let bad = Error::BadExt(EXT_DECIMAL);
    let mut pos = 0;
    let scale = match read_token(data, &mut pos).map_err(|_| bad)? {
        Token::Int(i) => i,
        Token::Uint(u) => i64::try_from(u).map_err(|_| bad)?,
        _ => return Err(bad),
    };
    let bcd = &data[pos..];
    if bcd.is_empty() {
        return Err(bad);
    }
    let mut digits = Vec::with_capacity(bcd.len() * 2);
    for &b in bcd {
        digits.push(b >> 4);
        digits.push(b & 0x0f);
    }
    let sign = digits.pop().ok_or(bad)?;
    let negative = match sign {
        0x0b | 0x0d => true,
        0x0a | 0x0c | 0x0e | 0x0f => false,
        _ => return Err(bad),
    };
    if digits.iter().any(|&x| x > 9) {
        return Err(bad);
    }
    let first = digits.iter().position(|&x| x != 0).unwrap_or(digits.len());
    digits.drain(..first);
    Ok(Decimal {
        negative,
        digits,
        scale,
    })
}

/// Datetime: seconds since the epoch (UTC), nanoseconds, offset in minutes and the
/// tz database index (0 when only an offset is known).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Datetime {
    pub seconds: i64,
    pub nsec: i32,
    pub tzoffset: i16,
    pub tzindex: i16,
}

pub fn encode_datetime(buf: &mut Vec<u8>, d: &Datetime) {
    let mut p = [0u8; 16];
    p[..8].copy_from_slice(&d.seconds.to_le_bytes());
    if d.nsec == 0 && d.tzoffset == 0 && d.tzindex == 0 {
        super::write_ext(buf, EXT_DATETIME, &p[..8]);
    } else {
        p[8..12].copy_from_slice(&d.nsec.to_le_bytes());
        p[12..14].copy_from_slice(&d.tzoffset.to_le_bytes());
        p[14..16].copy_from_slice(&d.tzindex.to_le_bytes());
        super::write_ext(buf, EXT_DATETIME, &p);
    }
}

pub fn decode_datetime(data: &[u8]) -> Result<Datetime, Error> {
    let mut d = Datetime::default();
    match data.len() {
        8 | 16 => {}
        _ => return Err(Error::BadExt(EXT_DATETIME)),
    }
    d.seconds = i64::from_le_bytes(data[..8].try_into().expect("8 bytes"));
    if data.len() == 16 {
        d.nsec = i32::from_le_bytes(data[8..12].try_into().expect("4 bytes"));
        d.tzoffset = i16::from_le_bytes(data[12..14].try_into().expect("2 bytes"));
        d.tzindex = i16::from_le_bytes(data[14..16].try_into().expect("2 bytes"));
    }
    Ok(d)
}

/// Interval field ids, in order: the index in this table is the id on the wire.
pub const INTERVAL_FIELDS: [&str; 9] = [
    "year", "month", "week", "day", "hour", "minute", "sec", "nsec", "adjust",
];

/// Interval fields by id (see [`INTERVAL_FIELDS`]); `adjust` is 0 excess, 1 none, 2 last.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Interval {
    pub fields: [i64; 9],
}

pub fn encode_interval(buf: &mut Vec<u8>, iv: &Interval) {
    let mut payload = vec![0u8];
    let mut count = 0u8;
    for (id, &v) in iv.fields.iter().enumerate() {
        if v != 0 {
            write_uint(&mut payload, id as u64);
            write_int(&mut payload, v);
            count += 1;
        }
    }
    payload[0] = count;
    super::write_ext(buf, EXT_INTERVAL, &payload);
}

pub fn decode_interval(data: &[u8]) -> Result<Interval, Error> {
    let bad = Error::BadExt(EXT_INTERVAL);
    let (&count, rest) = data.split_first().ok_or(bad)?;
    let mut iv = Interval::default();
    let mut pos = 0;
    for _ in 0..count {
        let id = match read_token(rest, &mut pos).map_err(|_| bad)? {
            Token::Uint(u) if (u as usize) < INTERVAL_FIELDS.len() => u as usize,
            _ => return Err(bad),
        };
        iv.fields[id] = match read_token(rest, &mut pos).map_err(|_| bad)? {
            Token::Int(i) => i,
            Token::Uint(u) => i64::try_from(u).map_err(|_| bad)?,
            _ => return Err(bad),
        };
    }
    if pos != rest.len() {
        return Err(bad);
    }
    Ok(iv)
}

/// One entry of an error stack (the server's box.error), innermost cause last.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct ErrorEntry<'a> {
    pub ty: &'a [u8],
    pub file: &'a [u8],
    pub line: u64,
    pub message: &'a [u8],
    pub errno: u64,
    pub code: u64,
    /// The MessagePack map of extra fields, undecoded (empty when absent).
    pub fields: &'a [u8],
}

/// Decode an error stack (the payload of ext type 3, or IPROTO_ERROR's value).
pub fn decode_error_stack(data: &[u8]) -> Result<Vec<ErrorEntry<'_>>, Error> {
    let bad = Error::BadExt(EXT_ERROR);
    let mut pos = 0;
    let mut stack = Vec::new();
    let Token::Map(n) = read_token(data, &mut pos).map_err(|_| bad)? else {
        return Err(bad);
    };
    for _ in 0..n {
        let key = read_token(data, &mut pos).map_err(|_| bad)?;
        if key != Token::Uint(0) {
            skip_value(data, &mut pos).map_err(|_| bad)?;
            continue;
        }
        let Token::Array(len) = read_token(data, &mut pos).map_err(|_| bad)? else {
            return Err(bad);
        };
        for _ in 0..len {
            let Token::Map(nf) = read_token(data, &mut pos).map_err(|_| bad)? else {
                return Err(bad);
            };
            let mut e = ErrorEntry::default();
            for _ in 0..nf {
                let Token::Uint(k) = read_token(data, &mut pos).map_err(|_| bad)? else {
                    return Err(bad);
                };
                let start = pos;
                let v = read_token(data, &mut pos).map_err(|_| bad)?;
                match (k, v) {
                    (0, Token::Str(s)) => e.ty = s,
                    (1, Token::Str(s)) => e.file = s,
                    (2, Token::Uint(u)) => e.line = u,
                    (3, Token::Str(s)) => e.message = s,
                    (4, Token::Uint(u)) => e.errno = u,
                    (5, Token::Uint(u)) => e.code = u,
                    (6, Token::Map(_)) => {
                        pos = start;
                        skip_value(data, &mut pos).map_err(|_| bad)?;
                        e.fields = &data[start..pos];
                    }
                    _ => {
                        pos = start;
                        skip_value(data, &mut pos).map_err(|_| bad)?;
                    }
                }
            }
            stack.push(e);
        }
    }
    Ok(stack)
}

/// Encode an error stack (for ext type 3 payloads); `fields` must be a msgpack map or empty.
pub fn encode_error_stack(buf: &mut Vec<u8>, stack: &[ErrorEntry<'_>]) {
    use super::{write_array_len, write_map_len, write_str_header};
    let s = |buf: &mut Vec<u8>, b: &[u8]| {
        write_str_header(buf, b.len());
        buf.extend_from_slice(b);
    };
    write_map_len(buf, 1);
    write_uint(buf, 0);
    write_array_len(buf, stack.len());
    for e in stack {
        write_map_len(buf, if e.fields.is_empty() { 6 } else { 7 });
        write_uint(buf, 0);
        s(buf, e.ty);
        write_uint(buf, 1);
        s(buf, e.file);
        write_uint(buf, 2);
        write_uint(buf, e.line);
        write_uint(buf, 3);
        s(buf, e.message);
        write_uint(buf, 4);
        write_uint(buf, e.errno);
        write_uint(buf, 5);
        write_uint(buf, e.code);
        if !e.fields.is_empty() {
            write_uint(buf, 6);
            buf.extend_from_slice(e.fields);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ext_payload(buf: &[u8]) -> (i8, &[u8]) {
        let mut p = 0;
        match read_token(buf, &mut p).unwrap() {
            Token::Ext(t, d) => (t, d),
            t => panic!("{t:?}"),
        }
    }

    #[test]
    fn decimal_fixtures() {
        // From Tarantool's msgpack extension docs: -12.34 is d6 01 02 01 23 4d.
        let d = Decimal {
            negative: true,
            digits: vec![1, 2, 3, 4],
            scale: 2,
        };
        let mut b = Vec::new();
        encode_decimal(&mut b, &d).unwrap();
        assert_eq!(b, [0xd6, 0x01, 0x02, 0x01, 0x23, 0x4d]);
        let (t, p) = ext_payload(&b);
        assert_eq!(t, EXT_DECIMAL);
        assert_eq!(decode_decimal(p).unwrap(), d);
        // 0.5 and 1 digit odd count.
        let d = Decimal {
            negative: false,
            digits: vec![5],
            scale: 1,
        };
        b.clear();
        encode_decimal(&mut b, &d).unwrap();
        assert_eq!(decode_decimal(ext_payload(&b).1).unwrap(), d);
        assert!(decode_decimal(&[0x00, 0x1f]).is_ok());
        assert!(decode_decimal(&[0x00, 0x12]).is_err());
        assert!(decode_decimal(&[]).is_err());
    }

    #[test]
    fn datetime_fixtures() {
        let d = Datetime {
            seconds: 1_700_000_000,
            ..Default::default()
        };
        let mut b = Vec::new();
        encode_datetime(&mut b, &d);
        assert_eq!(b[..2], [0xd7, 0x04]);
        assert_eq!(decode_datetime(ext_payload(&b).1).unwrap(), d);
        let d = Datetime {
            seconds: -1,
            nsec: 123_456_789,
            tzoffset: 180,
            tzindex: 0,
        };
        b.clear();
        encode_datetime(&mut b, &d);
        assert_eq!(b[..2], [0xd8, 0x04]);
        assert_eq!(decode_datetime(ext_payload(&b).1).unwrap(), d);
        assert!(decode_datetime(&[0; 9]).is_err());
    }

    #[test]
    fn interval_fixtures() {
        let mut iv = Interval::default();
        iv.fields[0] = 1; // year
        iv.fields[3] = -2; // day
        iv.fields[8] = 1; // adjust none
        let mut b = Vec::new();
        encode_interval(&mut b, &iv);
        // count 3: (0,1) (3,-2) (8,1)
        assert_eq!(b, [0xc7, 7, 6, 3, 0x00, 0x01, 0x03, 0xfe, 0x08, 0x01]);
        assert_eq!(decode_interval(ext_payload(&b).1).unwrap(), iv);
        assert!(decode_interval(&[1, 9, 1]).is_err());
        assert!(decode_interval(&[2, 0, 1]).is_err());
    }

    #[test]
    fn error_stack_round_trip() {
        let stack = vec![ErrorEntry {
            ty: b"ClientError",
            file: b"box.cc",
            line: 10,
            message: b"boom",
            errno: 0,
            code: 32,
            fields: &[0x81, 0xa1, b'k', 0x01],
        }];
        let mut b = Vec::new();
        encode_error_stack(&mut b, &stack);
        assert_eq!(decode_error_stack(&b).unwrap(), stack);
        for cut in 0..b.len() {
            let _ = decode_error_stack(&b[..cut]);
        }
    }
}
