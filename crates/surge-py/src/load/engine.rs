//! The HTTP load loop: one thread, one epoll (mio), a timerfd for the schedule.
//!
//! Theory of operation. Requests are identical, so their bytes are built once
//! and a request is no more than its due time: pushed on a connection's
//! in-flight queue when sent, popped when its response completes (responses
//! come in order on HTTP/1.1), and the latency is `now - due`. Each loop turn
//! issues every request that is due, writes each connection's new requests in
//! one write, then sleeps in epoll until the next due time, socket event,
//! second boundary or timeout sweep.
//!
//! Open model: request `i` is due at `begin + (phase + i) / rate`; it goes to a
//! connection with fewer than `pipeline` requests in flight, else waits in the
//! queue (its latency still counts from its due time) while a new connection
//! opens, up to `connections`. Closed model: `connections` connections each
//! keep `pipeline` requests in flight, each response sending the next.
//!
//! Every request ends exactly once: a response, or an error of one kind (its
//! connection failed to open, died, sent garbage, or the request timed out).
//!
//! HTTPS: a connection carries a rustls client session and counts as open
//! only once its handshake is done (within the connect timeout; a failure is
//! the error kind `tls_handshake`, its reason kept). Requests of one loop turn
//! are sealed together (rustls packs them into as few records as fit) and the
//! records written straight from rustls's queue to the socket; a read is
//! decrypted into the response parser's buffer (`tls::decrypt_into`), so TLS
//! adds no copy of its own beyond rustls's.

use std::collections::VecDeque;
use std::io::{self, Read, Write};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use mio::net::TcpStream;
use mio::unix::SourceFd;
use mio::{Events, Interest, Poll, Token};
use rustls::pki_types::ServerName;
use rustls::{ClientConfig, ClientConnection};
use surge_proto::http1::client::{Expect, ResponseEvent, ResponseLimits, ResponseParser};

use super::stats::{Final, Kind, Recorder, Tick};
use crate::tls::{decrypt_into, PlainSink};

use super::timer::{
    above_own_process, now_ns, tighten_timer_slack, Margin, TimerFd, MAX_SPIN_NS, MIN_SPIN_NS,
    SPIN_SHARE,
};

/// How often requests and connection attempts are checked against their timeouts.
const SWEEP_NS: u64 = 10_000_000;
/// Closed model: wait this long before reopening a connection that failed to open.
const RECONNECT_DELAY_NS: u64 = 50_000_000;
/// Bytes read per `read` call.
const READ_CHUNK: usize = 64 * 1024;
const TIMER: Token = Token(usize::MAX);

/// One run's settings (times in CLOCK_MONOTONIC nanoseconds).
#[derive(Clone)]
pub struct Settings {
    pub addr: SocketAddr,
    pub request: Vec<u8>,
    pub head: bool,
    /// Open model: this worker's requests per second; None for the closed model.
    pub rate: Option<f64>,
    /// This worker's schedule offset, as a fraction of one interval.
    pub phase: f64,
    pub connections: usize,
    pub pipeline: usize,
    /// When the measured period starts; the warm-up runs before it.
    pub start_ns: u64,
    pub warmup_ns: u64,
    pub duration_ns: u64,
    pub timeout_ns: u64,
    pub connect_timeout_ns: u64,
    /// HTTPS: the client settings and the name the certificate must show (SNI).
    pub tls: Option<(Arc<ClientConfig>, ServerName<'static>)>,
}

/// Decrypted bytes go straight into the response parser's buffer.
impl PlainSink for ResponseParser {
    fn reserve(&mut self, _n: usize) {}

    fn put(&mut self, chunk: &[u8]) {
        self.feed(chunk);
    }
}

/// What the loop and Python share: finished seconds, and the stop request.
#[derive(Default)]
pub struct Shared {
    pub ticks: Mutex<Vec<Tick>>,
    pub stop: AtomicBool,
    pub done: AtomicBool,
}

struct Conn {
    stream: TcpStream,
    parser: ResponseParser,
    inflight: VecDeque<u64>,
    /// Plaintext requests not yet written (TLS: not yet sealed).
    out: Vec<u8>,
    /// HTTPS: the session (boxed: rustls's state is large and rarely moved).
    tls: Option<Box<ClientConnection>>,
    /// The TCP connection is up (the TLS handshake may still be going on).
    tcp: bool,
    /// Ready for requests: TCP up and, over TLS, the handshake done.
    connected: bool,
    opened_at: u64,
    status: u16,
    keep_alive: bool,
    dirty: bool,
    in_free: bool,
}

struct Loop {
    s: Settings,
    poll: Poll,
    conns: Vec<Option<Conn>>,
    vacant: Vec<usize>,
    live: usize,
    connecting: usize,
    queue: VecDeque<u64>,
    free: Vec<usize>,
    dirty: Vec<usize>,
    reopen_at: Vec<u64>,
    rec: Recorder,
    stopping: bool,
    closed: bool,
    scratch: Vec<u8>,
}

/// Runs the whole load on the calling thread; returns what was recorded.
pub fn run(s: Settings, shared: Arc<Shared>) -> io::Result<Final> {
    tighten_timer_slack();
    above_own_process();
    let poll = Poll::new()?;
    let mut timer = TimerFd::new()?;
    poll.registry()
        .register(&mut SourceFd(&timer.raw()), TIMER, Interest::READABLE)?;
    let begin = s.start_ns.saturating_sub(s.warmup_ns);
    let end = s.start_ns + s.duration_ns;
    let mut lp = Loop {
        rec: Recorder::new(s.start_ns, s.duration_ns),
        s,
        poll,
        conns: Vec::new(),
        vacant: Vec::new(),
        live: 0,
        connecting: 0,
        queue: VecDeque::new(),
        free: Vec::new(),
        dirty: Vec::new(),
        reopen_at: Vec::new(),
        stopping: false,
        closed: false,
        scratch: vec![0; READ_CHUNK],
    };
    let mut events = Events::with_capacity(1024);
    let mut ticks = Vec::new();
    // Sleep until the run begins (several processes start together).
    let mut margin = Margin::new();
    while now_ns() < begin {
        timer.arm_at(begin.saturating_sub(MAX_SPIN_NS));
        let wait = begin.saturating_sub(now_ns());
        let t = if wait > MAX_SPIN_NS {
            None
        } else {
            Some(Duration::ZERO)
        };
        lp.poll.poll(&mut events, t)?;
        timer.clear();
    }
    let interval = lp.s.rate.map(|r| 1e9 / r);
    let phase = lp.s.phase;
    let due_of = |i: u64| begin + ((phase + i as f64) * interval.unwrap_or(0.0)) as u64;
    let mut i: u64 = 0;
    let mut due = due_of(0);
    if interval.is_none() {
        for _ in 0..lp.s.connections {
            lp.open(now_ns());
        }
    }
    let spin_cap = interval.map_or(MAX_SPIN_NS, |i| ((i * SPIN_SHARE) as u64).max(MIN_SPIN_NS));
    let mut next_sweep = now_ns() + SWEEP_NS;
    let mut drain_end = u64::MAX;
    loop {
        let now = now_ns();
        if shared.stop.load(Ordering::Relaxed) {
            lp.abandon(Kind::Interrupted);
            break;
        }
        if interval.is_some() {
            while due <= now && due < end {
                lp.rec.issued(due, now);
                lp.issue(due);
                i += 1;
                due = due_of(i);
            }
        }
        if !lp.reopen_at.is_empty() {
            let n = lp.reopen_at.len();
            lp.reopen_at.retain(|t| *t > now);
            for _ in lp.reopen_at.len()..n {
                if !lp.stopping {
                    lp.open(now);
                }
            }
        }
        if now >= next_sweep {
            lp.expire(now);
            next_sweep = now + SWEEP_NS;
        }
        lp.rec.ticks_due(now, &mut ticks);
        if !ticks.is_empty() {
            shared.ticks.lock().unwrap().append(&mut ticks);
        }
        if now >= end {
            if !lp.stopping {
                lp.stopping = true;
                drain_end = now + lp.s.timeout_ns;
            }
            if lp.outstanding() == 0 || now >= drain_end {
                lp.abandon(Kind::Timeout);
                break;
            }
        }
        lp.flush();
        // Sleep until the next thing to do; poll the last margin before a due
        // time (the other wake-ups need no precision).
        let mut wake = next_sweep.min(if lp.stopping { drain_end } else { end });
        if let Some(at) = lp.rec.next_tick_at() {
            wake = wake.min(at);
        }
        if let Some(at) = lp.reopen_at.iter().min() {
            wake = wake.min(*at);
        }
        let now = now_ns();
        let timeout = if interval.is_some() && due < end && due <= wake {
            let spin = margin.spin_ns().min(spin_cap);
            if due.saturating_sub(now) <= spin {
                Some(Duration::ZERO)
            } else {
                timer.arm_at(due - spin);
                None
            }
        } else if wake <= now {
            Some(Duration::ZERO)
        } else {
            timer.arm_at(wake);
            None
        };
        match lp.poll.poll(&mut events, timeout) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        }
        let now = now_ns();
        for ev in events.iter() {
            if ev.token() == TIMER {
                margin.woke(timer.target(), now);
                timer.clear();
                continue;
            }
            lp.event(
                ev.token().0,
                ev.is_readable() || ev.is_read_closed() || ev.is_error(),
                now,
            );
        }
    }
    let fin = lp.rec.finish(&mut ticks);
    shared.ticks.lock().unwrap().append(&mut ticks);
    Ok(fin)
}

impl Loop {
    fn open_model(&self) -> bool {
        self.s.rate.is_some()
    }

    fn outstanding(&self) -> usize {
        self.queue.len()
            + self
                .conns
                .iter()
                .flatten()
                .map(|c| c.inflight.len())
                .sum::<usize>()
    }

    fn open(&mut self, now: u64) {
        let mut stream = match TcpStream::connect(self.s.addr) {
            Ok(s) => s,
            Err(e) => {
                self.rec.failed_connects += 1;
                self.connect_failed(Kind::of_connect(&e), now);
                return;
            }
        };
        let _ = stream.set_nodelay(true);
        let tls = match &self.s.tls {
            None => None,
            Some((config, name)) => match ClientConnection::new(config.clone(), name.clone()) {
                Ok(mut c) => {
                    // The loop bounds what it queues; rustls must not refuse part of a write.
                    c.set_buffer_limit(None);
                    Some(Box::new(c))
                }
                Err(e) => {
                    self.rec.failed_connects += 1;
                    self.rec.reason(Kind::TlsHandshake, &e.to_string());
                    self.connect_failed(Kind::TlsHandshake, now);
                    return;
                }
            },
        };
        let idx = self.vacant.pop().unwrap_or_else(|| {
            self.conns.push(None);
            self.conns.len() - 1
        });
        if let Err(e) = self.poll.registry().register(
            &mut stream,
            Token(idx),
            Interest::READABLE | Interest::WRITABLE,
        ) {
            self.vacant.push(idx);
            self.connect_failed(Kind::of_connect(&e), now);
            return;
        }
        self.connecting += 1;
        self.conns[idx] = Some(Conn {
            stream,
            parser: ResponseParser::new(ResponseLimits::default()),
            inflight: VecDeque::new(),
            out: Vec::new(),
            tls,
            tcp: false,
            connected: false,
            opened_at: now,
            status: 0,
            keep_alive: true,
            dirty: false,
            in_free: false,
        });
    }

    /// A connection attempt failed (the attempt is no longer counted in `connecting`).
    fn connect_failed(&mut self, kind: Kind, now: u64) {
        if self.open_model() {
            // Queued requests wait for any connection; they fail when none is left.
            if self.live == 0 && self.connecting == 0 {
                while let Some(due) = self.queue.pop_front() {
                    self.rec.error(due, kind);
                }
            }
            return;
        }
        // Closed model: this connection's requests fail; try again after a pause.
        for _ in 0..self.s.pipeline {
            self.rec.error(now, kind);
        }
        if !self.stopping && !self.closed {
            self.reopen_at.push(now + RECONNECT_DELAY_NS);
        }
    }

    fn event(&mut self, idx: usize, readable: bool, now: u64) {
        let Some(conn) = self.conns.get_mut(idx).and_then(|c| c.as_mut()) else {
            return;
        };
        if !conn.tcp {
            let failed = match conn.stream.take_error() {
                Ok(None) => match conn.stream.peer_addr() {
                    Ok(_) => None,
                    Err(e) if e.kind() == io::ErrorKind::NotConnected => return,
                    Err(e) => Some(e),
                },
                Ok(Some(e)) | Err(e) => Some(e),
            };
            if let Some(e) = failed {
                self.rec.failed_connects += 1;
                self.remove(idx);
                self.connecting -= 1;
                self.connect_failed(Kind::of_connect(&e), now);
                return;
            }
            conn.tcp = true;
            // TLS: the ClientHello waits in the session; the write below sends it.
            if conn.tls.is_none() && !self.ready(idx, now) {
                return;
            }
        }
        if readable {
            self.read(idx, now);
        }
        // Writable: what a full socket buffer held back goes now.
        if let Some(conn) = self.conns.get_mut(idx).and_then(|c| c.as_mut()) {
            let tls_out = conn.tls.as_ref().is_some_and(|t| t.wants_write());
            if (tls_out || !conn.out.is_empty()) && !conn.dirty {
                conn.dirty = true;
                self.dirty.push(idx);
            }
        }
    }

    /// The connection is open (over TLS: its handshake is done) and takes its
    /// first requests; false if it was dropped instead (the run is over).
    fn ready(&mut self, idx: usize, now: u64) -> bool {
        let Some(conn) = self.conns.get_mut(idx).and_then(|c| c.as_mut()) else {
            return false;
        };
        conn.connected = true;
        self.connecting -= 1;
        self.live += 1;
        self.rec.opened += 1;
        if self.closed || (self.stopping && !self.open_model()) {
            self.kill(idx, Kind::Disconnect);
            return false;
        }
        if self.open_model() {
            self.feed(idx);
        } else {
            for _ in 0..self.s.pipeline {
                self.send(idx, now);
            }
        }
        true
    }

    /// The TLS handshake failed (or timed out) for `why`: a failed connection
    /// attempt. The session's alert, if any, is sent first (best effort).
    fn handshake_failed(&mut self, idx: usize, why: &str, now: u64) {
        if let Some(mut conn) = self.remove(idx) {
            if let Some(tls) = conn.tls.as_mut() {
                let _ = tls.write_tls(&mut conn.stream);
            }
        }
        self.connecting -= 1;
        self.rec.failed_connects += 1;
        self.rec.reason(Kind::TlsHandshake, why);
        self.connect_failed(Kind::TlsHandshake, now);
    }

    // Reads until WouldBlock even after a short read: stopping at a short read
    // (one recv less per response, +~10 % capacity) lost connections' deaths
    // under CPU load (tests/load's dying-at-once test: 2 of 400 requests ended
    // as timeouts), so the EAGAIN read stays.
    fn read(&mut self, idx: usize, now: u64) {
        let mut eof = false;
        loop {
            let Some(conn) = self.conns[idx].as_mut() else {
                return;
            };
            let handshaking = conn.tls.is_some() && !conn.connected;
            match conn.stream.read(&mut self.scratch) {
                Ok(0) if handshaking => {
                    let why = "the server closed the connection during the handshake";
                    self.handshake_failed(idx, why, now);
                    return;
                }
                Ok(0) => {
                    eof = true;
                    conn.parser.feed_eof();
                    break;
                }
                Ok(n) => {
                    if let Some(tls) = conn.tls.as_mut() {
                        let (error, closed) =
                            decrypt_into(tls, &self.scratch[..n], &mut conn.parser);
                        let wants_write = tls.wants_write();
                        let done = !tls.is_handshaking();
                        if let Some(why) = error {
                            if handshaking {
                                self.handshake_failed(idx, &why, now);
                            } else {
                                self.kill(idx, Kind::Malformed);
                            }
                            return;
                        }
                        if wants_write && !conn.dirty {
                            conn.dirty = true;
                            self.dirty.push(idx);
                        }
                        // still handshaking, or the run ended as it finished
                        if handshaking && (!done || !self.ready(idx, now)) {
                            continue;
                        }
                        if closed {
                            if let Some(conn) = self.conns[idx].as_mut() {
                                conn.parser.feed_eof();
                            }
                            eof = true;
                            break;
                        }
                    } else {
                        conn.parser.feed(&self.scratch[..n]);
                    }
                    if !self.responses(idx, now, false) {
                        return;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) if handshaking => {
                    self.handshake_failed(idx, &e.to_string(), now);
                    return;
                }
                Err(_) => {
                    self.kill(idx, Kind::Disconnect);
                    return;
                }
            }
        }
        if eof && self.responses(idx, now, true) {
            self.kill(idx, Kind::Disconnect);
        }
    }

    /// Completes the responses the parser holds; false if the connection was dropped.
    /// `eof`: the server has closed; a response it cut short then is a disconnect
    /// (a server dying mid-response sent nothing malformed).
    fn responses(&mut self, idx: usize, now: u64, eof: bool) -> bool {
        let mut done = 0usize;
        loop {
            let Some(conn) = self.conns[idx].as_mut() else {
                return false;
            };
            match conn.parser.poll() {
                Ok(None) => break,
                Ok(Some(ResponseEvent::Head(h))) => {
                    conn.status = h.status;
                    conn.keep_alive = h.keep_alive;
                }
                Ok(Some(ResponseEvent::Data(_))) => {}
                Ok(Some(ResponseEvent::End)) => {
                    let Some(due) = conn.inflight.pop_front() else {
                        self.kill(idx, Kind::Malformed); // a response nobody asked for
                        return false;
                    };
                    let (status, keep_alive) = (conn.status, conn.keep_alive);
                    self.rec.reply(due, now, status);
                    done += 1;
                    if !keep_alive {
                        // What was pipelined behind it is lost.
                        self.kill(idx, Kind::Disconnect);
                        return false;
                    }
                }
                Err(_) => {
                    self.kill(
                        idx,
                        if eof {
                            Kind::Disconnect
                        } else {
                            Kind::Malformed
                        },
                    );
                    return false;
                }
            }
        }
        if done > 0 {
            if self.open_model() {
                self.feed(idx);
            } else if !self.stopping {
                for _ in 0..done {
                    self.send(idx, now);
                }
            }
        }
        true
    }

    /// Open model: one request due at `due`.
    fn issue(&mut self, due: u64) {
        if self.queue.is_empty() {
            while let Some(&idx) = self.free.last() {
                let room = match self.conns.get(idx).and_then(|c| c.as_ref()) {
                    Some(c) if c.connected => c.inflight.len() < self.s.pipeline,
                    _ => false,
                };
                if !room {
                    self.free.pop();
                    if let Some(c) = self.conns.get_mut(idx).and_then(|c| c.as_mut()) {
                        c.in_free = false;
                    }
                    continue;
                }
                self.send(idx, due);
                return;
            }
        }
        self.queue.push_back(due);
        if self.live + self.connecting < self.s.connections && self.connecting < self.queue.len() {
            self.open(now_ns());
        }
    }

    /// Gives a connection with room queued requests; else lists it as free.
    fn feed(&mut self, idx: usize) {
        let depth = self.s.pipeline;
        loop {
            let Some(conn) = self.conns[idx].as_ref() else {
                return;
            };
            if conn.inflight.len() >= depth {
                return;
            }
            let Some(due) = self.queue.pop_front() else {
                break;
            };
            self.send(idx, due);
        }
        if let Some(conn) = self.conns[idx].as_mut() {
            if !conn.in_free {
                conn.in_free = true;
                self.free.push(idx);
            }
        }
    }

    fn send(&mut self, idx: usize, due: u64) {
        let head = self.s.head;
        let Some(conn) = self.conns[idx].as_mut() else {
            return;
        };
        conn.inflight.push_back(due);
        conn.out.extend_from_slice(&self.s.request);
        if head {
            conn.parser.expect(Expect::Head);
        }
        if !conn.dirty {
            conn.dirty = true;
            self.dirty.push(idx);
        }
    }

    fn flush(&mut self) {
        let mut dirty = std::mem::take(&mut self.dirty);
        for &idx in &dirty {
            let Some(conn) = self.conns.get_mut(idx).and_then(|c| c.as_mut()) else {
                continue;
            };
            conn.dirty = false;
            if !conn.tcp {
                continue;
            }
            let failed = match conn.tls.as_mut() {
                Some(tls) => write_tls(tls, &mut conn.out, &mut conn.stream),
                None => write_plain(&mut conn.out, &mut conn.stream),
            };
            if failed {
                if conn.connected {
                    self.kill(idx, Kind::Disconnect);
                } else {
                    self.handshake_failed(
                        idx,
                        "the connection failed during the handshake",
                        now_ns(),
                    );
                }
            }
        }
        dirty.clear();
        if self.dirty.is_empty() {
            self.dirty = dirty;
        }
    }

    fn remove(&mut self, idx: usize) -> Option<Conn> {
        let mut conn = self.conns.get_mut(idx)?.take()?;
        let _ = self.poll.registry().deregister(&mut conn.stream);
        self.vacant.push(idx);
        Some(conn)
    }

    /// Ends a connection; its requests in flight end as `kind`.
    fn kill(&mut self, idx: usize, kind: Kind) {
        let Some(conn) = self.remove(idx) else {
            return;
        };
        if conn.connected {
            self.live -= 1;
        } else {
            self.connecting -= 1;
        }
        for due in conn.inflight {
            self.rec.error(due, kind);
        }
        if self.closed {
            return;
        }
        if self.open_model() {
            if !self.queue.is_empty() && self.live + self.connecting < self.s.connections {
                self.open(now_ns());
            } else if self.live == 0 && self.connecting == 0 {
                while let Some(due) = self.queue.pop_front() {
                    self.rec.error(due, kind);
                }
            }
        } else if !self.stopping {
            self.open(now_ns());
        }
    }

    fn expire(&mut self, now: u64) {
        let timeout = self.s.timeout_ns;
        while let Some(&due) = self.queue.front() {
            if due + timeout > now {
                break;
            }
            self.queue.pop_front();
            self.rec.error(due, Kind::Timeout);
        }
        for idx in 0..self.conns.len() {
            let Some(conn) = self.conns[idx].as_ref() else {
                continue;
            };
            if !conn.connected {
                if conn.opened_at + self.s.connect_timeout_ns <= now {
                    if conn.tcp {
                        let why = "the handshake did not finish within the connect timeout";
                        self.handshake_failed(idx, why, now);
                        continue;
                    }
                    self.remove(idx);
                    self.connecting -= 1;
                    self.rec.failed_connects += 1;
                    self.connect_failed(Kind::ConnectTimeout, now);
                }
            } else if conn.inflight.front().is_some_and(|d| d + timeout <= now) {
                // A response can no longer be matched to its request once one is
                // skipped: every request on this connection ends as a timeout.
                self.kill(idx, Kind::Timeout);
            }
        }
    }

    /// The drain time is over (everything outstanding counts as a timeout), or
    /// the run was stopped (as interrupted).
    fn abandon(&mut self, kind: Kind) {
        self.closed = true;
        while let Some(due) = self.queue.pop_front() {
            self.rec.error(due, kind);
        }
        for idx in 0..self.conns.len() {
            self.kill(idx, kind);
        }
    }
}

/// Writes what `out` holds; true if the connection failed.
fn write_plain(out: &mut Vec<u8>, stream: &mut TcpStream) -> bool {
    while !out.is_empty() {
        match stream.write(out) {
            Ok(n) => {
                out.drain(..n);
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(_) => return true,
        }
    }
    false
}

/// Seals the requests in `out` (one batch: rustls fills each record) and
/// writes every record the session holds, from its queue to the socket (what a
/// full socket buffer holds back stays queued there); true if the connection
/// failed.
fn write_tls(tls: &mut ClientConnection, out: &mut Vec<u8>, stream: &mut TcpStream) -> bool {
    if !out.is_empty() {
        if tls.writer().write_all(out).is_err() {
            return true;
        }
        out.clear();
    }
    while tls.wants_write() {
        match tls.write_tls(stream) {
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(_) => return true,
        }
    }
    false
}
