//! Limits on what a reply may claim, so a corrupt or hostile stream cannot make
//! the client allocate without bound or recurse without bound. A limit error
//! means the stream can no longer be trusted: drop the connection.

/// Largest bulk string accepted: 512 MiB, Redis's own `proto-max-bulk-len` default.
pub const MAX_BULK_LEN: u64 = 512 * 1024 * 1024;

/// Deepest nesting of aggregates (arrays in arrays ...). Redis replies nest a few
/// levels (EXEC of XREADs, COMMAND DOCS); 32 leaves room and bounds recursion.
pub const MAX_NESTING: usize = 32;

/// Most elements one aggregate may announce (a map counts its pairs): 2^28,
/// far above any reply a client can hold in memory but below what `usize`
/// arithmetic could overflow on.
pub const MAX_AGGREGATE_LEN: u64 = 1 << 28;

/// Longest line of a simple string, error, number or length, CRLF excluded.
/// Status lines are short; 1 MiB bounds the search for a CRLF that never comes.
pub const MAX_LINE_LEN: usize = 1024 * 1024;
