//! Dates, times and intervals. Dates count days and timestamps microseconds
//! from 2000-01-01 (PostgreSQL's epoch); `i32::MAX`/`i32::MIN`
//! (`i64::MAX`/`i64::MIN`) stand for ±infinity.

use super::scalar::{decode_i32, decode_i64};
use crate::pgwire::Error;

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

/// timetz: microseconds since midnight and the zone's offset in seconds WEST
/// of UTC (so UTC+02:00 is -7200), PostgreSQL's sign.
pub fn decode_timetz(b: &[u8]) -> Result<(i64, i32), Error> {
    if b.len() != 12 {
        return Err(Error::BadValue("timetz"));
    }
    Ok((decode_i64(&b[..8])?, decode_i32(&b[8..])?))
}

pub fn encode_timetz(buf: &mut Vec<u8>, micros: i64, west_offset: i32) {
    buf.extend_from_slice(&micros.to_be_bytes());
    buf.extend_from_slice(&west_offset.to_be_bytes());
}
