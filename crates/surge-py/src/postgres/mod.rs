//! PostgreSQL: the connection codec for the shared engine, prepared statements,
//! result records, binary values to and from Python (by the codec each type
//! resolves to: `registry`), and auth helpers.

mod auth;
mod codec;
mod containers;
mod copy_in;
mod custom;
mod decode;
mod encode;
mod geometry;
mod network;
mod pyclasses;
mod record;
mod registry;
mod statement;

pub(crate) use auth::{pg_md5_password, ScramClient};
pub(crate) use codec::{PgCodec, PgProtocolError, StatementGone};
pub(crate) use record::record_type;
pub(crate) use registry::pg_types;
pub(crate) use statement::Statement;
