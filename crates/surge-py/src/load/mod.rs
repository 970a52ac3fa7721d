//! `surge._core.HttpLoad`: the HTTP load generator's loop, run natively.
//!
//! Why native: the Python scheduler sleeps on uvloop's millisecond timers and
//! pays the interpreter per request, so its own lag (0.6 ms at p50) went into
//! every latency and one process could not outrun the servers it measured.
//! Here a dedicated thread (the GIL released: it never touches Python) runs the
//! schedule on a timerfd, writes pre-encoded requests, frames responses with
//! surge-proto's HTTP/1 client parser and records latencies in HDR histograms;
//! Python collects a tick per second and the final counts. HTTPS targets run
//! over rustls sessions in the same loop (a `TlsClientConfig` and a server name).

mod engine;
mod stats;
mod timer;

use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::thread::JoinHandle;

use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};
use rustls::pki_types::ServerName;

use crate::tls::TlsConfigError;
use crate::tls_client::TlsClientConfig;
use engine::{Settings, Shared};
use stats::Final;

/// A load on one HTTP address, run on a thread of its own (see the module doc).
#[pyclass(module = "surge._core")]
pub struct HttpLoad {
    settings: Settings,
    shared: Arc<Shared>,
    thread: Option<JoinHandle<std::io::Result<Final>>>,
}

fn ns(seconds: f64, what: &str) -> PyResult<u64> {
    if !(seconds >= 0.0 && seconds.is_finite()) {
        return Err(PyValueError::new_err(format!(
            "{what} must be >= 0 seconds, got {seconds}"
        )));
    }
    Ok((seconds * 1e9) as u64)
}

#[pymethods]
impl HttpLoad {
    #[new]
    #[pyo3(signature = (
        ip, port, request, *, head=false, rate=None, phase=0.0, connections, pipeline=1,
        start_ns, warmup, duration, timeout, connect_timeout, tls=None, server_name=None
    ))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        ip: &str,
        port: u16,
        request: &[u8],
        head: bool,
        rate: Option<f64>,
        phase: f64,
        connections: usize,
        pipeline: usize,
        start_ns: u64,
        warmup: f64,
        duration: f64,
        timeout: f64,
        connect_timeout: f64,
        tls: Option<PyRef<'_, TlsClientConfig>>,
        server_name: Option<&str>,
    ) -> PyResult<Self> {
        let ip: IpAddr = ip
            .parse()
            .map_err(|_| PyValueError::new_err(format!("not an IP address: {ip:?}")))?;
        if let Some(r) = rate {
            if !(r > 0.0 && r.is_finite()) {
                return Err(PyValueError::new_err(format!("rate must be > 0, got {r}")));
            }
        }
        if connections == 0 || pipeline == 0 {
            return Err(PyValueError::new_err(
                "connections and pipeline must be >= 1",
            ));
        }
        if request.is_empty() {
            return Err(PyValueError::new_err("the request is empty"));
        }
        let tls = match tls {
            None => None,
            Some(config) => {
                // The given settings plus ALPN http/1.1, the protocol this loop speaks.
                let mut config = (*config.config).clone();
                config.alpn_protocols = vec![b"http/1.1".to_vec()];
                let name = server_name.map_or_else(|| ip.to_string(), str::to_owned);
                let name = ServerName::try_from(name.clone()).map_err(|e| {
                    TlsConfigError::new_err(format!("bad server name {name:?}: {e}"))
                })?;
                Some((Arc::new(config), name))
            }
        };
        Ok(HttpLoad {
            settings: Settings {
                addr: SocketAddr::new(ip, port),
                request: request.to_vec(),
                head,
                rate,
                phase: phase.clamp(0.0, 1.0),
                connections,
                pipeline,
                start_ns,
                warmup_ns: ns(warmup, "warmup")?,
                duration_ns: ns(duration, "duration")?.max(1),
                timeout_ns: ns(timeout, "timeout")?,
                connect_timeout_ns: ns(connect_timeout, "connect_timeout")?,
                tls,
            },
            shared: Arc::new(Shared::default()),
            thread: None,
        })
    }

    /// Starts the loop on its own thread.
    fn start(&mut self) -> PyResult<()> {
        if self.thread.is_some() {
            return Err(PyRuntimeError::new_err("this load has already started"));
        }
        let (s, shared) = (self.settings.clone(), self.shared.clone());
        let handle = std::thread::Builder::new()
            .name("surge-load".into())
            .spawn(move || {
                let r = engine::run(s, shared.clone());
                shared.done.store(true, Ordering::Release);
                r
            })
            .map_err(|e| PyRuntimeError::new_err(format!("cannot start the load thread: {e}")))?;
        self.thread = Some(handle);
        Ok(())
    }

    /// True once the loop has ended (call `join` for the result).
    fn done(&self) -> bool {
        self.shared.done.load(Ordering::Acquire)
    }

    /// Asks the loop to end now; what is outstanding counts as interrupted.
    fn stop(&self) {
        self.shared.stop.store(true, Ordering::Relaxed);
    }

    /// The seconds finished since the last call:
    /// ``[{"t": second, "n": replies, "errors": errors, "hist": encoded}]``.
    fn ticks<'py>(&self, py: Python<'py>) -> PyResult<Vec<Bound<'py, PyDict>>> {
        let ticks = std::mem::take(&mut *self.shared.ticks.lock().unwrap());
        ticks
            .into_iter()
            .map(|t| {
                let d = PyDict::new(py);
                d.set_item("t", t.second)?;
                d.set_item("n", t.n)?;
                d.set_item("errors", t.errors)?;
                d.set_item("hist", PyBytes::new(py, &t.hist))?;
                Ok(d)
            })
            .collect()
    }

    /// Waits for the loop to end (the GIL released) and returns what it recorded.
    fn join<'py>(&mut self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let handle = self
            .thread
            .take()
            .ok_or_else(|| PyRuntimeError::new_err("the load was not started, or joined"))?;
        let fin = py
            .allow_threads(|| handle.join())
            .map_err(|_| PyRuntimeError::new_err("the load thread panicked"))?
            .map_err(|e| PyRuntimeError::new_err(format!("the load loop failed: {e}")))?;
        let d = PyDict::new(py);
        d.set_item("n", fin.n)?;
        d.set_item("hist", PyBytes::new(py, &fin.hist))?;
        let errors = PyDict::new(py);
        for (k, v) in fin.errors {
            errors.set_item(k, v)?;
        }
        d.set_item("errors", errors)?;
        let status = PyDict::new(py);
        for (k, v) in fin.status {
            status.set_item(k, v)?;
        }
        d.set_item("status", status)?;
        d.set_item("sent", fin.sent)?;
        d.set_item("lag", PyBytes::new(py, &fin.lag))?;
        d.set_item("opened", fin.opened)?;
        d.set_item("failed_connects", fin.failed_connects)?;
        let reasons = PyDict::new(py);
        for (k, v) in fin.reasons {
            reasons.set_item(k, v)?;
        }
        d.set_item("reasons", reasons)?;
        Ok(d)
    }
}

impl Drop for HttpLoad {
    fn drop(&mut self) {
        // A load dropped while running (its caller cancelled) stops; the thread
        // ends on its own within one loop turn.
        self.shared.stop.store(true, Ordering::Relaxed);
    }
}
