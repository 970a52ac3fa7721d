//! Backend (server to client) messages: framing, then typed views that borrow
//! the frame's bytes (a DataRow is not copied; its fields are walked in place).

use super::{Error, MAX_MESSAGE_LEN};

pub use crate::status::Status;

/// Every tag a backend message may carry (protocol 3.0 and 3.2).
const BACKEND_TAGS: &[u8] = b"RK23CdcGHWDIEVvnNAtS1sZT";

/// `BACKEND_TAGS` as a table indexed by the tag byte. Why: the check runs once
/// per message, i.e. per row; `contains` on the slice went through memchr,
/// ~70 instructions a row (6 % of decoding 1000 one-int rows).
static IS_BACKEND_TAG: [bool; 256] = {
    let mut t = [false; 256];
    let mut i = 0;
    while i < BACKEND_TAGS.len() {
        t[BACKEND_TAGS[i] as usize] = true;
        i += 1;
    }
    t
};

/// One framed message: its tag and its body (length word excluded).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Frame<'a> {
    pub tag: u8,
    pub body: &'a [u8],
}

/// Read one message frame at the start of `buf`: `Complete((frame, bytes used))`
/// or `Partial`. The tag and length are checked as soon as they are there,
/// so garbage fails at once rather than after a long wait for a bogus length.
pub fn read_frame(buf: &[u8]) -> Result<Status<(Frame<'_>, usize)>, Error> {
    let Some(&tag) = buf.first() else {
        return Ok(Status::Partial);
    };
    if !IS_BACKEND_TAG[usize::from(tag)] {
        return Err(Error::UnknownTag(tag));
    }
    if buf.len() < 5 {
        return Ok(Status::Partial);
    }
    let len = u32::from_be_bytes([buf[1], buf[2], buf[3], buf[4]]);
    if len < 4 {
        return Err(Error::BadLength(len));
    }
    let len = len as usize;
    if len > MAX_MESSAGE_LEN {
        return Err(Error::MessageTooLong(len));
    }
    let total = 1 + len;
    if buf.len() < total {
        return Ok(Status::Partial);
    }
    Ok(Status::Complete((
        Frame {
            tag,
            body: &buf[5..total],
        },
        total,
    )))
}

/// An authentication request (the `R` message).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Auth<'a> {
    Ok,
    CleartextPassword,
    Md5Password([u8; 4]),
    /// The SASL mechanisms offered, NUL-separated (see [`sasl_mechanisms`]).
    Sasl(&'a [u8]),
    SaslContinue(&'a [u8]),
    SaslFinal(&'a [u8]),
    /// Kerberos, GSSAPI, SSPI: known codes this client does not implement.
    Unsupported(u32),
}

/// The mechanism names of an `Auth::Sasl` list.
pub fn sasl_mechanisms(list: &[u8]) -> impl Iterator<Item = &[u8]> {
    list.split(|&b| b == 0).filter(|s| !s.is_empty())
}

/// A typed backend message borrowing its frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Message<'a> {
    Authentication(Auth<'a>),
    BackendKeyData {
        pid: i32,
        secret: &'a [u8],
    },
    BindComplete,
    CloseComplete,
    CommandComplete(&'a str),
    CopyData(&'a [u8]),
    CopyDone,
    /// CopyIn/CopyOut/CopyBoth: overall format (0 text, 1 binary) and column count.
    CopyInResponse {
        format: u8,
        columns: u16,
    },
    CopyOutResponse {
        format: u8,
        columns: u16,
    },
    CopyBothResponse {
        format: u8,
        columns: u16,
    },
    DataRow(DataRow<'a>),
    EmptyQueryResponse,
    ErrorResponse(Fields<'a>),
    NoticeResponse(Fields<'a>),
    NegotiateProtocolVersion {
        minor: i32,
    },
    NoData,
    NotificationResponse {
        pid: i32,
        channel: &'a str,
        payload: &'a str,
    },
    ParameterDescription(Oids<'a>),
    ParameterStatus {
        name: &'a str,
        value: &'a str,
    },
    ParseComplete,
    PortalSuspended,
    /// Transaction status: `I` idle, `T` in a transaction, `E` in a failed one.
    ReadyForQuery(u8),
    RowDescription(RowDescription<'a>),
}

/// A cursor over a message body.
struct Cur<'a> {
    tag: u8,
    b: &'a [u8],
}

impl<'a> Cur<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], Error> {
        if self.b.len() < n {
            return Err(Error::Truncated(self.tag));
        }
        let (h, t) = self.b.split_at(n);
        self.b = t;
        Ok(h)
    }
    fn u8(&mut self) -> Result<u8, Error> {
        Ok(self.take(1)?[0])
    }
    fn i16(&mut self) -> Result<i16, Error> {
        let s = self.take(2)?;
        Ok(i16::from_be_bytes([s[0], s[1]]))
    }
    fn i32(&mut self) -> Result<i32, Error> {
        let s = self.take(4)?;
        Ok(i32::from_be_bytes([s[0], s[1], s[2], s[3]]))
    }
    fn cstr(&mut self) -> Result<&'a str, Error> {
        let n = memchr::memchr(0, self.b).ok_or(Error::BadString(self.tag))?;
        let s = std::str::from_utf8(&self.b[..n]).map_err(|_| Error::BadString(self.tag))?;
        self.b = &self.b[n + 1..];
        Ok(s)
    }
    fn end(&self) -> Result<(), Error> {
        if self.b.is_empty() {
            Ok(())
        } else {
            Err(Error::Truncated(self.tag))
        }
    }
}

impl<'a> Message<'a> {
    /// Type a frame from [`read_frame`]. Every field is checked (lengths, string
    /// terminators, counts against the body), so a view never reads past its body.
    pub fn parse(frame: Frame<'a>) -> Result<Message<'a>, Error> {
        let mut c = Cur {
            tag: frame.tag,
            b: frame.body,
        };
        let m = match frame.tag {
            b'R' => {
                let code = c.i32()? as u32;
                let auth = match code {
                    0 => Auth::Ok,
                    3 => Auth::CleartextPassword,
                    5 => {
                        let s = c.take(4)?;
                        Auth::Md5Password([s[0], s[1], s[2], s[3]])
                    }
                    10 => Auth::Sasl(c.take(c.b.len())?),
                    11 => Auth::SaslContinue(c.take(c.b.len())?),
                    12 => Auth::SaslFinal(c.take(c.b.len())?),
                    2 | 6 | 7 | 8 | 9 => {
                        c.take(c.b.len())?;
                        Auth::Unsupported(code)
                    }
                    _ => return Err(Error::BadAuthCode(code)),
                };
                Message::Authentication(auth)
            }
            b'K' => {
                let pid = c.i32()?;
                // 4 bytes in protocol 3.0; up to 256 in 3.2.
                let secret = c.take(c.b.len())?;
                if secret.len() < 4 || secret.len() > 256 {
                    return Err(Error::Truncated(b'K'));
                }
                Message::BackendKeyData { pid, secret }
            }
            b'2' => Message::BindComplete,
            b'3' => Message::CloseComplete,
            b'C' => Message::CommandComplete(c.cstr()?),
            b'd' => Message::CopyData(c.take(c.b.len())?),
            b'c' => Message::CopyDone,
            b'G' | b'H' | b'W' => {
                let format = c.u8()?;
                let columns = c.i16()?;
                if columns < 0 {
                    return Err(Error::Truncated(frame.tag));
                }
                c.take(columns as usize * 2)?;
                let (format, columns) = (format, columns as u16);
                match frame.tag {
                    b'G' => Message::CopyInResponse { format, columns },
                    b'H' => Message::CopyOutResponse { format, columns },
                    _ => Message::CopyBothResponse { format, columns },
                }
            }
            b'D' => {
                let d = DataRow::new(frame.body)?;
                c.b = &[];
                Message::DataRow(d)
            }
            b'I' => Message::EmptyQueryResponse,
            b'E' | b'N' => {
                let f = Fields::new(frame.tag, frame.body)?;
                c.b = &[];
                if frame.tag == b'E' {
                    Message::ErrorResponse(f)
                } else {
                    Message::NoticeResponse(f)
                }
            }
            b'v' => {
                let minor = c.i32()?;
                let n = c.i32()?;
                for _ in 0..n.max(0) {
                    c.cstr()?;
                }
                Message::NegotiateProtocolVersion { minor }
            }
            b'n' => Message::NoData,
            b'A' => Message::NotificationResponse {
                pid: c.i32()?,
                channel: c.cstr()?,
                payload: c.cstr()?,
            },
            b't' => {
                let n = c.i16()?;
                if n < 0 {
                    return Err(Error::Truncated(b't'));
                }
                let raw = c.take(n as usize * 4)?;
                Message::ParameterDescription(Oids { raw })
            }
            b'S' => Message::ParameterStatus {
                name: c.cstr()?,
                value: c.cstr()?,
            },
            b'1' => Message::ParseComplete,
            b's' => Message::PortalSuspended,
            b'Z' => {
                let s = c.u8()?;
                if !matches!(s, b'I' | b'T' | b'E') {
                    return Err(Error::Truncated(b'Z'));
                }
                Message::ReadyForQuery(s)
            }
            b'T' => {
                let d = RowDescription::new(frame.body)?;
                c.b = &[];
                Message::RowDescription(d)
            }
            // `read_frame` lets only known tags through; 'V' (FunctionCallResponse)
            // answers a message this client never sends.
            t => return Err(Error::UnknownTag(t)),
        };
        c.end()?;
        Ok(m)
    }
}

/// The type OIDs of a ParameterDescription.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Oids<'a> {
    raw: &'a [u8],
}

impl<'a> Oids<'a> {
    pub fn len(&self) -> usize {
        self.raw.len() / 4
    }
    pub fn is_empty(&self) -> bool {
        self.raw.is_empty()
    }
    pub fn iter(&self) -> impl Iterator<Item = u32> + 'a {
        self.raw
            .chunks_exact(4)
            .map(|s| u32::from_be_bytes([s[0], s[1], s[2], s[3]]))
    }
}

/// One column of a RowDescription.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Column<'a> {
    pub name: &'a str,
    pub table_oid: u32,
    pub column_attr: i16,
    pub type_oid: u32,
    pub type_size: i16,
    pub type_modifier: i32,
    pub format: i16,
}

/// A RowDescription, checked whole on parse; columns are read on demand.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RowDescription<'a> {
    count: u16,
    raw: &'a [u8],
}

impl<'a> RowDescription<'a> {
    fn new(body: &'a [u8]) -> Result<Self, Error> {
        let mut c = Cur { tag: b'T', b: body };
        let n = c.i16()?;
        if n < 0 {
            return Err(Error::Truncated(b'T'));
        }
        let raw = c.b;
        for _ in 0..n {
            c.cstr()?;
            c.take(18)?;
        }
        c.end()?;
        Ok(RowDescription {
            count: n as u16,
            raw,
        })
    }
    pub fn len(&self) -> usize {
        self.count as usize
    }
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }
    pub fn columns(&self) -> impl Iterator<Item = Column<'a>> + 'a {
        let mut c = Cur {
            tag: b'T',
            b: self.raw,
        };
        (0..self.count).map(move |_| {
            // Checked in `new`: these cannot fail.
            let name = c.cstr().unwrap_or("");
            let s = c.take(18).unwrap_or(&[0; 18]);
            let u32at = |i: usize| u32::from_be_bytes([s[i], s[i + 1], s[i + 2], s[i + 3]]);
            Column {
                name,
                table_oid: u32at(0),
                column_attr: i16::from_be_bytes([s[4], s[5]]),
                type_oid: u32at(6),
                type_size: i16::from_be_bytes([s[10], s[11]]),
                type_modifier: u32at(12) as i32,
                format: i16::from_be_bytes([s[16], s[17]]),
            }
        })
    }
}

/// A DataRow, checked whole on parse (every field length fits the body).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DataRow<'a> {
    count: u16,
    raw: &'a [u8],
}

impl<'a> DataRow<'a> {
    fn new(body: &'a [u8]) -> Result<Self, Error> {
        let mut c = Cur { tag: b'D', b: body };
        let n = c.i16()?;
        if n < 0 {
            return Err(Error::Truncated(b'D'));
        }
        let raw = c.b;
        for _ in 0..n {
            let len = c.i32()?;
            if len >= 0 {
                c.take(len as usize)?;
            } else if len != -1 {
                return Err(Error::Truncated(b'D'));
            }
        }
        c.end()?;
        Ok(DataRow {
            count: n as u16,
            raw,
        })
    }
    pub fn len(&self) -> usize {
        self.count as usize
    }
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }
    /// The fields in order: `None` for NULL.
    pub fn fields(&self) -> DataRowFields<'a> {
        DataRowFields {
            left: self.count,
            b: self.raw,
        }
    }
}

/// Iterator over a DataRow's fields.
pub struct DataRowFields<'a> {
    left: u16,
    b: &'a [u8],
}

impl<'a> Iterator for DataRowFields<'a> {
    type Item = Option<&'a [u8]>;
    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        if self.left == 0 || self.b.len() < 4 {
            return None;
        }
        self.left -= 1;
        let len = i32::from_be_bytes([self.b[0], self.b[1], self.b[2], self.b[3]]);
        self.b = &self.b[4..];
        if len < 0 {
            return Some(None);
        }
        // Checked in `DataRow::new`; `min` keeps this total all the same.
        let n = (len as usize).min(self.b.len());
        let (v, rest) = self.b.split_at(n);
        self.b = rest;
        Some(Some(v))
    }
}

/// The fields of an ErrorResponse or NoticeResponse: `(code, value)` pairs,
/// codes as in the protocol (`S` severity, `C` SQLSTATE, `M` message ...).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Fields<'a> {
    raw: &'a [u8],
}

impl<'a> Fields<'a> {
    fn new(tag: u8, body: &'a [u8]) -> Result<Self, Error> {
        let mut c = Cur { tag, b: body };
        loop {
            let code = c.u8()?;
            if code == 0 {
                break;
            }
            c.cstr()?;
        }
        c.end()?;
        Ok(Fields { raw: body })
    }
    pub fn iter(&self) -> impl Iterator<Item = (u8, &'a str)> + 'a {
        let mut c = Cur {
            tag: b'E',
            b: self.raw,
        };
        std::iter::from_fn(move || {
            let code = c.u8().ok()?;
            if code == 0 {
                return None;
            }
            Some((code, c.cstr().ok()?))
        })
    }
    /// The value of field `code`, if present.
    pub fn get(&self, code: u8) -> Option<&'a str> {
        self.iter().find(|(c, _)| *c == code).map(|(_, v)| v)
    }
}
