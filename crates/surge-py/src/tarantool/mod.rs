//! Tarantool: MessagePack <-> Python objects and the IPROTO connection codec.

mod codec;
mod pack;
mod tuple;
mod unpack;

pub(crate) use codec::{msgpack_packb, msgpack_unpackb, IprotoCodec, IprotoProtocolError};
pub(crate) use tuple::Tuple;
