//! PostgreSQL: the connection codec for the shared engine, prepared statements,
//! result records, binary values to and from Python, and auth helpers.

mod auth;
mod codec;
mod decode;
mod encode;
mod record;
mod statement;

use pyo3::prelude::*;

/// Add the PostgreSQL types to `surge._core`.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<codec::PgCodec>()?;
    m.add_class::<statement::Statement>()?;
    m.add_class::<record::Record>()?;
    m.add_class::<auth::ScramClient>()?;
    m.add_function(wrap_pyfunction!(auth::pg_md5_password, m)?)?;
    m.add(
        "PgProtocolError",
        m.py().get_type::<codec::PgProtocolError>(),
    )?;
    m.add("StatementGone", m.py().get_type::<codec::StatementGone>())?;
    Ok(())
}
