//! The PostgreSQL frontend/backend protocol (version 3.0), sans-IO.
//!
//! Theory of operation: every backend message is a tag byte and a length word
//! that counts itself. [`read_frame`] cuts one message off the front of a buffer
//! (`Partial` until it is all there; an unknown tag or impossible length is
//! an [`Error`] at once), and [`Message::parse`] types it, checking every field
//! against the body so the views it returns (a [`DataRow`]'s fields, a
//! [`RowDescription`]'s columns) never read out of bounds. Frontend encoders
//! ([`frontend`]) append to a caller-owned buffer and patch lengths, so the
//! Parse/Bind/Execute/Sync of many queries leave in one write. [`auth`] has md5
//! and SCRAM-SHA-256; [`types`] the binary formats of the common types.
//!
//! Matching replies to requests is the caller's: the server answers in order,
//! and each Sync (or simple Query) is answered by exactly one ReadyForQuery, so
//! a client that ends every request with Sync can number its requests and
//! close one at each ReadyForQuery. NoticeResponse, NotificationResponse and
//! ParameterStatus may come at any time and belong to no request.

pub mod auth;
mod backend;
mod error;
pub mod frontend;
mod limits;
pub mod types;

pub use backend::{
    read_frame, sasl_mechanisms, Auth, Column, DataRow, DataRowFields, Fields, Frame, Message,
    Oids, RowDescription, Status,
};
pub use error::Error;
pub use limits::*;

#[cfg(test)]
mod tests;
