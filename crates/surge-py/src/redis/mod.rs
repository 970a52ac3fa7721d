//! Redis: command arguments from Python, RESP replies to Python, and the
//! connection codec for the shared engine.

mod args;
mod codec;
mod reply;

pub(crate) use codec::{RespCodec, RespProtocolError};
