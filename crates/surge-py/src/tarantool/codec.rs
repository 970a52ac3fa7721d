//! `IprotoCodec`: one connection's write buffer, read buffer and sync counter.
//!
//! Requests are encoded straight into the write buffer (Python takes it with
//! `take()` once per loop iteration); `feed()` parses every complete reply in the
//! read buffer and returns `(sync, ok, value)` triples for the engine to resolve
//! in bulk. Rows are built as `Tuple`s in that same pass when the request named a
//! space. Out-of-band messages (greeting, watcher events, pushes) come back with
//! `sync = None`.

use pyo3::create_exception;
use pyo3::exceptions::{PyException, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList, PyTuple};
use pyo3::IntoPyObjectExt;
use rustc_hash::FxHashMap;
use surge_proto::iproto::{self, key, request, Status};
use surge_proto::msgpack as mp;

use super::pack::pack;
use super::response::{new_response, ReplyInfo};
use super::unpack::{error_stack_to_py, unpack, unpack_data, unpack_rows};

use crate::lane::Buffered;
use crate::wire::{ReadBuf, ReplyParser, WriteBuf};

create_exception!(
    _core,
    IprotoProtocolError,
    PyException,
    "The byte stream from the server is not valid IPROTO."
);

#[pyclass(module = "surge._core")]
pub struct IprotoCodec {
    wbuf: WriteBuf,
    rbuf: ReadBuf,
    sync: u64,
    /// Requests whose reply rows become `Tuple`s, with the space's field names.
    /// Keyed by sync (a counter): Fx's multiply hash, where the default SipHash
    /// was ~300 instructions per request (an insert and a remove) for keys no
    /// peer chooses.
    row_names: FxHashMap<u64, Option<Py<PyDict>>>,
    greeted: bool,
    #[pyo3(get)]
    schema_version: u64,
    /// The schema version the connection's cached names are of (set by it):
    /// while replies carry this one, the engine's native read path skips the
    /// connection's per-read schema check.
    #[pyo3(get, set)]
    known_schema_version: u64,
    /// Requests encoded since the write buffer was last taken (`IprotoLane`'s
    /// early-flush rule: all of them unanswered means the server is idle).
    encoded: usize,
    /// True: data replies are `Response`s (lists with asynctnt's `Response`
    /// attributes), replies without data an empty `Response` whose `body` is
    /// None; False: plain lists, and None.
    #[pyo3(get, set)]
    responses: bool,
}

/// Which single-key-with-value pairs a data request's body has, in order.
enum Part<'a, 'py> {
    Uint(u64, u64),
    Str(u64, &'a str),
    Obj(u64, &'a Bound<'py, PyAny>),
}

impl IprotoCodec {
    /// Bytes in the write buffer and requests encoded since it was last taken.
    pub(super) fn buffered(&self) -> Buffered {
        Buffered {
            bytes: self.wbuf.len(),
            requests: self.encoded,
        }
    }

    fn next_sync(&mut self) -> u64 {
        self.encoded += 1;
        self.sync = self.sync.wrapping_add(1);
        self.sync
    }

    /// Encode one request; on a bad value the buffer is left as it was.
    fn request(&mut self, code: u32, stream_id: u64, parts: &[Part<'_, '_>]) -> PyResult<u64> {
        let sync = self.next_sync();
        let mark = self.wbuf.len();
        let start = iproto::start_frame(&mut self.wbuf, code, sync, stream_id);
        mp::write_map_len(&mut self.wbuf, parts.len());
        for p in parts {
            let r = match p {
                Part::Uint(k, v) => {
                    mp::write_uint(&mut self.wbuf, *k);
                    mp::write_uint(&mut self.wbuf, *v);
                    Ok(())
                }
                Part::Str(k, v) => {
                    mp::write_uint(&mut self.wbuf, *k);
                    mp::write_str(&mut self.wbuf, v);
                    Ok(())
                }
                Part::Obj(k, v) => {
                    mp::write_uint(&mut self.wbuf, *k);
                    pack(&mut self.wbuf, v)
                }
            };
            if let Err(e) = r {
                self.wbuf.truncate(mark);
                self.encoded -= 1;
                return Err(e);
            }
        }
        iproto::finish_frame(&mut self.wbuf, start);
        Ok(sync)
    }

    fn reply(&mut self, py: Python<'_>, f: &iproto::Frame<'_>) -> PyResult<PyObject> {
        let names = self.row_names.remove(&f.sync);
        let body = iproto::decode_body(f.body).map_err(|e| PyValueError::new_err(e.to_string()))?;
        if f.code & request::TYPE_ERROR != 0 {
            let code = f.code & !request::TYPE_ERROR;
            let message = match body.error_24 {
                Some(m) => unpack(py, m, &mut 0)?,
                None => "".into_py_any(py)?,
            };
            let stack = match body.error {
                Some(e) => error_stack_to_py(py, e)?,
                None => py.None(),
            };
            return (code, message, stack).into_py_any(py);
        }
        if body.metadata.is_some() || body.sql_info.is_some() || body.stmt_id.is_some() {
            return self.sql_reply(py, f.sync, f.schema_version, &body);
        }
        if let Some(v) = body.version {
            let d = PyDict::new(py);
            d.set_item("version", v)?;
            let features = match body.features {
                Some(fs) => unpack(py, fs, &mut 0)?,
                None => PyList::empty(py).into_any().unbind(),
            };
            d.set_item("features", features)?;
            return Ok(d.into_any().unbind());
        }
        let info = self.responses.then_some(ReplyInfo {
            sync: f.sync,
            schema_id: f.schema_version,
            no_body: 0,
        });
        match (body.data, names, info) {
            (Some(data), Some(names), _) => unpack_rows(py, data, &names, info),
            (Some(data), None, _) => unpack_data(py, data, info),
            (None, _, Some(info)) => {
                let none = ReplyInfo { no_body: 1, ..info };
                Ok(new_response(py, none)?.into_any().unbind())
            }
            (None, _, None) => Ok(py.None()),
        }
    }

    fn sql_reply(
        &self,
        py: Python<'_>,
        sync: u64,
        schema_id: u64,
        body: &iproto::Body<'_>,
    ) -> PyResult<PyObject> {
        let d = PyDict::new(py);
        d.set_item("sync", sync)?;
        // The reply's own: after DDL it is the new version, as asynctnt reports it.
        d.set_item("schema_id", schema_id)?;
        let mut names: Option<Py<PyDict>> = None;
        if let Some(meta) = body.metadata {
            let m = unpack(py, meta, &mut 0)?;
            // Column names (metadata key 0) give the rows their field names.
            let nd = PyDict::new(py);
            for (i, col) in m.bind(py).try_iter()?.enumerate() {
                if let Ok(name) = col?.get_item(0) {
                    nd.set_item(name, i)?;
                }
            }
            names = Some(nd.unbind());
            d.set_item("metadata", m)?;
        }
        if let Some(data) = body.data {
            d.set_item("rows", unpack_rows(py, data, &names, None)?)?;
        }
        if let Some(info) = body.sql_info {
            d.set_item("sql_info", unpack(py, info, &mut 0)?)?;
        }
        if let Some(id) = body.stmt_id {
            d.set_item("stmt_id", id)?;
        }
        if let Some(n) = body.bind_count {
            d.set_item("bind_count", n)?;
        }
        if let Some(bm) = body.bind_metadata {
            d.set_item("bind_metadata", unpack(py, bm, &mut 0)?)?;
        }
        Ok(d.into_any().unbind())
    }

    fn out_of_band(&self, py: Python<'_>, f: &iproto::Frame<'_>) -> PyResult<PyObject> {
        let body = iproto::decode_body(f.body).map_err(|e| PyValueError::new_err(e.to_string()))?;
        if f.code == request::EVENT {
            let k = match body.event_key {
                Some(k) => unpack(py, k, &mut 0)?,
                None => py.None(),
            };
            let v = match body.event_data {
                Some(v) => unpack(py, v, &mut 0)?,
                None => py.None(),
            };
            return ("event", k, v).into_py_any(py);
        }
        let data = match body.data {
            Some(d) => unpack(py, d, &mut 0)?,
            None => py.None(),
        };
        ("push", f.sync, data).into_py_any(py)
    }

    /// Decodes every complete frame at the start of `buf` into `out`; returns the
    /// bytes used (up to the first incomplete or bad frame) and how it ended.
    fn decode_frames(
        &mut self,
        py: Python<'_>,
        buf: &[u8],
        out: &mut Vec<Reply>,
    ) -> (usize, PyResult<()>) {
        let mut pos = 0;
        let result = (|| -> PyResult<()> {
            loop {
                let f = match iproto::decode_frame(&buf[pos..]).map_err(proto_err)? {
                    Status::Complete(f) => f,
                    Status::Partial => return Ok(()),
                };
                pos += f.len;
                if f.schema_version != 0 {
                    self.schema_version = f.schema_version;
                }
                if f.code == request::EVENT || f.code == request::CHUNK {
                    out.push((None, true, self.out_of_band(py, &f)?));
                    continue;
                }
                let ok = f.code & request::TYPE_ERROR == 0;
                let value = self.reply(py, &f)?;
                out.push((Some(f.sync), ok, value));
            }
        })();
        (pos, result)
    }

    /// Every complete message in `data` (plus what was buffered), in order; on a
    /// bad stream, the messages before it and the error.
    fn parse(&mut self, py: Python<'_>, data: &[u8]) -> (Vec<Reply>, PyResult<()>) {
        let mut out = Vec::new();
        let result = self.parse_into(py, data, &mut out);
        (out, result)
    }

    fn parse_into(&mut self, py: Python<'_>, data: &[u8], out: &mut Vec<Reply>) -> PyResult<()> {
        let mut data = data;
        if !self.greeted {
            self.rbuf.extend(data);
            if self.rbuf.unread().len() < iproto::GREETING_SIZE {
                return Ok(());
            }
            let g = iproto::parse_greeting(&self.rbuf.unread()[..iproto::GREETING_SIZE])
                .map_err(proto_err)?;
            self.rbuf.advance(iproto::GREETING_SIZE);
            self.greeted = true;
            let info = PyDict::new(py);
            info.set_item("version", &g.version)?;
            info.set_item("version_tuple", g.version_tuple)?;
            info.set_item("protocol", &g.protocol)?;
            info.set_item("salt", PyBytes::new(py, &g.salt))?;
            out.push((None, true, ("greeting", info).into_py_any(py)?));
            data = &[];
        }
        if !self.rbuf.is_drained() || data.is_empty() {
            // A frame begun in an earlier read: complete it with just the bytes it
            // still needs (all of them while its size is unknown), decode from the
            // buffer, then go on with the rest of `data` without copying it.
            let have = self.rbuf.unread().len();
            let take = match iproto::frame_len(self.rbuf.unread()).map_err(proto_err)? {
                Some(total) => total.saturating_sub(have).min(data.len()),
                None => data.len(),
            };
            self.rbuf.extend(&data[..take]);
            data = &data[take..];
            let rbuf = std::mem::take(&mut self.rbuf);
            let (used, result) = self.decode_frames(py, rbuf.unread(), out);
            self.rbuf = rbuf;
            self.rbuf.advance(used);
            self.rbuf.compact();
            result?;
            if !self.rbuf.is_drained() {
                self.rbuf.extend(data);
                return Ok(());
            }
        }
        // Nothing buffered (the usual case): decode straight from `data` and keep
        // only an incomplete tail, saving a copy of every reply.
        let (used, result) = self.decode_frames(py, data, out);
        self.rbuf.extend(&data[used..]);
        result
    }
}

/// One parsed message: `(sync, ok, value)`, sync None for out-of-band ones.
type Reply = (Option<u64>, bool, PyObject);

impl ReplyParser for IprotoCodec {
    fn parse_replies<'py>(
        &mut self,
        py: Python<'py>,
        data: &[u8],
    ) -> (Vec<crate::wire::Reply<'py>>, PyResult<()>) {
        let (replies, result) = self.parse(py, data);
        let replies = replies
            .into_iter()
            .map(|(id, ok, v)| (id, ok, v.into_bound(py)))
            .collect();
        (replies, result)
    }

    fn batch_hook_due(&self) -> bool {
        self.schema_version != self.known_schema_version
    }
}

fn proto_err(e: impl std::fmt::Display) -> PyErr {
    IprotoProtocolError::new_err(e.to_string())
}

#[pymethods]
impl IprotoCodec {
    #[new]
    fn new() -> Self {
        IprotoCodec {
            wbuf: WriteBuf::new(),
            rbuf: ReadBuf::default(),
            sync: 0,
            row_names: FxHashMap::default(),
            greeted: false,
            schema_version: 0,
            known_schema_version: 0,
            encoded: 0,
            responses: false,
        }
    }

    /// Forget everything about the previous connection (buffers, pending names).
    fn reset(&mut self) {
        self.wbuf.clear();
        self.rbuf.clear();
        self.row_names.clear();
        self.greeted = false;
        self.encoded = 0;
    }

    /// Bytes waiting in the write buffer.
    fn pending(&self) -> usize {
        self.wbuf.len()
    }

    /// Requests whose replies have not arrived (and whose rows need names).
    fn pending_rows(&self) -> usize {
        self.row_names.len()
    }

    /// The write buffer's contents as bytes, leaving it empty.
    fn take<'py>(&mut self, py: Python<'py>) -> Bound<'py, PyBytes> {
        self.encoded = 0;
        self.wbuf.take(py)
    }

    /// Parse every complete message in `data` (plus what was buffered): a list of
    /// `(sync, ok, value)`; errors are `(sync, False, (code, message, ErrorInfo|None))`.
    fn feed<'py>(&mut self, py: Python<'py>, data: &[u8]) -> PyResult<Bound<'py, PyList>> {
        let (replies, result) = self.parse(py, data);
        result?;
        let out = PyList::empty(py);
        for r in replies {
            out.append(r)?;
        }
        Ok(out)
    }

    fn ping(&mut self) -> PyResult<u64> {
        let sync = self.next_sync();
        iproto::encode_ping(&mut self.wbuf, sync);
        Ok(sync)
    }

    fn auth(&mut self, user: &str, password: &str, salt: &[u8]) -> PyResult<u64> {
        let sync = self.next_sync();
        let s = iproto::scramble(salt, password.as_bytes());
        iproto::encode_auth(&mut self.wbuf, sync, user, &s);
        Ok(sync)
    }

    #[pyo3(signature = (features=vec![]))]
    fn id(&mut self, features: Vec<u64>) -> u64 {
        let sync = self.next_sync();
        iproto::encode_id(&mut self.wbuf, sync, &features);
        sync
    }

    #[pyo3(signature = (space, index, key, limit=u32::MAX as u64, offset=0, iterator=0, names=None, stream_id=0))]
    #[allow(clippy::too_many_arguments)]
    pub(super) fn select(
        &mut self,
        space: u64,
        index: u64,
        key: &Bound<'_, PyAny>,
        limit: u64,
        offset: u64,
        iterator: u64,
        names: Option<Py<PyDict>>,
        stream_id: u64,
    ) -> PyResult<u64> {
        let sync = self.request(
            request::SELECT,
            stream_id,
            &[
                Part::Uint(key::SPACE_ID, space),
                Part::Uint(key::INDEX_ID, index),
                Part::Uint(key::LIMIT, limit),
                Part::Uint(key::OFFSET, offset),
                Part::Uint(key::ITERATOR, iterator),
                Part::Obj(key::KEY, key),
            ],
        )?;
        self.row_names.insert(sync, names);
        Ok(sync)
    }

    /// INSERT, or REPLACE when `replace` is true.
    #[pyo3(signature = (space, tuple, names=None, replace=false, stream_id=0))]
    pub(super) fn insert(
        &mut self,
        space: u64,
        tuple: &Bound<'_, PyAny>,
        names: Option<Py<PyDict>>,
        replace: bool,
        stream_id: u64,
    ) -> PyResult<u64> {
        let code = if replace {
            request::REPLACE
        } else {
            request::INSERT
        };
        let sync = self.request(
            code,
            stream_id,
            &[
                Part::Uint(key::SPACE_ID, space),
                Part::Obj(key::TUPLE, tuple),
            ],
        )?;
        self.row_names.insert(sync, names);
        Ok(sync)
    }

    #[pyo3(signature = (space, index, key, ops, names=None, stream_id=0))]
    pub(super) fn update(
        &mut self,
        space: u64,
        index: u64,
        key: &Bound<'_, PyAny>,
        ops: &Bound<'_, PyAny>,
        names: Option<Py<PyDict>>,
        stream_id: u64,
    ) -> PyResult<u64> {
        let sync = self.request(
            request::UPDATE,
            stream_id,
            &[
                Part::Uint(key::SPACE_ID, space),
                Part::Uint(key::INDEX_ID, index),
                Part::Obj(key::KEY, key),
                // UPDATE carries its operations under IPROTO_TUPLE (UPSERT uses IPROTO_OPS).
                Part::Obj(key::TUPLE, ops),
            ],
        )?;
        self.row_names.insert(sync, names);
        Ok(sync)
    }

    #[pyo3(signature = (space, tuple, ops, stream_id=0))]
    pub(super) fn upsert(
        &mut self,
        space: u64,
        tuple: &Bound<'_, PyAny>,
        ops: &Bound<'_, PyAny>,
        stream_id: u64,
    ) -> PyResult<u64> {
        // Field numbers in ops are 0-based unless INDEX_BASE says otherwise; asynctnt
        // and tarantool-python both send 0-based, so do we.
        self.request(
            request::UPSERT,
            stream_id,
            &[
                Part::Uint(key::SPACE_ID, space),
                Part::Obj(key::TUPLE, tuple),
                Part::Obj(key::OPS, ops),
            ],
        )
    }

    #[pyo3(signature = (space, index, key, names=None, stream_id=0))]
    pub(super) fn delete(
        &mut self,
        space: u64,
        index: u64,
        key: &Bound<'_, PyAny>,
        names: Option<Py<PyDict>>,
        stream_id: u64,
    ) -> PyResult<u64> {
        let sync = self.request(
            request::DELETE,
            stream_id,
            &[
                Part::Uint(key::SPACE_ID, space),
                Part::Uint(key::INDEX_ID, index),
                Part::Obj(key::KEY, key),
            ],
        )?;
        self.row_names.insert(sync, names);
        Ok(sync)
    }

    #[pyo3(signature = (function, args, stream_id=0))]
    fn call(&mut self, function: &str, args: &Bound<'_, PyAny>, stream_id: u64) -> PyResult<u64> {
        self.request(
            request::CALL,
            stream_id,
            &[
                Part::Str(key::FUNCTION_NAME, function),
                Part::Obj(key::TUPLE, args),
            ],
        )
    }

    /// CALL_16 (Tarantool 1.6's call, asynctnt's `call16`): the server wraps each
    /// return value that is not a table in a tuple.
    #[pyo3(signature = (function, args, stream_id=0))]
    fn call16(&mut self, function: &str, args: &Bound<'_, PyAny>, stream_id: u64) -> PyResult<u64> {
        self.request(
            request::CALL_16,
            stream_id,
            &[
                Part::Str(key::FUNCTION_NAME, function),
                Part::Obj(key::TUPLE, args),
            ],
        )
    }

    #[pyo3(signature = (expr, args, stream_id=0))]
    fn eval(&mut self, expr: &str, args: &Bound<'_, PyAny>, stream_id: u64) -> PyResult<u64> {
        self.request(
            request::EVAL,
            stream_id,
            &[Part::Str(key::EXPR, expr), Part::Obj(key::TUPLE, args)],
        )
    }

    /// EXECUTE by SQL text (a str) or by prepared statement id (an int).
    #[pyo3(signature = (query, params, stream_id=0))]
    fn execute(
        &mut self,
        query: &Bound<'_, PyAny>,
        params: &Bound<'_, PyAny>,
        stream_id: u64,
    ) -> PyResult<u64> {
        let empty = PyTuple::empty(query.py());
        let opts = empty.as_any();
        if let Ok(id) = query.extract::<u64>() {
            self.request(
                request::EXECUTE,
                stream_id,
                &[
                    Part::Uint(key::STMT_ID, id),
                    Part::Obj(key::SQL_BIND, params),
                    Part::Obj(key::OPTIONS, opts),
                ],
            )
        } else {
            let sql: &str = query.extract()?;
            self.request(
                request::EXECUTE,
                stream_id,
                &[
                    Part::Str(key::SQL_TEXT, sql),
                    Part::Obj(key::SQL_BIND, params),
                    Part::Obj(key::OPTIONS, opts),
                ],
            )
        }
    }

    /// PREPARE of SQL text (a str); of a statement id (an int), it unprepares it.
    #[pyo3(signature = (sql, stream_id=0))]
    fn prepare(&mut self, sql: &Bound<'_, PyAny>, stream_id: u64) -> PyResult<u64> {
        if let Ok(id) = sql.extract::<u64>() {
            return self.request(request::PREPARE, stream_id, &[Part::Uint(key::STMT_ID, id)]);
        }
        let sql: &str = sql.extract()?;
        self.request(
            request::PREPARE,
            stream_id,
            &[Part::Str(key::SQL_TEXT, sql)],
        )
    }

    #[pyo3(signature = (stream_id, timeout=0.0, isolation=0))]
    fn begin(&mut self, stream_id: u64, timeout: f64, isolation: u64) -> u64 {
        let sync = self.next_sync();
        iproto::encode_begin(&mut self.wbuf, sync, stream_id, timeout, isolation);
        sync
    }

    fn commit(&mut self, stream_id: u64) -> u64 {
        let sync = self.next_sync();
        iproto::encode_commit(&mut self.wbuf, sync, stream_id);
        sync
    }

    fn rollback(&mut self, stream_id: u64) -> u64 {
        let sync = self.next_sync();
        iproto::encode_rollback(&mut self.wbuf, sync, stream_id);
        sync
    }

    /// IPROTO_WATCH (or UNWATCH): no reply; events come out of band.
    #[pyo3(signature = (event_key, watch=true))]
    fn watch(&mut self, event_key: &str, watch: bool) -> u64 {
        let sync = self.next_sync();
        iproto::encode_watch(&mut self.wbuf, sync, event_key, watch);
        sync
    }
}

/// `packb(obj) -> bytes`: MessagePack with Tarantool's extension types.
#[pyfunction]
pub fn msgpack_packb<'py>(obj: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyBytes>> {
    let mut buf = Vec::new();
    pack(&mut buf, obj)?;
    Ok(PyBytes::new(obj.py(), &buf))
}

/// `unpackb(data) -> object`: exactly one MessagePack value.
#[pyfunction]
pub fn msgpack_unpackb(py: Python<'_>, data: &[u8]) -> PyResult<PyObject> {
    let mut pos = 0;
    let v = unpack(py, data, &mut pos)?;
    if pos != data.len() {
        return Err(PyValueError::new_err(format!(
            "msgpack: {} extra bytes after the value",
            data.len() - pos
        )));
    }
    Ok(v)
}
