//! `IprotoLane`: `Connection.select/insert/replace/update/upsert/delete` in one
//! native call each, when the call needs nothing of Python.
//!
//! Why: at 10 coroutines on one connection (seed 000) a Tarantool client is bound
//! by its CPU per request while the server waits, and the Python frames between
//! the user's call and the codec (the method, its helper, the engine's `request`)
//! were about a quarter of that CPU. The lane does what those frames do, step for
//! step: the space looked up by name in the connection's name table (`_names`:
//! empty while a schema reload is due, so a due reload always takes the Python
//! path), the index by name in the space's, the key and the iterator as the
//! methods make them, then the engine's request path (`crate::lane::EngineLane`).
//!
//! Whenever that is not all the call needs, it goes to the Python method
//! (given as the fallback), which behaves exactly as it always did: a per-call
//! `timeout`, a transaction open on the connection (a request may belong to its
//! stream), a name the cached schema lacks, a space given by id, a field name in
//! update operations, an iterator by name, a value MessagePack cannot hold (the
//! Python path raises the error), not connected, over a limit.

use pyo3::gc::PyVisit;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyInt, PyList, PySequence, PyString, PyTuple};
use pyo3::PyTraverseError;

use super::codec::IprotoCodec;
use crate::engine_state::slot_class;
use crate::lane::{native_or_fallback, Early, EngineLane, Given};

slot_class! {
    /// The base class of `surge.tarantool.Connection`: the state every lane
    /// call reads (`crate::engine_state`'s slots: two field loads rather than
    /// two lookups in the connection's instance dict, ~270 instructions).
    IprotoConnState {
        names => c"_names",
        tx_open => c"_tx_open",
    }
}

/// select's limit when none is given (`surge.tarantool.connection.MAX_LIMIT`).
const MAX_LIMIT: u64 = 0xFFFF_FFFF;
/// select's iterators when none is given: EQ with a key, ALL without.
const ITERATOR_EQ: u64 = 0;
const ITERATOR_ALL: u64 = 2;

/// A space as the request needs it: its id and field names.
struct Space {
    id: u64,
    names: Option<Py<PyDict>>,
    info: PyObject,
}

impl Space {
    fn clone_ref(&self, py: Python<'_>) -> Self {
        Space {
            id: self.id,
            names: self.names.as_ref().map(|n| n.clone_ref(py)),
            info: self.info.clone_ref(py),
        }
    }
}

/// The last space looked up: the name table it was found in, the name object
/// and what was found. A name table is never changed once in use (a reload
/// installs a new one), so the same table and the same name object give the
/// same space; the lookup's five dict and attribute reads become two identity
/// checks (callers pass the same literal name again and again).
struct LastSpace {
    table: Py<PyDict>,
    name: PyObject,
    space: Space,
}

/// The connection's Python methods, by the index of their request in
/// `IprotoLane::fallbacks`.
#[derive(Clone, Copy)]
enum Op {
    Select,
    Insert,
    Replace,
    Update,
    Upsert,
    Delete,
}

#[pyclass(module = "surge._core")]
pub struct IprotoLane {
    codec: Py<IprotoCodec>,
    lane: EngineLane,
    /// The connection's slots (`_names`, `_tx_open`).
    conn: Py<IprotoConnState>,
    /// The keys the engine counts requests under (the codec's bound methods):
    /// select, insert (and replace), update, upsert, delete.
    key_select: PyObject,
    key_insert: PyObject,
    key_update: PyObject,
    key_upsert: PyObject,
    key_delete: PyObject,
    /// The connection's Python methods, by `Op`.
    fallbacks: [PyObject; 6],
    last: Option<LastSpace>,
}

/// `key` as the methods send it: None is no key, a list or tuple as it is, any
/// other value a key of one part; None for a dict (by field names: the Python
/// path lays it out by the index's parts).
fn key_of<'py>(key: &Bound<'py, PyAny>) -> PyResult<Option<Bound<'py, PyAny>>> {
    let py = key.py();
    if key.is_none() {
        return Ok(Some(PyTuple::empty(py).into_any()));
    }
    if key.is_instance_of::<PyList>() || key.is_instance_of::<PyTuple>() {
        return Ok(Some(key.clone()));
    }
    if key.is_instance_of::<PyDict>() {
        return Ok(None);
    }
    Ok(Some(PyTuple::new(py, [key])?.into_any()))
}

/// Whether update/upsert operations need nothing of the schema and nothing of
/// Python's checks: a list or tuple of operations, each a list or tuple whose
/// operator is one of Tarantool's, with its items all there (three; five for a
/// splice) and a field number (an int, not a bool). Names, and anything malformed
/// (which the Python path refuses with asynctnt's error classes), take that path.
fn plain_ops(ops: &Bound<'_, PyAny>) -> PyResult<bool> {
    if !(ops.is_instance_of::<PyList>() || ops.is_instance_of::<PyTuple>()) {
        return Ok(false);
    }
    let ops = ops.downcast::<PySequence>()?;
    for op in ops.try_iter()? {
        let op = op?;
        if !(op.is_instance_of::<PyList>() || op.is_instance_of::<PyTuple>()) {
            return Ok(false);
        }
        let op = op.downcast::<PySequence>()?;
        let n = op.len()?;
        if n < 3 || !plain_field(&op.get_item(1)?) {
            return Ok(false);
        }
        let kind = op.get_item(0)?;
        let Ok(kind) = kind.downcast::<PyString>() else {
            return Ok(false);
        };
        match kind.to_str()? {
            "+" | "-" | "&" | "^" | "|" | "#" | "!" | "=" => {}
            ":" if n >= 5 && plain_field(&op.get_item(2)?) && plain_field(&op.get_item(3)?) => {}
            _ => return Ok(false),
        }
    }
    Ok(true)
}

/// An int that is not a bool (asynctnt would take True as 1; surge refuses it).
fn plain_field(v: &Bound<'_, PyAny>) -> bool {
    v.is_instance_of::<PyInt>() && !v.is_instance_of::<PyBool>()
}

/// The keyword arguments given (those left out are not passed on).
fn keywords<'py>(
    py: Python<'py>,
    given: &[(&str, Option<&Bound<'py, PyAny>>)],
) -> PyResult<Bound<'py, PyDict>> {
    let kw = PyDict::new(py);
    for (name, v) in given {
        if let Some(v) = v {
            kw.set_item(name, v)?;
        }
    }
    Ok(kw)
}

/// An unsigned int argument, or None when it is anything else (the Python path
/// judges it).
fn uint(v: &Bound<'_, PyAny>) -> Option<u64> {
    if v.is_instance_of::<PyInt>() {
        v.extract().ok()
    } else {
        None
    }
}

impl IprotoLane {
    /// The space named `space` in the connection's name table, or None (not a
    /// name, not known, a reload due, a transaction open: the Python path).
    fn space(&mut self, py: Python<'_>, space: &Bound<'_, PyAny>) -> PyResult<Option<Space>> {
        if !space.is_instance_of::<PyString>() {
            return Ok(None);
        }
        let conn = self.conn.get();
        if conn.tx_open.get(py).map_or(Ok(true), |t| t.is_truthy())? {
            return Ok(None);
        }
        let Some(table) = conn.names.get(py) else {
            return Ok(None);
        };
        if let Some(last) = &self.last {
            if last.table.bind(py).is(&table) && last.name.bind(py).is(space) {
                return Ok(Some(last.space.clone_ref(py)));
            }
        }
        let table = table.downcast_into::<PyDict>()?;
        let Some(info) = table.get_item(space)? else {
            return Ok(None);
        };
        let Some(id) = uint(&info.getattr(intern!(py, "id"))?) else {
            return Ok(None);
        };
        let names = info.getattr(intern!(py, "field_names"))?;
        let names = if names.is_none() {
            None
        } else {
            match names.downcast_into::<PyDict>() {
                Ok(d) => Some(d.unbind()),
                Err(_) => return Ok(None),
            }
        };
        let found = Space {
            id,
            names,
            info: info.unbind(),
        };
        self.last = Some(LastSpace {
            table: table.unbind(),
            name: space.clone().unbind(),
            space: found.clone_ref(py),
        });
        Ok(Some(found))
    }

    /// The id of `index` (an id, or a name in the space's indexes).
    fn index(
        &self,
        py: Python<'_>,
        space: &Space,
        index: &Bound<'_, PyAny>,
    ) -> PyResult<Option<u64>> {
        if index.is_instance_of::<PyInt>() {
            return Ok(index.extract().ok());
        }
        if !index.is_instance_of::<PyString>() {
            return Ok(None);
        }
        let indexes = space.info.bind(py).getattr(intern!(py, "indexes"))?;
        let Ok(indexes) = indexes.downcast_into::<PyDict>() else {
            return Ok(None);
        };
        Ok(match indexes.get_item(index)? {
            Some(id) => uint(&id),
            None => None,
        })
    }

    /// The engine's request path around `encode` (None: the Python path).
    fn submit(
        &mut self,
        py: Python<'_>,
        key: &PyObject,
        encode: impl FnOnce(&mut IprotoCodec) -> PyResult<u64>,
    ) -> PyResult<Option<PyObject>> {
        let (admitted, id) = {
            let Ok(mut codec) = self.codec.try_borrow_mut(py) else {
                return Ok(None);
            };
            let Some(admitted) = self.lane.admit(py, codec.buffered())? else {
                return Ok(None);
            };
            let Ok(id) = encode(&mut codec) else {
                return Ok(None);
            };
            (admitted, id)
        };
        // The codec is released: a flush takes its buffer.
        self.lane.register(py, admitted, id, key).map(Some)
    }
}

#[pymethods]
impl IprotoLane {
    /// A lane over `engine` (a `PipelinedConnection`), its `codec` and the
    /// `connection` (a `surge.tarantool.Connection`); the fallbacks are the
    /// connection's Python methods, taken when the lane cannot serve a call.
    #[new]
    #[pyo3(signature = (
        codec, engine, connection, fallback_select, fallback_insert, fallback_replace,
        fallback_update, fallback_upsert, fallback_delete, flush_size
    ))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        codec: Bound<'_, IprotoCodec>,
        engine: Bound<'_, PyAny>,
        connection: Bound<'_, PyAny>,
        fallback_select: PyObject,
        fallback_insert: PyObject,
        fallback_replace: PyObject,
        fallback_update: PyObject,
        fallback_upsert: PyObject,
        fallback_delete: PyObject,
        flush_size: usize,
    ) -> PyResult<Self> {
        let conn = connection.downcast_into::<IprotoConnState>()?.unbind();
        let key = |name: &Bound<'_, PyString>| codec.getattr(name).map(Bound::unbind);
        Ok(IprotoLane {
            key_select: key(intern!(py, "select"))?,
            key_insert: key(intern!(py, "insert"))?,
            key_update: key(intern!(py, "update"))?,
            key_upsert: key(intern!(py, "upsert"))?,
            key_delete: key(intern!(py, "delete"))?,
            codec: codec.unbind(),
            lane: EngineLane::new(engine, flush_size, Early::Engine)?,
            conn,
            last: None,
            fallbacks: [
                fallback_select,
                fallback_insert,
                fallback_replace,
                fallback_update,
                fallback_upsert,
                fallback_delete,
            ],
        })
    }

    /// `Connection.select`.
    #[pyo3(signature = (
        space, key=None, *, index=Given::Missing, limit=None, offset=Given::Missing,
        iterator=None, timeout=None
    ))]
    #[allow(clippy::too_many_arguments)]
    fn select<'py>(
        slf: &Bound<'py, Self>,
        space: &Bound<'py, PyAny>,
        key: Option<&Bound<'py, PyAny>>,
        index: Given<'py>,
        limit: Option<&Bound<'py, PyAny>>,
        offset: Given<'py>,
        iterator: Option<&Bound<'py, PyAny>>,
        timeout: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<PyObject> {
        let py = slf.py();
        let none = py.None().into_bound(py);
        let key = key.unwrap_or(&none);
        native_or_fallback(
            slf,
            |this| match timeout.is_none() {
                true => this.select_now(py, space, key, index.get(), limit, offset.get(), iterator),
                false => Ok(None),
            },
            |this| this.fallback(Op::Select),
            |f| {
                let kw = keywords(
                    py,
                    &[
                        ("index", index.get()),
                        ("limit", limit),
                        ("offset", offset.get()),
                        ("iterator", iterator),
                        ("timeout", timeout),
                    ],
                )?;
                Ok(f.call((space, key), Some(&kw))?.unbind())
            },
        )
    }

    /// `Connection.insert` (``replace=True``: `Connection.replace`, asynctnt's way).
    #[pyo3(signature = (space, t, *, replace=false, timeout=None))]
    fn insert(
        slf: &Bound<'_, Self>,
        space: &Bound<'_, PyAny>,
        t: &Bound<'_, PyAny>,
        replace: bool,
        timeout: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<PyObject> {
        let op = if replace { Op::Replace } else { Op::Insert };
        Self::store(slf, space, t, op, timeout)
    }

    /// `Connection.replace`.
    #[pyo3(signature = (space, t, *, timeout=None))]
    fn replace(
        slf: &Bound<'_, Self>,
        space: &Bound<'_, PyAny>,
        t: &Bound<'_, PyAny>,
        timeout: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<PyObject> {
        Self::store(slf, space, t, Op::Replace, timeout)
    }

    /// `Connection.update` (``operations`` is asynctnt's name for ``ops``: the
    /// Python method takes it).
    #[pyo3(signature = (space, key, ops=None, *, index=Given::Missing, timeout=None, operations=None))]
    #[allow(clippy::too_many_arguments)]
    fn update<'py>(
        slf: &Bound<'py, Self>,
        space: &Bound<'py, PyAny>,
        key: &Bound<'py, PyAny>,
        ops: Option<&Bound<'py, PyAny>>,
        index: Given<'py>,
        timeout: Option<&Bound<'py, PyAny>>,
        operations: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<PyObject> {
        let py = slf.py();
        let none = py.None().into_bound(py);
        let ops = ops.unwrap_or(&none);
        native_or_fallback(
            slf,
            |this| {
                if timeout.is_some() || operations.is_some() || !plain_ops(ops)? {
                    return Ok(None);
                }
                let rk = this.key_update.clone_ref(py);
                let encode = |c: &mut IprotoCodec, sp: Space, idx: u64, k: &Bound<'_, PyAny>| {
                    c.update(sp.id, idx, k, ops, sp.names, 0)
                };
                this.keyed(py, space, index.get(), key, &rk, encode)
            },
            |this| this.fallback(Op::Update),
            |f| {
                let kw = keywords(
                    py,
                    &[
                        ("index", index.get()),
                        ("timeout", timeout),
                        ("operations", operations),
                    ],
                )?;
                Ok(f.call((space, key, ops), Some(&kw))?.unbind())
            },
        )
    }

    /// `Connection.upsert` (``operations`` as in `update`).
    #[pyo3(signature = (space, t, ops=None, *, timeout=None, operations=None))]
    fn upsert(
        slf: &Bound<'_, Self>,
        space: &Bound<'_, PyAny>,
        t: &Bound<'_, PyAny>,
        ops: Option<&Bound<'_, PyAny>>,
        timeout: Option<&Bound<'_, PyAny>>,
        operations: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<PyObject> {
        let py = slf.py();
        let none = py.None().into_bound(py);
        let ops = ops.unwrap_or(&none);
        native_or_fallback(
            slf,
            |this| {
                if timeout.is_some()
                    || operations.is_some()
                    || t.is_instance_of::<PyDict>()
                    || !plain_ops(ops)?
                {
                    return Ok(None);
                }
                let Some(sp) = this.space(py, space)? else {
                    return Ok(None);
                };
                let rk = this.key_upsert.clone_ref(py);
                this.submit(py, &rk, |c| c.upsert(sp.id, t, ops, 0))
            },
            |this| this.fallback(Op::Upsert),
            |f| {
                let kw = keywords(py, &[("timeout", timeout), ("operations", operations)])?;
                Ok(f.call((space, t, ops), Some(&kw))?.unbind())
            },
        )
    }

    /// `Connection.delete`.
    #[pyo3(signature = (space, key, *, index=Given::Missing, timeout=None))]
    fn delete<'py>(
        slf: &Bound<'py, Self>,
        space: &Bound<'py, PyAny>,
        key: &Bound<'py, PyAny>,
        index: Given<'py>,
        timeout: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<PyObject> {
        let py = slf.py();
        native_or_fallback(
            slf,
            |this| {
                if timeout.is_some() {
                    return Ok(None);
                }
                let rk = this.key_delete.clone_ref(py);
                let encode = |c: &mut IprotoCodec, sp: Space, idx: u64, k: &Bound<'_, PyAny>| {
                    c.delete(sp.id, idx, k, sp.names, 0)
                };
                this.keyed(py, space, index.get(), key, &rk, encode)
            },
            |this| this.fallback(Op::Delete),
            |f| {
                let kw = keywords(py, &[("index", index.get()), ("timeout", timeout)])?;
                Ok(f.call((space, key), Some(&kw))?.unbind())
            },
        )
    }

    fn __traverse__(&self, visit: PyVisit<'_>) -> Result<(), PyTraverseError> {
        visit.call(&self.codec)?;
        self.lane.traverse(&visit)?;
        visit.call(&self.conn)?;
        for o in [
            &self.key_select,
            &self.key_insert,
            &self.key_update,
            &self.key_upsert,
            &self.key_delete,
        ]
        .into_iter()
        .chain(&self.fallbacks)
        {
            visit.call(o)?;
        }
        if let Some(last) = &self.last {
            visit.call(&last.table)?;
            visit.call(&last.name)?;
            visit.call(&last.space.info)?;
            if let Some(n) = &last.space.names {
                visit.call(n)?;
            }
        }
        Ok(())
    }

    fn __clear__(&mut self) {
        self.lane.clear();
        self.last = None;
    }
}

impl IprotoLane {
    #[allow(clippy::too_many_arguments)]
    fn select_now(
        &mut self,
        py: Python<'_>,
        space: &Bound<'_, PyAny>,
        key: &Bound<'_, PyAny>,
        index: Option<&Bound<'_, PyAny>>,
        limit: Option<&Bound<'_, PyAny>>,
        offset: Option<&Bound<'_, PyAny>>,
        iterator: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Option<PyObject>> {
        // An explicit offset=None is the Python path's to refuse (limit=None is
        // "no limit" there; `limit` arrives as None either way).
        let arg = |v: Option<&Bound<'_, PyAny>>, default: u64| match v {
            Some(v) => uint(v),
            None => Some(default),
        };
        let (Some(limit), Some(offset)) = (arg(limit, MAX_LIMIT), arg(offset, 0)) else {
            return Ok(None);
        };
        let Some(key) = key_of(key)? else {
            return Ok(None);
        };
        let it = match iterator {
            Some(i) if !i.is_none() => match uint(i) {
                Some(i) => i,
                None => return Ok(None),
            },
            _ if key.len()? > 0 => ITERATOR_EQ,
            _ => ITERATOR_ALL,
        };
        let rk = self.key_select.clone_ref(py);
        let encode = |c: &mut IprotoCodec, sp: Space, idx: u64, k: &Bound<'_, PyAny>| {
            c.select(sp.id, idx, k, limit, offset, it, sp.names, 0)
        };
        self.keyed_as(py, space, index, &key, &rk, encode)
    }

    /// A request by key (select, update, delete): the space, the index and the
    /// key as the methods make them, then `encode(codec, space, index, key)`
    /// through the engine (None: the Python path).
    fn keyed(
        &mut self,
        py: Python<'_>,
        space: &Bound<'_, PyAny>,
        index: Option<&Bound<'_, PyAny>>,
        key: &Bound<'_, PyAny>,
        counted: &PyObject,
        encode: impl FnOnce(&mut IprotoCodec, Space, u64, &Bound<'_, PyAny>) -> PyResult<u64>,
    ) -> PyResult<Option<PyObject>> {
        let Some(key) = key_of(key)? else {
            return Ok(None);
        };
        self.keyed_as(py, space, index, &key, counted, encode)
    }

    /// `keyed` with the key made already.
    fn keyed_as(
        &mut self,
        py: Python<'_>,
        space: &Bound<'_, PyAny>,
        index: Option<&Bound<'_, PyAny>>,
        key: &Bound<'_, PyAny>,
        counted: &PyObject,
        encode: impl FnOnce(&mut IprotoCodec, Space, u64, &Bound<'_, PyAny>) -> PyResult<u64>,
    ) -> PyResult<Option<PyObject>> {
        let Some(sp) = self.space(py, space)? else {
            return Ok(None);
        };
        let idx = match index {
            None => Some(0),
            Some(i) => self.index(py, &sp, i)?,
        };
        let Some(idx) = idx else {
            return Ok(None);
        };
        self.submit(py, counted, |c| encode(c, sp, idx, key))
    }

    fn fallback(&self, op: Op) -> &PyObject {
        &self.fallbacks[op as usize]
    }

    /// insert, or replace (`op`).
    fn store(
        slf: &Bound<'_, Self>,
        space: &Bound<'_, PyAny>,
        t: &Bound<'_, PyAny>,
        op: Op,
        timeout: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<PyObject> {
        let py = slf.py();
        native_or_fallback(
            slf,
            |this| {
                // A dict is a tuple by field names: the Python method lays it out
                // by the space's format.
                if timeout.is_some() || t.is_instance_of::<PyDict>() {
                    return Ok(None);
                }
                let Some(sp) = this.space(py, space)? else {
                    return Ok(None);
                };
                let replace = matches!(op, Op::Replace);
                let names = sp.names;
                let rk = this.key_insert.clone_ref(py);
                this.submit(py, &rk, |c| c.insert(sp.id, t, names, replace, 0))
            },
            |this| this.fallback(op),
            |f| {
                let kw = keywords(py, &[("timeout", timeout)])?;
                Ok(f.call((space, t), Some(&kw))?.unbind())
            },
        )
    }
}
