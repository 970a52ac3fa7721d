"""The WSGI thread pool and the loop's wake-ups from it.

`WsgiPool` runs each request's cycle in one of at most N threads taken from one
queue. Why not `concurrent.futures.ThreadPoolExecutor`: per call it makes a
Future and a work item and goes through two Python-level Condition/Semaphore
round trips (the idle count, the result) that the cycle never uses, since it
reports through its own queue: measured on Flask hello, about a tenth of the
server's own CPU per request. Here a call is one `SimpleQueue.put` (C).

`Wakeups` hands finished work back to the event loop: a thread appends its
cycle to a deque and pokes the loop only if no poke is pending, so cycles that
finish while the loop is busy cost one `call_soon_threadsafe` (a write to the
loop's wake-up descriptor, and one wake of its thread) between them, not one
each.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections import deque
from collections.abc import Callable
from queue import Empty, SimpleQueue
from typing import Protocol

from surge.http.plan import LazyExecutor

log = logging.getLogger("surge.wsgi")


class _Wakeable(Protocol):
    def _wake(self) -> None: ...
    def _on_lost(self, _lost: object = None) -> None: ...


class WsgiPool(LazyExecutor):
    """At most `threads` threads, started as work arrives, running submitted calls.

    It is also the plan's executor (`LazyExecutor`), so the server's shutdown
    stops it: queued calls are dropped, the threads end after their current call.
    """

    __slots__ = ("_idle", "_jobs", "_started")

    def __init__(self, threads: int) -> None:
        super().__init__(threads)
        self._jobs: SimpleQueue[Callable[[], None] | None] = SimpleQueue()
        #: One item per thread waiting for work: deque append/pop are atomic, so
        #: its length is the idle count without a lock.
        self._idle: deque[None] = deque()
        self._started = 0

    def submit(self, job: Callable[[], None]) -> None:
        """Runs `job()` in a pool thread (it reports its own outcome)."""
        jobs = self._jobs
        jobs.put(job)
        if jobs.qsize() > len(self._idle) and self._started < self._threads:
            self._spawn()

    def _spawn(self) -> None:
        self._started += 1
        # Daemon threads: a stuck app must not keep a stopped worker process alive.
        thread = threading.Thread(
            target=self._work,
            args=(self._jobs,),
            name=f"surge-wsgi-{self._started}",
            daemon=True,
        )
        thread.start()

    def _work(self, jobs: SimpleQueue[Callable[[], None] | None]) -> None:
        idle = self._idle
        while True:
            idle.append(None)
            job = jobs.get()
            idle.pop()
            if job is None:
                return
            # A submit between our get() and pop() saw us as idle: look again,
            # so no call waits for a thread while the pool may grow.
            if jobs.qsize() > len(idle) and self._started < self._threads:
                self._spawn()
            try:
                job()
            except BaseException:  # the cycle reports its app's errors itself
                log.exception("internal error in a WSGI thread")
            del job

    def shutdown(self) -> None:
        """Drops queued calls; each thread ends once its current call returns."""
        super().shutdown()
        jobs, self._jobs = self._jobs, SimpleQueue()
        while True:
            try:
                jobs.get_nowait()
            except Empty:
                break
        for _ in range(self._started):
            jobs.put(None)
        self._started = 0


class Wakeups:
    """Cycles ready for the loop's attention, handed over with batched pokes."""

    __slots__ = ("_pending", "_ready", "loop")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self._ready: deque[_Wakeable] = deque()
        self._pending = False

    def add(self, cycle: _Wakeable) -> None:
        """From a thread: `cycle._wake()` runs soon on the loop."""
        self._ready.append(cycle)
        if self._pending:
            return  # the pending `_run` takes it (it clears the flag before it looks)
        self._pending = True
        try:
            self.loop.call_soon_threadsafe(self._run)
        except RuntimeError:  # the loop is closed: nobody is left to write
            self._pending = False
            while self._ready:
                self._ready.popleft()._on_lost()

    def _run(self) -> None:
        self._pending = False
        ready = self._ready
        while ready:
            cycle = ready.popleft()
            try:
                cycle._wake()
            except Exception:  # one cycle's bug must not strand the others
                log.exception("internal error while writing a WSGI response")
