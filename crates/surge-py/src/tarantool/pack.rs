//! Python objects -> MessagePack, straight into a byte buffer.

use pyo3::exceptions::{PyOverflowError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::sync::GILOnceCell;
use pyo3::types::{
    PyBool, PyByteArray, PyBytes, PyDateTime, PyDict, PyFloat, PyInt, PyList, PyMemoryView,
    PyString, PyTuple, PyType,
};
use surge_proto::msgpack::{self as mp, ext};

use crate::pydatetime::{PyDateAccess, PyTimeAccess};

use super::tuple::Tuple;

pub(crate) static DECIMAL: GILOnceCell<Py<PyType>> = GILOnceCell::new();
pub(crate) static UUID: GILOnceCell<Py<PyType>> = GILOnceCell::new();
pub(crate) static INTERVAL: GILOnceCell<Py<PyType>> = GILOnceCell::new();

pub(crate) const TYPES_MODULE: &str = "surge.tarantool.types";

/// Append `obj` as MessagePack; on error `buf` may hold a partial value (callers truncate).
pub fn pack(buf: &mut Vec<u8>, obj: &Bound<'_, PyAny>) -> PyResult<()> {
    pack_depth(buf, obj, 0)
}

fn too_deep() -> PyErr {
    PyValueError::new_err(format!(
        "cannot encode to msgpack: nesting deeper than {}",
        ext::MAX_DEPTH
    ))
}

fn pack_depth(buf: &mut Vec<u8>, obj: &Bound<'_, PyAny>, depth: usize) -> PyResult<()> {
    if depth > ext::MAX_DEPTH {
        return Err(too_deep());
    }
    // Exact ints, lists and tuples first: a request's keys, tuples and update
    // operations are mostly these, and each test is a type pointer compare
    // (the subclass checks below are calls into the interpreter under abi3,
    // ~100 instructions for a one-int key that passed them all). An exact int
    // is never a bool.
    if obj.downcast_exact::<PyInt>().is_ok() {
        pack_int(buf, obj)?;
    } else if let Ok(l) = obj.downcast_exact::<PyList>() {
        pack_items(buf, l.len(), l.iter(), depth)?;
    } else if let Ok(t) = obj.downcast_exact::<PyTuple>() {
        pack_items(buf, t.len(), t.iter(), depth)?;
    } else if obj.is_none() {
        mp::write_nil(buf);
    } else if let Ok(s) = obj.downcast_exact::<PyString>() {
        mp::write_str(buf, s.to_str()?);
    } else if let Ok(b) = obj.downcast_exact::<PyBool>() {
        mp::write_bool(buf, b.is_true());
    } else if obj.is_instance_of::<PyInt>() && !obj.is_instance_of::<PyBool>() {
        pack_int(buf, obj)?;
    } else if let Ok(b) = obj.downcast::<PyBool>() {
        mp::write_bool(buf, b.is_true());
    } else if let Ok(f) = obj.downcast::<PyFloat>() {
        mp::write_f64(buf, f.value());
    } else if let Ok(s) = obj.downcast::<PyString>() {
        mp::write_str(buf, s.to_str()?);
    } else if let Ok(t) = obj.downcast::<PyTuple>() {
        pack_items(buf, t.len(), t.iter(), depth)?;
    } else if let Ok(l) = obj.downcast::<PyList>() {
        pack_items(buf, l.len(), l.iter(), depth)?;
    } else if let Ok(d) = obj.downcast::<PyDict>() {
        mp::write_map_len(buf, d.len());
        for (k, v) in d.iter() {
            pack_depth(buf, &k, depth + 1)?;
            pack_depth(buf, &v, depth + 1)?;
        }
    } else if let Ok(b) = obj.downcast::<PyBytes>() {
        mp::write_bin(buf, b.as_bytes());
    } else if let Ok(b) = obj.downcast::<PyByteArray>() {
        mp::write_bin(buf, &b.to_vec());
    } else if obj.is_instance_of::<PyMemoryView>() {
        let b = obj.call_method0("tobytes")?;
        mp::write_bin(buf, b.downcast::<PyBytes>()?.as_bytes());
    } else if let Ok(t) = obj.downcast::<Tuple>() {
        let items = t.get().items.bind(obj.py());
        pack_items(buf, items.len(), items.iter(), depth)?;
    } else if let Ok(dt) = obj.downcast::<PyDateTime>() {
        pack_datetime(buf, dt)?;
    } else {
        pack_ext(buf, obj)?;
    }
    Ok(())
}

/// An array of `len` items, at nesting `depth`.
fn pack_items<'py>(
    buf: &mut Vec<u8>,
    len: usize,
    items: impl Iterator<Item = Bound<'py, PyAny>>,
    depth: usize,
) -> PyResult<()> {
    mp::write_array_len(buf, len);
    for item in items {
        pack_depth(buf, &item, depth + 1)?;
    }
    Ok(())
}

fn pack_int(buf: &mut Vec<u8>, obj: &Bound<'_, PyAny>) -> PyResult<()> {
    if let Ok(v) = obj.extract::<i64>() {
        mp::write_int(buf, v);
    } else if let Ok(v) = obj.extract::<u64>() {
        mp::write_uint(buf, v);
    } else {
        return Err(PyOverflowError::new_err(
            "int out of MessagePack range (-2**63 .. 2**64-1)",
        ));
    }
    Ok(())
}

fn pack_ext(buf: &mut Vec<u8>, obj: &Bound<'_, PyAny>) -> PyResult<()> {
    let py = obj.py();
    if obj.is_instance(DECIMAL.import(py, "decimal", "Decimal")?)? {
        return pack_decimal(buf, obj);
    }
    if obj.is_instance(UUID.import(py, "uuid", "UUID")?)? {
        let b = obj.getattr("bytes")?;
        let b = b.downcast::<PyBytes>()?;
        mp::write_ext(buf, ext::EXT_UUID, b.as_bytes());
        return Ok(());
    }
    if obj.is_instance(INTERVAL.import(py, TYPES_MODULE, "Interval")?)? {
        let mut iv = ext::Interval::default();
        for (i, name) in ext::INTERVAL_FIELDS.iter().enumerate() {
            iv.fields[i] = obj.getattr(*name)?.extract::<i64>()?;
        }
        ext::encode_interval(buf, &iv);
        return Ok(());
    }
    Err(PyTypeError::new_err(format!(
        "cannot encode object of type {} to msgpack",
        obj.get_type().name()?
    )))
}

fn pack_decimal(buf: &mut Vec<u8>, obj: &Bound<'_, PyAny>) -> PyResult<()> {
    let t = obj.call_method0("as_tuple")?;
    let (sign, digits, exponent): (u8, Vec<u8>, Bound<'_, PyAny>) = t.extract()?;
    let Ok(exponent) = exponent.extract::<i64>() else {
        return Err(PyValueError::new_err(
            "cannot encode a NaN or infinite Decimal to Tarantool",
        ));
    };
    let mut digits = digits;
    let first = digits.iter().position(|&d| d != 0).unwrap_or(digits.len());
    digits.drain(..first);
    let d = ext::Decimal {
        negative: sign == 1,
        digits,
        scale: -exponent,
    };
    ext::encode_decimal(buf, &d).map_err(|_| {
        PyValueError::new_err(format!(
            "Decimal has more than {} digits, Tarantool's limit",
            ext::DECIMAL_MAX_DIGITS
        ))
    })
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = if y >= 0 { y } else { y - 399 } / 400;
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146097 + doe - 719468
}

fn pack_datetime(buf: &mut Vec<u8>, dt: &Bound<'_, PyDateTime>) -> PyResult<()> {
    // Naive datetimes are taken as UTC, as Tarantool's own datetime.new() does.
    let offset_min: i64 = match dt.call_method0("utcoffset")? {
        o if o.is_none() => 0,
        o => {
            let secs: f64 = o.call_method0("total_seconds")?.extract()?;
            (secs / 60.0).round() as i64
        }
    };
    let days = days_from_civil(
        dt.get_year() as i64,
        dt.get_month() as i64,
        dt.get_day() as i64,
    );
    let local = days * 86400
        + dt.get_hour() as i64 * 3600
        + dt.get_minute() as i64 * 60
        + dt.get_second() as i64;
    let d = ext::Datetime {
        seconds: local - offset_min * 60,
        nsec: dt.get_microsecond() as i32 * 1000,
        tzoffset: offset_min as i16,
        tzindex: 0,
    };
    ext::encode_datetime(buf, &d);
    Ok(())
}
