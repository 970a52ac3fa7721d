"""What the driver targets (Tarantool, Redis) share: issuing an operation of
the mix on a connection, timing it from its due time, and the closed loop.

A subclass sets `ops`, `conns`, `_cycle` (the mix as a repeating list of
operation names), `_issue` (operation name -> function of a connection that
returns an awaitable), `_outstanding` (operation -> 0), `_conn()` and
`classify` (exception -> error kind).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from functools import partial
from typing import Any

from surge.load.recorder import Recorder
from surge.load.target import LoadConfig, Target


class DriverTarget(Target):
    """Base of the targets that load a database through a surge driver."""

    conns: list[Any]
    _cycle: list[str]
    _issue: dict[str, Callable[[Any], Any]]

    def __init__(self, config: LoadConfig, recorder: Recorder) -> None:
        super().__init__(config, recorder)
        self._i = 0
        self._outstanding: dict[str, int] = {}  # per operation; set with the mix
        self._abandoned = False

    def _conn(self) -> Any:
        raise NotImplementedError

    def classify(self, exc: BaseException) -> str:
        """The report's error kind for a driver exception."""
        raise NotImplementedError

    def _start(self, due_ns: int, closed: bool) -> None:
        cycle = self._cycle
        op = cycle[self._i]
        self._i = (self._i + 1) % len(cycle)
        self._outstanding[op] += 1
        try:
            aw = self._issue[op](self._conn())
        except Exception as exc:  # bad input raised before sending
            self._end(op, due_ns, closed, exc)
            return
        if not asyncio.isfuture(aw):
            aw = asyncio.ensure_future(aw)
        aw.add_done_callback(partial(self._done, op, due_ns, closed))

    def _done(self, op: str, due_ns: int, closed: bool, fut: asyncio.Future) -> None:
        exc: BaseException | None = None if not fut.cancelled() else asyncio.CancelledError()
        if exc is None:
            exc = fut.exception()
        self._end(op, due_ns, closed, exc)

    def _end(self, op: str, due_ns: int, closed: bool, exc: BaseException | None) -> None:
        if self._abandoned:
            return
        self._outstanding[op] -= 1
        if exc is None:
            self.recorder.ok(op, time.monotonic_ns() - due_ns)
        else:
            self.recorder.error(op, self.classify(exc))
        if closed and not self.stopping:
            self._start(time.monotonic_ns(), True)

    # -- Target -------------------------------------------------------------------------

    def issue(self, due_ns: int) -> None:
        self._start(due_ns, False)

    def start_closed(self) -> None:
        now = time.monotonic_ns()
        for _ in range(len(self.conns) * self.config.pipeline):
            self._start(now, True)

    def outstanding(self) -> int:
        return sum(self._outstanding.values())

    def abandon(self) -> None:
        # Late replies are ignored from now on; what is left counts as timed out.
        self._abandoned = True
        for op, n in self._outstanding.items():
            for _ in range(n):
                self.recorder.error(op, "timeout")
            self._outstanding[op] = 0

    async def close(self) -> None:
        self.stopping = True
        for c in self.conns:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(c.close(), 2.0)
