//! Custom codecs (`Connection.set_type_codec`), in asyncpg's three formats:
//!
//! * `text`: the encoder returns str, the decoder takes str (the type's text
//!   form on the wire);
//! * `binary`: the encoder returns bytes, the decoder takes bytes (the type's
//!   binary form on the wire, untouched);
//! * `tuple`: the binary form taken apart into a tuple of ints (or a
//!   composite's fields), asyncpg's layouts: date `(days from 2000-01-01,)`,
//!   timestamp and timestamptz `(microseconds from 2000-01-01,)`, time
//!   `(microseconds,)`, timetz `(microseconds, offset in seconds west of UTC)`,
//!   interval `(months, days, microseconds)`, a composite its field values (a
//!   `Record` when decoded, as asyncpg's; any sequence when encoded).
//!   ±infinity are the integer limits, as on the wire.

use std::collections::HashMap;
use std::sync::Arc;

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyByteArray, PyBytes, PyList, PyMemoryView, PyString, PyTuple};
use surge_proto::pgwire::frontend::{Param, FORMAT_BINARY, FORMAT_TEXT};
use surge_proto::pgwire::types::{self as t, Kind};

use super::decode::{bad, decode, decode_text};
use super::encode::Encoder;
use super::registry::Codec;

/// How a custom codec's callables see values (asyncpg's `format=`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Text,
    Binary,
    Tuple,
}

impl Format {
    pub fn parse(s: &str) -> PyResult<Format> {
        match s {
            "text" => Ok(Format::Text),
            "binary" => Ok(Format::Binary),
            "tuple" => Ok(Format::Tuple),
            _ => Err(PyValueError::new_err(format!(
                "format must be 'text', 'binary' or 'tuple', not {s:?}"
            ))),
        }
    }
}

/// One type's custom codec.
pub struct Custom {
    pub encoder: PyObject,
    pub decoder: PyObject,
    pub format: Format,
}

/// A connection's custom codecs, by type oid.
pub type CustomMap = HashMap<u32, Arc<Custom>>;

/// True when `kind` has a tuple layout (composites have one too).
pub fn tuple_kind(kind: Kind) -> bool {
    matches!(
        kind,
        Kind::Date
            | Kind::Timestamp
            | Kind::TimestampTz
            | Kind::Time
            | Kind::TimeTz
            | Kind::Interval
    )
}

impl Custom {
    /// The wire format of the values this codec sees.
    pub fn wire_format(&self) -> i16 {
        match self.format {
            Format::Text => FORMAT_TEXT,
            Format::Binary | Format::Tuple => FORMAT_BINARY,
        }
    }

    /// A column value (not NULL) through the decoder; `codec` is the type's
    /// built-in codec (needed by the tuple format).
    pub fn decode(&self, py: Python<'_>, codec: Option<&Codec>, b: &[u8]) -> PyResult<PyObject> {
        let arg = match self.format {
            Format::Text => decode_text(py, b)?,
            Format::Binary => PyBytes::new(py, b).into_any().unbind(),
            Format::Tuple => to_tuple(py, codec, b)?,
        };
        Ok(self.decoder.bind(py).call1((arg,))?.unbind())
    }

    /// A parameter (not None) through the encoder, appended to `buf`.
    pub fn encode<'py>(
        &self,
        enc: &Encoder<'_, 'py>,
        type_oid: u32,
        codec: Option<&Codec>,
        v: &Bound<'py, PyAny>,
        buf: &mut Vec<u8>,
    ) -> PyResult<Param> {
        let out = self.encoder.bind(enc.py).call1((v,))?;
        match self.format {
            Format::Text => {
                let s = out
                    .downcast::<PyString>()
                    .map_err(|_| PyTypeError::new_err("a text-format encoder must return str"))?;
                buf.extend_from_slice(s.to_str()?.as_bytes());
            }
            Format::Binary => {
                if let Ok(b) = out.downcast::<PyBytes>() {
                    buf.extend_from_slice(b.as_bytes());
                } else if let Ok(b) = out.downcast::<PyByteArray>() {
                    buf.extend_from_slice(&b.to_vec());
                } else if out.is_instance_of::<PyMemoryView>() {
                    let b = out.call_method0("tobytes")?;
                    buf.extend_from_slice(b.downcast::<PyBytes>()?.as_bytes());
                } else {
                    return Err(PyTypeError::new_err(
                        "a binary-format encoder must return bytes",
                    ));
                }
            }
            Format::Tuple => from_tuple(enc, type_oid, codec, &out, buf)?,
        }
        Ok(Param::Value)
    }
}

fn to_tuple(py: Python<'_>, codec: Option<&Codec>, b: &[u8]) -> PyResult<PyObject> {
    let t = match codec {
        Some(Codec::Scalar(k)) => match k {
            Kind::Date => (t::decode_i32(b).map_err(bad)?,).into_pyobject(py)?,
            Kind::Timestamp | Kind::TimestampTz | Kind::Time => {
                (t::decode_i64(b).map_err(bad)?,).into_pyobject(py)?
            }
            Kind::TimeTz => t::decode_timetz(b).map_err(bad)?.into_pyobject(py)?,
            Kind::Interval => {
                let iv = t::decode_interval(b).map_err(bad)?;
                (iv.months, iv.days, iv.micros).into_pyobject(py)?
            }
            _ => return Err(no_tuple()),
        },
        // The fields as a Record, as asyncpg hands them: a decoder may read them
        // by name (`t["a"]`) as well as by position.
        Some(c @ Codec::Composite { .. }) => return decode(py, c, b),
        _ => return Err(no_tuple()),
    };
    Ok(t.into_any().unbind())
}

fn no_tuple() -> PyErr {
    PyValueError::new_err("the type has no tuple format")
}

fn int_at<'py, T: FromPyObject<'py>>(tup: &Bound<'py, PyTuple>, i: usize) -> PyResult<T> {
    tup.get_item(i)?
        .extract()
        .map_err(|_| PyTypeError::new_err(format!("tuple item {i} must be an int in range")))
}

fn from_tuple<'py>(
    enc: &Encoder<'_, 'py>,
    type_oid: u32,
    codec: Option<&Codec>,
    out: &Bound<'py, PyAny>,
    buf: &mut Vec<u8>,
) -> PyResult<()> {
    if let Some(c @ Codec::Composite { .. }) = codec {
        enc.encode_with(type_oid, c, out, buf)?;
        return Ok(());
    }
    let tup = out
        .downcast::<PyTuple>()
        .map_err(|_| PyTypeError::new_err("a tuple-format encoder must return a tuple"))?;
    let kind = match codec {
        Some(Codec::Scalar(k)) if tuple_kind(*k) => *k,
        _ => return Err(no_tuple()),
    };
    let want = match kind {
        Kind::TimeTz => 2,
        Kind::Interval => 3,
        _ => 1,
    };
    if tup.len() != want {
        return Err(PyValueError::new_err(format!(
            "a tuple of {want} item(s) expected, got {}",
            tup.len()
        )));
    }
    match kind {
        Kind::Date => buf.extend_from_slice(&int_at::<i32>(tup, 0)?.to_be_bytes()),
        Kind::TimeTz => t::encode_timetz(buf, int_at(tup, 0)?, int_at(tup, 1)?),
        Kind::Interval => t::encode_interval(
            buf,
            t::Interval {
                months: int_at(tup, 0)?,
                days: int_at(tup, 1)?,
                micros: int_at(tup, 2)?,
            },
        ),
        _ => buf.extend_from_slice(&int_at::<i64>(tup, 0)?.to_be_bytes()),
    }
    Ok(())
}

/// An array value's elements (lists or tuples nested for more dimensions)
/// through `f` (a custom codec's encoder or decoder); None elements stay None.
pub fn map_elements(py: Python<'_>, v: &Bound<'_, PyAny>, f: &PyObject) -> PyResult<PyObject> {
    if v.is_instance_of::<PyList>() || v.is_instance_of::<PyTuple>() {
        let out = PyList::empty(py);
        for item in v.try_iter()? {
            out.append(map_elements(py, &item?, f)?)?;
        }
        return Ok(out.into_any().unbind());
    }
    if v.is_none() {
        return Ok(py.None());
    }
    f.call1(py, (v,))
}
