use std::fmt;

/// Why a MessagePack value could not be read or written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Error {
    /// The input ends inside a value (inside a complete frame this is corruption).
    Truncated,
    /// A byte that starts no MessagePack value (0xc1).
    BadMarker(u8),
    /// Nesting deeper than [`MAX_DEPTH`](crate::msgpack::ext::MAX_DEPTH).
    TooDeep,
    /// An extension payload that does not decode as its type says.
    BadExt(i8),
    /// A value of the wrong type where the protocol expects another.
    Unexpected(&'static str),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Truncated => f.write_str("msgpack: truncated value"),
            Error::BadMarker(b) => write!(f, "msgpack: invalid marker byte 0x{b:02x}"),
            Error::TooDeep => f.write_str("msgpack: nesting too deep"),
            Error::BadExt(t) => write!(f, "msgpack: malformed extension value of type {t}"),
            Error::Unexpected(what) => write!(f, "msgpack: expected {what}"),
        }
    }
}

impl std::error::Error for Error {}
