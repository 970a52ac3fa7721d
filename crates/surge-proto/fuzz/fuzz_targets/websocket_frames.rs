//! Fuzz target; the property and its input layout are in
//! `tests/fuzz_checks/websocket_frames.rs`, which `cargo test` also replays over the corpus.

#![no_main]

#[path = "../../tests/fuzz_checks/split.rs"]
mod split;
#[path = "../../tests/websocket_common/mod.rs"]
mod websocket_common;
#[path = "../../tests/fuzz_checks/websocket_frames.rs"]
mod check;

libfuzzer_sys::fuzz_target!(|data: &[u8]| check::check(data));
