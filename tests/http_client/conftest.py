"""Fixtures for the HTTP client tests (servers live in `client_servers.py`: a
bare `conftest` import would clash with other test directories).

Every test runs once on plain asyncio and once on uvloop (`run` builds a fresh
loop of the kind); the servers of `client_servers.py` run inside that loop.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any

import pytest
import uvloop


@pytest.fixture(params=["asyncio", "uvloop"])
def run(request) -> Callable[[Coroutine], Any]:
    """Runs a coroutine to completion on a new loop of the test's kind."""
    factory = uvloop.new_event_loop if request.param == "uvloop" else asyncio.new_event_loop

    def runner(coro: Coroutine) -> Any:
        with asyncio.Runner(loop_factory=factory) as r:
            return r.run(coro)

    runner.kind = request.param  # type: ignore[attr-defined]
    return runner
