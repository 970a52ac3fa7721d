//! The outcome of decoding a prefix of a stream.

/// "Incomplete" is a result, not an error (httparse's habit): `Partial` asks
/// for more bytes, and a prefix of a valid stream is never an error.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status<T> {
    Complete(T),
    Partial,
}
