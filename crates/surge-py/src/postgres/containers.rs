//! Values made of other values: arrays (nested lists), composites (`Record`s
//! with the type's field names), anonymous records, ranges (`Range`),
//! multiranges (lists of `Range`) and hstore (dict), both ways.

use std::sync::Arc;

use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyMapping, PyString, PyTuple};
use pyo3::IntoPyObjectExt;
use surge_proto::pgwire::frontend::Param;
use surge_proto::pgwire::types::{self as t, Kind};
use surge_proto::pgwire::Error;

use super::decode::{bad, decode, text};
use super::encode::Encoder;
use super::pyclasses as cls;
use super::record::{record_from_vec, record_type, Desc};
use super::registry::{Codec, RecordFields};

/// An array as (nested) lists; lower bounds are not kept (as in asyncpg's lists).
pub fn decode_array(py: Python<'_>, elem_oid: u32, elem: &Codec, b: &[u8]) -> PyResult<PyObject> {
    let (h, rest) = t::decode_array_header(b).map_err(bad)?;
    if h.element_oid != elem_oid {
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
    let dims: Vec<usize> = h.dims.iter().map(|&(n, _)| n as usize).collect();
    nest(py, flat, &dims)
}

/// Nested lists of `flat`'s values, innermost dimension first.
fn nest(py: Python<'_>, flat: Vec<PyObject>, dims: &[usize]) -> PyResult<PyObject> {
    let mut level = flat;
    for &n in dims.iter().skip(1).rev() {
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

/// An int2/int4/int8 array in its text form (see `Codec::text_result`):
/// the same lists of ints as the binary decoder gives.
pub fn decode_int_text_array(py: Python<'_>, kind: Kind, b: &[u8]) -> PyResult<PyObject> {
    let (min, max) = match kind {
        Kind::Int2 => (i64::from(i16::MIN), i64::from(i16::MAX)),
        Kind::Int4 => (i64::from(i32::MIN), i64::from(i32::MAX)),
        _ => (i64::MIN, i64::MAX),
    };
    let (dims, vals) = t::parse_int_text_array(b, min, max).map_err(bad)?;
    if dims.len() <= 1 {
        // the common case, straight into one list (None for NULL)
        return Ok(PyList::new(py, vals)?.into_any().unbind());
    }
    let mut flat = Vec::with_capacity(vals.len());
    for v in vals {
        flat.push(match v {
            None => py.None(),
            Some(v) => v.into_py_any(py)?,
        });
    }
    nest(py, flat, &dims)
}

fn record_obj(py: Python<'_>, values: Vec<PyObject>, desc: Arc<Desc>) -> PyResult<PyObject> {
    record_from_vec(py, values, &desc)
}

/// A composite of a known type: a `Record` with the type's field names.
pub fn decode_composite(
    py: Python<'_>,
    oids: &[u32],
    fields: &[Arc<Codec>],
    desc: &Arc<Desc>,
    b: &[u8],
) -> PyResult<PyObject> {
    let parts = t::decode_record(b).map_err(bad)?;
    if parts.len() != fields.len() {
        return Err(bad(Error::BadValue("composite field count")));
    }
    let mut values = Vec::with_capacity(parts.len());
    for ((oid, v), (want, codec)) in parts.into_iter().zip(oids.iter().zip(fields)) {
        if oid != *want {
            return Err(bad(Error::BadValue("composite field type")));
        }
        values.push(match v {
            None => py.None(),
            Some(v) => decode(py, codec, v)?,
        });
    }
    record_obj(py, values, desc.clone())
}

/// An anonymous record (`SELECT ROW(1, 'a')`): a tuple (as asyncpg returns
/// it), fields decoded by the oids they carry.
pub fn decode_record(py: Python<'_>, fields: &RecordFields, b: &[u8]) -> PyResult<PyObject> {
    let parts = t::decode_record(b).map_err(bad)?;
    let codecs = fields.codecs(py, parts.iter().map(|&(oid, _)| oid));
    let mut values = Vec::with_capacity(parts.len());
    for (&(oid, v), codec) in parts.iter().zip(codecs.iter()) {
        values.push(match (v, codec) {
            (None, _) => py.None(),
            (Some(v), Some(c)) => decode(py, c, v)?,
            (Some(_), None) => {
                return Err(pyo3::exceptions::PyValueError::new_err(format!(
                    "a record field of type oid {oid} has no binary codec here: \
                     cast it (e.g. to text) in the query"
                )))
            }
        });
    }
    Ok(PyTuple::new(py, values)?.into_any().unbind())
}

pub fn decode_range(py: Python<'_>, sub: &Codec, b: &[u8]) -> PyResult<PyObject> {
    let r = t::decode_range(b).map_err(bad)?;
    let bound = |v: Option<&[u8]>| match v {
        None => Ok(py.None()),
        Some(v) => decode(py, sub, v),
    };
    let (lower, upper) = (bound(r.lower)?, bound(r.upper)?);
    // Made without running Range.__init__ (a Python frame and a kwargs dict per
    // value: most of the cost of a range column): the server's flags are
    // already what __init__ would make of them (an infinite bound is never
    // inclusive; an empty range has neither bounds nor inclusivity).
    let range = cls::range(py)?;
    let obj = cls::object_new(py)?.call1((range,))?;
    obj.setattr(intern!(py, "_lower"), lower)?;
    obj.setattr(intern!(py, "_upper"), upper)?;
    obj.setattr(intern!(py, "_lower_inc"), r.lower_inc && r.lower.is_some())?;
    obj.setattr(intern!(py, "_upper_inc"), r.upper_inc && r.upper.is_some())?;
    obj.setattr(intern!(py, "_empty"), r.empty)?;
    Ok(obj.unbind())
}

pub fn decode_multirange(py: Python<'_>, range: &Codec, b: &[u8]) -> PyResult<PyObject> {
    let sub = match range {
        Codec::Range(sub) => sub,
        _ => return Err(bad(Error::BadValue("multirange"))),
    };
    let parts = t::decode_multirange(b).map_err(bad)?;
    let mut out = Vec::with_capacity(parts.len());
    for p in parts {
        out.push(decode_range(py, sub, p)?);
    }
    Ok(PyList::new(py, out)?.into_any().unbind())
}

pub fn decode_hstore(py: Python<'_>, b: &[u8]) -> PyResult<PyObject> {
    let d = PyDict::new(py);
    for (k, v) in t::decode_hstore(b).map_err(bad)? {
        let v = match v {
            None => py.None(),
            Some(v) => text(py, v)?,
        };
        d.set_item(text(py, k)?, v)?;
    }
    Ok(d.into_any().unbind())
}

/// An array in its text form: nested lists of str (None for NULL).
pub fn decode_text_array(py: Python<'_>, b: &[u8]) -> PyResult<PyObject> {
    let s = std::str::from_utf8(b).map_err(|_| bad(Error::BadValue("array text")))?;
    let items = t::parse_text_array(s).map_err(bad)?;
    text_items(py, &items)
}

fn text_items(py: Python<'_>, items: &[t::TextItem]) -> PyResult<PyObject> {
    let mut out = Vec::with_capacity(items.len());
    for i in items {
        out.push(match i {
            t::TextItem::Elem(None) => py.None(),
            t::TextItem::Elem(Some(s)) => PyString::new(py, s).into_any().unbind(),
            t::TextItem::Sub(sub) => text_items(py, sub)?,
        });
    }
    Ok(PyList::new(py, out)?.into_any().unbind())
}

/// Python values of these codecs are tuples themselves: inside an array, a
/// tuple is then one element, not a dimension (only lists are).
fn tuple_shaped(c: &Codec) -> bool {
    match c {
        Codec::Scalar(k) => k.is_geometric() || matches!(k, Kind::Tid | Kind::Snapshot),
        Codec::Composite { .. } | Codec::Record(..) | Codec::Range(_) => true,
        // a tuple-format codec on a composite takes the composite's tuples
        Codec::Custom { inner, .. } => inner.as_deref().is_some_and(tuple_shaped),
        _ => false,
    }
}

/// Python values of these codecs are lists: inside an array, no list is a
/// dimension, so the array is one-dimensional.
fn list_shaped(c: &Codec) -> bool {
    matches!(
        c,
        Codec::Array { .. } | Codec::Multirange(_) | Codec::TextArray
    )
}

impl<'py> Encoder<'_, 'py> {
    /// One element or field, length-prefixed (-1 for None).
    fn field(
        &self,
        oid: u32,
        c: &Codec,
        v: &Bound<'py, PyAny>,
        buf: &mut Vec<u8>,
    ) -> PyResult<bool> {
        let mut null = false;
        t::write_field(buf, |buf| -> PyResult<bool> {
            null = matches!(self.encode_with(oid, c, v, buf)?, Param::Null);
            Ok(!null)
        })?;
        Ok(null)
    }

    pub fn array(
        &self,
        elem_oid: u32,
        elem: &Codec,
        lower: i32,
        v: &Bound<'py, PyAny>,
        buf: &mut Vec<u8>,
    ) -> PyResult<()> {
        let tuple_elems = tuple_shaped(elem);
        let list_elems = list_shaped(elem);
        let is_dim = |x: &Bound<'py, PyAny>| {
            !list_elems
                && (x.is_instance_of::<PyList>() || (!tuple_elems && x.is_instance_of::<PyTuple>()))
        };
        if !(v.is_instance_of::<PyList>() || v.is_instance_of::<PyTuple>()) {
            return Err(self.mismatch(v, "list or tuple"));
        }
        // Dimensions from the first element at each level; every sub-list must match.
        let mut dims = vec![v.len()?];
        let mut cur = v.clone();
        while dims.last() != Some(&0) && dims.len() <= surge_proto::pgwire::MAX_ARRAY_DIMS {
            cur = cur.get_item(0)?;
            if !is_dim(&cur) {
                break;
            }
            dims.push(cur.len()?);
        }
        if dims.len() > surge_proto::pgwire::MAX_ARRAY_DIMS {
            return Err(self.fail("array nested too deep".into()));
        }
        if dims.contains(&0) {
            t::encode_array_header(buf, elem_oid, &[], lower, false);
            return Ok(());
        }
        let mark = buf.len();
        t::encode_array_header(buf, elem_oid, &dims, lower, false);
        let mut has_null = false;
        self.array_level(elem_oid, elem, v, &dims, &is_dim, buf, &mut has_null)?;
        if has_null {
            buf[mark + 4..mark + 8].copy_from_slice(&1i32.to_be_bytes());
        }
        Ok(())
    }

    #[allow(clippy::too_many_arguments)]
    fn array_level(
        &self,
        elem_oid: u32,
        elem: &Codec,
        v: &Bound<'py, PyAny>,
        dims: &[usize],
        is_dim: &dyn Fn(&Bound<'py, PyAny>) -> bool,
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
                if !is_dim(&item) {
                    return Err(self.fail("multi-dimensional arrays must be rectangular".into()));
                }
                self.array_level(elem_oid, elem, &item, &dims[1..], is_dim, buf, has_null)?;
                continue;
            }
            *has_null |= self.field(elem_oid, elem, &item, buf)?;
        }
        Ok(())
    }

    /// A composite from a tuple, list or Record (by position) or a dict (by
    /// field name; missing fields are NULL).
    pub fn composite(
        &self,
        oids: &[u32],
        fields: &[Arc<Codec>],
        desc: &Desc,
        v: &Bound<'py, PyAny>,
        buf: &mut Vec<u8>,
    ) -> PyResult<()> {
        let py = self.py;
        let values: Vec<Bound<'py, PyAny>> = if let Ok(m) = v.downcast::<PyDict>() {
            let mut out = Vec::with_capacity(fields.len());
            let known: Vec<String> = desc.names.iter().map(|n| n.to_string()).collect();
            for k in m.keys() {
                let k: String = k
                    .extract()
                    .map_err(|_| self.fail("composite keys are str".into()))?;
                if !known.contains(&k) {
                    return Err(self.fail(format!("the composite type has no field {k:?}")));
                }
            }
            for n in &desc.names {
                out.push(
                    m.get_item(n.bind(py))?
                        .unwrap_or_else(|| py.None().into_bound(py)),
                );
            }
            out
        } else if v.is_instance_of::<PyTuple>()
            || v.is_instance_of::<PyList>()
            || v.is_instance(record_type(py)?)?
        {
            v.try_iter()?.collect::<PyResult<_>>()?
        } else {
            return Err(self.mismatch(v, "tuple, Record or dict"));
        };
        if values.len() != fields.len() {
            return Err(self.fail(format!(
                "the composite type has {} fields, {} given",
                fields.len(),
                values.len()
            )));
        }
        t::encode_record_header(buf, fields.len());
        for ((oid, c), x) in oids.iter().zip(fields).zip(&values) {
            buf.extend_from_slice(&oid.to_be_bytes());
            self.field(*oid, c, x, buf)?;
        }
        Ok(())
    }

    /// A Range (ours or asyncpg's: `lower`, `upper`, `lower_inc`, `upper_inc`,
    /// `isempty`), or a sequence read as asyncpg reads it: (lower, upper) is
    /// [lower, upper] (both bounds included), (lower,) is [lower,), () is empty.
    pub fn range(&self, sub: &Codec, v: &Bound<'py, PyAny>, buf: &mut Vec<u8>) -> PyResult<()> {
        let (empty, lower, upper, li, ui) = if v.hasattr("isempty")? {
            (
                v.getattr("isempty")?.is_truthy()?,
                v.getattr("lower")?,
                v.getattr("upper")?,
                v.getattr("lower_inc")?.is_truthy()?,
                v.getattr("upper_inc")?.is_truthy()?,
            )
        } else if v.is_instance_of::<PyTuple>() || v.is_instance_of::<PyList>() {
            let none = || v.py().None().into_bound(v.py());
            match v.len()? {
                0 => (true, none(), none(), false, false),
                1 => (false, v.get_item(0)?, none(), true, false),
                2 => (false, v.get_item(0)?, v.get_item(1)?, true, true),
                n => {
                    return Err(self.fail(format!(
                        "a range as a sequence is (lower, upper), (lower,) or (), not {n} elements"
                    )))
                }
            }
        } else {
            return Err(self.mismatch(v, "Range or a (lower, upper) tuple"));
        };
        let flags = t::range_flags(empty, !lower.is_none(), !upper.is_none(), li, ui);
        buf.push(flags);
        if !empty {
            for b in [&lower, &upper] {
                if !b.is_none() {
                    // The subtype oid is not in a range's bytes: 0 is not used.
                    self.field(0, sub, b, buf)?;
                }
            }
        }
        Ok(())
    }

    pub fn multirange(
        &self,
        range: &Codec,
        v: &Bound<'py, PyAny>,
        buf: &mut Vec<u8>,
    ) -> PyResult<()> {
        let Codec::Range(sub) = range else {
            return Err(self.fail("not a multirange".into()));
        };
        let items = self.items(v, "multirange")?;
        buf.extend_from_slice(&(items.len() as i32).to_be_bytes());
        for r in &items {
            if r.is_none() {
                return Err(self.fail("a multirange holds no NULL ranges".into()));
            }
            t::write_field(buf, |buf| self.range(sub, r, buf).map(|()| true))?;
        }
        Ok(())
    }

    /// An array of a text-format type from (nested) lists of str, in the
    /// array's text form.
    pub fn text_array(&self, v: &Bound<'py, PyAny>, buf: &mut Vec<u8>) -> PyResult<()> {
        if let Ok(s) = v.downcast::<PyString>() {
            buf.extend_from_slice(s.to_str()?.as_bytes());
            return Ok(());
        }
        let mut out = String::new();
        self.text_level(v, &mut out, 0)?;
        buf.extend_from_slice(out.as_bytes());
        Ok(())
    }

    fn text_level(&self, v: &Bound<'py, PyAny>, out: &mut String, depth: usize) -> PyResult<()> {
        if depth > surge_proto::pgwire::MAX_ARRAY_DIMS {
            return Err(self.fail("array nested too deep".into()));
        }
        let items = self.items(v, "array")?;
        out.push('{');
        for (i, x) in items.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            if x.is_instance_of::<PyList>() || x.is_instance_of::<PyTuple>() {
                self.text_level(x, out, depth + 1)?;
            } else if x.is_none() {
                t::push_text_element(out, None);
            } else if let Ok(s) = x.downcast::<PyString>() {
                t::push_text_element(out, Some(s.to_str()?));
            } else {
                return Err(self.mismatch(x, "str (the element's text)"));
            }
        }
        out.push('}');
        Ok(())
    }

    /// hstore from a mapping of str to str or None.
    pub fn hstore(&self, v: &Bound<'py, PyAny>, buf: &mut Vec<u8>) -> PyResult<()> {
        let m = v
            .downcast::<PyMapping>()
            .map_err(|_| self.mismatch(v, "dict"))?;
        let items = m.items()?;
        buf.extend_from_slice(&(items.len() as i32).to_be_bytes());
        for kv in items.iter() {
            let (k, val): (Bound<'py, PyAny>, Bound<'py, PyAny>) = kv.extract()?;
            if k.is_none() {
                return Err(self.fail("hstore keys are str".into()));
            }
            for (x, what) in [(k, "keys are str"), (val, "values are str or None")] {
                t::write_field(buf, |buf| -> PyResult<bool> {
                    if x.is_none() {
                        return Ok(false);
                    }
                    let s = x
                        .downcast::<PyString>()
                        .map_err(|_| self.fail(format!("hstore {what}")))?;
                    buf.extend_from_slice(s.to_str()?.as_bytes());
                    Ok(true)
                })?;
            }
        }
        Ok(())
    }
}
