//! HTTP/1.x server side: request parsing with strict RFC 9112 framing, and
//! response head encoding.

mod chunked;
pub mod client;
mod error;
mod fields;
mod head;
mod limits;
mod parser;
mod response;

pub use error::Error;
pub use head::{HeaderIndex, RequestHead, Version};
pub use limits::Limits;
pub use parser::{Event, Parser};
pub use response::{reason_phrase, write_status_line};
