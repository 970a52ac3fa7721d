//! Geometric types and bit strings <-> `surge.postgres.types` objects (asyncpg's
//! shapes: Point, Box, Line and LineSegment are tuples, Path and Polygon hold
//! `points`). Encoding takes those objects, asyncpg's, or plain sequences.

use pyo3::prelude::*;
use pyo3::types::{PyByteArray, PyBytes, PyDict, PyList, PyTuple};
use surge_proto::pgwire::types::{self as t, Kind};

use super::decode::bad;
use super::encode::Encoder;
use super::pyclasses as cls;

fn point<'py>(py: Python<'py>, x: f64, y: f64) -> PyResult<Bound<'py, PyAny>> {
    cls::point(py)?.call1((x, y))
}

pub fn decode(py: Python<'_>, kind: Kind, b: &[u8]) -> PyResult<PyObject> {
    let v = match kind {
        Kind::Point => {
            let [x, y] = t::decode_floats::<2>(b, "point").map_err(bad)?;
            point(py, x, y)?
        }
        Kind::Line => {
            let [a, bb, c] = t::decode_floats::<3>(b, "line").map_err(bad)?;
            cls::line(py)?.call1((a, bb, c))?
        }
        Kind::Lseg => {
            let [x1, y1, x2, y2] = t::decode_floats::<4>(b, "lseg").map_err(bad)?;
            cls::lseg(py)?.call1(((x1, y1), (x2, y2)))?
        }
        Kind::Box => {
            let [x1, y1, x2, y2] = t::decode_floats::<4>(b, "box").map_err(bad)?;
            cls::box_(py)?.call1(((x1, y1), (x2, y2)))?
        }
        Kind::Circle => {
            let [x, y, r] = t::decode_floats::<3>(b, "circle").map_err(bad)?;
            cls::circle(py)?.call1(((x, y), r))?
        }
        Kind::Path => {
            let (closed, pts) = t::decode_path(b).map_err(bad)?;
            let kw = PyDict::new(py);
            kw.set_item("is_closed", closed)?;
            cls::path(py)?.call(PyTuple::new(py, pts)?, Some(&kw))?
        }
        Kind::Polygon => {
            let pts = t::decode_polygon(b).map_err(bad)?;
            cls::polygon(py)?.call1(PyTuple::new(py, pts)?)?
        }
        _ => unreachable!("not a geometric kind"),
    };
    Ok(v.unbind())
}

pub fn decode_bits(py: Python<'_>, b: &[u8]) -> PyResult<PyObject> {
    let (n, data) = t::decode_bits(b).map_err(bad)?;
    Ok(cls::bit_string(py)?
        .call_method1("frombytes", (PyBytes::new(py, data), n))?
        .unbind())
}

impl<'py> Encoder<'_, 'py> {
    fn floats<const N: usize>(&self, v: &Bound<'py, PyAny>, what: &str) -> PyResult<[f64; N]> {
        let items = self.items(v, what)?;
        if items.len() != N {
            return Err(self.fail(format!("a {what} takes {N} numbers, got {}", items.len())));
        }
        let mut out = [0.0; N];
        for (o, i) in out.iter_mut().zip(items) {
            *o = self.float(&i)?;
        }
        Ok(out)
    }

    /// The items of a list or tuple (the Python shapes of the geometric types).
    pub fn items(&self, v: &Bound<'py, PyAny>, what: &str) -> PyResult<Vec<Bound<'py, PyAny>>> {
        if v.is_instance_of::<PyTuple>() || v.is_instance_of::<PyList>() {
            return v.try_iter()?.collect();
        }
        Err(self.mismatch(v, &format!("{what} (a tuple)")))
    }

    fn xy(&self, v: &Bound<'py, PyAny>) -> PyResult<(f64, f64)> {
        let [x, y] = self.floats::<2>(v, "point")?;
        Ok((x, y))
    }

    fn points(&self, pts: &Bound<'py, PyAny>) -> PyResult<Vec<(f64, f64)>> {
        pts.try_iter()?.map(|p| self.xy(&p?)).collect()
    }

    pub fn geometry(&self, kind: Kind, v: &Bound<'py, PyAny>, buf: &mut Vec<u8>) -> PyResult<()> {
        match kind {
            Kind::Point => t::encode_floats(buf, &self.floats::<2>(v, "point")?),
            Kind::Line => t::encode_floats(buf, &self.floats::<3>(v, "line")?),
            Kind::Lseg | Kind::Box => {
                let what = if kind == Kind::Box { "box" } else { "lseg" };
                let items = self.items(v, what)?;
                if items.len() != 2 {
                    return Err(self.fail(format!("a {what} takes 2 points")));
                }
                let (a, b) = (self.xy(&items[0])?, self.xy(&items[1])?);
                t::encode_floats(buf, &[a.0, a.1, b.0, b.1]);
            }
            Kind::Circle => {
                let items = self.items(v, "circle")?;
                if items.len() != 2 {
                    return Err(self.fail("a circle is (center, radius)".into()));
                }
                let (x, y) = self.xy(&items[0])?;
                t::encode_floats(buf, &[x, y, self.float(&items[1])?]);
            }
            Kind::Path => {
                // A Path object says whether it is closed; a plain tuple of points
                // is closed and a list open (asyncpg's rule).
                let (closed, pts) = if v.hasattr("points")? {
                    (v.getattr("is_closed")?.is_truthy()?, v.getattr("points")?)
                } else if v.is_instance_of::<PyTuple>() || v.is_instance_of::<PyList>() {
                    (v.is_instance_of::<PyTuple>(), v.clone())
                } else {
                    return Err(self.mismatch(v, "Path or a sequence of points"));
                };
                t::encode_path(buf, closed, &self.points(&pts)?);
            }
            Kind::Polygon => {
                let pts = if v.hasattr("points")? {
                    v.getattr("points")?
                } else if v.is_instance_of::<PyTuple>() || v.is_instance_of::<PyList>() {
                    v.clone()
                } else {
                    return Err(self.mismatch(v, "Polygon or a sequence of points"));
                };
                t::encode_polygon(buf, &self.points(&pts)?);
            }
            _ => unreachable!("not a geometric kind"),
        }
        Ok(())
    }

    /// A BitString (asyncpg's or ours: `.bytes` and `len()` bits), or bytes
    /// (all their bits).
    pub fn bits(&self, v: &Bound<'py, PyAny>, buf: &mut Vec<u8>) -> PyResult<()> {
        let (data, n): (Vec<u8>, usize) = if let Ok(b) = v.downcast::<PyBytes>() {
            (b.as_bytes().to_vec(), b.as_bytes().len() * 8)
        } else if let Ok(b) = v.downcast::<PyByteArray>() {
            let d = b.to_vec();
            let n = d.len() * 8;
            (d, n)
        } else if v.hasattr("bytes")? && v.hasattr("__len__")? {
            (v.getattr("bytes")?.extract()?, v.len()?)
        } else {
            return Err(self.mismatch(v, "BitString or bytes"));
        };
        t::encode_bits(buf, n, &data)
            .map_err(|_| self.fail("a BitString's length does not match its bytes".into()))
    }
}
