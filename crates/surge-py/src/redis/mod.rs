//! Redis: command arguments from Python, RESP replies to Python, and the
//! connection codec for the shared engine, and the native GET/SET lane.

mod args;
mod codec;
mod lane;
mod reply;

pub(crate) use codec::{RespCodec, RespProtocolError};
pub(crate) use lane::RespLane;
