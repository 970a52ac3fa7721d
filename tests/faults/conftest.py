"""Fixtures for the fault tests: real servers (one of each for the session: Redis,
PostgreSQL, Tarantool, and surge's own HTTP server in a thread), each async test
on plain asyncio and on uvloop, and `FaultProxy`s that are stopped after each test."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from proxy import FaultProxy
from surge import services
from surge.http import App, serve


@pytest.fixture
def make_proxy() -> Iterator[Callable[[str, int], FaultProxy]]:
    """Start `FaultProxy`s in front of servers; all are stopped after the test."""
    started: list[FaultProxy] = []

    def make(host: str, port: int) -> FaultProxy:
        p = FaultProxy(host, port).start()
        started.append(p)
        return p

    yield make
    for p in started:
        p.stop()


@pytest.fixture(scope="session")
def redis_svc() -> Iterator[services.Service]:
    """A Redis for the whole session."""
    with services.redis() as svc:
        yield svc


@pytest.fixture(scope="session")
def pg_svc() -> Iterator[services.Service]:
    """A PostgreSQL (trust auth) for the whole session."""
    with services.postgres() as svc:
        yield svc


#: The space the Tarantool fault tests write their own ids into.
TARANTOOL_LUA = """
box.once('surge-faults', function()
    local t = box.schema.space.create('faults', {format = {
        {name = 'id', type = 'unsigned'}, {name = 'data', type = 'string'}}})
    t:create_index('primary', {type = 'hash', parts = {1, 'unsigned'}})
end)
function slow(sec, v) require('fiber').sleep(sec) return v end
"""


@pytest.fixture(scope="session")
def tnt_svc() -> Iterator[services.Service]:
    """A Tarantool with the ``faults`` space and user ``surge`` (password auth)."""
    with services.tarantool(extra_lua=TARANTOOL_LUA) as svc:
        yield svc


def _fault_app() -> App:
    app = App()

    @app.get("/echo/{v:int}/{pad:int}")
    def echo(request: Any, v: int, pad: int) -> str:
        # The caller's own number back, padded so that cuts can land mid-body.
        return f"{v}:" + "h" * pad

    @app.get("/slow/{ms:int}")
    async def slow(request: Any, ms: int) -> str:
        await asyncio.sleep(ms / 1000)
        return "slow"

    return app


@pytest.fixture(scope="session")
def http_svc() -> Iterator[tuple[str, int]]:
    """surge's own HTTP server with the fault app, in a thread with its own loop (so
    it serves whatever the test's loop does); yields (host, port)."""
    loop = asyncio.new_event_loop()
    server = loop.run_until_complete(serve(_fault_app(), "127.0.0.1", 0))
    assert server._server is not None
    port = server._server.sockets[0].getsockname()[1]
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    yield "127.0.0.1", port
    asyncio.run_coroutine_threadsafe(server.shutdown(grace=0.5), loop).result(10)
    loop.call_soon_threadsafe(loop.stop)
    thread.join(5)
    loop.close()
