"""Servers for the HTTP client tests, run inside the test's loop: surge's own
(`SurgeServer`) for well-behaved replies, and `RawServer`, whose handler a test
scripts, for malformed, truncated, slow or missing ones."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Awaitable, Callable

from surge.http import App, Server, serve


class SurgeServer:
    """surge's server for `app` on a free loopback port, inside the running loop."""

    def __init__(self, app: App) -> None:
        self.app = app
        self.server: Server | None = None
        self.port = 0

    async def __aenter__(self) -> SurgeServer:
        self.server = await serve(self.app, "127.0.0.1", 0)
        assert self.server._server is not None
        self.port = self.server._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self.server is not None
        await self.server.shutdown(grace=0.5)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


class RawServer:
    """An asyncio server whose connections `handler` scripts; counts connections."""

    def __init__(self, handler: Handler) -> None:
        self.handler = handler
        self.connections = 0
        self.port = 0
        self._server: asyncio.AbstractServer | None = None
        self._tasks: set[asyncio.Task] = set()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        self._tasks.add(asyncio.current_task())  # type: ignore[arg-type]
        try:
            await self.handler(reader, writer)
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.CancelledError):
            pass
        finally:
            writer.close()

    async def __aenter__(self) -> RawServer:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()
        for t in self._tasks:
            t.cancel()
        await asyncio.sleep(0)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


async def read_request(reader: asyncio.StreamReader) -> bytes:
    """One request head (bodies in these tests are declared by Content-Length)."""
    head = await reader.readuntil(b"\r\n\r\n")
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            await reader.readexactly(int(line.split(b":")[1]))
    return head


def refused_port() -> int:
    """A loopback port nothing listens on."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
