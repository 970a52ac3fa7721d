//! Geometric types: float8 coordinates, big-endian. point (x, y); line
//! {A, B, C} of Ax + By + C = 0; lseg and box two points (a box's upper-right
//! corner first); path a closed flag, a count and points; polygon a count and
//! points; circle a center and a radius.

use super::reader::Reader;
use crate::pgwire::Error;

/// `n` float8 values (a point, line, lseg, box or circle).
pub fn decode_floats<const N: usize>(b: &[u8], what: &'static str) -> Result<[f64; N], Error> {
    let mut r = Reader::new(b, what);
    let mut out = [0.0; N];
    for v in &mut out {
        *v = r.f64()?;
    }
    r.finish()?;
    Ok(out)
}

pub fn encode_floats(buf: &mut Vec<u8>, values: &[f64]) {
    for v in values {
        buf.extend_from_slice(&v.to_be_bytes());
    }
}

/// A path: whether it is closed, and its points.
pub fn decode_path(b: &[u8]) -> Result<(bool, Vec<(f64, f64)>), Error> {
    let mut r = Reader::new(b, "path");
    let closed = match r.u8()? {
        0 => false,
        1 => true,
        _ => return Err(r.bad()),
    };
    let pts = points(&mut r)?;
    r.finish()?;
    Ok((closed, pts))
}

/// A polygon's points.
pub fn decode_polygon(b: &[u8]) -> Result<Vec<(f64, f64)>, Error> {
    let mut r = Reader::new(b, "polygon");
    let pts = points(&mut r)?;
    r.finish()?;
    Ok(pts)
}

fn points(r: &mut Reader<'_>) -> Result<Vec<(f64, f64)>, Error> {
    let n = r.count(16)?;
    (0..n).map(|_| Ok((r.f64()?, r.f64()?))).collect()
}

pub fn encode_path(buf: &mut Vec<u8>, closed: bool, pts: &[(f64, f64)]) {
    buf.push(u8::from(closed));
    encode_polygon(buf, pts);
}

pub fn encode_polygon(buf: &mut Vec<u8>, pts: &[(f64, f64)]) {
    buf.extend_from_slice(&(pts.len() as i32).to_be_bytes());
    for (x, y) in pts {
        encode_floats(buf, &[*x, *y]);
    }
}
