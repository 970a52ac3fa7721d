//! Python arguments -> binary parameter values, by the type the server
//! inferred for each parameter (ParameterDescription). A value that does not
//! fit its type raises the driver's DataError before anything is sent.

use pyo3::prelude::*;
use pyo3::sync::GILOnceCell;
use pyo3::types::{
    PyBool, PyByteArray, PyBytes, PyDate, PyDateTime, PyDelta, PyFloat, PyInt, PyMemoryView,
    PyString, PyTime, PyType,
};
use surge_proto::pgwire::frontend::Param;
use surge_proto::pgwire::types::{self as t, Kind};

use super::registry::Codec;
use crate::pydatetime::{PyDateAccess, PyDeltaAccess, PyTimeAccess};

use super::decode::{DECIMAL, UUID};

static JSON_DUMPS: GILOnceCell<PyObject> = GILOnceCell::new();

/// `datetime.max` and `datetime.min` in microseconds from 2000-01-01: the values
/// ±infinity decode to, so they are written back as ±infinity (as asyncpg).
const TIMESTAMP_MAX: i64 = 252_455_615_999_999_999;
const TIMESTAMP_MIN: i64 = -63_082_281_600_000_000;

/// Encodes one statement's arguments; `err` is the DataError class.
pub struct Encoder<'a, 'py> {
    pub py: Python<'py>,
    pub err: &'a Bound<'py, PyType>,
}

impl<'py> Encoder<'_, 'py> {
    pub fn fail(&self, what: String) -> PyErr {
        PyErr::from_type(self.err.clone(), what)
    }

    pub fn mismatch(&self, v: &Bound<'py, PyAny>, want: &str) -> PyErr {
        let tn = v
            .get_type()
            .name()
            .map(|n| n.to_string())
            .unwrap_or_else(|_| "?".into());
        self.fail(format!("expected {want}, got {tn}"))
    }

    /// Append `v` (of parameter type `type_oid`, resolved to `codec`; None:
    /// no binary codec, the value goes as text) to `buf`.
    pub fn encode(
        &self,
        type_oid: u32,
        codec: Option<&Codec>,
        v: &Bound<'py, PyAny>,
        buf: &mut Vec<u8>,
    ) -> PyResult<Param> {
        match codec {
            Some(c) => self.encode_with(type_oid, c, v, buf),
            None => self.encode_text(type_oid, v, buf),
        }
    }

    /// A value of a type without a binary codec here, as its text.
    fn encode_text(
        &self,
        type_oid: u32,
        v: &Bound<'py, PyAny>,
        buf: &mut Vec<u8>,
    ) -> PyResult<Param> {
        if v.is_none() {
            return Ok(Param::Null);
        }
        // An int's text is exact, so an int-based domain takes an int.
        if let Ok(s) = v.downcast::<PyString>() {
            buf.extend_from_slice(s.to_str()?.as_bytes());
        } else if v.is_instance_of::<PyInt>() && !v.is_instance_of::<PyBool>() {
            buf.extend_from_slice(v.str()?.to_str()?.as_bytes());
        } else {
            return Err(self.fail(format!(
                "a parameter of type oid {type_oid} has no binary codec here: pass it as str"
            )));
        }
        Ok(Param::Value)
    }

    /// Append `v` in the binary format of `c`.
    pub fn encode_with(
        &self,
        type_oid: u32,
        c: &Codec,
        v: &Bound<'py, PyAny>,
        buf: &mut Vec<u8>,
    ) -> PyResult<Param> {
        if v.is_none() {
            return Ok(Param::Null);
        }
        match c {
            Codec::Scalar(k) => self.encode_kind(*k, v, buf)?,
            Codec::Array {
                elem_oid,
                elem,
                lower,
            } => self.array(*elem_oid, elem, *lower, v, buf)?,
            Codec::Composite { oids, fields, desc } => {
                self.composite(oids, fields, desc, v, buf)?
            }
            Codec::Record(..) => {
                return Err(self.fail(format!(
                    "an anonymous record (type oid {type_oid}) cannot be a parameter: \
                     cast the parameter to a composite type"
                )))
            }
            Codec::Range(sub) => self.range(sub, v, buf)?,
            Codec::Multirange(range) => self.multirange(range, v, buf)?,
            Codec::Hstore => self.hstore(v, buf)?,
            Codec::TextArray => self.text_array(v, buf)?,
            Codec::Custom { oid, custom, inner } => {
                return custom.encode(self, *oid, inner.as_deref(), v, buf)
            }
        }
        Ok(Param::Value)
    }

    /// A built-in scalar.
    fn encode_kind(&self, kind: Kind, v: &Bound<'py, PyAny>, buf: &mut Vec<u8>) -> PyResult<()> {
        match kind {
            Kind::Bool => {
                let b = v
                    .downcast::<PyBool>()
                    .map_err(|_| self.mismatch(v, "bool"))?;
                buf.push(u8::from(b.is_true()));
            }
            Kind::Int2 => buf.extend_from_slice(&self.int::<i16>(v, "int2")?.to_be_bytes()),
            Kind::Int4 => buf.extend_from_slice(&self.int::<i32>(v, "int4")?.to_be_bytes()),
            Kind::Int8 => buf.extend_from_slice(&self.int::<i64>(v, "int8")?.to_be_bytes()),
            Kind::Uint4 => buf.extend_from_slice(&self.int::<u32>(v, "oid")?.to_be_bytes()),
            Kind::Uint8 => buf.extend_from_slice(&self.int::<u64>(v, "xid8")?.to_be_bytes()),
            Kind::Float4 => buf.extend_from_slice(&(self.float(v)? as f32).to_be_bytes()),
            Kind::Float8 => buf.extend_from_slice(&self.float(v)?.to_be_bytes()),
            Kind::Char => {
                // `"char"` is one byte; asyncpg takes and returns bytes for it.
                if let Ok(b) = v.downcast::<PyBytes>() {
                    buf.extend_from_slice(b.as_bytes());
                } else if let Ok(s) = v.downcast::<PyString>() {
                    buf.extend_from_slice(s.to_str()?.as_bytes());
                } else {
                    return Err(self.mismatch(v, "bytes or str"));
                }
            }
            Kind::Text => {
                let s = v
                    .downcast::<PyString>()
                    .map_err(|_| self.mismatch(v, "str"))?;
                buf.extend_from_slice(s.to_str()?.as_bytes());
            }
            Kind::Json => buf.extend_from_slice(self.json(v)?.as_bytes()),
            Kind::Jsonb => t::encode_jsonb(buf, self.json(v)?.as_bytes()),
            // jsonpath has the same layout (a version byte, then the text).
            Kind::Jsonpath => {
                let s = v
                    .downcast::<PyString>()
                    .map_err(|_| self.mismatch(v, "str"))?;
                t::encode_jsonb(buf, s.to_str()?.as_bytes());
            }
            Kind::Bytea => {
                if let Ok(b) = v.downcast::<PyBytes>() {
                    buf.extend_from_slice(b.as_bytes());
                } else if let Ok(b) = v.downcast::<PyByteArray>() {
                    buf.extend_from_slice(&b.to_vec());
                } else if v.is_instance_of::<PyMemoryView>() {
                    let b: Vec<u8> = v.call_method0("tobytes")?.extract()?;
                    buf.extend_from_slice(&b);
                } else {
                    return Err(self.mismatch(v, "bytes, bytearray or memoryview"));
                }
            }
            Kind::Numeric => {
                let py = self.py;
                let dec = DECIMAL.import(py, "decimal", "Decimal")?;
                let s = if v.is_instance_of::<PyString>() {
                    // Decimal text, as asyncpg takes it; checked here so a typo
                    // names its parameter instead of failing on the server.
                    dec.call1((v,))
                        .map_err(|_| self.fail(format!("{v:?} is not a decimal number")))?
                        .str()?
                } else if v.is_instance(dec)?
                    || (v.is_instance_of::<PyInt>() && !v.is_instance_of::<PyBool>())
                    || v.is_instance_of::<PyFloat>()
                {
                    v.str()?
                } else {
                    return Err(self.mismatch(v, "Decimal, int, float or str"));
                };
                t::encode_numeric(buf, s.to_str()?)
                    .map_err(|_| self.fail(format!("cannot encode {s} as numeric")))?;
            }
            Kind::Uuid => {
                let py = self.py;
                let u = if v.is_instance(UUID.import(py, "uuid", "UUID")?)? {
                    v.clone()
                } else if v.is_instance_of::<PyString>() {
                    UUID.import(py, "uuid", "UUID")?
                        .call1((v,))
                        .map_err(|_| self.fail(format!("{v} is not a UUID")))?
                } else {
                    return Err(self.mismatch(v, "uuid.UUID or str"));
                };
                let b = u.getattr("bytes")?;
                buf.extend_from_slice(b.downcast::<PyBytes>()?.as_bytes());
            }
            Kind::Date => {
                // A datetime is a date: its date part is taken, as asyncpg does.
                let d = v
                    .downcast::<PyDate>()
                    .map_err(|_| self.mismatch(v, "date"))?;
                let days = match (d.get_year(), d.get_month(), d.get_day()) {
                    // date.max/date.min are what ±infinity decode to: written back
                    // as ±infinity so a read-modify-write keeps the value.
                    (9999, 12, 31) => i32::MAX,
                    (1, 1, 1) => i32::MIN,
                    (y, m, dd) => t::days_from_date(y, m.into(), dd.into()),
                };
                buf.extend_from_slice(&days.to_be_bytes());
            }
            Kind::Timestamp | Kind::TimestampTz => {
                let us = if let Ok(dt) = v.downcast::<PyDateTime>() {
                    self.timestamp(dt)?
                } else if let Ok(d) = v.downcast::<PyDate>() {
                    // Midnight of that day, as asyncpg: naive for timestamp, in the
                    // local time zone for timestamptz.
                    let mut dt = PyDateTime::new(
                        self.py,
                        d.get_year(),
                        d.get_month(),
                        d.get_day(),
                        0,
                        0,
                        0,
                        0,
                        None,
                    )?;
                    if kind == Kind::TimestampTz {
                        dt = dt.call_method0("astimezone")?.downcast_into()?;
                    }
                    self.timestamp(&dt)?
                } else {
                    return Err(self.mismatch(v, "datetime or date"));
                };
                // datetime.max/min (what ±infinity decode to) go back as ±infinity.
                let us = match us {
                    TIMESTAMP_MAX => i64::MAX,
                    TIMESTAMP_MIN => i64::MIN,
                    us => us,
                };
                buf.extend_from_slice(&us.to_be_bytes());
            }
            Kind::Time => {
                let tm = v
                    .downcast::<PyTime>()
                    .map_err(|_| self.mismatch(v, "time"))?;
                let us = (i64::from(tm.get_hour()) * 3600
                    + i64::from(tm.get_minute()) * 60
                    + i64::from(tm.get_second()))
                    * 1_000_000
                    + i64::from(tm.get_microsecond());
                buf.extend_from_slice(&us.to_be_bytes());
            }
            Kind::Interval => {
                let d = v
                    .downcast::<PyDelta>()
                    .map_err(|_| self.mismatch(v, "timedelta"))?;
                let micros =
                    i64::from(d.get_seconds()) * 1_000_000 + i64::from(d.get_microseconds());
                t::encode_interval(
                    buf,
                    t::Interval {
                        micros,
                        days: d.get_days(),
                        months: 0,
                    },
                );
            }
            Kind::TimeTz => {
                let tm = v
                    .downcast::<PyTime>()
                    .map_err(|_| self.mismatch(v, "time"))?;
                let off = tm.call_method0("utcoffset")?;
                // A naive time is taken as UTC; PostgreSQL counts the offset west.
                let east = if off.is_none() {
                    0
                } else {
                    let d = off.downcast::<PyDelta>()?;
                    d.get_days() * 86_400 + d.get_seconds()
                };
                t::encode_timetz(buf, self.time_micros(tm), -east);
            }
            Kind::Inet => self.inet(false, v, buf)?,
            Kind::Cidr => self.inet(true, v, buf)?,
            Kind::MacAddr | Kind::MacAddr8 => {
                let s = v
                    .downcast::<PyString>()
                    .map_err(|_| self.mismatch(v, "str"))?;
                let n = if kind == Kind::MacAddr { 6 } else { 8 };
                let b = t::parse_macaddr(s.to_str()?, n)
                    .map_err(|_| self.fail(format!("{s} is not a MAC address")))?;
                buf.extend_from_slice(&b);
            }
            Kind::Bit => self.bits(v, buf)?,
            k if k.is_geometric() => self.geometry(k, v, buf)?,
            Kind::Tid => {
                let items = self.items(v, "tid")?;
                if items.len() != 2 {
                    return Err(self.fail("a tid is (block, offset)".into()));
                }
                let block = self.int::<u32>(&items[0], "a tid block")?;
                let offset = self.int::<u16>(&items[1], "a tid offset")?;
                t::encode_tid(buf, block, offset);
            }
            Kind::Snapshot => {
                let items = self.items(v, "snapshot")?;
                if items.len() != 3 {
                    return Err(self.fail("a snapshot is (xmin, xmax, xip)".into()));
                }
                let xmin = self.int::<u64>(&items[0], "xid8")?;
                let xmax = self.int::<u64>(&items[1], "xid8")?;
                let xip = items[2]
                    .try_iter()?
                    .map(|x| self.int::<u64>(&x?, "xid8"))
                    .collect::<PyResult<Vec<_>>>()?;
                t::encode_snapshot(buf, xmin, xmax, &xip);
            }
            Kind::Void => {}
            // Vector, Range, Multirange and Record are resolved into containers
            // (see `registry::resolve`); AsText values go as text.
            _ => return Err(self.fail(format!("{kind:?} is not a scalar"))),
        }
        Ok(())
    }

    fn time_micros(&self, tm: &Bound<'py, PyTime>) -> i64 {
        (i64::from(tm.get_hour()) * 3600
            + i64::from(tm.get_minute()) * 60
            + i64::from(tm.get_second()))
            * 1_000_000
            + i64::from(tm.get_microsecond())
    }

    pub fn int<T: for<'a> FromPyObject<'a>>(
        &self,
        v: &Bound<'py, PyAny>,
        name: &str,
    ) -> PyResult<T> {
        if !v.is_instance_of::<PyInt>() || v.is_instance_of::<PyBool>() {
            return Err(self.mismatch(v, "int"));
        }
        v.extract::<T>()
            .map_err(|_| self.fail(format!("{v} is out of range for {name}")))
    }

    pub fn float(&self, v: &Bound<'py, PyAny>) -> PyResult<f64> {
        if v.is_instance_of::<PyBool>() {
            return Err(self.mismatch(v, "float, int or Decimal"));
        }
        if v.is_instance_of::<PyFloat>() || v.is_instance_of::<PyInt>() {
            return v.extract::<f64>();
        }
        // A Decimal goes in as the nearest double, as asyncpg sends it.
        if v.is_instance(DECIMAL.import(self.py, "decimal", "Decimal")?)? {
            return v.call_method0("__float__")?.extract::<f64>();
        }
        Err(self.mismatch(v, "float, int or Decimal"))
    }

    fn json(&self, v: &Bound<'py, PyAny>) -> PyResult<String> {
        if let Ok(s) = v.downcast::<PyString>() {
            return Ok(s.to_str()?.to_owned());
        }
        // Anything else goes through json.dumps (asyncpg wants str; accepting
        // dicts and lists saves the caller a step).
        let py = self.py;
        let dumps = JSON_DUMPS.get_or_try_init(py, || {
            Ok::<_, PyErr>(py.import("json")?.getattr("dumps")?.unbind())
        })?;
        dumps
            .bind(py)
            .call1((v,))
            .map_err(|e| self.fail(format!("cannot encode as JSON: {e}")))?
            .extract()
    }

    fn timestamp(&self, dt: &Bound<'py, PyDateTime>) -> PyResult<i64> {
        let days = t::days_from_date(dt.get_year(), dt.get_month().into(), dt.get_day().into());
        let mut us = i64::from(days) * t::MICROS_PER_DAY
            + (i64::from(dt.get_hour()) * 3600
                + i64::from(dt.get_minute()) * 60
                + i64::from(dt.get_second()))
                * 1_000_000
            + i64::from(dt.get_microsecond());
        // Aware datetimes are stored as UTC; naive ones are taken as UTC already.
        let off = dt.call_method0("utcoffset")?;
        if !off.is_none() {
            let d = off.downcast::<PyDelta>()?;
            us -= (i64::from(d.get_days()) * 86_400 + i64::from(d.get_seconds())) * 1_000_000
                + i64::from(d.get_microseconds());
        }
        Ok(us)
    }
}
