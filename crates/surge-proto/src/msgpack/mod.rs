//! MessagePack, sans-IO: a token reader over a byte slice and writers that
//! append to a caller-owned `Vec<u8>`, plus Tarantool's extension types.

mod decode;
mod encode;
mod error;
pub mod ext;

pub use decode::{read_token, skip_value, Token};
pub use encode::*;
pub use error::Error;
