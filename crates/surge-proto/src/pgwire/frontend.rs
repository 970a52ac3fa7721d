//! Frontend (client to server) messages, appended to a buffer the caller owns.
//!
//! Each encoder writes its tag and a placeholder length, then the body, then
//! patches the length; so a whole batch of messages (Parse, Bind, Execute,
//! Sync for many queries) is one buffer and one write. On error an encoder
//! leaves the buffer exactly as it found it.

use super::{Error, MAX_FRONTEND_MESSAGE_LEN, MAX_PARAMS};

/// Protocol 3.0, the version every PostgreSQL since 7.4 speaks.
pub const PROTOCOL_VERSION: i32 = 196_608;

/// Format codes of Bind parameters and result columns.
pub const FORMAT_TEXT: i16 = 0;
pub const FORMAT_BINARY: i16 = 1;

/// Start a message: the tag (none for Startup) and a length placeholder.
/// Returns where the length word is.
#[inline]
fn begin(buf: &mut Vec<u8>, tag: Option<u8>) -> usize {
    if let Some(t) = tag {
        buf.push(t);
    }
    let at = buf.len();
    buf.extend_from_slice(&[0; 4]);
    at
}

/// Patch the length word at `at` (it counts itself, not the tag).
#[inline]
fn finish(buf: &mut Vec<u8>, at: usize, mark: usize) -> Result<(), Error> {
    let len = buf.len() - at;
    if len > MAX_FRONTEND_MESSAGE_LEN {
        buf.truncate(mark);
        return Err(Error::FrontendTooLong(len));
    }
    buf[at..at + 4].copy_from_slice(&(len as i32).to_be_bytes());
    Ok(())
}

/// A NUL-terminated string; a NUL inside would silently cut the field.
#[inline]
pub fn write_cstr(buf: &mut Vec<u8>, s: &[u8]) -> Result<(), Error> {
    if memchr::memchr(0, s).is_some() {
        return Err(Error::NulInString);
    }
    buf.extend_from_slice(s);
    buf.push(0);
    Ok(())
}

/// Run `body` inside a message frame, undoing everything if it fails.
#[inline]
fn message(
    buf: &mut Vec<u8>,
    tag: Option<u8>,
    body: impl FnOnce(&mut Vec<u8>) -> Result<(), Error>,
) -> Result<(), Error> {
    let mark = buf.len();
    let at = begin(buf, tag);
    if let Err(e) = body(buf) {
        buf.truncate(mark);
        return Err(e);
    }
    finish(buf, at, mark)
}

/// StartupMessage: protocol version and `name, value` pairs (`user` is required).
pub fn startup(buf: &mut Vec<u8>, params: &[(&str, &str)]) -> Result<(), Error> {
    message(buf, None, |buf| {
        buf.extend_from_slice(&PROTOCOL_VERSION.to_be_bytes());
        for (k, v) in params {
            write_cstr(buf, k.as_bytes())?;
            write_cstr(buf, v.as_bytes())?;
        }
        buf.push(0);
        Ok(())
    })
}

/// PasswordMessage: a cleartext password or an md5 digest (see `auth::md5_password`).
pub fn password(buf: &mut Vec<u8>, password: &[u8]) -> Result<(), Error> {
    message(buf, Some(b'p'), |buf| write_cstr(buf, password))
}

/// SASLInitialResponse: the chosen mechanism and the client-first message.
pub fn sasl_initial_response(buf: &mut Vec<u8>, mechanism: &str, data: &[u8]) -> Result<(), Error> {
    message(buf, Some(b'p'), |buf| {
        write_cstr(buf, mechanism.as_bytes())?;
        buf.extend_from_slice(&(data.len() as i32).to_be_bytes());
        buf.extend_from_slice(data);
        Ok(())
    })
}

/// SASLResponse: the client-final message.
pub fn sasl_response(buf: &mut Vec<u8>, data: &[u8]) -> Result<(), Error> {
    message(buf, Some(b'p'), |buf| {
        buf.extend_from_slice(data);
        Ok(())
    })
}

/// Query: one or more SQL statements in the simple protocol (text results).
pub fn query(buf: &mut Vec<u8>, sql: &str) -> Result<(), Error> {
    message(buf, Some(b'Q'), |buf| write_cstr(buf, sql.as_bytes()))
}

/// Parse: prepare `sql` as statement `name` ("" is the unnamed one); `param_oids`
/// may be shorter than the parameters (0 lets the server infer a type).
pub fn parse(buf: &mut Vec<u8>, name: &str, sql: &str, param_oids: &[u32]) -> Result<(), Error> {
    if param_oids.len() > MAX_PARAMS {
        return Err(Error::TooManyParams(param_oids.len()));
    }
    message(buf, Some(b'P'), |buf| {
        write_cstr(buf, name.as_bytes())?;
        write_cstr(buf, sql.as_bytes())?;
        buf.extend_from_slice(&(param_oids.len() as i16).to_be_bytes());
        for oid in param_oids {
            buf.extend_from_slice(&oid.to_be_bytes());
        }
        Ok(())
    })
}

/// What a Bind parameter writer produced.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Param {
    /// The bytes written are the value.
    Value,
    /// SQL NULL (anything written is discarded).
    Null,
}

/// Bind: statement `stmt` to portal `portal`, with `nparams` parameters written
/// by `write_param(i, buf)` (it appends the value's bytes; the length word is
/// handled here) in `param_formats` (empty: all text; one: that for all; else
/// one per parameter) and results in `result_formats` (same convention).
/// A writer error leaves the buffer as it was and is returned as is.
pub fn bind<E: From<Error>>(
    buf: &mut Vec<u8>,
    portal: &str,
    stmt: &str,
    param_formats: &[i16],
    nparams: usize,
    mut write_param: impl FnMut(usize, &mut Vec<u8>) -> Result<Param, E>,
    result_formats: &[i16],
) -> Result<(), E> {
    if nparams > MAX_PARAMS || param_formats.len() > MAX_PARAMS {
        return Err(Error::TooManyParams(nparams.max(param_formats.len())).into());
    }
    if result_formats.len() > MAX_PARAMS {
        return Err(Error::TooManyParams(result_formats.len()).into());
    }
    let mark = buf.len();
    let at = begin(buf, Some(b'B'));
    let r = (|| {
        write_cstr(buf, portal.as_bytes())?;
        write_cstr(buf, stmt.as_bytes())?;
        write_formats(buf, param_formats);
        buf.extend_from_slice(&(nparams as i16).to_be_bytes());
        Ok::<(), Error>(())
    })();
    if let Err(e) = r {
        buf.truncate(mark);
        return Err(e.into());
    }
    for i in 0..nparams {
        let len_at = buf.len();
        buf.extend_from_slice(&[0; 4]);
        match write_param(i, buf) {
            Ok(Param::Value) => {
                let n = buf.len() - len_at - 4;
                if n > MAX_FRONTEND_MESSAGE_LEN {
                    buf.truncate(mark);
                    return Err(Error::FrontendTooLong(n).into());
                }
                buf[len_at..len_at + 4].copy_from_slice(&(n as i32).to_be_bytes());
            }
            Ok(Param::Null) => {
                buf.truncate(len_at);
                buf.extend_from_slice(&(-1i32).to_be_bytes());
            }
            Err(e) => {
                buf.truncate(mark);
                return Err(e);
            }
        }
    }
    write_formats(buf, result_formats);
    finish(buf, at, mark).map_err(E::from)
}

fn write_formats(buf: &mut Vec<u8>, formats: &[i16]) {
    buf.extend_from_slice(&(formats.len() as i16).to_be_bytes());
    for f in formats {
        buf.extend_from_slice(&f.to_be_bytes());
    }
}

/// Describe a statement (`b'S'`) or a portal (`b'P'`).
pub fn describe(buf: &mut Vec<u8>, kind: u8, name: &str) -> Result<(), Error> {
    message(buf, Some(b'D'), |buf| {
        buf.push(kind);
        write_cstr(buf, name.as_bytes())
    })
}

/// Execute portal `portal`, returning at most `max_rows` rows (0: all).
pub fn execute(buf: &mut Vec<u8>, portal: &str, max_rows: i32) -> Result<(), Error> {
    message(buf, Some(b'E'), |buf| {
        write_cstr(buf, portal.as_bytes())?;
        buf.extend_from_slice(&max_rows.to_be_bytes());
        Ok(())
    })
}

/// Close a statement (`b'S'`) or a portal (`b'P'`).
pub fn close(buf: &mut Vec<u8>, kind: u8, name: &str) -> Result<(), Error> {
    message(buf, Some(b'C'), |buf| {
        buf.push(kind);
        write_cstr(buf, name.as_bytes())
    })
}

/// A message of a tag and no body.
#[inline]
fn empty(buf: &mut Vec<u8>, tag: u8) {
    buf.push(tag);
    buf.extend_from_slice(&4i32.to_be_bytes());
}

/// Sync: ends an extended-query batch; the server answers ReadyForQuery, and
/// after an error it skips everything up to here (so each Sync bounds the
/// damage of one failing query).
pub fn sync(buf: &mut Vec<u8>) {
    empty(buf, b'S');
}

/// Flush: ask for the replies so far without ending the batch.
pub fn flush(buf: &mut Vec<u8>) {
    empty(buf, b'H');
}

/// Terminate: a polite goodbye before closing the socket.
pub fn terminate(buf: &mut Vec<u8>) {
    empty(buf, b'X');
}

/// CopyData: a chunk of COPY FROM STDIN input.
pub fn copy_data(buf: &mut Vec<u8>, data: &[u8]) -> Result<(), Error> {
    message(buf, Some(b'd'), |buf| {
        buf.extend_from_slice(data);
        Ok(())
    })
}

/// CopyData whose body `body` writes in place (COPY rows encoded straight into
/// the message, no buffer in between); on error the buffer is left as it was.
pub fn copy_data_with<E: From<Error>>(
    buf: &mut Vec<u8>,
    body: impl FnOnce(&mut Vec<u8>) -> Result<(), E>,
) -> Result<(), E> {
    let mark = buf.len();
    let at = begin(buf, Some(b'd'));
    if let Err(e) = body(buf) {
        buf.truncate(mark);
        return Err(e);
    }
    finish(buf, at, mark).map_err(E::from)
}

/// CopyDone: the end of COPY FROM STDIN input.
pub fn copy_done(buf: &mut Vec<u8>) {
    empty(buf, b'c');
}

/// CopyFail: abort COPY FROM STDIN with `reason`.
pub fn copy_fail(buf: &mut Vec<u8>, reason: &str) -> Result<(), Error> {
    message(buf, Some(b'f'), |buf| write_cstr(buf, reason.as_bytes()))
}

/// CancelRequest, sent on a new connection of its own (no tag).
pub fn cancel_request(buf: &mut Vec<u8>, pid: i32, secret: i32) {
    buf.extend_from_slice(&16i32.to_be_bytes());
    buf.extend_from_slice(&80_877_102i32.to_be_bytes());
    buf.extend_from_slice(&pid.to_be_bytes());
    buf.extend_from_slice(&secret.to_be_bytes());
}
