//! A token reader: one call reads one item's header (and a scalar's payload)
//! and advances the position; containers are read as their length, the caller
//! then reads that many items (twice as many for a map).

use super::Error;

/// One MessagePack item; strings, binaries and extension payloads borrow the input.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Token<'a> {
    Nil,
    Bool(bool),
    Int(i64),
    Uint(u64),
    F32(f32),
    F64(f64),
    Str(&'a [u8]),
    Bin(&'a [u8]),
    Array(u32),
    Map(u32),
    Ext(i8, &'a [u8]),
}

#[inline]
fn take<'a>(buf: &'a [u8], pos: &mut usize, n: usize) -> Result<&'a [u8], Error> {
    let end = pos.checked_add(n).ok_or(Error::Truncated)?;
    let s = buf.get(*pos..end).ok_or(Error::Truncated)?;
    *pos = end;
    Ok(s)
}

#[inline]
fn be<const N: usize>(buf: &[u8], pos: &mut usize) -> Result<[u8; N], Error> {
    let s = take(buf, pos, N)?;
    let mut a = [0u8; N];
    a.copy_from_slice(s);
    Ok(a)
}

#[inline]
fn len8(buf: &[u8], pos: &mut usize) -> Result<usize, Error> {
    Ok(be::<1>(buf, pos)?[0] as usize)
}
#[inline]
fn len16(buf: &[u8], pos: &mut usize) -> Result<usize, Error> {
    Ok(u16::from_be_bytes(be(buf, pos)?) as usize)
}
#[inline]
fn len32(buf: &[u8], pos: &mut usize) -> Result<usize, Error> {
    Ok(u32::from_be_bytes(be(buf, pos)?) as usize)
}

/// Read one token at `*pos`; on error `*pos` is unspecified.
#[inline]
pub fn read_token<'a>(buf: &'a [u8], pos: &mut usize) -> Result<Token<'a>, Error> {
    let m = *buf.get(*pos).ok_or(Error::Truncated)?;
    *pos += 1;
    Ok(match m {
        0x00..=0x7f => Token::Uint(m as u64),
        0x80..=0x8f => Token::Map((m & 0x0f) as u32),
        0x90..=0x9f => Token::Array((m & 0x0f) as u32),
        0xa0..=0xbf => Token::Str(take(buf, pos, (m & 0x1f) as usize)?),
        0xc0 => Token::Nil,
        0xc1 => return Err(Error::BadMarker(m)),
        0xc2 => Token::Bool(false),
        0xc3 => Token::Bool(true),
        0xc4 => {
            let n = len8(buf, pos)?;
            Token::Bin(take(buf, pos, n)?)
        }
        0xc5 => {
            let n = len16(buf, pos)?;
            Token::Bin(take(buf, pos, n)?)
        }
        0xc6 => {
            let n = len32(buf, pos)?;
            Token::Bin(take(buf, pos, n)?)
        }
        0xc7..=0xc9 => {
            let n = match m {
                0xc7 => len8(buf, pos)?,
                0xc8 => len16(buf, pos)?,
                _ => len32(buf, pos)?,
            };
            let ty = be::<1>(buf, pos)?[0] as i8;
            Token::Ext(ty, take(buf, pos, n)?)
        }
        0xca => Token::F32(f32::from_be_bytes(be(buf, pos)?)),
        0xcb => Token::F64(f64::from_be_bytes(be(buf, pos)?)),
        0xcc => Token::Uint(be::<1>(buf, pos)?[0] as u64),
        0xcd => Token::Uint(u16::from_be_bytes(be(buf, pos)?) as u64),
        0xce => Token::Uint(u32::from_be_bytes(be(buf, pos)?) as u64),
        0xcf => Token::Uint(u64::from_be_bytes(be(buf, pos)?)),
        0xd0 => Token::Int(i8::from_be_bytes(be(buf, pos)?) as i64),
        0xd1 => Token::Int(i16::from_be_bytes(be(buf, pos)?) as i64),
        0xd2 => Token::Int(i32::from_be_bytes(be(buf, pos)?) as i64),
        0xd3 => Token::Int(i64::from_be_bytes(be(buf, pos)?)),
        0xd4..=0xd8 => {
            let n = 1usize << (m - 0xd4);
            let ty = be::<1>(buf, pos)?[0] as i8;
            Token::Ext(ty, take(buf, pos, n)?)
        }
        0xd9 => {
            let n = len8(buf, pos)?;
            Token::Str(take(buf, pos, n)?)
        }
        0xda => {
            let n = len16(buf, pos)?;
            Token::Str(take(buf, pos, n)?)
        }
        0xdb => {
            let n = len32(buf, pos)?;
            Token::Str(take(buf, pos, n)?)
        }
        0xdc => Token::Array(len16(buf, pos)? as u32),
        0xdd => Token::Array(len32(buf, pos)? as u32),
        0xde => Token::Map(len16(buf, pos)? as u32),
        0xdf => Token::Map(len32(buf, pos)? as u32),
        0xe0..=0xff => Token::Int(m as i8 as i64),
    })
}

/// Skip one whole value (containers included) without building anything.
pub fn skip_value(buf: &[u8], pos: &mut usize) -> Result<(), Error> {
    // Items still to skip; a u64 cannot overflow from u32 lengths in a bounded input,
    // and every item consumes at least one byte, so this loop ends.
    let mut pending: u64 = 1;
    while pending > 0 {
        pending -= 1;
        match read_token(buf, pos)? {
            Token::Array(n) => pending += n as u64,
            Token::Map(n) => pending += 2 * n as u64,
            _ => {}
        }
        if pending > (buf.len() - *pos) as u64 {
            return Err(Error::Truncated);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::*;
    use super::*;

    #[test]
    fn round_trip_ints() {
        for v in [
            0i64,
            1,
            127,
            128,
            255,
            256,
            65535,
            65536,
            -1,
            -32,
            -33,
            -128,
            -129,
            i64::MIN,
            i64::MAX,
        ] {
            let mut b = Vec::new();
            write_int(&mut b, v);
            let mut p = 0;
            let t = read_token(&b, &mut p).unwrap();
            let got = match t {
                Token::Uint(u) => u as i64,
                Token::Int(i) => i,
                _ => panic!(),
            };
            assert_eq!(got, v);
            assert_eq!(p, b.len());
        }
    }

    #[test]
    fn truncated_is_error_never_panic() {
        let mut b = Vec::new();
        write_array_len(&mut b, 3);
        write_str(&mut b, "hello");
        write_bin(&mut b, &[1, 2, 3]);
        write_ext(&mut b, 1, &[1, 2, 3]);
        for cut in 0..b.len() {
            let mut p = 0;
            assert_eq!(skip_value(&b[..cut], &mut p), Err(Error::Truncated));
        }
        let mut p = 0;
        skip_value(&b, &mut p).unwrap();
        assert_eq!(p, b.len());
    }

    #[test]
    fn huge_declared_lengths() {
        let mut p = 0;
        assert_eq!(
            skip_value(&[0xdd, 0xff, 0xff, 0xff, 0xff], &mut p),
            Err(Error::Truncated)
        );
        let mut p = 0;
        assert_eq!(
            read_token(&[0xdb, 0xff, 0xff, 0xff, 0xff], &mut p),
            Err(Error::Truncated)
        );
        let mut p = 0;
        assert_eq!(read_token(&[0xc1], &mut p), Err(Error::BadMarker(0xc1)));
    }
}
