//! Request types and map keys, named as in Tarantool's `iproto_constants.h`.

pub mod request {
    pub const OK: u32 = 0x00;
    pub const SELECT: u32 = 0x01;
    pub const INSERT: u32 = 0x02;
    pub const REPLACE: u32 = 0x03;
    pub const UPDATE: u32 = 0x04;
    pub const DELETE: u32 = 0x05;
    /// Tarantool 1.6's call: every return value wrapped as a tuple.
    pub const CALL_16: u32 = 0x06;
    pub const AUTH: u32 = 0x07;
    pub const EVAL: u32 = 0x08;
    pub const UPSERT: u32 = 0x09;
    pub const CALL: u32 = 0x0a;
    pub const EXECUTE: u32 = 0x0b;
    pub const NOP: u32 = 0x0c;
    pub const PREPARE: u32 = 0x0d;
    pub const BEGIN: u32 = 0x0e;
    pub const COMMIT: u32 = 0x0f;
    pub const ROLLBACK: u32 = 0x10;
    pub const PING: u32 = 0x40;
    pub const ID: u32 = 0x49;
    pub const WATCH: u32 = 0x4a;
    pub const UNWATCH: u32 = 0x4b;
    pub const EVENT: u32 = 0x4c;
    /// Out-of-band push (box.session.push) before the final reply.
    pub const CHUNK: u32 = 0x80;
    /// Set in a reply's type when it is an error; the low 15 bits are the error code.
    pub const TYPE_ERROR: u32 = 0x8000;
}

pub mod key {
    pub const REQUEST_TYPE: u64 = 0x00;
    pub const SYNC: u64 = 0x01;
    pub const SCHEMA_VERSION: u64 = 0x05;
    pub const STREAM_ID: u64 = 0x0a;
    pub const SPACE_ID: u64 = 0x10;
    pub const INDEX_ID: u64 = 0x11;
    pub const LIMIT: u64 = 0x12;
    pub const OFFSET: u64 = 0x13;
    pub const ITERATOR: u64 = 0x14;
    pub const INDEX_BASE: u64 = 0x15;
    pub const KEY: u64 = 0x20;
    pub const TUPLE: u64 = 0x21;
    pub const FUNCTION_NAME: u64 = 0x22;
    pub const USER_NAME: u64 = 0x23;
    pub const EXPR: u64 = 0x27;
    pub const OPS: u64 = 0x28;
    pub const OPTIONS: u64 = 0x2b;
    pub const DATA: u64 = 0x30;
    pub const ERROR_24: u64 = 0x31;
    pub const METADATA: u64 = 0x32;
    pub const BIND_METADATA: u64 = 0x33;
    pub const BIND_COUNT: u64 = 0x34;
    pub const SQL_TEXT: u64 = 0x40;
    pub const SQL_BIND: u64 = 0x41;
    pub const SQL_INFO: u64 = 0x42;
    pub const STMT_ID: u64 = 0x43;
    pub const ERROR: u64 = 0x52;
    pub const VERSION: u64 = 0x54;
    pub const FEATURES: u64 = 0x55;
    pub const TIMEOUT: u64 = 0x56;
    pub const EVENT_KEY: u64 = 0x57;
    pub const EVENT_DATA: u64 = 0x58;
    pub const TXN_ISOLATION: u64 = 0x59;
    pub const AUTH_TYPE: u64 = 0x5b;
}

/// Select iterators, by their Lua names' order on the wire.
pub mod iterator {
    pub const EQ: u32 = 0;
    pub const REQ: u32 = 1;
    pub const ALL: u32 = 2;
    pub const LT: u32 = 3;
    pub const LE: u32 = 4;
    pub const GE: u32 = 5;
    pub const GT: u32 = 6;
    pub const BITS_ALL_SET: u32 = 7;
    pub const BITS_ANY_SET: u32 = 8;
    pub const BITS_ALL_NOT_SET: u32 = 9;
    pub const OVERLAPS: u32 = 10;
    pub const NEIGHBOR: u32 = 11;
}

/// IPROTO_FEATURES bits (2.10+).
pub mod feature {
    pub const STREAMS: u64 = 0;
    pub const TRANSACTIONS: u64 = 1;
    pub const ERROR_EXTENSION: u64 = 2;
    pub const WATCHERS: u64 = 3;
    pub const PAGINATION: u64 = 4;
}

/// The protocol version this client speaks in IPROTO_ID.
pub const PROTOCOL_VERSION: u64 = 3;

/// Largest frame the decoder accepts; a bigger size prefix is treated as corruption.
/// Tarantool's own default `max_tuple_size` is 1 MiB, so replies of many tuples
/// stay well under this.
pub const MAX_FRAME_SIZE: usize = 1 << 30;
