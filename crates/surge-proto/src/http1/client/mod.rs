//! HTTP/1.1 client side, sans-IO: the request encoder and the response parser
//! with strict framing (Content-Length, chunked, until close; no body for HEAD,
//! 204 and 304; interim 1xx responses skipped).

mod encoder;
mod error;
mod head;
mod limits;
mod parser;

pub use encoder::{write_chunk, write_last_chunk, write_request, RequestBody};
pub use error::{EncodeError, ResponseError};
pub use head::{ResponseBody, ResponseHead};
pub use limits::*;
pub use parser::{Expect, ResponseEvent, ResponseParser};
