//! HTTP/1.x, sans-IO, in three parts:
//!
//! - [`common`]: what both sides share: the version, header indexes, token
//!   and list syntax, the Connection and Transfer-Encoding rules, and the
//!   chunked decoder;
//! - [`server`]: the request parser with strict RFC 9112 framing, its limits
//!   and errors, and response status lines;
//! - [`client`]: the request encoder and the response parser, its limits and
//!   errors.

pub mod client;
pub mod common;
pub mod server;
