"""The WSGI thread pool and the loop's wake-ups from it.

`WsgiPool` runs each request's cycle in one of at most N threads. Why not
`concurrent.futures.ThreadPoolExecutor`:

- per call it makes a Future and a work item and goes through Python-level
  Condition/Semaphore round trips (the idle count, the result) that the cycle
  never uses, since it reports through its own queue;
- it wakes a different idle thread for every call, so with N threads started
  N threads take turns at the GIL. Measured on Flask hello with 32 threads on
  a busy core: every GIL hand-over waits for the scheduler, and throughput fell
  to 100-800 req/s against 1,600-1,900 with one thread, at 7% CPU.

So this pool grows by need, not by arrivals: a call goes to the thread that
went idle last (a hot thread; the others time out and end after
`IDLE_EXIT` seconds), else waits in the backlog. The first thread is started
at once; one more only when the calls under way are blocked (a slow query, a
sleep, a client slow to read). A check on the loop every `GROW_AFTER` seconds
while the backlog lasts judges that from the kernel's accounting of the
process's threads: over the last period no call finished, and the process's
threads were running or waiting for a CPU for less than `BLOCKED_SHARE` of
it (the CPU time of the process plus each thread's run-queue wait, from
``/proc/self/task/*/schedstat``). Why not "no call finished for a while"
alone: a CPU-bound app on a busy core, or a process that was stopped
(SIGSTOP), also finishes nothing for tens of milliseconds, and every thread
started then only adds GIL hand-overs. Measured on Flask hello on a loaded
machine, that rule grew the pool to 10 threads within seconds and throughput
fell from ~9,000 to ~2,000 req/s. A thread waiting for the GIL is not counted,
but the thread holding it runs or waits for a CPU, so a CPU-bound app always
shows as busy. A check that comes late (the loop itself did not run: a stopped
or starved process) only starts a new period. Without ``/proc`` (not Linux)
the process's CPU time alone stands for its threads' activity.
A CPU-bound app therefore runs on one thread beside the loop's, and an app
that blocks gets a thread per blocked call, up to N.

`surge._core.WsgiWakeups` hands finished work back to the event loop: a
thread adds its cycle and pokes the loop only if no poke is pending, so cycles
that finish while the loop is busy share one `call_soon_threadsafe` (a write
to the loop's wake-up descriptor, and one wake of its thread).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import threading
import time
from collections import deque
from collections.abc import Callable

from surge.http.plan import LazyExecutor

log = logging.getLogger("surge.wsgi")

#: Seconds between two looks at a waiting backlog (a thread may be started at each).
GROW_AFTER = 0.02
#: A look this many periods late means the loop was not running: it starts a new period.
LATE_AFTER = 2
#: Calls are blocked when the process's threads ran or waited for a CPU for less
#: than this share of the period.
BLOCKED_SHARE = 0.5
#: Where Linux accounts each thread's run time and run-queue wait (nanoseconds).
_TASKS = "/proc/self/task"
#: Seconds a thread stays idle before it ends (the pool shrinks after a burst).
IDLE_EXIT = 10.0

Job = Callable[[], None]


class _Worker:
    """A pool thread's mailbox: `wake` is held while it is parked."""

    __slots__ = ("job", "wake")

    def __init__(self) -> None:
        self.job: Job | None = None
        self.wake = threading.Lock()
        self.wake.acquire()


class WsgiPool(LazyExecutor):
    """At most `threads` threads, started by need, running submitted calls
    (see the module docstring).

    It is also the plan's executor (`LazyExecutor`), so the server's shutdown
    stops it: queued calls are dropped, the threads end after their current call.
    """

    __slots__ = (
        "_backlog",
        "_finished",
        "_generation",
        "_grow_timer",
        "_idle",
        "_lock",
        "_period",
        "_started",
    )

    def __init__(self, threads: int) -> None:
        super().__init__(threads)
        self._lock = threading.Lock()
        self._backlog: deque[Job] = deque()
        #: Parked threads, the most recently idle last (it is woken first).
        self._idle: list[_Worker] = []
        self._started = 0
        #: Calls finished so far (only whether it moves matters).
        self._finished = 0
        #: Where the current growth period started (see `_mark`); None: none open.
        self._period: tuple[float, float, int] | None = None
        self._grow_timer: asyncio.TimerHandle | None = None
        #: Bumped by `shutdown`: threads of an older generation end.
        self._generation = 0

    def submit(self, job: Job) -> None:
        """Runs `job()` in a pool thread (it reports its own outcome). On the loop."""
        with self._lock:
            if self._idle:
                worker = self._idle.pop()
                worker.job = job
                worker.wake.release()
                return
            self._backlog.append(job)
            first = self._started == 0
            if first:
                self._started = 1
        if first:
            self._spawn()
        if self._grow_timer is None:
            self._period = self._mark()
            self._grow_timer = asyncio.get_running_loop().call_later(GROW_AFTER, self._grow)

    def _mark(self) -> tuple[float, float, int]:
        """Now: (monotonic time, seconds the process's threads ran or waited for a
        CPU, calls finished); without Linux's ``/proc``, the process's CPU time
        stands for the second."""
        busy = 0.0
        with contextlib.suppress(OSError):
            busy = time.process_time()  # includes threads that have ended
            waited = 0
            for task in os.listdir(_TASKS):
                # OSError: the thread has just ended.
                with (
                    contextlib.suppress(OSError, ValueError, IndexError),
                    open(f"{_TASKS}/{task}/schedstat", "rb") as f,
                ):
                    waited += int(f.read().split()[1])
            busy += waited / 1e9
        return time.monotonic(), busy, self._finished

    def _grow(self) -> None:
        """The loop's look at a waiting backlog (see the module docstring)."""
        self._grow_timer = None
        with self._lock:
            waiting = bool(self._backlog)
        if not waiting:
            self._period = None
            return
        now = self._mark()
        start, self._period = self._period, now
        if start is not None and self._blocked(start, now):
            with self._lock:
                grow = self._started < self._threads
                if grow:
                    self._started += 1
            if grow:
                self._spawn()
        self._grow_timer = asyncio.get_running_loop().call_later(GROW_AFTER, self._grow)

    @staticmethod
    def _blocked(start: tuple[float, float, int], now: tuple[float, float, int]) -> bool:
        """Whether the calls under way sat blocked over the period from `start`."""
        elapsed = now[0] - start[0]
        if elapsed > LATE_AFTER * GROW_AFTER:
            return False  # the loop did not run on time: no evidence either way
        if now[2] != start[2]:
            return False  # calls are finishing
        return now[1] - start[1] < BLOCKED_SHARE * elapsed

    def _spawn(self) -> None:
        # Daemon threads: a stuck app must not keep a stopped worker process alive.
        thread = threading.Thread(
            target=self._work,
            args=(self._generation,),
            name=f"surge-wsgi-{self._started}",
            daemon=True,
        )
        thread.start()

    def _work(self, generation: int) -> None:
        me = _Worker()
        lock, backlog, idle = self._lock, self._backlog, self._idle
        while True:
            with lock:
                if self._generation != generation:
                    return
                job = backlog.popleft() if backlog else None
                if job is None:
                    idle.append(me)
            if job is None:
                if not me.wake.acquire(timeout=IDLE_EXIT):
                    with lock:
                        if me in idle:  # not handed a call meanwhile: end
                            idle.remove(me)
                            if self._generation == generation:
                                self._started -= 1
                            return
                    me.wake.acquire()  # handed one just as we timed out: released already
                job, me.job = me.job, None
                if job is None:  # `shutdown` woke us
                    return
            try:
                job()
            except BaseException:  # the cycle reports its app's errors itself
                log.exception("internal error in a WSGI thread")
            self._finished += 1
            del job

    def shutdown(self) -> None:
        """Drops queued calls; each thread ends once its current call returns."""
        super().shutdown()
        with self._lock:
            self._generation += 1
            self._backlog.clear()
            for worker in self._idle:
                worker.job = None
                worker.wake.release()
            self._idle.clear()
            self._started = 0
        self._period = None
        if self._grow_timer is not None:
            self._grow_timer.cancel()
            self._grow_timer = None
