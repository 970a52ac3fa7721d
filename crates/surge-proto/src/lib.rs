//! Sans-IO protocol codecs for surge.
//!
//! Nothing here does I/O or knows about Python or asyncio: each codec takes
//! bytes and returns messages (or "need more"), and encoders append to a buffer
//! the caller owns, so a whole batch of messages leaves in one write.

pub mod http1;
pub mod iproto;
pub mod msgpack;
pub mod pgwire;
pub mod resp;
mod status;
pub mod websocket;

pub use status::Status;
