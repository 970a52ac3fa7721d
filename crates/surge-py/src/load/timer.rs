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
//! actually seen (`Margin`): a quiet machine wakes within ~10 us and spins
//! little; a VM whose timers fire 50-100 us late gets a wider margin, at most
//! `MAX_SPIN_NS` and at most a quarter of the interval between requests (so the
//! spinning never takes more than a quarter of a core).

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

/// The narrowest and widest margin before a due time in which the loop polls
/// instead of sleeping.
pub const MIN_SPIN_NS: u64 = 10_000;
pub const MAX_SPIN_NS: u64 = 150_000;

/// How late the timer wakes the loop: rises at once to a late wake-up, decays
/// slowly (1/64 per wake-up) so that one quiet stretch does not undo it.
pub struct Margin {
    late_ns: u64,
}

impl Margin {
    pub fn new() -> Self {
        Margin { late_ns: 20_000 }
    }

    /// The timer armed for `target` woke the loop at `now`.
    pub fn woke(&mut self, target: u64, now: u64) {
        let late = now.saturating_sub(target).min(MAX_SPIN_NS);
        if late > self.late_ns {
            self.late_ns = late;
        } else {
            self.late_ns -= (self.late_ns - late) / 64;
        }
    }

    /// How long before a due time to stop sleeping.
    pub fn spin_ns(&self) -> u64 {
        (self.late_ns + MIN_SPIN_NS).clamp(MIN_SPIN_NS, MAX_SPIN_NS)
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
