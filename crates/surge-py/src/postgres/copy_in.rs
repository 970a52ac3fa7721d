//! COPY FROM STDIN in the binary format, streamed: records are encoded straight
//! into CopyData messages of about a chunk each, which the driver writes out one
//! at a time, minding the transport's back-pressure in between
//! (`surge/postgres/copy.py`). The server starts on the first chunk while the
//! next is encoded, and memory holds a chunk, not the whole COPY.
//!
//! Theory of operation: while a stream is open its bytes are the only ones that
//! may go out. A request that another coroutine encodes meanwhile (or the
//! liveness ping's Sync) would land inside the COPY's data, where the server
//! takes it for an error, or (a Sync) ignores it, and the replies would no
//! longer match the requests. So the stream's bytes go to a buffer of their
//! own, the one `PgCodec.take` hands the engine while the stream is open;
//! requests encoded meanwhile wait in the write buffer and follow the CopyDone
//! (or CopyFail) that ends the stream, their replies after the COPY's, in the
//! order the waiting queue has them.

use std::sync::Arc;

use pyo3::prelude::*;
use pyo3::types::{PyList, PyTuple, PyType};
use surge_proto::pgwire::frontend::{self as fe, Param};
use surge_proto::pgwire::Error;

use super::encode::Encoder;
use super::registry::Codec;

/// An open COPY FROM STDIN whose data is being streamed.
pub(super) struct CopyStream {
    /// The COPY's request id (its reply is the command tag).
    pub id: u64,
    /// Bytes for the engine's next write: everything buffered before the COPY,
    /// its Query, then its data as it is encoded.
    pub out: Vec<u8>,
    /// The binary codec of each column (records streams), in column order.
    pub codecs: Vec<(u32, Arc<Codec>)>,
}

/// The driver's DataError, or a message that does not fit the protocol.
enum RowErr {
    Py(PyErr),
    Wire(Error),
}

impl From<Error> for RowErr {
    fn from(e: Error) -> Self {
        RowErr::Wire(e)
    }
}

/// Encodes records of one COPY's columns in the binary COPY format.
pub(super) struct Rows<'a, 'py> {
    pub py: Python<'py>,
    /// The DataError class.
    pub err: &'a Bound<'py, PyType>,
    pub columns: &'a [(u32, Arc<Codec>)],
}

impl<'py> Rows<'_, 'py> {
    fn fail(&self, msg: String) -> PyErr {
        PyErr::from_type(self.err.clone(), msg)
    }

    /// Value `v` of column `i` of record `n`: its length, then its bytes (-1: NULL).
    fn value(&self, n: usize, i: usize, v: &Bound<'py, PyAny>, buf: &mut Vec<u8>) -> PyResult<()> {
        let enc = Encoder {
            py: self.py,
            err: self.err,
        };
        let (oid, codec) = &self.columns[i];
        let at = buf.len();
        buf.extend_from_slice(&[0; 4]);
        match enc.encode_with(*oid, codec, v, buf) {
            Ok(Param::Null) => {
                buf.truncate(at);
                buf.extend_from_slice(&(-1i32).to_be_bytes());
                Ok(())
            }
            Ok(Param::Value) => {
                let len = i32::try_from(buf.len() - at - 4).map_err(|_| {
                    self.fail(format!("record {n}, column {}: value too large", i + 1))
                })?;
                buf[at..at + 4].copy_from_slice(&len.to_be_bytes());
                Ok(())
            }
            Err(e) => Err(self.fail(format!(
                "record {n}, column {}: {}",
                i + 1,
                e.value(self.py)
            ))),
        }
    }

    /// Record `n`: its field count, then each value.
    ///
    /// Tuples and lists (what callers pass, 100k at a time) are read by index: an
    /// iterator per record was a third of the encoding's CPU (its allocation, the
    /// end-of-iteration check, and the collections that the allocations set off);
    /// other sequences go through their iterator, with the count checked.
    fn row(&self, n: usize, rec: &Bound<'py, PyAny>, buf: &mut Vec<u8>) -> PyResult<()> {
        let ncols = self.columns.len();
        let len = rec.len()?;
        if len != ncols {
            return Err(self.fail(format!(
                "record {n} has {len} values, the table takes {ncols}"
            )));
        }
        buf.extend_from_slice(&(ncols as i16).to_be_bytes());
        if let Ok(t) = rec.downcast::<PyTuple>() {
            (0..ncols).try_for_each(|i| self.value(n, i, &*t.get_borrowed_item(i)?, buf))
        } else if let Ok(l) = rec.downcast::<PyList>() {
            (0..ncols).try_for_each(|i| self.value(n, i, &l.get_item(i)?, buf))
        } else {
            let mut count = 0;
            for v in rec.try_iter()?.take(ncols) {
                self.value(n, count, &v?, buf)?;
                count += 1;
            }
            if count != ncols {
                return Err(self.fail(format!(
                    "record {n} gave {count} values, the table takes {ncols}"
                )));
            }
            Ok(())
        }
    }

    /// Records of `records` (a list or tuple, read from index `start`, or an
    /// iterator, read from where it stands) appended to `buf` as ONE CopyData
    /// message, until it holds `limit` bytes (at least one record) or the
    /// records run out; errors name
    /// records counted from `start`. Returns (the next record's number, whether
    /// the records ran out). On error `buf` is left as it was.
    pub fn message(
        &self,
        records: &Bound<'py, PyAny>,
        start: usize,
        limit: usize,
        buf: &mut Vec<u8>,
    ) -> PyResult<(usize, bool)> {
        let mark = buf.len();
        let mut next = start;
        let mut done = false;
        let r = fe::copy_data_with::<RowErr>(buf, |buf| {
            // At least one record per message, whatever `limit`: every call moves on.
            let body = buf.len();
            let full = |buf: &Vec<u8>| buf.len() - body >= limit;
            if let Ok(list) = records.downcast::<PyList>() {
                // by index, re-checking the length: an encoder may run Python code
                while next < list.len() {
                    self.row(next, &list.get_item(next).map_err(RowErr::Py)?, buf)
                        .map_err(RowErr::Py)?;
                    next += 1;
                    if full(buf) {
                        break;
                    }
                }
                done = next >= list.len();
            } else if let Ok(tuple) = records.downcast::<PyTuple>() {
                while next < tuple.len() {
                    let rec = tuple.get_borrowed_item(next).map_err(RowErr::Py)?;
                    self.row(next, &rec, buf).map_err(RowErr::Py)?;
                    next += 1;
                    if full(buf) {
                        break;
                    }
                }
                done = next >= tuple.len();
            } else {
                let mut it = records.try_iter().map_err(RowErr::Py)?;
                loop {
                    match it.next() {
                        None => {
                            done = true;
                            break;
                        }
                        Some(rec) => {
                            self.row(next, &rec.map_err(RowErr::Py)?, buf)
                                .map_err(RowErr::Py)?;
                            next += 1;
                            if full(buf) {
                                break;
                            }
                        }
                    }
                }
            }
            Ok(())
        });
        match r {
            Ok(()) => {
                if next == start {
                    buf.truncate(mark); // no record: no message
                }
                Ok((next, done))
            }
            Err(RowErr::Py(e)) => Err(e),
            Err(RowErr::Wire(e)) => Err(self.fail(format!("COPY data: {e}"))),
        }
    }
}
