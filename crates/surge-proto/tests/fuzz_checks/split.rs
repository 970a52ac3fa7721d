//! How the fuzz properties cut one input stream into reads: cut points from a
//! small xorshift seeded by one input byte, so that a corpus entry replays the same
//! cuts every time. Shared by every target in `tests/fuzz_checks/` (declared by the
//! fuzz targets and by `tests/fuzz_corpus.rs`).

#![allow(dead_code)] // each fuzz target uses only some of these

use std::fmt::Debug;

/// Offsets (strictly inside `0..len`, increasing) at which to cut a stream of
/// `len` bytes: steps of 1 to `max_step` bytes drawn from `seed`.
pub fn cut_points(seed: u8, len: usize, max_step: u32) -> Vec<usize> {
    let mut x = u32::from(seed) | 0x9e37_7900;
    let mut cuts = Vec::new();
    let mut at = 0;
    while at < len {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        at += (x % max_step + 1) as usize;
        if at < len {
            cuts.push(at);
        }
    }
    cuts
}

/// `input` cut into pieces of 1 to 32 bytes at `cut_points(seed, ...)`.
pub fn pieces(input: &[u8], seed: u8) -> Vec<&[u8]> {
    let mut out = Vec::new();
    let mut start = 0;
    for end in cut_points(seed, input.len(), 32)
        .into_iter()
        .chain(std::iter::once(input.len()))
    {
        if end > start {
            out.push(&input[start..end]);
            start = end;
        }
    }
    out
}

/// The common property of the stream decoders: `run(stream, cuts)` (the stream
/// fed in reads ending at `cuts`, then the rest) gives the same outcome whole,
/// byte by byte, and cut at `cut_points(seed, len, max_step)`.
pub fn same_under_cuts<T: PartialEq + Debug>(
    stream: &[u8],
    seed: u8,
    max_step: u32,
    run: impl Fn(&[u8], &[usize]) -> T,
) {
    let whole = run(stream, &[]);
    let bytewise: Vec<usize> = (1..stream.len()).collect();
    assert_eq!(run(stream, &bytewise), whole, "fed byte by byte");
    let cuts = cut_points(seed, stream.len(), max_step);
    assert_eq!(run(stream, &cuts), whole, "fed in pieces");
}
