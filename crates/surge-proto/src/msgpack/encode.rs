//! Writers: each appends one MessagePack item to `buf` in its shortest form.

#[inline]
pub fn write_nil(buf: &mut Vec<u8>) {
    buf.push(0xc0);
}

#[inline]
pub fn write_bool(buf: &mut Vec<u8>, v: bool) {
    buf.push(if v { 0xc3 } else { 0xc2 });
}

// Always inlined: a request header and body are a dozen uints, most one byte
// long (~18 instructions a call as a function, ~half inlined).
#[inline(always)]
pub fn write_uint(buf: &mut Vec<u8>, v: u64) {
    if v < 128 {
        buf.push(v as u8);
    } else if v <= u8::MAX as u64 {
        buf.extend_from_slice(&[0xcc, v as u8]);
    } else if v <= u16::MAX as u64 {
        buf.push(0xcd);
        buf.extend_from_slice(&(v as u16).to_be_bytes());
    } else if v <= u32::MAX as u64 {
        buf.push(0xce);
        buf.extend_from_slice(&(v as u32).to_be_bytes());
    } else {
        buf.push(0xcf);
        buf.extend_from_slice(&v.to_be_bytes());
    }
}

#[inline]
pub fn write_int(buf: &mut Vec<u8>, v: i64) {
    if v >= 0 {
        write_uint(buf, v as u64);
    } else if v >= -32 {
        buf.push(v as i8 as u8);
    } else if v >= i8::MIN as i64 {
        buf.extend_from_slice(&[0xd0, v as i8 as u8]);
    } else if v >= i16::MIN as i64 {
        buf.push(0xd1);
        buf.extend_from_slice(&(v as i16).to_be_bytes());
    } else if v >= i32::MIN as i64 {
        buf.push(0xd2);
        buf.extend_from_slice(&(v as i32).to_be_bytes());
    } else {
        buf.push(0xd3);
        buf.extend_from_slice(&v.to_be_bytes());
    }
}

#[inline]
pub fn write_f64(buf: &mut Vec<u8>, v: f64) {
    buf.push(0xcb);
    buf.extend_from_slice(&v.to_be_bytes());
}

#[inline]
fn write_len(
    buf: &mut Vec<u8>,
    len: usize,
    fix: Option<(u8, usize)>,
    m8: Option<u8>,
    m16: u8,
    m32: u8,
) {
    match fix {
        Some((base, max)) if len <= max => buf.push(base | len as u8),
        _ => match m8 {
            Some(m) if len <= u8::MAX as usize => buf.extend_from_slice(&[m, len as u8]),
            _ if len <= u16::MAX as usize => {
                buf.push(m16);
                buf.extend_from_slice(&(len as u16).to_be_bytes());
            }
            _ => {
                buf.push(m32);
                buf.extend_from_slice(&(len as u32).to_be_bytes());
            }
        },
    }
}

#[inline]
pub fn write_str_header(buf: &mut Vec<u8>, len: usize) {
    write_len(buf, len, Some((0xa0, 31)), Some(0xd9), 0xda, 0xdb);
}

#[inline]
pub fn write_str(buf: &mut Vec<u8>, s: &str) {
    write_str_header(buf, s.len());
    buf.extend_from_slice(s.as_bytes());
}

#[inline]
pub fn write_bin(buf: &mut Vec<u8>, b: &[u8]) {
    write_len(buf, b.len(), None, Some(0xc4), 0xc5, 0xc6);
    buf.extend_from_slice(b);
}

#[inline]
pub fn write_array_len(buf: &mut Vec<u8>, len: usize) {
    write_len(buf, len, Some((0x90, 15)), None, 0xdc, 0xdd);
}

#[inline]
pub fn write_map_len(buf: &mut Vec<u8>, len: usize) {
    write_len(buf, len, Some((0x80, 15)), None, 0xde, 0xdf);
}

/// An extension value: fixext for payloads of 1, 2, 4, 8, 16 bytes, ext 8/16/32 otherwise.
pub fn write_ext(buf: &mut Vec<u8>, ty: i8, data: &[u8]) {
    let fix = match data.len() {
        1 => Some(0xd4),
        2 => Some(0xd5),
        4 => Some(0xd6),
        8 => Some(0xd7),
        16 => Some(0xd8),
        _ => None,
    };
    match fix {
        Some(m) => buf.push(m),
        None => write_len(buf, data.len(), None, Some(0xc7), 0xc8, 0xc9),
    }
    buf.push(ty as u8);
    buf.extend_from_slice(data);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shortest_forms() {
        let cases: &[(i64, &[u8])] = &[
            (0, &[0x00]),
            (127, &[0x7f]),
            (128, &[0xcc, 0x80]),
            (256, &[0xcd, 0x01, 0x00]),
            (65536, &[0xce, 0, 1, 0, 0]),
            (-1, &[0xff]),
            (-32, &[0xe0]),
            (-33, &[0xd0, 0xdf]),
            (-129, &[0xd1, 0xff, 0x7f]),
            (i64::MIN, &[0xd3, 0x80, 0, 0, 0, 0, 0, 0, 0]),
        ];
        for (v, want) in cases {
            let mut b = Vec::new();
            write_int(&mut b, *v);
            assert_eq!(&b[..], *want, "{v}");
        }
        let mut b = Vec::new();
        write_str(&mut b, &"x".repeat(32));
        assert_eq!(&b[..2], &[0xd9, 32]);
        b.clear();
        write_array_len(&mut b, 16);
        assert_eq!(&b[..], &[0xdc, 0, 16]);
        b.clear();
        write_ext(&mut b, 2, &[0; 16]);
        assert_eq!(&b[..2], &[0xd8, 2]);
    }
}
