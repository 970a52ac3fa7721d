//! Python arguments -> binary parameter values, by the type the server
//! inferred for each parameter (ParameterDescription). A value that does not
//! fit its type raises the driver's DataError before anything is sent.

use pyo3::prelude::*;
use pyo3::sync::GILOnceCell;
use pyo3::types::{
    PyBool, PyByteArray, PyBytes, PyDate, PyDateTime, PyDelta, PyFloat, PyInt, PyList,
    PyMemoryView, PyString, PyTime, PyTuple, PyType,
};
use surge_proto::pgwire::frontend::Param;

use crate::pydatetime::{PyDateAccess, PyDeltaAccess, PyTimeAccess};
use surge_proto::pgwire::types::{self as t, oid};

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
    fn fail(&self, what: String) -> PyErr {
        PyErr::from_type(self.err.clone(), what)
    }

    fn mismatch(&self, v: &Bound<'py, PyAny>, want: &str) -> PyErr {
        let tn = v
            .get_type()
            .name()
            .map(|n| n.to_string())
            .unwrap_or_else(|_| "?".into());
        self.fail(format!("expected {want}, got {tn}"))
    }

    /// Append `v` (of parameter type `type_oid`) to `buf`.
    pub fn encode(
        &self,
        type_oid: u32,
        v: &Bound<'py, PyAny>,
        buf: &mut Vec<u8>,
    ) -> PyResult<Param> {
        if v.is_none() {
            return Ok(Param::Null);
        }
        match type_oid {
            oid::BOOL => {
                let b = v
                    .downcast::<PyBool>()
                    .map_err(|_| self.mismatch(v, "bool"))?;
                buf.push(u8::from(b.is_true()));
            }
            oid::INT2 => buf.extend_from_slice(&self.int::<i16>(v, "int2")?.to_be_bytes()),
            oid::INT4 => buf.extend_from_slice(&self.int::<i32>(v, "int4")?.to_be_bytes()),
            oid::INT8 => buf.extend_from_slice(&self.int::<i64>(v, "int8")?.to_be_bytes()),
            oid::OID => buf.extend_from_slice(&self.int::<u32>(v, "oid")?.to_be_bytes()),
            oid::FLOAT4 => buf.extend_from_slice(&(self.float(v)? as f32).to_be_bytes()),
            oid::FLOAT8 => buf.extend_from_slice(&self.float(v)?.to_be_bytes()),
            oid::CHAR => {
                // `"char"` is one byte; asyncpg takes and returns bytes for it.
                if let Ok(b) = v.downcast::<PyBytes>() {
                    buf.extend_from_slice(b.as_bytes());
                } else if let Ok(s) = v.downcast::<PyString>() {
                    buf.extend_from_slice(s.to_str()?.as_bytes());
                } else {
                    return Err(self.mismatch(v, "bytes or str"));
                }
            }
            oid::TEXT | oid::VARCHAR | oid::NAME | oid::BPCHAR | oid::UNKNOWN => {
                let s = v
                    .downcast::<PyString>()
                    .map_err(|_| self.mismatch(v, "str"))?;
                buf.extend_from_slice(s.to_str()?.as_bytes());
            }
            oid::JSON => buf.extend_from_slice(self.json(v)?.as_bytes()),
            oid::JSONB => t::encode_jsonb(buf, self.json(v)?.as_bytes()),
            oid::BYTEA => {
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
            oid::NUMERIC => {
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
            oid::UUID => {
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
            oid::DATE => {
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
            oid::TIMESTAMP | oid::TIMESTAMPTZ => {
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
                    if type_oid == oid::TIMESTAMPTZ {
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
            oid::TIME => {
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
            oid::INTERVAL => {
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
            other => match oid::element_of(other) {
                Some(elem) => self.array(elem, v, buf)?,
                None => {
                    // Sent as text (the statement asks for text for this one). An
                    // int's text is exact, so an int-based domain takes an int.
                    if let Ok(s) = v.downcast::<PyString>() {
                        buf.extend_from_slice(s.to_str()?.as_bytes());
                    } else if v.is_instance_of::<PyInt>() && !v.is_instance_of::<PyBool>() {
                        buf.extend_from_slice(v.str()?.to_str()?.as_bytes());
                    } else {
                        return Err(self.fail(format!(
                            "a parameter of type oid {other} has no binary codec here: pass it as str"
                        )));
                    }
                }
            },
        }
        Ok(Param::Value)
    }

    fn int<T: for<'a> FromPyObject<'a>>(&self, v: &Bound<'py, PyAny>, name: &str) -> PyResult<T> {
        if !v.is_instance_of::<PyInt>() || v.is_instance_of::<PyBool>() {
            return Err(self.mismatch(v, "int"));
        }
        v.extract::<T>()
            .map_err(|_| self.fail(format!("{v} is out of range for {name}")))
    }

    fn float(&self, v: &Bound<'py, PyAny>) -> PyResult<f64> {
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

    fn array(&self, elem: u32, v: &Bound<'py, PyAny>, buf: &mut Vec<u8>) -> PyResult<()> {
        if !(v.is_instance_of::<PyList>() || v.is_instance_of::<PyTuple>()) {
            return Err(self.mismatch(v, "list or tuple"));
        }
        // Dimensions from the first element at each level; every sub-list must match.
        let mut dims = Vec::new();
        let mut cur = v.clone();
        loop {
            if !(cur.is_instance_of::<PyList>() || cur.is_instance_of::<PyTuple>()) {
                break;
            }
            let n = cur.len()?;
            dims.push(n);
            if n == 0 || dims.len() > surge_proto::pgwire::MAX_ARRAY_DIMS {
                break;
            }
            cur = cur.get_item(0)?;
        }
        if dims.len() > surge_proto::pgwire::MAX_ARRAY_DIMS {
            return Err(self.fail("array nested too deep".into()));
        }
        if dims.contains(&0) {
            t::encode_array_header(buf, elem, &[], false);
            return Ok(());
        }
        let mark = buf.len();
        t::encode_array_header(buf, elem, &dims, false);
        let mut has_null = false;
        self.array_level(elem, v, &dims, buf, &mut has_null)?;
        if has_null {
            buf[mark + 4..mark + 8].copy_from_slice(&1i32.to_be_bytes());
        }
        Ok(())
    }

    fn array_level(
        &self,
        elem: u32,
        v: &Bound<'py, PyAny>,
        dims: &[usize],
        buf: &mut Vec<u8>,
        has_null: &mut bool,
    ) -> PyResult<()> {
        let is_seq = v.is_instance_of::<PyList>() || v.is_instance_of::<PyTuple>();
        if !is_seq || v.len()? != dims[0] {
            return Err(self.fail("multi-dimensional arrays must be rectangular".into()));
        }
        for item in v.try_iter()? {
            let item = item?;
            if dims.len() > 1 {
                self.array_level(elem, &item, &dims[1..], buf, has_null)?;
                continue;
            }
            let at = buf.len();
            buf.extend_from_slice(&[0; 4]);
            match self.encode(elem, &item, buf)? {
                Param::Null => {
                    *has_null = true;
                    buf.truncate(at);
                    buf.extend_from_slice(&(-1i32).to_be_bytes());
                }
                Param::Value => {
                    let n = (buf.len() - at - 4) as i32;
                    buf[at..at + 4].copy_from_slice(&n.to_be_bytes());
                }
            }
        }
        Ok(())
    }
}
