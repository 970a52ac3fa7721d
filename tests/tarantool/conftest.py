"""Fixtures for the Tarantool driver tests: a real server, both loops, a cutting proxy."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest
from surge import services

SPACES_LUA = """
box.once('surge-tests', function()
    local t = box.schema.space.create('tester', {format = {
        {name = 'id', type = 'unsigned'}, {name = 'data', type = 'string'}}})
    t:create_index('primary', {type = 'hash', parts = {1, 'unsigned'}})
    local s = box.schema.space.create('sorted', {format = {
        {name = 'id', type = 'unsigned'}, {name = 'name', type = 'string'},
        {name = 'n', type = 'integer'}}})
    s:create_index('primary', {type = 'tree', parts = {1, 'unsigned'}})
    s:create_index('by_name', {type = 'tree', unique = false, parts = {2, 'string'}})
    local x = box.schema.space.create('anything')
    x:create_index('primary', {type = 'tree', parts = {1, 'unsigned'}})
    box.schema.func.create('add', {body = 'function(a, b) return a + b end'})
end)
function slow(sec, v) require('fiber').sleep(sec) return v end
function add2(a, b) return a + b end
"""


@pytest.fixture(scope="session")
def tnt() -> Iterator[services.Service]:
    """A Tarantool 2.6 with the test spaces, for the whole session."""
    with services.tarantool(extra_lua=SPACES_LUA) as svc:
        yield svc


class Proxy:
    """A TCP proxy in the test's loop that can cut every connection on demand."""

    def __init__(self, host: str, port: int) -> None:
        self.target = (host, port)
        self.server: asyncio.Server | None = None
        self.writers: list[asyncio.StreamWriter] = []
        self.port = 0

    async def start(self) -> Proxy:
        self.server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        self.port = self.server.sockets[0].getsockname()[1]
        return self

    async def _handle(self, r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        try:
            ur, uw = await asyncio.open_connection(*self.target)
        except OSError:
            w.close()
            return
        self.writers += [w, uw]

        async def pump(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
            try:
                while data := await src.read(65536):
                    dst.write(data)
                    await dst.drain()
            except (OSError, asyncio.CancelledError):
                pass
            finally:
                dst.close()

        await asyncio.gather(pump(r, uw), pump(ur, w))

    def cut(self) -> None:
        """Drop every proxied connection at once (both sides)."""
        for w in self.writers:
            w.transport.abort()
        self.writers.clear()

    async def stop(self) -> None:
        self.cut()
        if self.server is not None:
            self.server.close()


@pytest.fixture
def proxy_cls() -> type[Proxy]:
    """The cutting proxy class (a fixture, so tests need not import this conftest)."""
    return Proxy
