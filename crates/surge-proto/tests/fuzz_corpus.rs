//! Every fuzz target's corpus, replayed on stable by `cargo test`: the seeds
//! committed in `fuzz/seeds/<target>/` and, when present, the inputs a fuzzing run
//! kept in `fuzz/corpus/<target>/` (`make fuzz`). Each input goes through the same
//! property function the fuzz target runs (`tests/fuzz_checks/`).

use std::path::Path;

mod client_common;
mod common;
mod websocket_common;

#[path = "fuzz_checks/split.rs"]
mod split;

#[path = "fuzz_checks/http1_parser.rs"]
mod http1_parser;
#[path = "fuzz_checks/http1_response.rs"]
mod http1_response;
#[path = "fuzz_checks/iproto_frames.rs"]
mod iproto_frames;
#[path = "fuzz_checks/pgwire_backend.rs"]
mod pgwire_backend;
#[path = "fuzz_checks/resp_decoder.rs"]
mod resp_decoder;
#[path = "fuzz_checks/websocket_frames.rs"]
mod websocket_frames;

/// Runs `check` over every file of the target's seed and corpus directories;
/// returns how many inputs ran.
fn replay(target: &str, check: fn(&[u8])) -> usize {
    let fuzz = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz");
    let mut count = 0;
    for dir in [
        fuzz.join("seeds").join(target),
        fuzz.join("corpus").join(target),
    ] {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        let mut paths: Vec<_> = entries.map(|e| e.expect("corpus entry").path()).collect();
        paths.sort();
        for path in paths {
            let data = std::fs::read(&path).expect("corpus file");
            let outcome = std::panic::catch_unwind(|| check(&data));
            assert!(
                outcome.is_ok(),
                "{target}: {} fails its property",
                path.display()
            );
            count += 1;
        }
    }
    count
}

#[test]
fn http1_parser_corpus() {
    assert!(
        replay("http1_parser", http1_parser::check) > 0,
        "no seeds for http1_parser"
    );
}

#[test]
fn http1_response_corpus() {
    assert!(
        replay("http1_response", http1_response::check) > 0,
        "no seeds for http1_response"
    );
}

#[test]
fn iproto_frames_corpus() {
    assert!(
        replay("iproto_frames", iproto_frames::check) > 0,
        "no seeds for iproto_frames"
    );
}

#[test]
fn pgwire_backend_corpus() {
    assert!(
        replay("pgwire_backend", pgwire_backend::check) > 0,
        "no seeds for pgwire_backend"
    );
}

#[test]
fn resp_decoder_corpus() {
    assert!(
        replay("resp_decoder", resp_decoder::check) > 0,
        "no seeds for resp_decoder"
    );
}

#[test]
fn websocket_frames_corpus() {
    assert!(
        replay("websocket_frames", websocket_frames::check) > 0,
        "no seeds for websocket_frames"
    );
}
