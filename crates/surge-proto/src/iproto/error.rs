use std::fmt;

/// Why IPROTO bytes could not be decoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Error {
    /// Malformed MessagePack inside a frame.
    Msgpack(crate::msgpack::Error),
    /// The size prefix is not a msgpack unsigned int.
    BadSize,
    /// The size prefix is over [`MAX_FRAME_SIZE`](super::MAX_FRAME_SIZE).
    FrameTooLarge(u64),
    /// A header or body that is not a map, or lacks a required key.
    BadHeader,
    /// The server greeting is not Tarantool's.
    BadGreeting,
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Msgpack(e) => write!(f, "iproto: {e}"),
            Error::BadSize => f.write_str("iproto: frame size prefix is not an unsigned int"),
            Error::FrameTooLarge(n) => write!(f, "iproto: frame of {n} bytes is over the limit"),
            Error::BadHeader => f.write_str("iproto: malformed frame header or body"),
            Error::BadGreeting => f.write_str("iproto: not a Tarantool greeting"),
        }
    }
}

impl std::error::Error for Error {}

impl From<crate::msgpack::Error> for Error {
    fn from(e: crate::msgpack::Error) -> Self {
        Error::Msgpack(e)
    }
}
