//! Process-wide HTTP server counters, bumped on the native path (a relaxed
//! atomic add each, so counting costs nothing measurable) and read by
//! `surge.stats` for Prometheus and Graphite.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use pyo3::prelude::*;
use pyo3::types::PyDict;

pub static REQUESTS: AtomicU64 = AtomicU64::new(0);
pub static PARSE_ERRORS: AtomicU64 = AtomicU64::new(0);
pub static CONNECTIONS_OPENED: AtomicU64 = AtomicU64::new(0);
pub static CONNECTIONS_CLOSED: AtomicU64 = AtomicU64::new(0);
/// Responses by status class: index 1 is 1xx ... 5, anything else in 0.
pub static RESPONSES: [AtomicU64; 6] = [const { AtomicU64::new(0) }; 6];

#[inline]
pub fn count_response(status: u16) {
    let class = (status / 100) as usize;
    RESPONSES[if class < 6 { class } else { 0 }].fetch_add(1, Relaxed);
}

/// A snapshot of the counters of this process.
#[pyfunction]
pub fn http_stats(py: Python<'_>) -> PyResult<Bound<'_, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("requests", REQUESTS.load(Relaxed))?;
    d.set_item("parse_errors", PARSE_ERRORS.load(Relaxed))?;
    let opened = CONNECTIONS_OPENED.load(Relaxed);
    let closed = CONNECTIONS_CLOSED.load(Relaxed);
    d.set_item("connections_opened", opened)?;
    d.set_item("connections_open", opened.saturating_sub(closed))?;
    let by_class = PyDict::new(py);
    for (i, c) in RESPONSES.iter().enumerate() {
        let key = if i == 0 {
            "other".to_owned()
        } else {
            format!("{i}xx")
        };
        by_class.set_item(key, c.load(Relaxed))?;
    }
    d.set_item("responses", by_class)?;
    Ok(d)
}
