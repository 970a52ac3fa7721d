//! Binary formats of PostgreSQL's types, as encode/decode functions on raw bytes
//! (no Python here: the extension builds Python objects from these parts), one
//! file per family, and [`table`]: the one table of built-in type oids.

mod array;
mod composite;
mod datetime;
mod geometric;
mod hstore;
mod network;
mod numeric;
mod range;
mod reader;
mod scalar;
pub mod table;

pub use array::*;
pub use composite::*;
pub use datetime::*;
pub use geometric::*;
pub use hstore::*;
pub use network::*;
pub use numeric::*;
pub use range::*;
pub use reader::{write_field, Reader};
pub use scalar::*;
pub use table::{find, is_known, lookup, Found, Kind, TypeInfo, TYPES};
