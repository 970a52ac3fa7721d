//! Limits on what the server may claim, so a corrupt or hostile stream cannot
//! make the client allocate without bound. A limit error means the stream can
//! no longer be trusted: drop the connection.

/// Largest backend message accepted, length word included: 1 GiB, PostgreSQL's
/// own `MaxAllocSize` (no field, and so no row, can be larger than that).
pub const MAX_MESSAGE_LEN: usize = 1 << 30;

/// Largest frontend message the encoders write: the length word is a signed
/// 32-bit integer, and the server refuses anything over `MaxAllocSize` anyway.
pub const MAX_FRONTEND_MESSAGE_LEN: usize = (1 << 30) - 1;

/// Most parameters one Bind may carry: the count is an unsigned 16-bit word.
pub const MAX_PARAMS: usize = u16::MAX as usize;

/// Most dimensions of an array value: PostgreSQL's `MAXDIM`.
pub const MAX_ARRAY_DIMS: usize = 6;

/// Most elements one array value may announce; far above any real array, but
/// low enough that `usize` products of the dimensions cannot overflow.
pub const MAX_ARRAY_ELEMENTS: usize = 1 << 27;
