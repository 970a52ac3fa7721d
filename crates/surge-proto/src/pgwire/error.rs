use std::fmt;

/// Why PostgreSQL wire bytes could not be decoded (or a message not encoded).
/// A decode error means the stream is out of sync with the protocol: the
/// connection must be dropped. A value error (`BadValue`) fails one value only.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Error {
    /// A message tag that no backend message has.
    UnknownTag(u8),
    /// A length word below 4 (it counts itself).
    BadLength(u32),
    /// A message over [`MAX_MESSAGE_LEN`](super::MAX_MESSAGE_LEN).
    MessageTooLong(usize),
    /// A message whose body ends before its fields do, or has bytes left over.
    Truncated(u8),
    /// A string field without its NUL terminator, or not UTF-8.
    BadString(u8),
    /// An authentication request code this client does not know.
    BadAuthCode(u32),
    /// A frontend string with a NUL byte inside (it would end the field early).
    NulInString,
    /// A frontend message over [`MAX_FRONTEND_MESSAGE_LEN`](super::MAX_FRONTEND_MESSAGE_LEN).
    FrontendTooLong(usize),
    /// More Bind parameters (or result formats) than [`MAX_PARAMS`](super::MAX_PARAMS).
    TooManyParams(usize),
    /// A binary value of a type whose bytes do not fit the type.
    BadValue(&'static str),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::UnknownTag(t) => write!(f, "pgwire: unknown message tag 0x{t:02x}"),
            Error::BadLength(n) => write!(f, "pgwire: message length {n} is below 4"),
            Error::MessageTooLong(n) => write!(f, "pgwire: message of {n} bytes is over the limit"),
            Error::Truncated(t) => {
                write!(f, "pgwire: malformed '{}' message body", char::from(*t))
            }
            Error::BadString(t) => write!(
                f,
                "pgwire: unterminated or non-UTF-8 string in '{}' message",
                char::from(*t)
            ),
            Error::BadAuthCode(c) => write!(f, "pgwire: unknown authentication request {c}"),
            Error::NulInString => f.write_str("pgwire: string contains a NUL byte"),
            Error::FrontendTooLong(n) => {
                write!(f, "pgwire: message of {n} bytes is over the frontend limit")
            }
            Error::TooManyParams(n) => write!(f, "pgwire: {n} parameters is over the limit"),
            Error::BadValue(what) => write!(f, "pgwire: malformed binary {what} value"),
        }
    }
}

impl std::error::Error for Error {}
