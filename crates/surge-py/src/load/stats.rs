//! What the native load loop records: HDR latency histograms (microseconds, the
//! same bounds as `surge.load.recorder`), errors by kind, status classes, the
//! scheduler's own lag, and per-second ticks.
//!
//! Requests are told apart by their due time: one due before the measured
//! period started (a warm-up request) is not recorded at all, however it ends,
//! so the warm-up needs no second recorder and no hand-over at the boundary.

use base64::Engine as _;
use hdrhistogram::serialization::{Serializer, V2DeflateSerializer};
use hdrhistogram::Histogram;

/// Histogram range in microseconds: 1 us .. 100 s, 3 significant digits.
pub const LOWEST_US: u64 = 1;
pub const HIGHEST_US: u64 = 100_000_000;
pub const SIGNIFICANT_DIGITS: u8 = 3;

/// Error kinds, in the order (and with the names) `surge.load.recorder` uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    ConnectRefused,
    ConnectTimeout,
    ConnectError,
    /// The TLS handshake failed (a refused certificate, an alert, a server
    /// that does not speak TLS) or did not finish within the connect timeout.
    TlsHandshake,
    Timeout,
    Disconnect,
    Malformed,
    Http4xx,
    Http5xx,
    /// In flight when the run was stopped early (`HttpLoad.stop`: Ctrl-C).
    Interrupted,
}

impl Kind {
    pub const ALL: [Kind; 10] = [
        Kind::ConnectRefused,
        Kind::ConnectTimeout,
        Kind::ConnectError,
        Kind::TlsHandshake,
        Kind::Timeout,
        Kind::Disconnect,
        Kind::Malformed,
        Kind::Http4xx,
        Kind::Http5xx,
        Kind::Interrupted,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Kind::ConnectRefused => "connect_refused",
            Kind::ConnectTimeout => "connect_timeout",
            Kind::ConnectError => "connect_error",
            Kind::TlsHandshake => "tls_handshake",
            Kind::Timeout => "timeout",
            Kind::Disconnect => "disconnect",
            Kind::Malformed => "malformed",
            Kind::Http4xx => "http_4xx",
            Kind::Http5xx => "http_5xx",
            Kind::Interrupted => "interrupted",
        }
    }

    /// The kind of a failed connection attempt.
    pub fn of_connect(err: &std::io::Error) -> Kind {
        match err.raw_os_error() {
            Some(libc::ECONNREFUSED) => Kind::ConnectRefused,
            Some(libc::ETIMEDOUT) | Some(libc::EHOSTUNREACH) => Kind::ConnectTimeout,
            _ if err.kind() == std::io::ErrorKind::ConnectionRefused => Kind::ConnectRefused,
            _ => Kind::ConnectError,
        }
    }
}

pub fn new_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(LOWEST_US, HIGHEST_US, SIGNIFICANT_DIGITS)
        .expect("constant histogram bounds are valid")
}

/// The HdrHistogram V2 compressed encoding in base64: what the Python `hdrh`
/// package's `encode()` returns and `decode_and_add()` takes.
pub fn encode(h: &Histogram<u64>) -> Vec<u8> {
    if h.is_empty() {
        return Vec::new();
    }
    let mut raw = Vec::new();
    V2DeflateSerializer::new()
        .serialize(h, &mut raw)
        .expect("serializing into a Vec cannot fail");
    base64::engine::general_purpose::STANDARD
        .encode(raw)
        .into_bytes()
}

fn clamp_us(ns: u64) -> u64 {
    (ns / 1000).clamp(LOWEST_US, HIGHEST_US)
}

/// One finished second of the measured period.
pub struct Tick {
    pub second: u64,
    pub n: u64,
    pub errors: u64,
    pub hist: Vec<u8>,
}

/// Everything recorded, once the run is over.
pub struct Final {
    pub n: u64,
    pub hist: Vec<u8>,
    pub errors: Vec<(&'static str, u64)>,
    pub status: Vec<(String, u64)>,
    pub sent: u64,
    pub lag: Vec<u8>,
    /// Connections opened and attempts that failed.
    pub opened: u64,
    pub failed_connects: u64,
    /// Why connection attempts failed ("tls_handshake: <rustls's message>"),
    /// with the number of attempts.
    pub reasons: Vec<(String, u64)>,
}

/// Distinct failure messages kept (a run failing in many ways keeps the first).
const MAX_REASONS: usize = 8;

pub struct Recorder {
    start_ns: u64,
    seconds: u64,
    next_tick: u64,
    interval: Histogram<u64>,
    total: Histogram<u64>,
    lag: Histogram<u64>,
    interval_n: u64,
    interval_errors: u64,
    n: u64,
    errors: [u64; Kind::ALL.len()],
    /// Why connection attempts failed, by message (the first few kinds of message).
    reasons: Vec<(String, u64)>,
    status: [u64; 6],
    sent: u64,
    pub opened: u64,
    pub failed_connects: u64,
}

impl Recorder {
    pub fn new(start_ns: u64, duration_ns: u64) -> Self {
        Recorder {
            start_ns,
            seconds: duration_ns.div_ceil(1_000_000_000).max(1),
            next_tick: 0,
            interval: new_histogram(),
            total: new_histogram(),
            lag: new_histogram(),
            interval_n: 0,
            interval_errors: 0,
            n: 0,
            errors: [0; Kind::ALL.len()],
            reasons: Vec::new(),
            status: [0; 6],
            sent: 0,
            opened: 0,
            failed_connects: 0,
        }
    }

    /// The scheduler issued a request due at `due` at `now` (open model).
    pub fn issued(&mut self, due: u64, now: u64) {
        if due < self.start_ns {
            return;
        }
        self.sent += 1;
        let _ = self.lag.record(clamp_us(now.saturating_sub(due)));
    }

    /// A response with `status` to a request due at `due`, complete at `now`.
    pub fn reply(&mut self, due: u64, now: u64, status: u16) {
        if due < self.start_ns {
            return;
        }
        let _ = self.interval.record(clamp_us(now.saturating_sub(due)));
        self.n += 1;
        self.interval_n += 1;
        self.status[(status as usize / 100).min(5)] += 1;
        if status >= 500 {
            self.count(Kind::Http5xx);
        } else if status >= 400 {
            self.count(Kind::Http4xx);
        }
    }

    /// A request due at `due` that got no usable reply.
    pub fn error(&mut self, due: u64, kind: Kind) {
        if due < self.start_ns {
            return;
        }
        self.count(kind);
    }

    /// A connection attempt failed as `kind` for `why` (counted by message).
    pub fn reason(&mut self, kind: Kind, why: &str) {
        let text = format!("{}: {why}", kind.name());
        if let Some(r) = self.reasons.iter_mut().find(|r| r.0 == text) {
            r.1 += 1;
        } else if self.reasons.len() < MAX_REASONS {
            self.reasons.push((text, 1));
        }
    }

    fn count(&mut self, kind: Kind) {
        self.errors[kind as usize] += 1;
        self.interval_errors += 1;
    }

    /// When the current second ends (ns), or None once only the last one is left.
    pub fn next_tick_at(&self) -> Option<u64> {
        (self.next_tick + 1 < self.seconds)
            .then(|| self.start_ns + (self.next_tick + 1) * 1_000_000_000)
    }

    /// The seconds that ended by `now` (the last one ends only with `finish`).
    pub fn ticks_due(&mut self, now: u64, out: &mut Vec<Tick>) {
        while let Some(at) = self.next_tick_at() {
            if now < at {
                break;
            }
            out.push(self.tick());
        }
    }

    fn tick(&mut self) -> Tick {
        let t = Tick {
            second: self.next_tick,
            n: self.interval_n,
            errors: self.interval_errors,
            hist: if self.interval_n > 0 {
                encode(&self.interval)
            } else {
                Vec::new()
            },
        };
        if self.interval_n > 0 {
            self.total
                .add(&self.interval)
                .expect("histograms of equal bounds add");
        }
        self.interval.reset();
        self.interval_n = 0;
        self.interval_errors = 0;
        self.next_tick += 1;
        t
    }

    /// The remaining seconds (the last one holds what ended while draining).
    pub fn finish(&mut self, out: &mut Vec<Tick>) -> Final {
        while self.next_tick < self.seconds {
            out.push(self.tick());
        }
        let names = ["1xx", "1xx", "2xx", "3xx", "4xx", "5xx"];
        Final {
            n: self.n,
            hist: encode(&self.total),
            errors: Kind::ALL
                .iter()
                .filter(|k| self.errors[**k as usize] > 0)
                .map(|k| (k.name(), self.errors[*k as usize]))
                .collect(),
            status: (0..6)
                .filter(|i| self.status[*i] > 0)
                .map(|i| (names[i].to_string(), self.status[i]))
                .collect(),
            sent: self.sent,
            lag: encode(&self.lag),
            opened: self.opened,
            failed_connects: self.failed_connects,
            reasons: std::mem::take(&mut self.reasons),
        }
    }
}
