//! HTTP/1.x server side: request parsing with strict RFC 9112 framing, and
//! response head encoding.

mod error;
mod head;
mod limits;
mod parser;
mod response;

pub use error::Error;
pub use head::RequestHead;
pub use limits::Limits;
pub use parser::{Event, Parser};
pub use response::{reason_phrase, write_status_line};
