//! Binary formats of the common PostgreSQL types, as encode/decode pairs on raw
//! bytes (no Python here: the extension builds Python objects from these parts).
//!
//! Dates count days and timestamps microseconds from 2000-01-01 (PostgreSQL's
//! epoch); `i32::MAX`/`i32::MIN` (`i64::MAX`/`i64::MIN`) stand for ±infinity.

use super::{Error, MAX_ARRAY_DIMS, MAX_ARRAY_ELEMENTS};

/// Type OIDs (from `pg_type.dat`, fixed across versions).
pub mod oid {
    pub const BOOL: u32 = 16;
    pub const BYTEA: u32 = 17;
    pub const CHAR: u32 = 18;
    pub const NAME: u32 = 19;
    pub const INT8: u32 = 20;
    pub const INT2: u32 = 21;
    pub const INT4: u32 = 23;
    pub const TEXT: u32 = 25;
    pub const OID: u32 = 26;
    pub const JSON: u32 = 114;
    pub const FLOAT4: u32 = 700;
    pub const FLOAT8: u32 = 701;
    pub const UNKNOWN: u32 = 705;
    pub const BPCHAR: u32 = 1042;
    pub const VARCHAR: u32 = 1043;
    pub const DATE: u32 = 1082;
    pub const TIME: u32 = 1083;
    pub const TIMESTAMP: u32 = 1114;
    pub const TIMESTAMPTZ: u32 = 1184;
    pub const INTERVAL: u32 = 1186;
    pub const NUMERIC: u32 = 1700;
    pub const VOID: u32 = 2278;
    pub const UUID: u32 = 2950;
    pub const JSONB: u32 = 3802;

    pub const BOOL_ARRAY: u32 = 1000;
    pub const BYTEA_ARRAY: u32 = 1001;
    pub const CHAR_ARRAY: u32 = 1002;
    pub const NAME_ARRAY: u32 = 1003;
    pub const INT2_ARRAY: u32 = 1005;
    pub const INT4_ARRAY: u32 = 1007;
    pub const TEXT_ARRAY: u32 = 1009;
    pub const BPCHAR_ARRAY: u32 = 1014;
    pub const VARCHAR_ARRAY: u32 = 1015;
    pub const INT8_ARRAY: u32 = 1016;
    pub const FLOAT4_ARRAY: u32 = 1021;
    pub const FLOAT8_ARRAY: u32 = 1022;
    pub const OID_ARRAY: u32 = 1028;
    pub const TIMESTAMP_ARRAY: u32 = 1115;
    pub const DATE_ARRAY: u32 = 1182;
    pub const TIME_ARRAY: u32 = 1183;
    pub const TIMESTAMPTZ_ARRAY: u32 = 1185;
    pub const INTERVAL_ARRAY: u32 = 1187;
    pub const NUMERIC_ARRAY: u32 = 1231;
    pub const JSON_ARRAY: u32 = 199;
    pub const UUID_ARRAY: u32 = 2951;
    pub const JSONB_ARRAY: u32 = 3807;

    /// The element type of an array type this module knows, if `array` is one.
    pub fn element_of(array: u32) -> Option<u32> {
        Some(match array {
            BOOL_ARRAY => BOOL,
            BYTEA_ARRAY => BYTEA,
            CHAR_ARRAY => CHAR,
            NAME_ARRAY => NAME,
            INT2_ARRAY => INT2,
            INT4_ARRAY => INT4,
            TEXT_ARRAY => TEXT,
            BPCHAR_ARRAY => BPCHAR,
            VARCHAR_ARRAY => VARCHAR,
            INT8_ARRAY => INT8,
            FLOAT4_ARRAY => FLOAT4,
            FLOAT8_ARRAY => FLOAT8,
            OID_ARRAY => OID,
            TIMESTAMP_ARRAY => TIMESTAMP,
            DATE_ARRAY => DATE,
            TIME_ARRAY => TIME,
            TIMESTAMPTZ_ARRAY => TIMESTAMPTZ,
            INTERVAL_ARRAY => INTERVAL,
            NUMERIC_ARRAY => NUMERIC,
            JSON_ARRAY => JSON,
            UUID_ARRAY => UUID,
            JSONB_ARRAY => JSONB,
            _ => return None,
        })
    }

    /// True for a scalar type with a binary codec here.
    pub fn is_known_scalar(t: u32) -> bool {
        matches!(
            t,
            BOOL | BYTEA
                | CHAR
                | NAME
                | INT8
                | INT2
                | INT4
                | TEXT
                | OID
                | JSON
                | FLOAT4
                | FLOAT8
                | UNKNOWN
                | BPCHAR
                | VARCHAR
                | DATE
                | TIME
                | TIMESTAMP
                | TIMESTAMPTZ
                | INTERVAL
                | NUMERIC
                | VOID
                | UUID
                | JSONB
        )
    }

    /// True when values of type `t` can be read and written in binary here.
    pub fn is_known(t: u32) -> bool {
        is_known_scalar(t) || element_of(t).is_some()
    }
}

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

/// An interval: PostgreSQL keeps months, days and microseconds apart.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Interval {
    pub micros: i64,
    pub days: i32,
    pub months: i32,
}

pub fn decode_interval(b: &[u8]) -> Result<Interval, Error> {
    if b.len() != 16 {
        return Err(Error::BadValue("interval"));
    }
    Ok(Interval {
        micros: decode_i64(&b[..8])?,
        days: decode_i32(&b[8..12])?,
        months: decode_i32(&b[12..])?,
    })
}

pub fn encode_interval(buf: &mut Vec<u8>, v: Interval) {
    buf.extend_from_slice(&v.micros.to_be_bytes());
    buf.extend_from_slice(&v.days.to_be_bytes());
    buf.extend_from_slice(&v.months.to_be_bytes());
}

/// Days from 0000-03-01-based civil calendar: (year, month, day) of a day count
/// from 2000-01-01 (Howard Hinnant's `civil_from_days`, proleptic Gregorian).
pub fn date_from_days(days: i32) -> (i32, u32, u32) {
    // 730_425 days from 0000-03-01 to 2000-01-01... shifted to the 1970 epoch algorithm.
    let z = i64::from(days) + 10_957 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    ((y + i64::from(m <= 2)) as i32, m, d)
}

/// Inverse of [`date_from_days`].
pub fn days_from_date(year: i32, month: u32, day: u32) -> i32 {
    let y = i64::from(year) - i64::from(month <= 2);
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let m = i64::from(month);
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + i64::from(day) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    (era * 146_097 + doe - 719_468 - 10_957) as i32
}

/// Microseconds in a day, and the split of a time of day.
pub const MICROS_PER_DAY: i64 = 86_400_000_000;

/// (hour, minute, second, microsecond) of microseconds since midnight.
pub fn time_from_micros(us: i64) -> Result<(u32, u32, u32, u32), Error> {
    // 24:00:00 is a valid PostgreSQL time but has no (h, m, s) below 24: it is an
    // error here rather than a silently different value.
    if !(0..MICROS_PER_DAY).contains(&us) {
        return Err(Error::BadValue("time"));
    }
    let s = us / 1_000_000;
    Ok((
        (s / 3600) as u32,
        (s / 60 % 60) as u32,
        (s % 60) as u32,
        (us % 1_000_000) as u32,
    ))
}

/// A numeric's value as decimal text (`NaN`, `Infinity`, `-Infinity` included).
pub fn numeric_to_string(b: &[u8]) -> Result<String, Error> {
    const BAD: Error = Error::BadValue("numeric");
    if b.len() < 8 {
        return Err(BAD);
    }
    let ndigits = decode_i16(&b[0..2])?;
    let weight = i32::from(decode_i16(&b[2..4])?);
    let sign = u16::from_be_bytes([b[4], b[5]]);
    let dscale = decode_i16(&b[6..8])?;
    if ndigits < 0 || dscale < 0 || b.len() != 8 + 2 * ndigits as usize {
        return Err(BAD);
    }
    match sign {
        0xC000 => return Ok("NaN".into()),
        0xD000 => return Ok("Infinity".into()),
        0xF000 => return Ok("-Infinity".into()),
        0x0000 | 0x4000 => {}
        _ => return Err(BAD),
    }
    let digits: Vec<i16> = b[8..]
        .chunks_exact(2)
        .map(|c| i16::from_be_bytes([c[0], c[1]]))
        .collect();
    if digits.iter().any(|&d| !(0..10_000).contains(&d)) {
        return Err(BAD);
    }
    let mut s = String::with_capacity(digits.len() * 4 + 8);
    if sign == 0x4000 {
        s.push('-');
    }
    // Integer part: base-10000 digits at weights weight..=0.
    if weight < 0 {
        s.push('0');
    } else {
        for i in 0..=weight {
            let d = digits.get(i as usize).copied().unwrap_or(0);
            if i == 0 {
                s.push_str(&d.to_string());
            } else {
                s.push_str(&format!("{d:04}"));
            }
        }
    }
    let dscale = dscale as usize;
    if dscale > 0 {
        s.push('.');
        let mut frac = String::with_capacity(dscale + 4);
        let mut i = weight + 1;
        while frac.len() < dscale {
            let d = if i >= 0 {
                digits.get(i as usize).copied().unwrap_or(0)
            } else {
                0
            };
            frac.push_str(&format!("{d:04}"));
            i += 1;
        }
        frac.truncate(dscale);
        s.push_str(&frac);
    }
    Ok(s)
}

/// Encode decimal text (`-12.3400`, `1E+5`, `NaN`, `Infinity`) as a numeric.
pub fn encode_numeric(buf: &mut Vec<u8>, text: &str) -> Result<(), Error> {
    const BAD: Error = Error::BadValue("numeric");
    let t = text.trim();
    let special = match t {
        "NaN" | "nan" | "sNaN" => Some(0xC000u16),
        "Infinity" | "inf" | "+Infinity" => Some(0xD000),
        "-Infinity" | "-inf" => Some(0xF000),
        _ => None,
    };
    if let Some(sign) = special {
        buf.extend_from_slice(&[0, 0, 0, 0]);
        buf.extend_from_slice(&sign.to_be_bytes());
        buf.extend_from_slice(&[0, 0]);
        return Ok(());
    }
    let (neg, t) = match t.as_bytes().first() {
        Some(b'-') => (true, &t[1..]),
        Some(b'+') => (false, &t[1..]),
        _ => (false, t),
    };
    let (mant, exp) = match t.find(['e', 'E']) {
        Some(i) => (&t[..i], t[i + 1..].parse::<i32>().map_err(|_| BAD)?),
        None => (t, 0),
    };
    let (int, frac) = match mant.find('.') {
        Some(i) => (&mant[..i], &mant[i + 1..]),
        None => (mant, ""),
    };
    if (int.is_empty() && frac.is_empty())
        || !int.bytes().all(|c| c.is_ascii_digit())
        || !frac.bytes().all(|c| c.is_ascii_digit())
        || !(-100_000..=100_000).contains(&exp)
    {
        return Err(BAD);
    }
    // All decimal digits, and where the point sits in them after the exponent.
    let all: Vec<u8> = int.bytes().chain(frac.bytes()).map(|c| c - b'0').collect();
    let point = int.len() as i64 + i64::from(exp);
    let dscale = (frac.len() as i64 - i64::from(exp)).max(0);
    if dscale > 16_383 || point > 131_072 {
        return Err(BAD);
    }
    // Align to base-10000 groups: pad the front so the point falls on a group edge.
    let pad_front = (4 - point.rem_euclid(4)) % 4;
    let mut ds: Vec<u8> = vec![0; pad_front as usize];
    ds.extend_from_slice(&all);
    while !ds.len().is_multiple_of(4) {
        ds.push(0);
    }
    let mut groups: Vec<i16> = ds
        .chunks(4)
        .map(|c| c.iter().fold(0i16, |a, &d| a * 10 + i16::from(d)))
        .collect();
    let mut weight = (point + pad_front) / 4 - 1;
    while groups.first() == Some(&0) {
        groups.remove(0);
        weight -= 1;
    }
    while groups.last() == Some(&0) {
        groups.pop();
    }
    if groups.is_empty() {
        weight = 0;
    }
    if groups.len() > i16::MAX as usize || !(-32768..=32767).contains(&weight) {
        return Err(BAD);
    }
    buf.extend_from_slice(&(groups.len() as i16).to_be_bytes());
    buf.extend_from_slice(&(weight as i16).to_be_bytes());
    let sign: u16 = if neg && !groups.is_empty() { 0x4000 } else { 0 };
    buf.extend_from_slice(&sign.to_be_bytes());
    buf.extend_from_slice(&(dscale as i16).to_be_bytes());
    for g in groups {
        buf.extend_from_slice(&g.to_be_bytes());
    }
    Ok(())
}

/// The header of a binary array value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ArrayHeader {
    pub element_oid: u32,
    /// (length, lower bound) per dimension; empty for an empty array.
    pub dims: Vec<(i32, i32)>,
}

impl ArrayHeader {
    pub fn element_count(&self) -> usize {
        if self.dims.is_empty() {
            0
        } else {
            self.dims.iter().map(|&(n, _)| n as usize).product()
        }
    }
}

/// Read an array's header; returns it and the element bytes that follow
/// (walk them with [`array_elements`]).
pub fn decode_array_header(b: &[u8]) -> Result<(ArrayHeader, &[u8]), Error> {
    const BAD: Error = Error::BadValue("array");
    if b.len() < 12 {
        return Err(BAD);
    }
    let ndim = decode_i32(&b[0..4])?;
    let flags = decode_i32(&b[4..8])?;
    let element_oid = decode_u32(&b[8..12])?;
    if !(0..=MAX_ARRAY_DIMS as i32).contains(&ndim) || !(0..=1).contains(&flags) {
        return Err(BAD);
    }
    let ndim = ndim as usize;
    let rest = &b[12..];
    if rest.len() < ndim * 8 {
        return Err(BAD);
    }
    let mut dims = Vec::with_capacity(ndim);
    let mut total: usize = 1;
    for i in 0..ndim {
        let n = decode_i32(&rest[i * 8..i * 8 + 4])?;
        let lb = decode_i32(&rest[i * 8 + 4..i * 8 + 8])?;
        if n < 0 {
            return Err(BAD);
        }
        total = total.saturating_mul(n as usize);
        if total > MAX_ARRAY_ELEMENTS {
            return Err(BAD);
        }
        dims.push((n, lb));
    }
    Ok((ArrayHeader { element_oid, dims }, &rest[ndim * 8..]))
}

/// The elements after an array header: `None` for NULL. Fails on a length that
/// runs past the value, and when elements are missing or left over.
pub fn array_elements(b: &[u8], count: usize) -> Result<Vec<Option<&[u8]>>, Error> {
    const BAD: Error = Error::BadValue("array");
    // Each element takes at least its 4-byte length: bounds the allocation.
    if count > b.len() / 4 {
        return Err(BAD);
    }
    let mut out = Vec::with_capacity(count);
    let mut rest = b;
    for _ in 0..count {
        if rest.len() < 4 {
            return Err(BAD);
        }
        let n = decode_i32(&rest[..4])?;
        rest = &rest[4..];
        if n < 0 {
            if n != -1 {
                return Err(BAD);
            }
            out.push(None);
        } else {
            let n = n as usize;
            if rest.len() < n {
                return Err(BAD);
            }
            out.push(Some(&rest[..n]));
            rest = &rest[n..];
        }
    }
    if !rest.is_empty() {
        return Err(BAD);
    }
    Ok(out)
}

/// Write an array header (`dims`: lengths; lower bounds are 1).
pub fn encode_array_header(buf: &mut Vec<u8>, element_oid: u32, dims: &[usize], has_null: bool) {
    buf.extend_from_slice(&(dims.len() as i32).to_be_bytes());
    buf.extend_from_slice(&i32::from(has_null).to_be_bytes());
    buf.extend_from_slice(&element_oid.to_be_bytes());
    for &n in dims {
        buf.extend_from_slice(&(n as i32).to_be_bytes());
        buf.extend_from_slice(&1i32.to_be_bytes());
    }
}

/// The header of a binary COPY stream (signature, flags, no extension).
pub const COPY_BINARY_HEADER: &[u8] = b"PGCOPY\n\xff\r\n\0\0\0\0\0\0\0\0\0";
/// The trailer of a binary COPY stream (a field count of -1).
pub const COPY_BINARY_TRAILER: &[u8] = &[0xff, 0xff];
