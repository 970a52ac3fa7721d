//! Redis's RESP2 and RESP3, sans-IO.
//!
//! Theory of operation: a reply is one value; aggregates (arrays, maps, sets,
//! pushes, attributes) announce how many values follow. [`read_header`] reads
//! the type byte and line of one value at a position, and answers `Partial`
//! until that line (and a bulk string's payload) is all there. [`Scanner`]
//! walks headers with a stack of "values still owed" per open aggregate to find
//! where a whole reply ends; it resumes where it stopped, so a large reply
//! arriving in many reads is scanned once, not once per read. Only then is the
//! reply built ([`decode`] into a [`Value`] here; the Python extension builds
//! Python objects straight from the headers), so building never meets partial
//! input. Commands are arrays of bulk strings appended to a caller-owned buffer
//! ([`encode`]), so a batch of commands is one write.
//!
//! Replies are matched to commands in order; pushes (RESP3 `>`, and pub/sub
//! messages on a subscribed RESP2 connection) are told apart by the caller.

mod decode;
mod encode;
mod error;
mod limits;
mod scan;

pub use decode::{decode, read_header, Header, Status, Value};
pub use encode::{encode_command, write_arg, write_array_len, write_int_arg};
pub use error::Error;
pub use limits::*;
pub use scan::Scanner;
