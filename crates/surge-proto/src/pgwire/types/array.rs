//! Arrays (one header with the dimensions, then length-prefixed elements) and
//! the COPY binary stream's framing, which uses the same length-prefixed fields.

use super::scalar::{decode_i32, decode_u32};
use crate::pgwire::{Error, MAX_ARRAY_DIMS, MAX_ARRAY_ELEMENTS};

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

/// Write an array header (`dims`: lengths; every lower bound is `lower`: 1
/// for arrays, 0 for int2vector/oidvector, which the server insists on).
pub fn encode_array_header(
    buf: &mut Vec<u8>,
    element_oid: u32,
    dims: &[usize],
    lower: i32,
    has_null: bool,
) {
    buf.extend_from_slice(&(dims.len() as i32).to_be_bytes());
    buf.extend_from_slice(&i32::from(has_null).to_be_bytes());
    buf.extend_from_slice(&element_oid.to_be_bytes());
    for &n in dims {
        buf.extend_from_slice(&(n as i32).to_be_bytes());
        buf.extend_from_slice(&lower.to_be_bytes());
    }
}

/// The header of a binary COPY stream (signature, flags, no extension).
pub const COPY_BINARY_HEADER: &[u8] = b"PGCOPY\n\xff\r\n\0\0\0\0\0\0\0\0\0";
/// The trailer of a binary COPY stream (a field count of -1).
pub const COPY_BINARY_TRAILER: &[u8] = &[0xff, 0xff];

/// One item of an array's text form: an element (None: NULL) or a sub-array.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TextItem {
    Elem(Option<String>),
    Sub(Vec<TextItem>),
}

/// Parse an array's text form (`{a,"b c",NULL,{d}}`, with an optional
/// `[1:2]=` dimension prefix): used for arrays of the types that go as text
/// (money[], regclass[] ...), whose elements asyncpg returns as a list of str.
pub fn parse_text_array(s: &str) -> Result<Vec<TextItem>, Error> {
    const BAD: Error = Error::BadValue("array text");
    let s = match s.find("={") {
        Some(i) if s.starts_with('[') => &s[i + 1..],
        _ => s,
    };
    let b = s.as_bytes();
    let mut pos = 0;
    let out = text_level(b, &mut pos, 0)?;
    if pos != b.len() {
        return Err(BAD);
    }
    Ok(out)
}

fn text_level(b: &[u8], pos: &mut usize, depth: usize) -> Result<Vec<TextItem>, Error> {
    const BAD: Error = Error::BadValue("array text");
    if depth > MAX_ARRAY_DIMS || b.get(*pos) != Some(&b'{') {
        return Err(BAD);
    }
    *pos += 1;
    let mut out = Vec::new();
    if b.get(*pos) == Some(&b'}') {
        *pos += 1;
        return Ok(out);
    }
    loop {
        match b.get(*pos) {
            Some(b'{') => out.push(TextItem::Sub(text_level(b, pos, depth + 1)?)),
            Some(b'"') => {
                *pos += 1;
                let mut v = Vec::new();
                loop {
                    match b.get(*pos) {
                        Some(b'\\') => {
                            v.push(*b.get(*pos + 1).ok_or(BAD)?);
                            *pos += 2;
                        }
                        Some(b'"') => {
                            *pos += 1;
                            break;
                        }
                        Some(&c) => {
                            v.push(c);
                            *pos += 1;
                        }
                        None => return Err(BAD),
                    }
                }
                out.push(TextItem::Elem(Some(String::from_utf8(v).map_err(|_| BAD)?)));
            }
            Some(_) => {
                let start = *pos;
                while !matches!(b.get(*pos), Some(b',' | b'}') | None) {
                    *pos += 1;
                }
                let raw = std::str::from_utf8(&b[start..*pos])
                    .map_err(|_| BAD)?
                    .trim();
                out.push(TextItem::Elem(if raw.eq_ignore_ascii_case("NULL") {
                    None
                } else {
                    Some(raw.to_owned())
                }));
            }
            None => return Err(BAD),
        }
        match b.get(*pos) {
            Some(b',') => *pos += 1,
            Some(b'}') => {
                *pos += 1;
                return Ok(out);
            }
            _ => return Err(BAD),
        }
    }
}

/// Append one element to an array's text form, quoted (`"` and `\` escaped).
pub fn push_text_element(out: &mut String, v: Option<&str>) {
    match v {
        None => out.push_str("NULL"),
        Some(v) => {
            out.push('"');
            for c in v.chars() {
                if c == '"' || c == '\\' {
                    out.push('\\');
                }
                out.push(c);
            }
            out.push('"');
        }
    }
}
