//! Routing backend messages to the requests waiting for them (a child of
//! `codec`, split off to keep files short): rows decoded into Records, command
//! tags, errors, handshake steps, and out-of-band events.

use pyo3::prelude::*;
use pyo3::types::{PyBool, PyBytes, PyDict, PyList, PyString, PyTuple, PyType};
use surge_proto::pgwire::frontend as fe;
use surge_proto::pgwire::types;
use surge_proto::pgwire::{Auth, DataRow, Fields, Message};

use super::super::containers::{decode_int_text_array, decode_text_array};
use super::super::custom::map_elements;
use super::super::decode::{bad, decode, decode_text};
use super::super::record::new_record;
use super::super::registry::{Codec, TextResult};
use super::super::statement::Statement;
use super::{Kind, Mode, PgCodec, Waiting, COPY_IN_REFUSED};
use crate::wire::Reply;

/// An out-of-band event as `feed` returns it: `(None, True, event)`.
fn oob<'py, T>(py: Python<'py>, event: T) -> PyResult<Reply<'py>>
where
    T: IntoPyObject<'py, Target = PyTuple, Output = Bound<'py, PyTuple>, Error = PyErr>,
{
    Ok((None, true, event.into_pyobject(py)?.into_any()))
}

pub(super) fn fields_dict<'py>(py: Python<'py>, f: &Fields<'_>) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    for (code, v) in f.iter() {
        d.set_item(char::from(code).to_string(), v)?;
    }
    Ok(d)
}

impl PgCodec {
    pub(super) fn decode_field(
        py: Python<'_>,
        stmt: &Statement,
        i: usize,
        f: Option<&[u8]>,
    ) -> PyResult<PyObject> {
        match f {
            None => Ok(py.None()),
            Some(b) if stmt.column_custom[i].is_some() => {
                let custom = stmt.column_custom[i].as_ref().expect("checked");
                custom.decode(py, stmt.column_codecs[i].as_deref(), b)
            }
            Some(b) => {
                let v = Self::decode_builtin(py, stmt, i, b)?;
                match &stmt.column_element_custom[i] {
                    Some(custom) => map_elements(py, v.bind(py), &custom.decoder),
                    None => Ok(v),
                }
            }
        }
    }

    fn decode_builtin(py: Python<'_>, stmt: &Statement, i: usize, b: &[u8]) -> PyResult<PyObject> {
        match &stmt.column_codecs[i] {
            Some(c) if stmt.result_formats[i] == fe::FORMAT_BINARY => decode(py, c, b),
            Some(c) if matches!(**c, Codec::TextArray) => decode_text_array(py, b),
            Some(c) => match c.text_result() {
                Some(TextResult::IntArray(k)) => decode_int_text_array(py, k, b),
                Some(TextResult::Bool) => {
                    let v = types::parse_bool_text(b).map_err(bad)?;
                    Ok(PyBool::new(py, v).to_owned().into_any().unbind())
                }
                Some(TextResult::Char) => {
                    let v = types::parse_char_text(b).map_err(bad)?;
                    Ok(PyBytes::new(py, &[v]).into_any().unbind())
                }
                Some(TextResult::Str) | None => decode_text(py, b),
            },
            _ => decode_text(py, b),
        }
    }

    /// Decode a DataRow into the request (as its mode asks). An associated
    /// function, so the caller can hold the request in place in the queue.
    pub(super) fn on_row(
        py: Python<'_>,
        data_error: &Py<PyType>,
        w: &mut Waiting,
        row: DataRow<'_>,
    ) -> PyResult<()> {
        let (stmt, mode, column, class) = match &w.kind {
            Kind::Rows {
                stmt,
                mode,
                column,
                class,
                ..
            } => (stmt.get(), mode, column, class),
            Kind::Portal { stmt, class } => (stmt.get(), &Mode::All, &0, class),
            _ => return Ok(()), // a simple query's text rows: not asked for
        };
        if row.len() != stmt.column_oids.len() {
            let msg = "a row does not match its row description";
            return Err(PyErr::from_type(data_error.bind(py).clone(), msg));
        }
        match mode {
            Mode::All => {}
            Mode::First if w.rows.is_empty() => {}
            Mode::Value if w.value.is_none() => {
                let f = row.fields().nth(*column).flatten();
                w.value = Some(Self::decode_field(py, stmt, *column, f)?);
                return Ok(());
            }
            _ => return Ok(()),
        }
        let rec = new_record(
            py,
            &stmt.desc,
            class.as_ref(),
            row.len(),
            row.fields().enumerate(),
            |(i, f)| Self::decode_field(py, stmt, i, f),
        )?;
        w.rows.push(rec);
        Ok(())
    }

    /// The value a request answers with once its ReadyForQuery is in.
    pub(super) fn finish(&self, py: Python<'_>, w: Waiting) -> PyResult<(u64, bool, PyObject)> {
        if let Some(e) = w.error {
            return Ok((w.id, false, e));
        }
        let tag = || match &w.tag {
            Some(t) => PyString::new(py, t).into_any().unbind(),
            None => py.None(),
        };
        let v = match w.kind {
            Kind::Handshake => ("ready",).into_pyobject(py)?.into_any().unbind(),
            Kind::Simple | Kind::CopyIn => tag(),
            Kind::Prepare {
                name,
                query,
                params,
                columns,
            } => {
                let s = Statement::new(
                    py,
                    name,
                    query,
                    params,
                    columns,
                    self.session,
                    self.types_ctx(),
                )?;
                Py::new(py, s)?.into_any()
            }
            Kind::Rows { mode, tagged, .. } => {
                let v = match mode {
                    Mode::All => PyList::new(py, w.rows)?.into_any().unbind(),
                    Mode::First => w.rows.into_iter().next().unwrap_or_else(|| py.None()),
                    Mode::Value => w.value.unwrap_or_else(|| py.None()),
                    Mode::Status => tag(),
                };
                if tagged {
                    (v, tag()).into_pyobject(py)?.into_any().unbind()
                } else {
                    v
                }
            }
            Kind::Portal { .. } => {
                // No CommandComplete means PortalSuspended: the cursor has more rows.
                let more = w.tag.is_none();
                (PyList::new(py, w.rows)?, more)
                    .into_pyobject(py)?
                    .into_any()
                    .unbind()
            }
            Kind::Many | Kind::Close => py.None(),
            Kind::CopyOut(ref data) => (tag(), PyBytes::new(py, data))
                .into_pyobject(py)?
                .into_any()
                .unbind(),
        };
        Ok((w.id, true, v))
    }

    /// Route one message; out-of-band ones and finished requests go to `out`.
    pub(super) fn on_message<'py>(
        &mut self,
        py: Python<'py>,
        out: &mut Vec<Reply<'py>>,
        m: Message<'_>,
    ) -> PyResult<()> {
        match m {
            Message::NoticeResponse(f) => {
                out.push(oob(py, ("notice", fields_dict(py, &f)?))?);
                return Ok(());
            }
            Message::NotificationResponse {
                pid,
                channel,
                payload,
            } => {
                out.push(oob(py, ("notify", pid, channel, payload))?);
                return Ok(());
            }
            Message::ParameterStatus { name, value } => {
                self.server_params.bind(py).set_item(name, value)?;
                out.push(oob(py, ("parameter", name, value))?);
                return Ok(());
            }
            Message::BackendKeyData { pid, secret } => {
                self.backend_pid = pid;
                self.backend_secret =
                    i32::from_be_bytes([secret[0], secret[1], secret[2], secret[3]]);
                return Ok(());
            }
            _ => {}
        }
        if let Message::ReadyForQuery(status) = m {
            if let Some(w) = self.waiting.pop_front() {
                self.tx_status = status;
                let (id, ok, v) = self.finish(py, w)?;
                out.push((Some(id), ok, v.into_bound(py)));
            }
            return Ok(());
        }
        // The request stays in place in the queue (no move per message): only
        // disjoint fields of `self` are touched while `w` is held.
        let Some(w) = self.waiting.front_mut() else {
            if let Message::ErrorResponse(f) = m {
                out.push(oob(py, ("error", fields_dict(py, &f)?))?);
            }
            return Ok(());
        };
        let mut done = false;
        match m {
            Message::ErrorResponse(f) => {
                if w.error.is_none() {
                    w.error = Some(fields_dict(py, &f)?.into_any().unbind());
                }
                // A handshake error is final: the server closes the connection.
                done = matches!(w.kind, Kind::Handshake);
            }
            Message::Authentication(a) if matches!(w.kind, Kind::Handshake) => {
                let ask = |code: u32, data: &[u8]| {
                    ("auth", code, PyBytes::new(py, data))
                        .into_pyobject(py)
                        .map(|t| t.into_any().unbind())
                };
                match a {
                    Auth::Ok => {}
                    Auth::SaslFinal(d) => self.sasl_final = Some(d.to_vec()),
                    Auth::CleartextPassword => (w.value, done) = (Some(ask(3, b"")?), true),
                    Auth::Md5Password(salt) => (w.value, done) = (Some(ask(5, &salt)?), true),
                    Auth::Sasl(list) => (w.value, done) = (Some(ask(10, list)?), true),
                    Auth::SaslContinue(d) => (w.value, done) = (Some(ask(11, d)?), true),
                    Auth::Unsupported(c) => (w.value, done) = (Some(ask(c, b"")?), true),
                }
                if done {
                    let v = w.value.take().unwrap_or_else(|| py.None());
                    out.push((Some(w.id), true, v.into_bound(py)));
                    self.waiting.pop_front();
                    return Ok(());
                }
            }
            Message::ParameterDescription(oids) => {
                if let Kind::Prepare { params, .. } = &mut w.kind {
                    *params = oids.iter().collect();
                }
            }
            Message::RowDescription(d) => {
                if let Kind::Prepare { columns, .. } = &mut w.kind {
                    *columns = d
                        .columns()
                        .map(|c| (c.name.to_owned(), c.type_oid))
                        .collect();
                }
            }
            Message::DataRow(row) if w.error.is_none() => {
                if let Err(e) = Self::on_row(py, &self.data_error, w, row) {
                    let e = if e.is_instance_of::<pyo3::exceptions::PyValueError>(py) {
                        let msg = format!("cannot decode a column: {}", e.value(py));
                        PyErr::from_type(self.data_error.bind(py).clone(), msg)
                    } else {
                        e
                    };
                    w.error = Some(e.into_value(py).into_any());
                }
            }
            Message::CommandComplete(t) => w.tag = Some(t.to_owned()),
            Message::CopyData(d) => {
                if let Kind::CopyOut(buf) = &mut w.kind {
                    buf.extend_from_slice(d);
                }
            }
            Message::CopyInResponse { .. } | Message::CopyBothResponse { .. }
                if !matches!(w.kind, Kind::CopyIn) =>
            {
                // A COPY FROM STDIN sent as a plain query: the server would wait
                // for data forever. Refuse it, so the request fails and the stream
                // goes on; the ("flush",) event makes the engine write it now.
                let _ = fe::copy_fail(&mut self.wbuf, COPY_IN_REFUSED);
                if !matches!(w.kind, Kind::Simple | Kind::CopyOut(_)) {
                    // Extended protocol: the server ignored our Sync while in copy
                    // mode and now skips to the next one; this one closes the request.
                    fe::sync(&mut self.wbuf);
                }
                out.push(oob(py, ("flush",))?);
            }
            _ => {}
        }
        if done {
            let id = w.id;
            let e = w.error.take().unwrap_or_else(|| py.None());
            out.push((Some(id), false, e.into_bound(py)));
            self.waiting.pop_front();
        }
        Ok(())
    }
}
