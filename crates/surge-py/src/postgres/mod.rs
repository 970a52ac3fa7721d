//! PostgreSQL: the connection codec for the shared engine, prepared statements,
//! result records, binary values to and from Python, and auth helpers.

mod auth;
mod codec;
mod decode;
mod encode;
mod record;
mod statement;

pub(crate) use auth::{pg_md5_password, ScramClient};
pub(crate) use codec::{PgCodec, PgProtocolError, StatementGone};
pub(crate) use record::Record;
pub(crate) use statement::Statement;
