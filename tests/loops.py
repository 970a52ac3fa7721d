"""Running a test's coroutine on each event loop surge supports, with a bound.

`arun_fixture()` makes the one ``arun`` fixture (tests/conftest.py) every async test uses:
the test runs once on plain asyncio and once on uvloop (``arun.kind`` says which),
each time on a fresh loop, and a coroutine still running after ``timeout`` seconds
fails the test instead of hanging it.
"""

from __future__ import annotations

import asyncio
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
