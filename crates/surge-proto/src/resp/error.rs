use std::fmt;

/// Why RESP bytes could not be decoded. Every one of them means the stream is
/// out of sync with the protocol: the connection must be dropped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Error {
    /// A value starts with a byte that is no RESP2/RESP3 type.
    BadType(u8),
    /// A line does not end with CRLF (a bare CR or LF, or a payload overrun).
    BadLineEnd,
    /// A length or integer line is not a decimal integer.
    BadInteger,
    /// A double line is not a number (or inf / -inf / nan).
    BadDouble,
    /// A boolean line is not `t` or `f`.
    BadBoolean,
    /// A verbatim string lacks its `xxx:` format prefix.
    BadVerbatim,
    /// A bulk string over [`MAX_BULK_LEN`](super::MAX_BULK_LEN).
    BulkTooLong(u64),
    /// An aggregate over [`MAX_AGGREGATE_LEN`](super::MAX_AGGREGATE_LEN) elements.
    AggregateTooLong(u64),
    /// Aggregates nested deeper than [`MAX_NESTING`](super::MAX_NESTING).
    TooDeep,
    /// A line longer than [`MAX_LINE_LEN`](super::MAX_LINE_LEN).
    LineTooLong,
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::BadType(b) => write!(f, "resp: unknown type byte 0x{b:02x}"),
            Error::BadLineEnd => f.write_str("resp: line or payload not ended by CRLF"),
            Error::BadInteger => f.write_str("resp: malformed integer or length"),
            Error::BadDouble => f.write_str("resp: malformed double"),
            Error::BadBoolean => f.write_str("resp: malformed boolean"),
            Error::BadVerbatim => f.write_str("resp: verbatim string without a format prefix"),
            Error::BulkTooLong(n) => write!(f, "resp: bulk string of {n} bytes is over the limit"),
            Error::AggregateTooLong(n) => {
                write!(f, "resp: aggregate of {n} elements is over the limit")
            }
            Error::TooDeep => f.write_str("resp: aggregates nested too deep"),
            Error::LineTooLong => f.write_str("resp: line too long"),
        }
    }
}

impl std::error::Error for Error {}
