//! Binary column values -> Python objects, in the one pass over a DataRow.
//! A value whose bytes do not fit its type fails its request (not the stream).
//! Scalars and dates here; arrays, composites, ranges and hstore in
//! `containers`, geometric types and bit strings in `geometry`, inet/cidr in
//! `network`.

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::sync::GILOnceCell;
use pyo3::types::{
    PyBytes, PyDate, PyDateTime, PyDelta, PyString, PyTime, PyTuple, PyType, PyTzInfo,
};
use pyo3::IntoPyObjectExt;
use surge_proto::pgwire::types::{self as t, Kind};
use surge_proto::pgwire::Error;

use super::registry::Codec;
use super::{containers, geometry, network};

pub static DECIMAL: GILOnceCell<Py<PyType>> = GILOnceCell::new();
pub static UUID: GILOnceCell<Py<PyType>> = GILOnceCell::new();
static DATE: GILOnceCell<Py<PyType>> = GILOnceCell::new();
static DATETIME: GILOnceCell<Py<PyType>> = GILOnceCell::new();
static TIMEZONE: GILOnceCell<Py<PyType>> = GILOnceCell::new();

pub fn bad(e: Error) -> PyErr {
    PyValueError::new_err(e.to_string())
}

pub fn text(py: Python<'_>, b: &[u8]) -> PyResult<PyObject> {
    // The session's client_encoding is UTF8 (set at startup); a stray byte still
    // must not crash: it fails the value.
    let s = std::str::from_utf8(b).map_err(|_| PyValueError::new_err("text value is not UTF-8"))?;
    Ok(PyString::new(py, s).into_any().unbind())
}

/// `date.max`/`date.min` (or datetime's) for PostgreSQL's ±infinity, as asyncpg does.
fn infinity(
    py: Python<'_>,
    cls: &GILOnceCell<Py<PyType>>,
    name: &str,
    pos: bool,
) -> PyResult<PyObject> {
    let c = cls.import(py, "datetime", name)?;
    Ok(c.getattr(if pos { "max" } else { "min" })?.unbind())
}

fn date_obj(py: Python<'_>, days: i32) -> PyResult<PyObject> {
    if days == i32::MAX || days == i32::MIN {
        return infinity(py, &DATE, "date", days == i32::MAX);
    }
    let (y, m, d) = t::date_from_days(days);
    if !(1..=9999).contains(&y) {
        return Err(PyValueError::new_err(format!(
            "date year {y} is outside Python's range"
        )));
    }
    Ok(PyDate::new(py, y, m as u8, d as u8)?.into_any().unbind())
}

fn timestamp_obj(py: Python<'_>, us: i64, utc: bool) -> PyResult<PyObject> {
    if us == i64::MAX || us == i64::MIN {
        return infinity(py, &DATETIME, "datetime", us == i64::MAX);
    }
    let days = us.div_euclid(t::MICROS_PER_DAY);
    let rem = us.rem_euclid(t::MICROS_PER_DAY);
    let days = i32::try_from(days).map_err(|_| PyValueError::new_err("timestamp out of range"))?;
    let (y, m, d) = t::date_from_days(days);
    if !(1..=9999).contains(&y) {
        return Err(PyValueError::new_err(format!(
            "timestamp year {y} is outside Python's range"
        )));
    }
    let (h, mi, s, micro) = t::time_from_micros(rem).map_err(bad)?;
    let tz = if utc {
        Some(PyTzInfo::utc(py)?.to_owned())
    } else {
        None
    };
    Ok(PyDateTime::new(
        py,
        y,
        m as u8,
        d as u8,
        h as u8,
        mi as u8,
        s as u8,
        micro,
        tz.as_ref(),
    )?
    .into_any()
    .unbind())
}

/// Decode one non-NULL binary value with its statement-resolved codec.
pub fn decode(py: Python<'_>, c: &Codec, b: &[u8]) -> PyResult<PyObject> {
    match c {
        Codec::Scalar(k) => decode_kind(py, *k, b),
        Codec::Array { elem_oid, elem, .. } => containers::decode_array(py, *elem_oid, elem, b),
        Codec::Composite { oids, fields, desc } => {
            containers::decode_composite(py, oids, fields, desc, b)
        }
        Codec::Record(fields) => containers::decode_record(py, fields, b),
        Codec::Range(sub) => containers::decode_range(py, sub, b),
        Codec::Multirange(range) => containers::decode_multirange(py, range, b),
        Codec::Hstore => containers::decode_hstore(py, b),
        Codec::TextArray => containers::decode_text_array(py, b),
        Codec::Custom { custom, inner, .. } => custom.decode(py, inner.as_deref(), b),
    }
}

/// Decode one non-NULL binary value of a built-in scalar kind.
pub fn decode_kind(py: Python<'_>, kind: Kind, b: &[u8]) -> PyResult<PyObject> {
    Ok(match kind {
        Kind::Bool => t::decode_bool(b).map_err(bad)?.into_py_any(py)?,
        Kind::Int2 => t::decode_i16(b).map_err(bad)?.into_py_any(py)?,
        Kind::Int4 => t::decode_i32(b).map_err(bad)?.into_py_any(py)?,
        Kind::Int8 => t::decode_i64(b).map_err(bad)?.into_py_any(py)?,
        Kind::Uint4 => t::decode_u32(b).map_err(bad)?.into_py_any(py)?,
        Kind::Uint8 => t::decode_u64(b).map_err(bad)?.into_py_any(py)?,
        Kind::Float4 => f64::from(t::decode_f32(b).map_err(bad)?).into_py_any(py)?,
        Kind::Float8 => t::decode_f64(b).map_err(bad)?.into_py_any(py)?,
        Kind::Text | Kind::Json => text(py, b)?,
        Kind::Jsonb => text(py, t::decode_jsonb(b).map_err(bad)?)?,
        Kind::Jsonpath => text(py, t::decode_jsonpath(b).map_err(bad)?)?,
        // `"char"` is a byte, not a character: bytes, as asyncpg returns it.
        Kind::Bytea | Kind::Char => PyBytes::new(py, b).into_any().unbind(),
        Kind::Void => py.None(),
        Kind::Numeric => {
            let s = t::numeric_to_string(b).map_err(bad)?;
            DECIMAL
                .import(py, "decimal", "Decimal")?
                .call1((s,))?
                .unbind()
        }
        Kind::Uuid => {
            let raw = t::decode_uuid(b).map_err(bad)?;
            let kw = pyo3::types::PyDict::new(py);
            kw.set_item("bytes", PyBytes::new(py, &raw))?;
            UUID.import(py, "uuid", "UUID")?
                .call((), Some(&kw))?
                .unbind()
        }
        Kind::Date => date_obj(py, t::decode_i32(b).map_err(bad)?)?,
        Kind::Timestamp => timestamp_obj(py, t::decode_i64(b).map_err(bad)?, false)?,
        Kind::TimestampTz => timestamp_obj(py, t::decode_i64(b).map_err(bad)?, true)?,
        Kind::Time => time_obj(py, t::decode_i64(b).map_err(bad)?, None)?,
        Kind::TimeTz => {
            let (us, west) = t::decode_timetz(b).map_err(bad)?;
            // The offset is kept to the second (asyncpg rounds it to minutes,
            // which would change a zone like LMT's +00:01:15).
            let delta = PyDelta::new(py, 0, -west, 0, true)?;
            let tz = TIMEZONE
                .import(py, "datetime", "timezone")?
                .call1((delta,))?;
            time_obj(py, us, Some(tz.downcast_into::<PyTzInfo>()?))?
        }
        Kind::Interval => interval_obj(py, b)?,
        Kind::Inet | Kind::Cidr => network::decode_inet(py, kind == Kind::Cidr, b)?,
        Kind::MacAddr => text_owned(py, t::macaddr_to_string(b, 6).map_err(bad)?),
        Kind::MacAddr8 => text_owned(py, t::macaddr_to_string(b, 8).map_err(bad)?),
        Kind::Bit => geometry::decode_bits(py, b)?,
        k if k.is_geometric() => geometry::decode(py, k, b)?,
        Kind::Tid => t::decode_tid(b).map_err(bad)?.into_py_any(py)?,
        Kind::Snapshot => {
            let (xmin, xmax, xip) = t::decode_snapshot(b).map_err(bad)?;
            (xmin, xmax, PyTuple::new(py, xip)?).into_py_any(py)?
        }
        // Vector, Range, Multirange and Record are resolved into containers
        // before decoding (see `registry::resolve`); AsText columns come as text.
        _ => text(py, b)?,
    })
}

fn text_owned(py: Python<'_>, s: String) -> PyObject {
    PyString::new(py, &s).into_any().unbind()
}

fn time_obj(py: Python<'_>, us: i64, tz: Option<Bound<'_, PyTzInfo>>) -> PyResult<PyObject> {
    if us == t::MICROS_PER_DAY {
        // Never clamped to 23:59:59.999999: that would be another value.
        return Err(PyValueError::new_err(
            "time 24:00:00 has no datetime.time (hours stop at 23); \
             select it as text (::text) to keep it",
        ));
    }
    let (h, m, s, us) = t::time_from_micros(us).map_err(bad)?;
    Ok(PyTime::new(py, h as u8, m as u8, s as u8, us, tz.as_ref())?
        .into_any()
        .unbind())
}

fn interval_obj(py: Python<'_>, b: &[u8]) -> PyResult<PyObject> {
    let iv = t::decode_interval(b).map_err(bad)?;
    // Python has no months: a year is 365 days and a month 30, as asyncpg
    // counts them (both truncate toward zero, so '-13 mons' is -395 days).
    let days = i64::from(iv.days)
        + i64::from(iv.months / 12) * 365
        + i64::from(iv.months % 12) * 30
        + iv.micros.div_euclid(t::MICROS_PER_DAY);
    let rem = iv.micros.rem_euclid(t::MICROS_PER_DAY);
    let days = i32::try_from(days).map_err(|_| PyValueError::new_err("interval out of range"))?;
    Ok(PyDelta::new(
        py,
        days,
        (rem / 1_000_000) as i32,
        (rem % 1_000_000) as i32,
        true,
    )?
    .into_any()
    .unbind())
}

/// A text-format value (columns of types without a binary codec): str.
pub fn decode_text(py: Python<'_>, b: &[u8]) -> PyResult<PyObject> {
    text(py, b)
}
