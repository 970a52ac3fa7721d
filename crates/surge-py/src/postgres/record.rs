//! `Record`: one result row, indexed by position and by column name (asyncpg's
//! shape). All rows of a statement share one `Desc` (names and a name -> index
//! dict), so a row costs its values and one pointer.

use std::sync::Arc;

use pyo3::exceptions::{PyIndexError, PyKeyError, PyTypeError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyInt, PyList, PySlice, PyString, PyTuple};

/// Column names of a statement's rows, shared by all of them.
pub struct Desc {
    pub names: Vec<Py<PyString>>,
    /// name -> position (the first column of a duplicated name wins, as in asyncpg).
    pub index: Py<PyDict>,
}

impl Desc {
    pub fn new(py: Python<'_>, names: &[String]) -> PyResult<Arc<Desc>> {
        let index = PyDict::new(py);
        let mut v = Vec::with_capacity(names.len());
        for (i, n) in names.iter().enumerate().rev() {
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
    pub values: Vec<PyObject>,
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
            let n = self.values.len() as isize;
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
    fn __len__(&self) -> usize {
        self.values.len()
    }

    fn __getitem__(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<PyObject> {
        if let Ok(sl) = key.downcast::<PySlice>() {
            let t = PyTuple::new(py, self.values.iter().map(|v| v.clone_ref(py)))?;
            return Ok(t.as_any().get_item(sl)?.unbind());
        }
        match self.position(py, key)? {
            Some(i) => Ok(self.values[i].clone_ref(py)),
            None if key.is_instance_of::<PyString>() => {
                Err(PyKeyError::new_err(key.clone().unbind()))
            }
            None => Err(PyIndexError::new_err("Record index out of range")),
        }
    }

    fn __contains__(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<bool> {
        self.desc.index.bind(py).contains(key)
    }

    fn __iter__(&self, py: Python<'_>) -> PyResult<PyObject> {
        let t = PyTuple::new(py, self.values.iter().map(|v| v.clone_ref(py)))?;
        Ok(t.try_iter()?.into_any().unbind())
    }

    /// The column names, in order.
    fn keys<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyPyAnyIter>> {
        let t = PyTuple::new(py, self.desc.names.iter().map(|v| v.clone_ref(py)))?;
        t.try_iter()
    }

    /// The values, in order.
    fn values<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyPyAnyIter>> {
        let t = PyTuple::new(py, self.values.iter().map(|v| v.clone_ref(py)))?;
        t.try_iter()
    }

    /// `(name, value)` pairs, in order.
    fn items<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyPyAnyIter>> {
        let pairs = PyList::empty(py);
        for (n, v) in self.desc.names.iter().zip(&self.values) {
            pairs.append((n.clone_ref(py), v.clone_ref(py)))?;
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
            Ok(Some(i)) => Ok(self.values[i].clone_ref(py)),
            _ => Ok(default.unwrap_or_else(|| py.None())),
        }
    }

    fn __eq__(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> PyResult<bool> {
        let mine = PyTuple::new(py, self.values.iter().map(|v| v.clone_ref(py)))?;
        if let Ok(r) = other.downcast::<Record>() {
            let theirs = PyTuple::new(py, r.get().values.iter().map(|v| v.clone_ref(py)))?;
            return mine.eq(theirs);
        }
        if other.is_instance_of::<PyTuple>() {
            return mine.eq(other);
        }
        Ok(false)
    }

    fn __hash__(&self, py: Python<'_>) -> PyResult<isize> {
        PyTuple::new(py, self.values.iter().map(|v| v.clone_ref(py)))?.hash()
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        let mut s = String::from("<Record");
        for (n, v) in self.desc.names.iter().zip(&self.values) {
            s.push(' ');
            s.push_str(n.bind(py).to_str()?);
            s.push('=');
            s.push_str(v.bind(py).repr()?.to_str()?);
        }
        s.push('>');
        Ok(s)
    }
}

type PyPyAnyIter = pyo3::types::PyIterator;
