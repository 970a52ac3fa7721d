//! Redis: command arguments from Python, RESP replies to Python, and the
//! connection codec for the shared engine.

mod args;
mod codec;
mod reply;

use pyo3::prelude::*;

/// Add the Redis types to `surge._core`.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<codec::RespCodec>()?;
    m.add(
        "RespProtocolError",
        m.py().get_type::<codec::RespProtocolError>(),
    )?;
    Ok(())
}
