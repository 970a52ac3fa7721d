//! Reading RESP values: one header at a time ([`read_header`]) and whole
//! values ([`decode`]).

use super::error::Error;
use super::limits::{MAX_AGGREGATE_LEN, MAX_BULK_LEN, MAX_LINE_LEN, MAX_NESTING};
use super::scan::Scanner;

pub use crate::Status;

/// One value's type and line; aggregates carry how many values follow them.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Header<'a> {
    /// `+OK`
    Simple(&'a [u8]),
    /// `-ERR message` (and RESP3 `!` bulk errors)
    Error(&'a [u8]),
    /// `:42`
    Integer(i64),
    /// `$3\r\nfoo`; `$-1` is RESP2's null.
    Bulk(Option<&'a [u8]>),
    /// `=` RESP3 verbatim string: format (`txt`, `mkd`) and text.
    Verbatim(&'a [u8], &'a [u8]),
    /// `*n` (`*-1` is RESP2's null array: `None`)
    Array(Option<u64>),
    /// `%n`: n key/value pairs follow.
    Map(u64),
    /// `~n`
    Set(u64),
    /// `>n`: an out-of-band push (pub/sub, invalidation).
    Push(u64),
    /// `|n`: n pairs of metadata, then the value they describe.
    Attribute(u64),
    /// `_`
    Null,
    /// `#t` / `#f`
    Boolean(bool),
    /// `,3.14`
    Double(f64),
    /// `(12345678901234567890`: the digits, for the caller's big integer type.
    BigNumber(&'a [u8]),
}

impl Header<'_> {
    /// How many values follow this header as its children (pairs count twice).
    pub fn children(&self) -> u64 {
        match *self {
            Header::Array(Some(n)) | Header::Set(n) | Header::Push(n) => n,
            Header::Map(n) | Header::Attribute(n) => 2 * n,
            _ => 0,
        }
    }
}

/// The line starting at `pos` (CRLF excluded) and the position after its CRLF.
fn line(buf: &[u8], pos: usize) -> Result<Status<(&[u8], usize)>, Error> {
    let rest = &buf[pos..];
    match memchr::memchr(b'\r', rest) {
        Some(i) if i > MAX_LINE_LEN => Err(Error::LineTooLong),
        Some(i) => match rest.get(i + 1) {
            None => Ok(Status::Partial),
            Some(b'\n') => Ok(Status::Complete((&rest[..i], pos + i + 2))),
            Some(_) => Err(Error::BadLineEnd),
        },
        None if rest.len() > MAX_LINE_LEN => Err(Error::LineTooLong),
        None => Ok(Status::Partial),
    }
}

fn int(s: &[u8]) -> Result<i64, Error> {
    let (neg, digits) = match s.first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    if digits.is_empty() || digits.len() > 19 {
        return Err(Error::BadInteger);
    }
    let mut v: i64 = 0;
    for &d in digits {
        if !d.is_ascii_digit() {
            return Err(Error::BadInteger);
        }
        let d = i64::from(d - b'0');
        v = v
            .checked_mul(10)
            .and_then(|v| {
                if neg {
                    v.checked_sub(d)
                } else {
                    v.checked_add(d)
                }
            })
            .ok_or(Error::BadInteger)?;
    }
    Ok(v)
}

/// A count line: a non-negative integer, or -1 (null) when `allow_null`.
fn count(s: &[u8], allow_null: bool) -> Result<Option<u64>, Error> {
    match int(s)? {
        -1 if allow_null => Ok(None),
        n if n < 0 => Err(Error::BadInteger),
        n => Ok(Some(n as u64)),
    }
}

fn aggregate(s: &[u8]) -> Result<u64, Error> {
    let n = count(s, false)?.unwrap_or(0);
    if n > MAX_AGGREGATE_LEN {
        return Err(Error::AggregateTooLong(n));
    }
    Ok(n)
}

fn double(s: &[u8]) -> Result<f64, Error> {
    let text = std::str::from_utf8(s).map_err(|_| Error::BadDouble)?;
    match text {
        "inf" | "+inf" => Ok(f64::INFINITY),
        "-inf" => Ok(f64::NEG_INFINITY),
        "nan" | "-nan" => Ok(f64::NAN),
        _ if text
            .bytes()
            .all(|b| b.is_ascii_digit() || b"+-.eE".contains(&b)) =>
        {
            text.parse().map_err(|_| Error::BadDouble)
        }
        _ => Err(Error::BadDouble),
    }
}

fn is_big_number(s: &[u8]) -> bool {
    let digits = s.strip_prefix(b"-").unwrap_or(s);
    !digits.is_empty() && digits.iter().all(u8::is_ascii_digit)
}

/// A length-prefixed payload (`$`, `!`, `=`) of `n` bytes after `pos`, then CRLF.
fn payload(buf: &[u8], pos: usize, n: u64) -> Result<Status<(&[u8], usize)>, Error> {
    if n > MAX_BULK_LEN {
        return Err(Error::BulkTooLong(n));
    }
    let n = n as usize;
    if buf.len() - pos < n + 2 {
        return Ok(Status::Partial);
    }
    if &buf[pos + n..pos + n + 2] != b"\r\n" {
        return Err(Error::BadLineEnd);
    }
    Ok(Status::Complete((&buf[pos..pos + n], pos + n + 2)))
}

/// Read the header of the value at `*pos`; on `Complete`, `*pos` moves past it
/// (past a bulk string's payload too). On `Partial` or an error it stays put.
pub fn read_header<'a>(buf: &'a [u8], pos: &mut usize) -> Result<Status<Header<'a>>, Error> {
    let Some(&kind) = buf.get(*pos) else {
        return Ok(Status::Partial);
    };
    let (s, mut next) = match line(buf, *pos + 1)? {
        Status::Complete(x) => x,
        Status::Partial => return Ok(Status::Partial),
    };
    let h = match kind {
        b'+' => Header::Simple(s),
        b'-' => Header::Error(s),
        b':' => Header::Integer(int(s)?),
        b'$' | b'!' | b'=' => match count(s, kind == b'$')? {
            None => Header::Bulk(None),
            Some(n) => {
                let (data, end) = match payload(buf, next, n)? {
                    Status::Complete(x) => x,
                    Status::Partial => return Ok(Status::Partial),
                };
                next = end;
                match kind {
                    b'$' => Header::Bulk(Some(data)),
                    b'!' => Header::Error(data),
                    _ => {
                        if data.len() < 4 || data[3] != b':' {
                            return Err(Error::BadVerbatim);
                        }
                        Header::Verbatim(&data[..3], &data[4..])
                    }
                }
            }
        },
        b'*' => match count(s, true)? {
            None => Header::Array(None),
            Some(_) => Header::Array(Some(aggregate(s)?)),
        },
        b'%' => Header::Map(aggregate(s)?),
        b'~' => Header::Set(aggregate(s)?),
        b'>' => Header::Push(aggregate(s)?),
        b'|' => Header::Attribute(aggregate(s)?),
        b'_' if s.is_empty() => Header::Null,
        b'#' => match s {
            b"t" => Header::Boolean(true),
            b"f" => Header::Boolean(false),
            _ => return Err(Error::BadBoolean),
        },
        b',' => Header::Double(double(s)?),
        b'(' if is_big_number(s) => Header::BigNumber(s),
        b'(' => return Err(Error::BadInteger),
        b'_' => return Err(Error::BadLineEnd),
        other => return Err(Error::BadType(other)),
    };
    *pos = next;
    Ok(Status::Complete(h))
}

/// A whole decoded reply, borrowing strings from the input.
#[derive(Clone, Debug, PartialEq)]
pub enum Value<'a> {
    Simple(&'a [u8]),
    Error(&'a [u8]),
    Integer(i64),
    Bulk(&'a [u8]),
    Verbatim(&'a [u8], &'a [u8]),
    Array(Vec<Value<'a>>),
    Map(Vec<(Value<'a>, Value<'a>)>),
    Set(Vec<Value<'a>>),
    Push(Vec<Value<'a>>),
    Null,
    Boolean(bool),
    Double(f64),
    BigNumber(&'a [u8]),
}

/// Decode the reply at the front of `buf`: the value and the bytes it took.
/// Attributes are read and dropped (they describe, they do not answer).
pub fn decode(buf: &[u8]) -> Result<Status<(Value<'_>, usize)>, Error> {
    let mut scanner = Scanner::new();
    match scanner.scan(buf)? {
        Status::Partial => Ok(Status::Partial),
        Status::Complete(n) => {
            let mut pos = 0;
            let v = build(buf, &mut pos, 0)?;
            debug_assert_eq!(pos, n);
            Ok(Status::Complete((v, n)))
        }
    }
}

fn header<'a>(buf: &'a [u8], pos: &mut usize) -> Result<Header<'a>, Error> {
    match read_header(buf, pos)? {
        Status::Complete(h) => Ok(h),
        // The scanner saw the whole reply first; a partial value here is a bug.
        Status::Partial => Err(Error::BadLineEnd),
    }
}

fn build<'a>(buf: &'a [u8], pos: &mut usize, depth: usize) -> Result<Value<'a>, Error> {
    let h = header(buf, pos)?;
    let n = h.children();
    if n > 0 && depth >= MAX_NESTING {
        return Err(Error::TooDeep);
    }
    let many = |pos: &mut usize, n: u64| -> Result<Vec<Value<'a>>, Error> {
        // Never trust a count for preallocation beyond what the bytes can hold.
        let mut out = Vec::with_capacity((n as usize).min(buf.len() / 3));
        for _ in 0..n {
            out.push(build(buf, pos, depth + 1)?);
        }
        Ok(out)
    };
    Ok(match h {
        Header::Simple(s) => Value::Simple(s),
        Header::Error(s) => Value::Error(s),
        Header::Integer(i) => Value::Integer(i),
        Header::Bulk(Some(b)) => Value::Bulk(b),
        Header::Bulk(None) | Header::Array(None) | Header::Null => Value::Null,
        Header::Verbatim(f, t) => Value::Verbatim(f, t),
        Header::Array(Some(n)) => Value::Array(many(pos, n)?),
        Header::Set(n) => Value::Set(many(pos, n)?),
        Header::Push(n) => Value::Push(many(pos, n)?),
        Header::Map(n) => {
            let flat = many(pos, 2 * n)?;
            let mut it = flat.into_iter();
            let mut out = Vec::with_capacity(n as usize);
            while let (Some(k), Some(v)) = (it.next(), it.next()) {
                out.push((k, v));
            }
            Value::Map(out)
        }
        Header::Attribute(n) => {
            many(pos, 2 * n)?;
            build(buf, pos, depth)?
        }
        Header::Boolean(b) => Value::Boolean(b),
        Header::Double(d) => Value::Double(d),
        Header::BigNumber(s) => Value::BigNumber(s),
    })
}
