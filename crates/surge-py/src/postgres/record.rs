//! `Record`: one result row, indexed by position and by column name (asyncpg's
//! shape). All rows of a statement share one `Desc` (names and a name -> index
//! dict), so a row costs its values and one pointer.

use std::sync::Arc;

use pyo3::exceptions::{PyIndexError, PyKeyError, PyTypeError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyInt, PyIterator, PyList, PySlice, PyString, PyTuple};

/// Column names of a statement's rows, shared by all of them.
pub struct Desc {
    pub names: Vec<Py<PyString>>,
    /// name -> position (the LAST column of a duplicated name wins, as in asyncpg 0.32).
    pub index: Py<PyDict>,
}

impl Desc {
    pub fn new(py: Python<'_>, names: &[String]) -> PyResult<Arc<Desc>> {
        let index = PyDict::new(py);
        let mut v = Vec::with_capacity(names.len());
        for (i, n) in names.iter().enumerate() {
            index.set_item(n, i)?;
        }
        for n in names {
            v.push(PyString::new(py, n).unbind());
        }
        Ok(Arc::new(Desc {
            names: v,
            index: index.unbind(),
        }))
    }
}

#[pyclass(module = "surge._core", frozen, sequence)]
pub struct Record {
    /// The values in column order (a tuple: iteration, slices, equality and
    /// hashing come from it for free).
    pub values: Py<PyTuple>,
    pub desc: Arc<Desc>,
}

impl Record {
    fn position(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<Option<usize>> {
        if let Ok(s) = key.downcast::<PyString>() {
            return match self.desc.index.bind(py).get_item(s)? {
                Some(i) => Ok(Some(i.extract()?)),
                None => Ok(None),
            };
        }
        if key.is_instance_of::<PyInt>() {
            let i: isize = key.extract()?;
            let n = self.values.bind(py).len() as isize;
            let j = if i < 0 { i + n } else { i };
            return Ok((0..n).contains(&j).then_some(j as usize));
        }
        Err(PyTypeError::new_err(
            "a Record is indexed by position (int) or column name (str)",
        ))
    }
}

#[pymethods]
impl Record {
    fn __len__(&self, py: Python<'_>) -> usize {
        self.values.bind(py).len()
    }

    fn __getitem__(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<PyObject> {
        let t = self.values.bind(py);
        if key.is_instance_of::<PySlice>() {
            return Ok(t.as_any().get_item(key)?.unbind());
        }
        match self.position(py, key)? {
            Some(i) => Ok(t.get_item(i)?.unbind()),
            None if key.is_instance_of::<PyString>() => {
                Err(PyKeyError::new_err(key.clone().unbind()))
            }
            None => Err(PyIndexError::new_err("Record index out of range")),
        }
    }

    fn __contains__(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<bool> {
        self.desc.index.bind(py).contains(key)
    }

    fn __iter__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyIterator>> {
        self.values.bind(py).try_iter()
    }

    /// The column names, in order.
    fn keys<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyIterator>> {
        let t = PyTuple::new(py, self.desc.names.iter().map(|v| v.clone_ref(py)))?;
        t.try_iter()
    }

    /// The values, in order.
    fn values<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyIterator>> {
        self.values.bind(py).try_iter()
    }

    /// `(name, value)` pairs, in order.
    fn items<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyIterator>> {
        let pairs = PyList::empty(py);
        for (n, v) in self.desc.names.iter().zip(self.values.bind(py).iter()) {
            pairs.append((n.clone_ref(py), v))?;
        }
        pairs.try_iter()
    }

    /// The value of column `key`, or `default` when there is no such column.
    #[pyo3(signature = (key, default=None))]
    fn get(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        default: Option<PyObject>,
    ) -> PyResult<PyObject> {
        match self.position(py, key) {
            Ok(Some(i)) => Ok(self.values.bind(py).get_item(i)?.unbind()),
            _ => Ok(default.unwrap_or_else(|| py.None())),
        }
    }

    fn __eq__(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> PyResult<bool> {
        let mine = self.values.bind(py);
        if let Ok(r) = other.downcast::<Record>() {
            return mine.eq(r.get().values.bind(py));
        }
        if other.is_instance_of::<PyTuple>() {
            return mine.eq(other);
        }
        Ok(false)
    }

    fn __hash__(&self, py: Python<'_>) -> PyResult<isize> {
        self.values.bind(py).hash()
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        let mut s = String::from("<Record");
        for (n, v) in self.desc.names.iter().zip(self.values.bind(py).iter()) {
            s.push(' ');
            s.push_str(n.bind(py).to_str()?);
            s.push('=');
            s.push_str(v.repr()?.to_str()?);
        }
        s.push('>');
        Ok(s)
    }
}
