//! `Tuple`: a row from a space; indexable by position and, when the space's
//! format names its fields, by name.

use pyo3::exceptions::{PyIndexError, PyKeyError};
use pyo3::prelude::*;
use pyo3::pyclass::CompareOp;
use pyo3::types::{PyDict, PyList, PySlice, PyString, PyTuple};

#[pyclass(frozen, sequence, module = "surge._core", name = "Tuple")]
pub struct Tuple {
    pub items: Py<PyTuple>,
    /// Field name -> position, shared by every row of the same space.
    pub names: Option<Py<PyDict>>,
}

#[pymethods]
impl Tuple {
    #[new]
    #[pyo3(signature = (items, names=None))]
    fn py_new(items: &Bound<'_, PyAny>, names: Option<Bound<'_, PyDict>>) -> PyResult<Self> {
        let t = PyTuple::new(items.py(), items.try_iter()?.collect::<PyResult<Vec<_>>>()?)?;
        Ok(Tuple {
            items: t.unbind(),
            names: names.map(Bound::unbind),
        })
    }

    fn __len__(&self, py: Python<'_>) -> usize {
        self.items.bind(py).len()
    }

    fn __getitem__<'py>(&self, key: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
        let py = key.py();
        let items = self.items.bind(py);
        if let Ok(i) = key.extract::<isize>() {
            let n = items.len() as isize;
            let j = if i < 0 { i + n } else { i };
            if j < 0 || j >= n {
                return Err(PyIndexError::new_err("tuple index out of range"));
            }
            return items.get_item(j as usize);
        }
        if key.is_instance_of::<PySlice>() {
            return items.as_any().get_item(key);
        }
        if let Ok(name) = key.downcast::<PyString>() {
            if let Some(idx) = self.position(py, name)? {
                return match items.get_item(idx) {
                    Ok(v) => Ok(v),
                    // A named field past the tuple's end (formats may be longer).
                    Err(_) => Ok(py.None().into_bound(py)),
                };
            }
            return Err(PyKeyError::new_err(name.clone().unbind()));
        }
        Err(PyKeyError::new_err(key.clone().unbind()))
    }

    fn __iter__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        Ok(self.items.bind(py).as_any().try_iter()?.into_any())
    }

    /// Whether `name` is a field name of the tuple's format, as asynctnt's
    /// `TarantoolTuple` (and surge's PostgreSQL `Record`, as asyncpg's) answer
    /// `in`: ``"email" in row`` asks about the field. Values: `as_tuple()`.
    fn __contains__(&self, py: Python<'_>, name: &Bound<'_, PyAny>) -> PyResult<bool> {
        match (&self.names, name.downcast::<PyString>()) {
            (Some(n), Ok(name)) => n.bind(py).contains(name),
            _ => Ok(false),
        }
    }

    /// The hash of its values as a tuple: it equals that tuple (asynctnt's
    /// tuples are hashable too, so ported code may put them in sets).
    fn __hash__(&self, py: Python<'_>) -> PyResult<isize> {
        self.items.bind(py).hash()
    }

    /// `==` with a Tuple, a tuple or a list of the same values; `<`, `<=`, `>`,
    /// `>=` with a Tuple or a tuple, as tuples order (asynctnt's sort too).
    fn __richcmp__(&self, other: &Bound<'_, PyAny>, op: CompareOp) -> PyResult<Py<PyAny>> {
        let py = other.py();
        let mine = self.items.bind(py);
        let theirs = if let Ok(t) = other.downcast::<Tuple>() {
            t.get().items.bind(py).clone()
        } else if other.is_instance_of::<PyTuple>() {
            other.downcast::<PyTuple>()?.clone()
        } else if other.is_instance_of::<PyList>() && matches!(op, CompareOp::Eq | CompareOp::Ne) {
            PyTuple::new(py, other.try_iter()?.collect::<PyResult<Vec<_>>>()?)?
        } else {
            return Ok(py.NotImplemented());
        };
        Ok(mine.rich_compare(theirs, op)?.unbind())
    }

    /// `<Tuple id=1 name='a'>`: each value after its field name (its position
    /// when the format has none for it), as asynctnt's `TarantoolTuple`.
    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        let items = self.items.bind(py);
        let mut labels: Vec<Option<Bound<'_, PyAny>>> = vec![None; items.len()];
        if let Some(n) = &self.names {
            for (k, v) in n.bind(py).iter() {
                let i: usize = v.extract()?;
                if i < labels.len() {
                    labels[i] = Some(k);
                }
            }
        }
        let mut out = String::from("<Tuple");
        for (i, (v, label)) in items.iter().zip(labels).enumerate() {
            match label {
                Some(k) => out.push_str(&format!(" {}={}", k.str()?, v.repr()?)),
                None => out.push_str(&format!(" {i}={}", v.repr()?)),
            }
        }
        out.push('>');
        Ok(out)
    }

    /// The value of field `name`, or `default` when the format lacks it (or
    /// `name` is not a str: asynctnt's `get(1)` is None too, not field 1).
    #[pyo3(signature = (name, default=None))]
    fn get<'py>(
        &self,
        name: &Bound<'py, PyAny>,
        default: Option<Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let py = name.py();
        let pos = match name.downcast::<PyString>() {
            Ok(name) => self.position(py, name)?,
            Err(_) => None,
        };
        match pos {
            Some(i) if i < self.items.bind(py).len() => self.items.bind(py).get_item(i),
            _ => Ok(default.unwrap_or_else(|| py.None().into_bound(py))),
        }
    }

    /// Field names from the space format (empty when it has none).
    fn keys<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        match &self.names {
            Some(n) => Ok(n.bind(py).keys()),
            None => Ok(PyList::empty(py)),
        }
    }

    /// {name: value} for the named fields that the tuple has.
    fn as_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        let items = self.items.bind(py);
        if let Some(n) = &self.names {
            for (k, v) in n.bind(py).iter() {
                let i: usize = v.extract()?;
                if i < items.len() {
                    d.set_item(k, items.get_item(i)?)?;
                }
            }
        }
        Ok(d)
    }

    /// Every value, in order (asynctnt's `values()`).
    fn values<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        self.__iter__(py)
    }

    /// `(name, value)` of the named fields the tuple has, in field order
    /// (asynctnt's `items()`; empty when the space has no format).
    fn items<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let items = self.items.bind(py);
        let mut named: Vec<(usize, Bound<'py, PyAny>)> = Vec::new();
        if let Some(n) = &self.names {
            for (k, v) in n.bind(py).iter() {
                let i: usize = v.extract()?;
                if i < items.len() {
                    named.push((i, k));
                }
            }
        }
        named.sort_by_key(|(i, _)| *i);
        let out = PyList::empty(py);
        for (i, k) in named {
            out.append((k, items.get_item(i)?))?;
        }
        Ok(out)
    }

    /// The values as a plain Python tuple.
    fn as_tuple<'py>(&self, py: Python<'py>) -> Bound<'py, PyTuple> {
        self.items.bind(py).clone()
    }
}

impl Tuple {
    fn position(&self, py: Python<'_>, name: &Bound<'_, PyString>) -> PyResult<Option<usize>> {
        match &self.names {
            Some(n) => match n.bind(py).get_item(name)? {
                Some(i) => Ok(Some(i.extract()?)),
                None => Ok(None),
            },
            None => Ok(None),
        }
    }
}
