"""In-process surge servers for the WebSocket tests.

Each server runs a `ws_apps.make_app(**limits)` App on its own uvloop loop in a
thread, on a free loopback port; the tests talk to it with raw sockets and the
`websockets` library from the test thread. Servers are made on first use per
set of limits and kept for the session.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from typing import Any

import pytest
import uvloop
from surge.http.server import Server, serve
from surge.services import free_port
from ws_apps import make_app


class LiveServer:
    """A surge server on a loop in a thread."""

    def __init__(self, **limits: Any) -> None:
        self.port = free_port()
        self.loop = uvloop.new_event_loop()
        self.server: Server | None = None
        ready = threading.Event()

        def run() -> None:
            asyncio.set_event_loop(self.loop)
            self.server = self.loop.run_until_complete(serve(make_app(**limits), port=self.port))
            ready.set()
            self.loop.run_forever()

        self.thread = threading.Thread(target=run, daemon=True, name=f"ws-server-{self.port}")
        self.thread.start()
        assert ready.wait(10), "server did not start"

    def call(self, coro: Any, timeout: float = 10.0) -> Any:
        """Runs `coro` on the server's loop and returns its result."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def stop(self) -> None:
        if self.server is not None and not self.server.closing:
            self.call(self.server.shutdown(grace=1.0))
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)


@pytest.fixture(scope="session")
def servers() -> Iterator[dict[tuple[tuple[str, Any], ...], LiveServer]]:
    made: dict[tuple[tuple[str, Any], ...], LiveServer] = {}
    yield made
    for s in made.values():
        s.stop()


@pytest.fixture
def live(servers: dict[tuple[tuple[str, Any], ...], LiveServer]) -> Any:
    """`live(**limits)`: the session's server with those limits (made on first use)."""

    def get(**limits: Any) -> LiveServer:
        key = tuple(sorted(limits.items()))
        if key not in servers:
            servers[key] = LiveServer(**limits)
        return servers[key]

    return get


@pytest.fixture
def server(live: Any) -> LiveServer:
    """The server with default limits."""
    return live()  # type: ignore[no-any-return]
