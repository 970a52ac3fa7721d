//! `PgCodec`: one PostgreSQL connection's buffers for the shared engine
//! (`surge.engine.PipelinedConnection`).
//!
//! Theory of operation: every request the driver makes ends with Sync (or is a
//! simple Query), so the server answers each with exactly one ReadyForQuery,
//! in order. The codec numbers requests, keeps what each waits for in a queue,
//! and closes the oldest at each ReadyForQuery. The messages before it fill in
//! the request: rows are decoded from the binary format straight to Python
//! `Record`s as their DataRows arrive (one pass, no intermediate values), the
//! command tag is kept, and an ErrorResponse is kept as the request's error
//! (the server skips the rest of that request up to its Sync, so the next one
//! is unaffected). `feed` returns the engine's `(id, ok, value)` triples:
//!
//! - a request: `(id, True, value)`, or `(id, False, error)` where `error` is a
//!   dict of the ErrorResponse fields (`{"C": "23505", "M": ..., ...}`) or an
//!   exception (a value that could not be decoded);
//! - out of band, `(None, True, event)`: `("notice", fields)`,
//!   `("notify", pid, channel, payload)`, `("parameter", name, value)`, and
//!   `("error", fields)` for an error no request owns (a FATAL before a close).
//!
//! Bytes that are not the protocol set `failed`: the oldest request gets
//! `(id, False, ProtocolError)` and the driver must drop the connection.

use std::collections::{HashMap, VecDeque};

use pyo3::create_exception;
use pyo3::exceptions::{PyException, PyIndexError, PyTypeError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList, PyTuple, PyType};
use std::sync::Arc;
use surge_proto::pgwire::frontend as fe;

use surge_proto::pgwire::types::{COPY_BINARY_HEADER, COPY_BINARY_TRAILER};
use surge_proto::pgwire::{read_frame, Error, Message, Status};

use super::copy_in::{CopyStream, Rows};
use super::custom::{map_elements, Custom, CustomMap, Format};
use super::encode::Encoder;
use super::registry::{resolve, typedef_of, CatalogRow, Registry};
use super::statement::{Statement, Types};

use crate::tls::PlainSink;
use crate::tls_client::TlsClientSession;
use crate::wire::{ReadBuf, Reply, ReplyParser, WriteBuf};

#[path = "replies.rs"]
mod replies;

create_exception!(
    _core,
    PgProtocolError,
    PyException,
    "The byte stream from the server is not valid PostgreSQL protocol."
);
create_exception!(
    _core,
    StatementGone,
    PyException,
    "The prepared statement belongs to a closed session or was evicted: prepare it again."
);

/// Why a COPY FROM STDIN that came as a plain query is refused (CopyFail).
const COPY_IN_REFUSED: &str = "surge: COPY FROM STDIN needs copy_to_table or copy_records_to_table";

/// COPY input is cut into CopyData messages of at most this many bytes
/// (the server reads them one at a time; huge messages only cost memory).
const COPY_CHUNK: usize = 256 * 1024;

/// What to return from a statement's rows.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    All,
    First,
    Value,
    Status,
}

/// Added to a mode: the reply is `(value, command tag or None)` (asyncpg's
/// `PreparedStatement.get_statusmsg` reads the tag; None when the portal was
/// suspended after the one row fetchrow asks for).
const MODE_TAGGED: u8 = 4;

impl Mode {
    fn from_int(m: u8) -> PyResult<Mode> {
        Ok(match m & !MODE_TAGGED {
            0 => Mode::All,
            1 => Mode::First,
            2 => Mode::Value,
            3 => Mode::Status,
            _ => {
                return Err(PyTypeError::new_err(
                    "mode is 0 (all), 1 (first), 2 (value) or 3 (status), + 4 (tagged)",
                ))
            }
        })
    }
}

enum Kind {
    Handshake,
    Simple,
    Prepare {
        name: String,
        query: String,
        params: Vec<u32>,
        columns: Vec<(String, u32)>,
    },
    Rows {
        stmt: Py<Statement>,
        mode: Mode,
        column: usize,
        /// The rows' class when not `Record` (asyncpg's ``record_class``).
        class: Option<Py<PyType>>,
        /// The reply carries the command tag too (`MODE_TAGGED`).
        tagged: bool,
    },
    /// Execute of a named portal (a cursor): all rows it gives, and whether more remain.
    Portal {
        stmt: Py<Statement>,
        class: Option<Py<PyType>>,
    },
    Many,
    Close,
    CopyOut(Vec<u8>),
    CopyIn,
}

struct Waiting {
    id: u64,
    kind: Kind,
    rows: Vec<PyObject>,
    value: Option<PyObject>,
    tag: Option<String>,
    error: Option<PyObject>,
}

/// Holds off the cyclic garbage collector while one read is decoded, and lets
/// it run as before afterwards (untouched when the program had turned it off).
///
/// Why: a pipelined read carries the rows of many queries at once (tens of
/// thousands of objects), all alive until their coroutines run; collections
/// triggered every 700 of them in the middle of the decode traversed the rows
/// decoded so far again and again and pushed them into the old generation,
/// whose full collections then walked every live row. Measured with 1000
/// coroutines on one connection (composite_range: 100 rows of a composite, two
/// ranges and a range[] per query): full collections took 45 % of the client's
/// CPU. One read is bounded (the loop's read size), so is what waits for the
/// collector; cycles made meanwhile are found by the next collection.
struct GcPause(bool);

impl GcPause {
    fn new(_py: Python<'_>) -> Self {
        // SAFETY: the GIL is held (the `Python` token); PyGC_Disable only flips
        // the interpreter's flag and returns its previous state.
        GcPause(unsafe { pyo3::ffi::PyGC_Disable() } == 1)
    }
}

impl Drop for GcPause {
    fn drop(&mut self) {
        if self.0 {
            // SAFETY: made by `new` under the GIL, dropped in the same call,
            // GIL still held.
            unsafe { pyo3::ffi::PyGC_Enable() };
        }
    }
}

#[pyclass(module = "surge._core")]
pub struct PgCodec {
    wbuf: WriteBuf,
    rbuf: ReadBuf,
    next_id: u64,
    waiting: VecDeque<Waiting>,
    data_error: Py<PyType>,
    protocol_error: Py<PyType>,
    /// Counts connections: statements prepared on an earlier one are refused.
    #[pyo3(get)]
    session: u64,
    /// A reply did not parse: the connection must be dropped.
    #[pyo3(get)]
    failed: bool,
    /// The backend's process id and cancel key (BackendKeyData).
    #[pyo3(get)]
    backend_pid: i32,
    #[pyo3(get)]
    backend_secret: i32,
    /// Transaction status of the last ReadyForQuery: "I", "T" or "E".
    tx_status: u8,
    /// The server's SASLFinal data, checked by the driver after the handshake.
    sasl_final: Option<Vec<u8>>,
    /// Server parameters (ParameterStatus): server_version, TimeZone ...
    #[pyo3(get)]
    server_params: Py<PyDict>,
    /// Custom codecs by type oid (`set_type_codec`).
    custom: Arc<CustomMap>,
    /// Types looked up in the catalog (composites, enums, domains, ranges ...).
    types: Arc<Registry>,
    /// The COPY FROM STDIN being streamed, if any (see `copy_in.rs`).
    stream: Option<CopyStream>,
}

enum BindErr {
    Py(PyErr),
    Wire(Error),
}

impl From<Error> for BindErr {
    fn from(e: Error) -> Self {
        BindErr::Wire(e)
    }
}

impl PgCodec {
    pub(super) fn types_ctx(&self) -> Types<'_> {
        Types {
            custom: &self.custom,
            registry: &self.types,
        }
    }

    fn push(&mut self, kind: Kind) -> u64 {
        self.next_id += 1;
        self.waiting.push_back(Waiting {
            id: self.next_id,
            kind,
            rows: Vec::new(),
            value: None,
            tag: None,
            error: None,
        });
        self.next_id
    }

    fn wire_err(&self, py: Python<'_>, e: Error) -> PyErr {
        PyErr::from_type(self.data_error.bind(py).clone(), e.to_string())
    }

    fn data_err(&self, py: Python<'_>, msg: String) -> PyErr {
        PyErr::from_type(self.data_error.bind(py).clone(), msg)
    }

    /// Write a Bind for `stmt` with `args`; nothing is left in the buffer on error.
    fn write_bind(
        &mut self,
        py: Python<'_>,
        stmt: &Statement,
        args: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        self.write_bind_to(py, stmt, args, "")
    }

    /// Write a Bind of `stmt` to `portal` ("" is the unnamed one).
    fn write_bind_to(
        &mut self,
        py: Python<'_>,
        stmt: &Statement,
        args: &Bound<'_, PyAny>,
        portal: &str,
    ) -> PyResult<()> {
        if stmt.session != self.session || stmt.is_closed() {
            return Err(StatementGone::new_err(stmt.name.clone()));
        }
        let args = args
            .downcast::<PyTuple>()
            .cloned()
            .or_else(|_| args.downcast::<PyList>().map(|l| l.to_tuple()))
            .map_err(|_| self.data_err(py, "arguments must be a tuple or list".into()))?;
        if args.len() != stmt.param_oids.len() {
            return Err(self.data_err(
                py,
                format!(
                    "the query takes {} argument(s), {} given",
                    stmt.param_oids.len(),
                    args.len()
                ),
            ));
        }
        let err = self.data_error.bind(py).clone();
        let enc = Encoder { py, err: &err };
        let r = fe::bind::<BindErr>(
            &mut self.wbuf,
            portal,
            &stmt.name,
            &stmt.param_formats,
            args.len(),
            |i, buf| {
                let v = args.get_item(i).map_err(BindErr::Py)?;
                if let (Some(custom), false) = (&stmt.param_custom[i], v.is_none()) {
                    let codec = stmt.param_codecs[i].as_deref();
                    return custom
                        .encode(&enc, stmt.param_oids[i], codec, &v, buf)
                        .map_err(|e| {
                            let msg = format!(
                                "invalid input for query argument ${}: {}",
                                i + 1,
                                e.value(py)
                            );
                            BindErr::Py(PyErr::from_type(err.clone(), msg))
                        });
                }
                let v = match &stmt.param_element_custom[i] {
                    Some(custom) if !v.is_none() => map_elements(py, &v, &custom.encoder)
                        .map_err(BindErr::Py)?
                        .into_bound(py),
                    _ => v,
                };
                let codec = stmt.param_codecs[i].as_deref();
                enc.encode(stmt.param_oids[i], codec, &v, buf).map_err(|e| {
                    let msg = format!(
                        "invalid input for query argument ${}: {}",
                        i + 1,
                        e.value(py)
                    );
                    BindErr::Py(PyErr::from_type(err.clone(), msg))
                })
            },
            &stmt.result_formats,
        );
        match r {
            Ok(()) => Ok(()),
            Err(BindErr::Py(e)) => Err(e),
            Err(BindErr::Wire(e)) => Err(self.wire_err(py, e)),
        }
    }
}

#[pymethods]
impl PgCodec {
    /// `data_error`: raised for arguments that do not fit; `protocol_error`:
    /// the exception a request gets when the stream does not parse.
    #[new]
    #[pyo3(signature = (data_error=None, protocol_error=None))]
    fn new(
        py: Python<'_>,
        data_error: Option<Py<PyType>>,
        protocol_error: Option<Py<PyType>>,
    ) -> Self {
        PgCodec {
            wbuf: WriteBuf::new(),
            rbuf: ReadBuf::default(),
            next_id: 0,
            waiting: VecDeque::new(),
            data_error: data_error.unwrap_or_else(|| py.get_type::<PyTypeError>().unbind()),
            protocol_error: protocol_error
                .unwrap_or_else(|| py.get_type::<PgProtocolError>().unbind()),
            session: 0,
            failed: false,
            backend_pid: 0,
            backend_secret: 0,
            tx_status: b'I',
            sasl_final: None,
            server_params: PyDict::new(py).unbind(),
            custom: Arc::new(HashMap::new()),
            types: Arc::new(Registry::new()),
            stream: None,
        }
    }

    /// Forget everything about the previous connection (a new session begins).
    fn reset(&mut self, py: Python<'_>) {
        self.wbuf.clear();
        self.rbuf.clear();
        self.waiting.clear();
        self.stream = None;
        self.failed = false;
        self.session += 1;
        self.tx_status = b'I';
        self.sasl_final = None;
        self.server_params = PyDict::new(py).unbind();
    }

    /// Use `encoder(value)` and `decoder(wire value)` for type `oid` in
    /// statements prepared from now on; `format` is "text" (str), "binary"
    /// (bytes) or "tuple" (asyncpg's tuple layouts, see `custom`).
    #[pyo3(signature = (oid, encoder, decoder, format="text"))]
    fn set_type_codec(
        &mut self,
        oid: u32,
        encoder: PyObject,
        decoder: PyObject,
        format: &str,
    ) -> PyResult<()> {
        let format = Format::parse(format)?;
        let custom = Custom {
            encoder,
            decoder,
            format,
        };
        Arc::make_mut(&mut self.custom).insert(oid, Arc::new(custom));
        Ok(())
    }

    /// Back to the built-in codec (or text) for type `oid`.
    fn reset_type_codec(&mut self, oid: u32) {
        Arc::make_mut(&mut self.custom).remove(&oid);
    }

    /// Whether `sql` may be a `COPY ... FROM STDIN`, which must go out alone
    /// (see `Statement.copy_in`).
    #[staticmethod]
    fn may_copy_in(sql: &str) -> bool {
        super::statement::may_copy_in(sql)
    }

    /// Bytes waiting for the engine's next write (while a COPY streams, its
    /// own: requests made meanwhile wait for its end, see `copy_in.rs`).
    fn pending(&self) -> usize {
        match &self.stream {
            Some(s) => s.out.len(),
            None => self.wbuf.len(),
        }
    }

    /// Requests sent (or buffered) whose ReadyForQuery has not arrived.
    fn waiting(&self) -> usize {
        self.waiting.len()
    }

    /// The bytes for the engine's next write, leaving their buffer empty.
    fn take<'py>(&mut self, py: Python<'py>) -> Bound<'py, PyBytes> {
        match &mut self.stream {
            Some(s) => {
                let b = PyBytes::new(py, &s.out);
                s.out.clear();
                b
            }
            None => self.wbuf.take(py),
        }
    }

    /// Transaction status after the last reply: "I" idle, "T" in a transaction,
    /// "E" in a failed one.
    #[getter]
    fn transaction_status(&self) -> String {
        char::from(self.tx_status).to_string()
    }

    /// The SASLFinal data of the last handshake (None if there was none).
    #[getter]
    fn sasl_final<'py>(&self, py: Python<'py>) -> Option<Bound<'py, PyBytes>> {
        self.sasl_final.as_deref().map(|d| PyBytes::new(py, d))
    }

    // -- handshake ------------------------------------------------------------

    /// StartupMessage with `params` (`user` is required); answered by
    /// `("auth", code, data)` when the server asks for a password, or `("ready",)`.
    fn startup(&mut self, py: Python<'_>, params: Vec<(String, String)>) -> PyResult<u64> {
        let p: Vec<(&str, &str)> = params
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        fe::startup(&mut self.wbuf, &p).map_err(|e| self.wire_err(py, e))?;
        Ok(self.push(Kind::Handshake))
    }

    /// PasswordMessage (cleartext or md5 digest); answered like `startup`.
    fn password(&mut self, py: Python<'_>, data: &[u8]) -> PyResult<u64> {
        fe::password(&mut self.wbuf, data).map_err(|e| self.wire_err(py, e))?;
        Ok(self.push(Kind::Handshake))
    }

    /// SASLInitialResponse; answered like `startup`.
    fn sasl_initial(&mut self, py: Python<'_>, mechanism: &str, data: &[u8]) -> PyResult<u64> {
        fe::sasl_initial_response(&mut self.wbuf, mechanism, data)
            .map_err(|e| self.wire_err(py, e))?;
        Ok(self.push(Kind::Handshake))
    }

    /// SASLResponse; answered like `startup` (SASLFinal is kept in `sasl_final`).
    fn sasl_response(&mut self, data: &[u8]) -> PyResult<u64> {
        fe::sasl_response(&mut self.wbuf, data).map_err(|e| PyTypeError::new_err(e.to_string()))?;
        Ok(self.push(Kind::Handshake))
    }

    /// Terminate: sent before a polite close; nothing answers it.
    fn terminate(&mut self) {
        fe::terminate(&mut self.wbuf);
    }

    /// A CancelRequest for this session, to send on a new connection.
    fn cancel_request<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        let mut b = Vec::with_capacity(16);
        fe::cancel_request(&mut b, self.backend_pid, self.backend_secret);
        PyBytes::new(py, &b)
    }

    // -- requests -------------------------------------------------------------

    /// A simple Query (any number of statements, text results not kept);
    /// answers the last command tag.
    fn simple_query(&mut self, py: Python<'_>, sql: &str) -> PyResult<u64> {
        fe::query(&mut self.wbuf, sql).map_err(|e| self.wire_err(py, e))?;
        Ok(self.push(Kind::Simple))
    }

    /// Parse + Describe + Sync: prepare `query` as statement `name`; answers a `Statement`.
    fn prepare(&mut self, py: Python<'_>, name: &str, query: &str) -> PyResult<u64> {
        let mark = self.wbuf.len();
        let r = fe::parse(&mut self.wbuf, name, query, &[])
            .and_then(|()| fe::describe(&mut self.wbuf, b'S', name));
        if let Err(e) = r {
            self.wbuf.truncate(mark);
            return Err(self.wire_err(py, e));
        }
        fe::sync(&mut self.wbuf);
        Ok(self.push(Kind::Prepare {
            name: name.to_owned(),
            query: query.to_owned(),
            params: Vec::new(),
            columns: Vec::new(),
        }))
    }

    /// Bind + Execute + Sync of a prepared statement. `mode`: 0 all rows (a list
    /// of Records), 1 the first row (or None), 2 column `column` of the first
    /// row, 3 the command tag, plus 4 for `(reply, tag)`; rows are instances of `record_class` (a subclass
    /// of Record, checked by the caller) when given. Raises `StatementGone` for a
    /// stale statement and the DataError for arguments that do not fit (nothing
    /// is sent then).
    #[pyo3(signature = (stmt, args, mode=0, column=0, record_class=None))]
    fn bind_execute(
        &mut self,
        py: Python<'_>,
        stmt: &Bound<'_, Statement>,
        args: &Bound<'_, PyAny>,
        mode: u8,
        column: usize,
        record_class: Option<Bound<'_, PyType>>,
    ) -> PyResult<u64> {
        let tagged = mode & MODE_TAGGED != 0;
        let mode = Mode::from_int(mode)?;
        let s = stmt.get();
        // No columns at all (an INSERT without RETURNING): None, as in asyncpg.
        if mode == Mode::Value && column >= s.column_oids.len() && !s.column_oids.is_empty() {
            return Err(PyIndexError::new_err(format!(
                "column {column} is out of range: the query returns {} column(s)",
                s.column_oids.len()
            )));
        }
        let mark = self.wbuf.len();
        self.write_bind(py, s, args)?;
        // One row is all fetchrow/fetchval need: the server stops there.
        let max_rows = if matches!(mode, Mode::First | Mode::Value) {
            1
        } else {
            0
        };
        if let Err(e) = fe::execute(&mut self.wbuf, "", max_rows) {
            self.wbuf.truncate(mark);
            return Err(self.wire_err(py, e));
        }
        fe::sync(&mut self.wbuf);
        Ok(self.push(Kind::Rows {
            stmt: stmt.clone().unbind(),
            mode,
            column,
            class: record_class.map(Bound::unbind),
            tagged,
        }))
    }

    /// Bind + Execute for each argument tuple, then one Sync: all run in one
    /// implicit transaction (one failure undoes them all). Answers None.
    fn execute_many(
        &mut self,
        py: Python<'_>,
        stmt: &Bound<'_, Statement>,
        args_seq: &Bound<'_, PyAny>,
    ) -> PyResult<u64> {
        let s = stmt.get();
        let mark = self.wbuf.len();
        for args in args_seq.try_iter()? {
            let r = args
                .and_then(|a| self.write_bind(py, s, &a))
                .and_then(|()| {
                    fe::execute(&mut self.wbuf, "", 0).map_err(|e| self.wire_err(py, e))
                });
            if let Err(e) = r {
                self.wbuf.truncate(mark);
                return Err(e);
            }
        }
        fe::sync(&mut self.wbuf);
        Ok(self.push(Kind::Many))
    }

    /// Bind `stmt` with `args` to the named portal `portal`, + Sync; answers None.
    /// The portal lives until the transaction ends (cursors need one).
    fn bind_portal(
        &mut self,
        py: Python<'_>,
        stmt: &Bound<'_, Statement>,
        args: &Bound<'_, PyAny>,
        portal: &str,
    ) -> PyResult<u64> {
        let s = stmt.get();
        if portal.is_empty() {
            return Err(self.data_err(py, "a cursor's portal needs a name".into()));
        }
        self.write_bind_to(py, s, args, portal)?;
        fe::sync(&mut self.wbuf);
        Ok(self.push(Kind::Close))
    }

    /// Execute up to `max_rows` rows of `portal` (0: all), + Sync; answers
    /// `(rows, more)`, `more` true when the portal has rows left; rows of
    /// `record_class` as in `bind_execute`.
    #[pyo3(signature = (stmt, portal, max_rows, record_class=None))]
    fn execute_portal(
        &mut self,
        py: Python<'_>,
        stmt: &Bound<'_, Statement>,
        portal: &str,
        max_rows: i32,
        record_class: Option<Bound<'_, PyType>>,
    ) -> PyResult<u64> {
        fe::execute(&mut self.wbuf, portal, max_rows.max(0)).map_err(|e| self.wire_err(py, e))?;
        fe::sync(&mut self.wbuf);
        Ok(self.push(Kind::Portal {
            stmt: stmt.clone().unbind(),
            class: record_class.map(Bound::unbind),
        }))
    }

    /// Close + Sync of portal `name`; answers None.
    fn close_portal(&mut self, py: Python<'_>, name: &str) -> PyResult<u64> {
        fe::close(&mut self.wbuf, b'P', name).map_err(|e| self.wire_err(py, e))?;
        fe::sync(&mut self.wbuf);
        Ok(self.push(Kind::Close))
    }

    /// A lone Sync (the liveness ping): the server answers ReadyForQuery once
    /// everything before it is done; answers None.
    fn sync(&mut self) -> u64 {
        fe::sync(&mut self.wbuf);
        self.push(Kind::Close)
    }

    /// Close + Sync of statement `name`; answers None.
    fn close_statement(&mut self, py: Python<'_>, name: &str) -> PyResult<u64> {
        fe::close(&mut self.wbuf, b'S', name).map_err(|e| self.wire_err(py, e))?;
        fe::sync(&mut self.wbuf);
        Ok(self.push(Kind::Close))
    }

    /// `COPY ... TO STDOUT` as a simple Query; answers `(tag, data)`.
    fn copy_out(&mut self, py: Python<'_>, sql: &str) -> PyResult<u64> {
        fe::query(&mut self.wbuf, sql).map_err(|e| self.wire_err(py, e))?;
        Ok(self.push(Kind::CopyOut(Vec::new())))
    }

    /// For each type oid, whether it has a binary codec here, from the built-in
    /// table or the types looked up so far (COPY asks the server to encode the
    /// others).
    fn known_types(&self, py: Python<'_>, oids: Vec<u32>) -> Vec<bool> {
        oids.into_iter()
            .map(|o| resolve(py, o, &self.types, None).is_some_and(|c| c.is_binary()))
            .collect()
    }

    // -- types ----------------------------------------------------------------

    /// Type oids used by `stmt` that the table and the looked-up types do not
    /// know: the driver asks the catalog for them, then calls `add_types` and
    /// `refresh`.
    fn unknown_types(&self, stmt: &Bound<'_, Statement>) -> Vec<u32> {
        stmt.get().unknown_types(&self.types)
    }

    /// Record catalog rows `(oid, kind, name, base, element, range subtype,
    /// multirange's range, field oids, field names)`.
    fn add_types(&mut self, rows: Vec<CatalogRow>) {
        let reg = Arc::make_mut(&mut self.types);
        for row in rows {
            let oid = row.0;
            reg.insert(oid, typedef_of(row));
        }
    }

    /// Forget the looked-up types (after a schema change); statements prepared
    /// from now on look them up again.
    fn reset_types(&mut self) {
        self.types = Arc::new(Registry::new());
    }

    /// How many catalog types are known (tests and stats).
    fn type_count(&self) -> usize {
        self.types.len()
    }

    /// `stmt` again, its codecs resolved with the types known now (same server
    /// statement: nothing is sent).
    fn refresh(&self, py: Python<'_>, stmt: &Bound<'_, Statement>) -> PyResult<Statement> {
        let s = stmt.get();
        let columns = s
            .column_names
            .iter()
            .cloned()
            .zip(s.column_oids.iter().copied())
            .collect();
        Statement::new(
            py,
            s.name.clone(),
            s.query.clone(),
            s.param_oids.clone(),
            columns,
            s.session,
            self.types_ctx(),
        )
    }

    /// `COPY ... FROM STDIN` with all its data sent at once, without waiting for
    /// CopyInResponse (if the COPY fails, the server ignores the CopyData that
    /// follows: it discards copy messages outside copy mode). Answers the tag.
    fn copy_in(&mut self, py: Python<'_>, sql: &str, data: &[u8]) -> PyResult<u64> {
        let mark = self.wbuf.len();
        let r = fe::query(&mut self.wbuf, sql).and_then(|()| {
            for chunk in data.chunks(COPY_CHUNK) {
                fe::copy_data(&mut self.wbuf, chunk)?;
            }
            Ok(())
        });
        if let Err(e) = r {
            self.wbuf.truncate(mark);
            return Err(self.wire_err(py, e));
        }
        fe::copy_done(&mut self.wbuf);
        Ok(self.push(Kind::CopyIn))
    }

    /// `COPY ... FROM STDIN (FORMAT binary)` whose records follow in a stream:
    /// the Query and the binary header, then `copy_records_data` calls, then
    /// `copy_end`. Until then only the stream's bytes go out (see `copy_in.rs`).
    /// `oids` are the column types; each needs a binary codec here. Answers the
    /// tag.
    fn copy_records_start(&mut self, py: Python<'_>, sql: &str, oids: Vec<u32>) -> PyResult<u64> {
        if self.stream.is_some() {
            return Err(self.data_err(py, "a COPY is streaming on this connection".into()));
        }
        let mut codecs = Vec::with_capacity(oids.len());
        for &o in &oids {
            match resolve(py, o, &self.types, None).filter(|c| c.is_binary()) {
                Some(c) => codecs.push((o, c)),
                None => {
                    return Err(self.data_err(
                        py,
                        format!(
                            "a column of type oid {o} has no binary codec here: use copy_to_table"
                        ),
                    ))
                }
            }
        }
        let mark = self.wbuf.len();
        let r = fe::query(&mut self.wbuf, sql)
            .and_then(|()| fe::copy_data(&mut self.wbuf, COPY_BINARY_HEADER));
        if let Err(e) = r {
            self.wbuf.truncate(mark);
            return Err(self.wire_err(py, e));
        }
        let id = self.push(Kind::CopyIn);
        // What was buffered before (the Query included) leaves first; requests
        // encoded from now on wait in `wbuf` for the stream's end.
        let out = std::mem::take(&mut *self.wbuf);
        self.stream = Some(CopyStream { id, out, codecs });
        Ok(id)
    }

    /// The id of the COPY being streamed (None: none is).
    #[getter]
    fn copy_stream(&self) -> Option<u64> {
        self.stream.as_ref().map(|s| s.id)
    }

    /// The next CopyData message of stream `id`: records of `records` (a list or
    /// tuple, from index `start`, or an iterator, from where it stands) until the
    /// message holds `limit` bytes or the records run out; errors name records
    /// counted from `start`. Returns (the next record's number, whether the
    /// records ran out). Raises DataError for a bad record (nothing of it is
    /// written) or when stream `id` is not open (the connection was lost).
    fn copy_records_data(
        &mut self,
        py: Python<'_>,
        id: u64,
        records: &Bound<'_, PyAny>,
        start: usize,
        limit: usize,
    ) -> PyResult<(usize, bool)> {
        let err = self.data_error.bind(py).clone();
        let Some(stream) = self.stream.as_mut().filter(|s| s.id == id) else {
            return Err(PyErr::from_type(err, format!("COPY {id} is not streaming")));
        };
        let rows = Rows {
            py,
            err: &err,
            columns: &stream.codecs,
        };
        rows.message(records, start, limit, &mut stream.out)
    }

    /// End stream `id`: the binary trailer and CopyDone, or with `fail` (a
    /// reason) a CopyFail, which makes the server drop the COPY (it ignores
    /// either when the COPY failed already). The requests encoded meanwhile go
    /// out right after. False when `id` was not streaming (nothing written).
    #[pyo3(signature = (id, fail=None))]
    fn copy_end(&mut self, id: u64, fail: Option<&str>) -> bool {
        let Some(mut stream) = self.stream.take_if(|s| s.id == id) else {
            return false;
        };
        let out = &mut stream.out;
        match fail {
            None => {
                // Infallible: both messages are a few bytes.
                let _ = fe::copy_data(out, COPY_BINARY_TRAILER);
                fe::copy_done(out);
            }
            Some(reason) => {
                // A reason with a NUL or too long for the message: a fixed one.
                let reason: String = reason.chars().filter(|&c| c != '\0').take(1000).collect();
                let _ = fe::copy_fail(out, &reason);
            }
        }
        out.extend_from_slice(&self.wbuf);
        std::mem::swap(&mut *self.wbuf, out);
        true
    }

    /// Parse every complete message in `data` (plus what was buffered).
    fn feed<'py>(&mut self, py: Python<'py>, data: &[u8]) -> PyResult<Bound<'py, PyList>> {
        if self.failed {
            return Ok(PyList::empty(py));
        }
        self.rbuf.extend(data);
        PyList::new(py, self.parse(py)?)
    }

    /// `feed` for a connection over native TLS: `data` as read from the
    /// socket, decrypted by `session` straight into this codec's read buffer
    /// and parsed there. Returns (replies, bytes to send or None, error or
    /// None): after a TLS error send the bytes (an alert), then close.
    ///
    /// Why not `session.feed` then `feed`: the plaintext went from rustls into
    /// a buffer, from that into a bytes object and from that into the read
    /// buffer; on 100 KB rows those two extra copies (and a large allocation
    /// per read) were a quarter of what TLS added to the client's CPU.
    fn feed_tls<'py>(
        &mut self,
        py: Python<'py>,
        session: &Bound<'py, TlsClientSession>,
        data: &[u8],
    ) -> PyResult<TlsFed<'py>> {
        let mut session = session.try_borrow_mut()?;
        let (out, error) = if self.failed {
            // nothing more is parsed: decrypt (for the alerts) and drop
            session.feed_into(data, &mut Vec::new())
        } else {
            session.feed_into(data, &mut self.rbuf)
        };
        drop(session);
        let replies = if self.failed {
            PyList::empty(py)
        } else {
            PyList::new(py, self.parse(py)?)?
        };
        let out = (!out.is_empty()).then(|| PyBytes::new(py, &out));
        Ok((replies, out, error))
    }
}

/// What `PgCodec.feed_tls` returns: replies, bytes to send, a TLS error.
type TlsFed<'py> = (
    Bound<'py, PyList>,
    Option<Bound<'py, PyBytes>>,
    Option<String>,
);

impl PlainSink for ReadBuf {
    fn reserve(&mut self, _n: usize) {
        // the buffer keeps its capacity from read to read
    }

    fn put(&mut self, chunk: &[u8]) {
        self.extend(chunk);
    }
}

impl PgCodec {
    /// Every complete message in the read buffer, decoded into `feed`'s triples.
    fn parse<'py>(&mut self, py: Python<'py>) -> PyResult<Vec<Reply<'py>>> {
        let mut out = Vec::new();
        self.parse_buffered(py, &mut out)?;
        Ok(out)
    }

    /// `parse` into `out`.
    fn parse_buffered<'py>(&mut self, py: Python<'py>, out: &mut Vec<Reply<'py>>) -> PyResult<()> {
        let rbuf = std::mem::take(&mut self.rbuf);
        let start = rbuf.pos();
        let (n, r) = self.parse_frames(py, &rbuf.bytes()[start..], out);
        self.rbuf = rbuf;
        self.rbuf.set_pos(start + n);
        self.rbuf.compact();
        r
    }

    /// Every complete message at the start of `buf`, decoded into `out`; returns
    /// how many bytes they took (the rest is an incomplete message, or follows a
    /// message whose routing failed).
    fn parse_frames<'py>(
        &mut self,
        py: Python<'py>,
        buf: &[u8],
        out: &mut Vec<Reply<'py>>,
    ) -> (usize, PyResult<()>) {
        let _gc = GcPause::new(py);
        let mut pos = 0;
        let r = loop {
            let (frame, n) = match read_frame(&buf[pos..]) {
                Ok(Status::Complete(x)) => x,
                Ok(Status::Partial) => break Ok(()),
                Err(e) => break Err(e),
            };
            let m = match Message::parse(frame) {
                Ok(m) => m,
                Err(e) => break Err(e),
            };
            pos += n;
            if let Err(e) = self.on_message(py, out, m) {
                return (pos, Err(e));
            }
        };
        if let Err(e) = r {
            self.failed = true;
            let err = PyErr::from_type(self.protocol_error.bind(py).clone(), e.to_string());
            let id = self.waiting.pop_front().map(|w| w.id);
            out.push((id, false, err.into_value(py).into_bound(py).into_any()));
        }
        (pos, Ok(()))
    }
}

impl ReplyParser for PgCodec {
    fn parse_replies<'py>(
        &mut self,
        py: Python<'py>,
        data: &[u8],
    ) -> (Vec<Reply<'py>>, PyResult<()>) {
        let mut out = Vec::new();
        if self.failed {
            return (out, Ok(()));
        }
        if !self.rbuf.is_drained() {
            self.rbuf.extend(data);
            let r = self.parse_buffered(py, &mut out);
            return (out, r);
        }
        // Nothing buffered: the messages are decoded where the event loop read
        // them (the engine reader's slot), so each byte of a value is copied once,
        // into the object made from it, and only an incomplete tail is kept. A
        // 100 KB reply was copied whole into the codec's buffer first.
        let (n, r) = self.parse_frames(py, data, &mut out);
        self.rbuf.compact();
        self.rbuf.extend(&data[n..]);
        (out, r)
    }

    /// The driver's per-read hook drops a connection whose stream went bad.
    fn batch_hook_due(&self) -> bool {
        self.failed
    }
}
