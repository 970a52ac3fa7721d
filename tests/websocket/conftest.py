"""In-process surge servers for the WebSocket tests.

Each server runs a `ws_apps.make_app(**limits)` App on its own loop (asyncio and
uvloop: every test runs on both) in a thread, on a free loopback port; the tests
talk to it with raw sockets and the `websockets` library from the test thread.
Servers are made on first use per loop kind and set of limits, kept for the session.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from ws_server import LiveServer

from tests.loops import KINDS


@pytest.fixture(scope="session")
def servers() -> Iterator[dict[tuple[tuple[str, Any], ...], LiveServer]]:
    made: dict[tuple[tuple[str, Any], ...], LiveServer] = {}
    yield made
    for s in made.values():
        s.stop()


@pytest.fixture(params=KINDS)
def live(
    request: pytest.FixtureRequest, servers: dict[tuple[tuple[str, Any], ...], LiveServer]
) -> Any:
    """`live(**limits)`: the session's server with those limits on each loop kind
    (asyncio, uvloop), made on first use."""

    def get(**limits: Any) -> LiveServer:
        key = (("loop", request.param), *sorted(limits.items()))
        if key not in servers:
            servers[key] = LiveServer(request.param, **limits)
        return servers[key]

    return get


@pytest.fixture
def server(live: Any) -> LiveServer:
    """The server with default limits."""
    return live()  # type: ignore[no-any-return]
