"""Running a test's coroutine on each event loop surge supports, with a bound; and
`LoopLag`, how late a loop ran, for bounds that must hold on a loaded machine.

`arun_fixture()` makes the one ``arun`` fixture (tests/conftest.py) every async test uses:
the test runs once on plain asyncio and once on uvloop (``arun.kind`` says which),
each time on a fresh loop, and a coroutine still running after ``timeout`` seconds
fails the test instead of hanging it.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Coroutine
from typing import Any

import pytest
import uvloop

KINDS = ("asyncio", "uvloop")


def new_loop(kind: str) -> asyncio.AbstractEventLoop:
    """A fresh event loop of ``kind``."""
    return uvloop.new_event_loop() if kind == "uvloop" else asyncio.new_event_loop()


def runner(kind: str, timeout: float = 30.0) -> Callable[..., Any]:
    """``run(coro, timeout=...)``: runs ``coro`` to completion on a new ``kind`` loop."""

    def run(coro: Coroutine[Any, Any, Any], timeout: float = timeout) -> Any:
        with asyncio.Runner(loop_factory=lambda: new_loop(kind)) as r:
            return r.run(asyncio.wait_for(coro, timeout))

    run.kind = kind  # type: ignore[attr-defined]
    return run


#: The bound of ``arun`` when a test module sets no ``ARUN_TIMEOUT`` of its own.
ARUN_TIMEOUT = 30.0


def arun_fixture() -> Any:
    """The ``arun`` fixture (defined once, in tests/conftest.py): a module may set
    ``ARUN_TIMEOUT`` (seconds) for its own default bound."""

    @pytest.fixture(params=KINDS)
    def arun(request: pytest.FixtureRequest) -> Callable[..., Any]:
        """Run a coroutine to completion on a fresh loop of each kind, with a bound."""
        return runner(request.param, getattr(request.module, "ARUN_TIMEOUT", ARUN_TIMEOUT))

    return arun


class LoopLag:
    """How late this loop ran a 10 ms timer while it was open, summed: the part of
    a wall-clock figure measured meanwhile that the machine's load (or a busy loop)
    added, rather than the schedule under test (a 0.9 s liveness schedule took
    3.4 s at load 9 on a 2-core CI machine). Timer resolution adds ~10%."""

    TICK = 0.01

    def __init__(self) -> None:
        self.seconds = 0.0
        self._task: asyncio.Task[None] | None = None

    async def _run(self) -> None:
        while True:
            t = time.monotonic()
            await asyncio.sleep(self.TICK)
            self.seconds += max(0.0, time.monotonic() - t - self.TICK)

    def __enter__(self) -> LoopLag:
        self._task = asyncio.ensure_future(self._run())
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._task is not None
        self._task.cancel()
