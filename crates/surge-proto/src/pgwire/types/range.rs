//! Ranges (a flags byte, then the bounds present, each length-prefixed) and
//! multiranges (a count, then length-prefixed ranges).

use super::reader::Reader;
use crate::pgwire::Error;

pub const RANGE_EMPTY: u8 = 0x01;
pub const RANGE_LB_INC: u8 = 0x02;
pub const RANGE_UB_INC: u8 = 0x04;
pub const RANGE_LB_INF: u8 = 0x08;
pub const RANGE_UB_INF: u8 = 0x10;

/// A range's parts; a bound is `None` when infinite (or the range is empty).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RangeParts<'a> {
    pub empty: bool,
    pub lower: Option<&'a [u8]>,
    pub upper: Option<&'a [u8]>,
    pub lower_inc: bool,
    pub upper_inc: bool,
}

pub fn decode_range(b: &[u8]) -> Result<RangeParts<'_>, Error> {
    let mut r = Reader::new(b, "range");
    let flags = r.u8()?;
    let empty = flags & RANGE_EMPTY != 0;
    let mut bound = |present: bool| -> Result<Option<&[u8]>, Error> {
        if !present {
            return Ok(None);
        }
        match r.field()? {
            Some(v) => Ok(Some(v)),
            None => Err(Error::BadValue("range")),
        }
    };
    let lower = bound(!empty && flags & RANGE_LB_INF == 0)?;
    let upper = bound(!empty && flags & RANGE_UB_INF == 0)?;
    r.finish()?;
    Ok(RangeParts {
        empty,
        lower,
        upper,
        lower_inc: flags & RANGE_LB_INC != 0,
        upper_inc: flags & RANGE_UB_INC != 0,
    })
}

/// The flags byte of a range with these bounds (`has_*`: the bound is finite).
pub fn range_flags(
    empty: bool,
    has_lower: bool,
    has_upper: bool,
    lower_inc: bool,
    upper_inc: bool,
) -> u8 {
    if empty {
        return RANGE_EMPTY;
    }
    let mut f = 0;
    if has_lower {
        if lower_inc {
            f |= RANGE_LB_INC;
        }
    } else {
        f |= RANGE_LB_INF;
    }
    if has_upper {
        if upper_inc {
            f |= RANGE_UB_INC;
        }
    } else {
        f |= RANGE_UB_INF;
    }
    f
}

/// A multirange's ranges (each still in its binary form).
pub fn decode_multirange(b: &[u8]) -> Result<Vec<&[u8]>, Error> {
    let mut r = Reader::new(b, "multirange");
    let n = r.count(5)?;
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        match r.field()? {
            Some(v) => out.push(v),
            None => return Err(r.bad()),
        }
    }
    r.finish()?;
    Ok(out)
}
