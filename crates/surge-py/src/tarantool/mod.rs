//! Tarantool: MessagePack <-> Python objects and the IPROTO connection codec.

mod codec;
mod pack;
mod tuple;
mod unpack;

use pyo3::prelude::*;

/// Add the Tarantool types and functions to `surge._core`.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<codec::IprotoCodec>()?;
    m.add_class::<tuple::Tuple>()?;
    m.add(
        "IprotoProtocolError",
        m.py().get_type::<codec::IprotoProtocolError>(),
    )?;
    m.add_function(wrap_pyfunction!(codec::msgpack_packb, m)?)?;
    m.add_function(wrap_pyfunction!(codec::msgpack_unpackb, m)?)?;
    Ok(())
}
