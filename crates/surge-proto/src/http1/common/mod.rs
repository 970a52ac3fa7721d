//! What the HTTP/1 server and client share: head vocabulary, header field
//! rules and the chunked decoder.

mod chunked;
mod fields;
mod head;

pub(crate) use chunked::{ChunkError, Chunked, Step};
pub use fields::is_token;
pub(crate) use fields::{
    is_tchar, list_items, offsets, parse_length, slice, trim, ConnectionOptions, TransferCodings,
};
pub(crate) use head::{find_header, MAX_HEADERS_CAP};
pub use head::{HeaderIndex, Version};
