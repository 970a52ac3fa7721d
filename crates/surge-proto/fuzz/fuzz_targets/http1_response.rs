//! Fuzz target; the property and its input layout are in
//! `tests/fuzz_checks/http1_response.rs`, which `cargo test` also replays over the corpus.

#![no_main]

#[path = "../../tests/fuzz_checks/split.rs"]
mod split;
#[path = "../../tests/client_common/mod.rs"]
mod client_common;
#[path = "../../tests/fuzz_checks/http1_response.rs"]
mod check;

libfuzzer_sys::fuzz_target!(|data: &[u8]| check::check(data));
