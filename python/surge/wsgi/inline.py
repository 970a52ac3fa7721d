"""Which WSGI calls may run on the event loop's own thread, learned from how they ran.

Why: a call handed to a pool thread costs the hand-over there and back (the
pool's lock and wake-up, the thread's GIL take-over, a wake-up of the loop, the
response written from a later loop turn). Measured on Flask hello with
callgrind: 423k instructions per request in threads, 389k run on the loop
(Flask's own share is ~330k), before the kernel's futex and eventfd work,
which callgrind does not count. A call that neither sleeps nor computes for
long gains nothing from a thread: while it runs in one, it holds the GIL the
loop needs anyway.

The loop must never wait on the app, so a call runs inline only on evidence:

- its route key (method and PATH_INFO) ran `PROMOTE_AFTER` times more in a
  pool thread without sleeping than `SETBACK` times the runs that slept. A run
  sleeps when its thread makes a voluntary context switch from the app call to
  the iterable's ``close()`` (any blocking system call, lock wait or sleep
  makes one; so does waiting for the GIL, hence the tolerance), or takes
  `LONG` or more, or answers with the write high-water mark or more;
- its request body has all arrived (`wsgi.input` never waits on the loop);
- every call under way in the pool is of a key already judged so (it went to
  the pool because calls that might block were ahead of it): no pool thread can
  hold a lock the call would wait for while it blocks, or wait on the loop.

An inline call that stalled the loop anyway, by sleeping `SLEPT` or more (a
cache miss that queries a database) or computing `LONG` or more (not when the
kernel took the CPU away: an involuntary switch), demotes its key: it goes back to threads,
and the streak it needs to come back grows `BACKOFF` times for every
demotion less than `FORGET_AFTER` seconds after the last one (else it starts
again from `BACKOFF` times `PROMOTE_AFTER`: a garbage collection or a stolen
time slice may make a short call look long once in a while). A key that
blocks often stops coming back; one that blocks once in minutes stalls the
loop once in minutes. While pool threads
run calls (of keys judged not to block) a voluntary switch may be a pool
thread taking the GIL for up to a switch interval: only `SLEPT_BUSY` counts then.
The table holds at most `MAX_KEYS` keys; other keys always run in threads.

Inline calls run with no running event loop set (as in a pool thread:
asgiref's ``async_to_sync`` and ``asyncio.run`` inside a view behave the same)
and in one context of their own, so context variables an app leaves set do not
leak into the loop's tasks.
"""

from __future__ import annotations

import time

try:
    import resource

    _THREAD = resource.RUSAGE_THREAD  # Linux only
except (ImportError, AttributeError):  # pragma: no cover - not Linux
    resource = None  # type: ignore[assignment]

#: Clean runs in threads (net of setbacks) before a key runs inline.
PROMOTE_AFTER = 32
#: What a threaded call that slept takes off the streak.
SETBACK = 4
#: A demoted key needs this many times the streak it needed before.
BACKOFF = 4
#: Above this (never promoted again, in effect).
MAX_NEEDED = 1 << 30
#: Seconds after which a demotion no longer makes the next one's backoff longer.
FORGET_AFTER = 60.0
#: Seconds a call may compute and still run inline: CPython's default switch
#: interval, the time a call in a thread holds the GIL before the loop may take
#: it (so the loop is not kept longer than by a thread). Also what a cyclic
#: garbage collection or the hypervisor may add to a short call now and then.
LONG = 0.005
#: Seconds an inline call may be off the CPU, after it gave it up, and not count as blocking.
SLEPT = 0.001
#: The same while pool threads run calls (of keys judged not to block): one may
#: take the GIL for a switch interval.
SLEPT_BUSY = 0.02
#: Route keys remembered.
MAX_KEYS = 4096

Key = tuple[str, str]


def switches() -> tuple[int, int]:
    """This thread's voluntary and involuntary context switches so far."""
    r = resource.getrusage(_THREAD)
    return r.ru_nvcsw, r.ru_nivcsw


def slept_threaded(before: tuple[int, int], after: tuple[int, int], seconds: float) -> bool:
    """Whether a call run in a pool thread slept (or ran long), from `switches()`
    before and after it and its wall-clock time."""
    return after[0] != before[0] or seconds >= LONG


def stalled(before: tuple[int, int], after: tuple[int, int], seconds: float, busy: bool) -> bool:
    """Whether an inline call kept the loop too long through its own fault;
    `busy`: pool threads were running calls."""
    if after[0] != before[0]:  # it slept, or a pool thread took the GIL
        return seconds >= (SLEPT_BUSY if busy else SLEPT)
    # Computing; not when the kernel took the CPU away.
    return seconds >= LONG and after[1] == before[1]


class InlinePolicy:
    """Per route key: how many clean threaded runs in a row, and whether it runs inline."""

    __slots__ = ("_demoted", "_inline", "_needed", "_streak", "enabled")

    def __init__(self, enabled: bool = True) -> None:
        #: False: every call runs in the pool (also where the kernel gives no per-thread usage).
        self.enabled = enabled and resource is not None
        self._inline: set[Key] = set()
        self._streak: dict[Key, int] = {}
        self._needed: dict[Key, int] = {}
        #: When each key was last demoted (monotonic seconds).
        self._demoted: dict[Key, float] = {}

    def inline(self, key: Key) -> bool:
        """Whether calls for `key` run on the loop (the other conditions are the caller's)."""
        return key in self._inline

    def learning(self, key: Key) -> bool:
        """Whether a threaded call for `key` should be measured."""
        if not self.enabled:
            return False
        streak = self._streak
        return key in streak or len(streak) < MAX_KEYS

    def ran_threaded(self, key: Key, clean: bool) -> None:
        """A pool thread's report (under the GIL; a lost race only delays a promotion)."""
        if not clean:
            # Not back to 0: a thread also switches while it waits for the GIL
            # (a few percent of the calls on a busy loop); a key whose calls
            # sleep in more than 1 in `1 + SETBACK` never gets there.
            self._streak[key] = max(0, self._streak.get(key, 0) - SETBACK)
            return
        streak = self._streak.get(key, 0) + 1
        self._streak[key] = streak
        if streak >= self._needed.get(key, PROMOTE_AFTER):
            self._inline.add(key)

    def demote(self, key: Key) -> None:
        """An inline call of `key` stalled the loop: back to threads, for longer."""
        self._inline.discard(key)
        self._streak[key] = 0
        now = time.monotonic()
        recent = now - self._demoted.get(key, -FORGET_AFTER) < FORGET_AFTER
        needed = self._needed.get(key, PROMOTE_AFTER) if recent else PROMOTE_AFTER
        self._needed[key] = min(needed * BACKOFF, MAX_NEEDED)
        self._demoted[key] = now
