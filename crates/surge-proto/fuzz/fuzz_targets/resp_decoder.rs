//! Fuzz target; the property and its input layout are in
//! `tests/fuzz_checks/resp_decoder.rs`, which `cargo test` also replays over the corpus.

#![no_main]

#[path = "../../tests/fuzz_checks/split.rs"]
mod split;
#[path = "../../tests/fuzz_checks/resp_decoder.rs"]
mod check;

libfuzzer_sys::fuzz_target!(|data: &[u8]| check::check(data));
