//! HTTP's native half: the server ([`server`]) and the client ([`client`]),
//! and the header view both hand to Python.

pub(crate) mod client;
pub(crate) mod headers;
pub(crate) mod server;

pub(crate) use headers::Headers;
