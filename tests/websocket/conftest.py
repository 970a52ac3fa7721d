"""In-process surge servers for the WebSocket tests.

Each server runs a `ws_apps.make_app(**limits)` App on its own uvloop loop in a
thread, on a free loopback port; the tests talk to it with raw sockets and the
`websockets` library from the test thread. Servers are made on first use per
set of limits and kept for the session.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from ws_server import LiveServer


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
