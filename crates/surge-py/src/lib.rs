//! `surge._core`: the Python-facing types built on `surge-proto`.

use pyo3::prelude::*;

mod headers;
mod http;
mod http_client;
mod postgres;
mod redis;
mod tarantool;

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    http::register(m)?;
    http_client::register(m)?;
    postgres::register(m)?;
    redis::register(m)?;
    tarantool::register(m)?;
    Ok(())
}
