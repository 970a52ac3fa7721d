//! The schedule's clock: CLOCK_MONOTONIC (Python's `time.monotonic_ns`, so due
//! times agree across the language boundary) and a timerfd woken in epoll with
//! the thread's timer slack cut to 1 ns.
//!
//! Why a timerfd and not epoll's own timeout: epoll_wait counts whole
//! milliseconds (uvloop's timers too: the 0.6 ms lag of the Python scheduler),
//! a timerfd counts nanoseconds. Why the slack: Linux lets a normal thread's
//! timers fire up to 50 us late to batch wake-ups; 50 us is the whole budget.
//! The loop wakes a margin before a due time and polls without blocking until
//! then, which absorbs the wake-up latency. The margin follows the wake-ups
//! actually seen (`Margin`, a recent high percentile): a quiet machine wakes
//! within ~10 us and spins little; a VM whose timers fire 50-160 us late gets a
//! wider margin, at most `MAX_SPIN_NS` and at most `SPIN_SHARE` of the interval
//! between requests (see there for what that costs).

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

/// The narrowest and widest margin before a due time in which the loop polls
/// instead of sleeping.
pub const MIN_SPIN_NS: u64 = 10_000;
pub const MAX_SPIN_NS: u64 = 250_000;
/// The margin is at most this share of the interval between requests: the
/// loop polls (a core busy) for up to that share of the time. On this project's
/// loaded 2-core VM, timers under SCHED_FIFO fire up to ~160 us late at p99, so
/// at 5000 req/s (200 us apart) a quarter of the interval (the earlier cap) let
/// every tenth request go out 50-130 us late; three quarters covers the p99. A
/// quiet machine wakes within ~10-20 us and polls little at any rate.
pub const SPIN_SHARE: f64 = 0.75;
/// The wake-ups the margin is taken from (the most recent ones).
const WINDOW: usize = 512;
/// Lateness is counted in buckets of this width, up to `MAX_SPIN_NS`.
const BUCKET_NS: u64 = 5_000;
const BUCKETS: usize = (MAX_SPIN_NS / BUCKET_NS) as usize + 1;
/// The margin covers this share of the recent wake-ups (in 1/1000).
const COVER_PER_MILLE: usize = 995;

/// How late the timer wakes the loop: the 99.5th percentile of the last
/// `WINDOW` wake-ups (a small histogram over a ring of samples, O(BUCKETS) per
/// wake-up).
///
/// Why a percentile and not a peak that decays: on a loaded VM a timer armed
/// with SCHED_FIFO fires 25-40 us late at the median and 160 us late at p99
/// (measured here with a bare timerfd loop); a peak that decays by 1/64 per
/// wake-up forgot the tail within ~50 wake-ups, so about every tenth due time
/// found the loop still asleep, and that tail is exactly the schedule lag p99.
pub struct Margin {
    ring: [u8; WINDOW],
    next: usize,
    seen: usize,
    counts: [u16; BUCKETS],
    spin_ns: u64,
}

impl Margin {
    pub fn new() -> Self {
        Margin {
            ring: [0; WINDOW],
            next: 0,
            seen: 0,
            counts: [0; BUCKETS],
            spin_ns: 20_000 + MIN_SPIN_NS,
        }
    }

    /// The timer armed for `target` woke the loop at `now`.
    pub fn woke(&mut self, target: u64, now: u64) {
        let bucket = (now.saturating_sub(target).min(MAX_SPIN_NS) / BUCKET_NS) as usize;
        if self.seen == WINDOW {
            self.counts[self.ring[self.next] as usize] -= 1;
        } else {
            self.seen += 1;
        }
        self.ring[self.next] = bucket as u8;
        self.counts[bucket] += 1;
        self.next = (self.next + 1) % WINDOW;
        // The smallest lateness that covers COVER_PER_MILLE of the window; with
        // few samples, the largest seen.
        let keep = (self.seen * COVER_PER_MILLE).div_ceil(1000).max(1);
        let mut acc = 0usize;
        let mut at = BUCKETS - 1;
        for (i, c) in self.counts.iter().enumerate() {
            acc += *c as usize;
            if acc >= keep {
                at = i;
                break;
            }
        }
        self.spin_ns = ((at as u64 + 1) * BUCKET_NS + MIN_SPIN_NS).min(MAX_SPIN_NS);
    }

    /// How long before a due time to stop sleeping.
    pub fn spin_ns(&self) -> u64 {
        self.spin_ns
    }
}

/// CLOCK_MONOTONIC in nanoseconds.
pub fn now_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; CLOCK_MONOTONIC always exists.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Asks the kernel to fire this thread's timers on time (1 ns of slack).
pub fn tighten_timer_slack() {
    // SAFETY: PR_SET_TIMERSLACK takes one integer argument and affects only
    // the calling thread.
    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong, 0, 0, 0) };
}

/// Under a realtime policy (a benchmark runs the generator with `chrt -f`),
/// puts this thread one priority above the rest of the process.
///
/// Why: threads of equal SCHED_FIFO priority never preempt one another, so
/// when the Python thread woke to collect ticks (every 50 ms) while the loop
/// slept, the loop's timer could not run it until Python yielded: 100-300 us of
/// schedule lag for one request in every 25 at 500 req/s, i.e. the whole p99.
/// Under the normal policy nothing changes (a higher priority needs privilege).
pub fn above_own_process() {
    // SAFETY: sched_getscheduler/getparam/setscheduler with pid 0 act on the
    // calling thread only; `p` is a valid sched_param we own.
    unsafe {
        let policy = libc::sched_getscheduler(0);
        if policy != libc::SCHED_FIFO && policy != libc::SCHED_RR {
            return;
        }
        let mut p = libc::sched_param { sched_priority: 0 };
        if libc::sched_getparam(0, &mut p) != 0 {
            return;
        }
        if p.sched_priority < libc::sched_get_priority_max(policy) {
            p.sched_priority += 1;
            libc::sched_setscheduler(0, policy, &p);
        }
    }
}

pub struct TimerFd {
    fd: OwnedFd,
    armed_at: u64,
}

impl TimerFd {
    pub fn new() -> io::Result<Self> {
        // SAFETY: plain syscall; the result is checked before use.
        let fd = unsafe {
            libc::timerfd_create(
                libc::CLOCK_MONOTONIC,
                libc::TFD_NONBLOCK | libc::TFD_CLOEXEC,
            )
        };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `fd` is a new descriptor that nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        Ok(TimerFd { fd, armed_at: 0 })
    }

    /// Fires once at `at_ns` (CLOCK_MONOTONIC); re-arming to the same time is free.
    pub fn arm_at(&mut self, at_ns: u64) {
        if at_ns == self.armed_at {
            return;
        }
        self.armed_at = at_ns;
        let spec = libc::itimerspec {
            it_interval: libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            },
            it_value: libc::timespec {
                tv_sec: (at_ns / 1_000_000_000) as libc::time_t,
                tv_nsec: (at_ns % 1_000_000_000) as libc::c_long,
            },
        };
        // SAFETY: `spec` is a valid itimerspec and the fd is a timerfd we own.
        unsafe {
            libc::timerfd_settime(
                self.fd.as_raw_fd(),
                libc::TFD_TIMER_ABSTIME,
                &spec,
                std::ptr::null_mut(),
            )
        };
    }

    /// When the timer was last armed to fire (0 once it has fired).
    pub fn target(&self) -> u64 {
        self.armed_at
    }

    /// Reads the expiry count so the (edge-triggered) fd can fire again.
    pub fn clear(&mut self) {
        let mut n = 0u64;
        // SAFETY: reads 8 bytes into a u64 we own; the fd is non-blocking.
        unsafe {
            libc::read(
                self.fd.as_raw_fd(),
                (&mut n as *mut u64).cast::<libc::c_void>(),
                8,
            )
        };
        self.armed_at = 0;
    }

    pub fn raw(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}
