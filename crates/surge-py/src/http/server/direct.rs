//! Sending straight to a plain socket, ahead of its transport.
//!
//! Where the transport holds nothing, bytes sent with `send(2)` here leave
//! exactly as the transport's own write would send them (uvloop and asyncio
//! both try the socket at once when their buffer is empty), without the
//! transport's write path in between: for a small response that path is most
//! of what writing costs in user space (uvloop's `write`, ~1k instructions,
//! and a `bytes` object for it). Whatever the kernel does not take, and any
//! error, goes on through the transport, which buffers it (and applies its
//! write back-pressure) or reports the error as it would have.
//!
//! Only a plain socket qualifies: a TLS transport (Python's ssl, rustls)
//! answers `get_extra_info("sslcontext")`, and its socket must never see
//! plaintext.

use std::os::fd::RawFd;

use pyo3::intern;
use pyo3::prelude::*;

/// `send(2)` flags: no SIGPIPE for a peer gone, never block.
pub(crate) const FLAGS: libc::c_int = libc::MSG_NOSIGNAL | libc::MSG_DONTWAIT;

/// The descriptor of `transport`'s socket when it is a plain (not TLS) one;
/// callers look it up once per connection.
pub(crate) fn plain_socket(transport: &Bound<'_, PyAny>) -> Option<RawFd> {
    let py = transport.py();
    let info = intern!(py, "get_extra_info");
    let fd = (|| -> PyResult<Option<RawFd>> {
        if !transport.call_method1(info, ("sslcontext",))?.is_none() {
            return Ok(None);
        }
        let sock = transport.call_method1(info, ("socket",))?;
        if sock.is_none() {
            return Ok(None);
        }
        sock.call_method0(intern!(py, "fileno"))?
            .extract::<RawFd>()
            .map(Some)
    })();
    fd.ok().flatten().filter(|&fd| fd >= 0)
}

/// Sends `data` to `sock` until the kernel takes no more (EAGAIN) or fails:
/// how many bytes it took. The socket must be open and its transport empty.
pub(crate) fn send_bytes(sock: RawFd, data: &[u8], flags: libc::c_int) -> usize {
    let mut sent = 0;
    while sent < data.len() {
        // SAFETY: `data[sent..]` is a valid slice for the call's duration; the
        // caller holds the socket open (its transport is open).
        let n = unsafe { libc::send(sock, data[sent..].as_ptr().cast(), data.len() - sent, flags) };
        if n <= 0 {
            break;
        }
        sent += n as usize;
    }
    sent
}
