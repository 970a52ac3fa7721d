"""Fixtures for the Redis driver tests: a real redis-server, both loops."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Iterator

import pytest
import uvloop
from surge import services

_db_numbers = itertools.count(1)


@pytest.fixture(scope="session")
def redis_svc() -> Iterator[services.Service]:
    """A Redis (no persistence) for the whole session."""
    with services.redis() as svc:
        yield svc


@pytest.fixture
def url(redis_svc: services.Service) -> str:
    """The server's URL with a database of the test's own (tests do not see each other's keys)."""
    return f"redis://{redis_svc.host}:{redis_svc.port}/{next(_db_numbers) % 16}"


def _new_loop(kind: str) -> asyncio.AbstractEventLoop:
    return uvloop.new_event_loop() if kind == "uvloop" else asyncio.new_event_loop()


@pytest.fixture(params=["asyncio", "uvloop"])
def arun(request):
    """Run a coroutine to completion on a fresh loop of each kind, with a bound."""
    kind = request.param

    def run(coro, timeout: float = 10.0):
        with asyncio.Runner(loop_factory=lambda: _new_loop(kind)) as runner:
            return runner.run(asyncio.wait_for(coro, timeout))

    run.kind = kind
    return run
