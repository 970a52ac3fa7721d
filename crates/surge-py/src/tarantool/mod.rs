//! Tarantool: MessagePack <-> Python objects, the IPROTO connection codec and
//! the native request lane.

mod codec;
mod lane;
mod pack;
mod response;
mod tuple;
mod unpack;

pub(crate) use codec::{msgpack_packb, msgpack_unpackb, IprotoCodec, IprotoProtocolError};
pub(crate) use lane::{IprotoConnState, IprotoLane};
pub(crate) use response::response_type;
pub(crate) use tuple::Tuple;
