//! numeric: base-10000 digits with a weight, a sign and a display scale,
//! to and from decimal text (the extension turns the text into a Decimal).

use super::scalar::decode_i16;
use crate::pgwire::Error;

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
