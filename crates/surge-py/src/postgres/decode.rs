//! Binary column values -> Python objects, in the one pass over a DataRow.
//! A value whose bytes do not fit its type fails its request (not the stream).

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::sync::GILOnceCell;
use pyo3::types::{
    PyBytes, PyDate, PyDateTime, PyDelta, PyList, PyString, PyTime, PyType, PyTzInfo,
};
use pyo3::IntoPyObjectExt;
use surge_proto::pgwire::types::{self as t, oid};
use surge_proto::pgwire::Error;

pub static DECIMAL: GILOnceCell<Py<PyType>> = GILOnceCell::new();
pub static UUID: GILOnceCell<Py<PyType>> = GILOnceCell::new();
static DATE: GILOnceCell<Py<PyType>> = GILOnceCell::new();
static DATETIME: GILOnceCell<Py<PyType>> = GILOnceCell::new();

fn bad(e: Error) -> PyErr {
    PyValueError::new_err(e.to_string())
}

fn text(py: Python<'_>, b: &[u8]) -> PyResult<PyObject> {
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

/// Decode one non-NULL binary value of type `type_oid`.
pub fn decode(py: Python<'_>, type_oid: u32, b: &[u8]) -> PyResult<PyObject> {
    Ok(match type_oid {
        oid::BOOL => t::decode_bool(b).map_err(bad)?.into_py_any(py)?,
        oid::INT2 => t::decode_i16(b).map_err(bad)?.into_py_any(py)?,
        oid::INT4 => t::decode_i32(b).map_err(bad)?.into_py_any(py)?,
        oid::INT8 => t::decode_i64(b).map_err(bad)?.into_py_any(py)?,
        oid::OID => t::decode_u32(b).map_err(bad)?.into_py_any(py)?,
        oid::FLOAT4 => f64::from(t::decode_f32(b).map_err(bad)?).into_py_any(py)?,
        oid::FLOAT8 => t::decode_f64(b).map_err(bad)?.into_py_any(py)?,
        oid::TEXT | oid::VARCHAR | oid::NAME | oid::BPCHAR | oid::UNKNOWN | oid::JSON => {
            text(py, b)?
        }
        oid::JSONB => text(py, t::decode_jsonb(b).map_err(bad)?)?,
        // `"char"` is a byte, not a character: bytes, as asyncpg returns it.
        oid::BYTEA | oid::CHAR => PyBytes::new(py, b).into_any().unbind(),
        oid::VOID => py.None(),
        oid::NUMERIC => {
            let s = t::numeric_to_string(b).map_err(bad)?;
            DECIMAL
                .import(py, "decimal", "Decimal")?
                .call1((s,))?
                .unbind()
        }
        oid::UUID => {
            let raw = t::decode_uuid(b).map_err(bad)?;
            let kw = pyo3::types::PyDict::new(py);
            kw.set_item("bytes", PyBytes::new(py, &raw))?;
            UUID.import(py, "uuid", "UUID")?
                .call((), Some(&kw))?
                .unbind()
        }
        oid::DATE => date_obj(py, t::decode_i32(b).map_err(bad)?)?,
        oid::TIMESTAMP => timestamp_obj(py, t::decode_i64(b).map_err(bad)?, false)?,
        oid::TIMESTAMPTZ => timestamp_obj(py, t::decode_i64(b).map_err(bad)?, true)?,
        oid::TIME => {
            let us = t::decode_i64(b).map_err(bad)?;
            if us == t::MICROS_PER_DAY {
                // Never clamped to 23:59:59.999999: that would be another value.
                return Err(PyValueError::new_err(
                    "time 24:00:00 has no datetime.time (hours stop at 23); \
                     select it as text (::text) to keep it",
                ));
            }
            let (h, m, s, us) = t::time_from_micros(us).map_err(bad)?;
            PyTime::new(py, h as u8, m as u8, s as u8, us, None)?
                .into_any()
                .unbind()
        }
        oid::INTERVAL => {
            let iv = t::decode_interval(b).map_err(bad)?;
            // Python has no months: a year is 365 days and a month 30, as asyncpg
            // counts them (both truncate toward zero, so '-13 mons' is -395 days).
            let days = i64::from(iv.days)
                + i64::from(iv.months / 12) * 365
                + i64::from(iv.months % 12) * 30
                + iv.micros.div_euclid(t::MICROS_PER_DAY);
            let rem = iv.micros.rem_euclid(t::MICROS_PER_DAY);
            let days =
                i32::try_from(days).map_err(|_| PyValueError::new_err("interval out of range"))?;
            PyDelta::new(
                py,
                days,
                (rem / 1_000_000) as i32,
                (rem % 1_000_000) as i32,
                true,
            )?
            .into_any()
            .unbind()
        }
        other => match oid::element_of(other) {
            Some(elem) => decode_array(py, elem, b)?,
            // Types without a binary codec here are asked for in text.
            None => text(py, b)?,
        },
    })
}

/// An array as (nested) lists; lower bounds are not kept (as in asyncpg's lists).
fn decode_array(py: Python<'_>, elem: u32, b: &[u8]) -> PyResult<PyObject> {
    let (h, rest) = t::decode_array_header(b).map_err(bad)?;
    if h.element_oid != elem {
        return Err(bad(Error::BadValue("array element type")));
    }
    let els = t::array_elements(rest, h.element_count()).map_err(bad)?;
    if h.dims.is_empty() {
        return Ok(PyList::empty(py).into_any().unbind());
    }
    let mut flat = Vec::with_capacity(els.len());
    for e in els {
        flat.push(match e {
            None => py.None(),
            Some(v) => decode(py, elem, v)?,
        });
    }
    // Fold the innermost dimension first.
    let mut level = flat;
    for &(n, _) in h.dims.iter().skip(1).rev() {
        let n = n as usize;
        let mut next = Vec::with_capacity(level.len() / n.max(1));
        for chunk in level.chunks(n.max(1)) {
            next.push(
                PyList::new(py, chunk.iter().map(|o| o.clone_ref(py)))?
                    .into_any()
                    .unbind(),
            );
        }
        level = next;
    }
    Ok(PyList::new(py, level)?.into_any().unbind())
}

/// A text-format value (columns of types without a binary codec): str.
pub fn decode_text(py: Python<'_>, b: &[u8]) -> PyResult<PyObject> {
    text(py, b)
}
