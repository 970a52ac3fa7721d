//! The `Date` header value, formatted once per second and reused.

use std::cell::RefCell;
use std::time::{SystemTime, UNIX_EPOCH};

use pyo3::prelude::*;

thread_local! {
    static CACHE: RefCell<(u64, [u8; 29])> = const { RefCell::new((0, [b' '; 29])) };
}

/// Calls `f` with the current IMF-fixdate (29 bytes).
pub fn with_date<R>(f: impl FnOnce(&[u8]) -> R) -> R {
    let now = SystemTime::now();
    let secs = now
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    CACHE.with(|c| {
        let mut c = c.borrow_mut();
        if c.0 != secs {
            let s = httpdate::fmt_http_date(now);
            let n = s.len().min(29);
            c.1[..n].copy_from_slice(&s.as_bytes()[..n]);
            c.0 = secs;
        }
        f(&c.1)
    })
}

/// The current date as an HTTP header value.
#[pyfunction]
pub fn http_date() -> String {
    with_date(|d| String::from_utf8_lossy(d).into_owned())
}
