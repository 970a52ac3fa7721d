"""Fixtures of the WSGI tests (servers in `wsgiservers.py`)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from wsgiservers import WsgiServer, WsgiServers


@pytest.fixture(scope="session")
def wsgi_servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WsgiServers]:
    servers = WsgiServers(tmp_path_factory.mktemp("wsgi-logs"))
    yield servers
    servers.stop_all()


@pytest.fixture(autouse=True)
def _wsgi_servers_healthy(request: pytest.FixtureRequest) -> Iterator[None]:
    yield
    if "wsgi_servers" in request.fixturenames:
        for server in request.getfixturevalue("wsgi_servers").running.values():
            server.check_health()


@pytest.fixture
def raw_surge(wsgi_servers: WsgiServers) -> WsgiServer:
    """The raw WSGI app under `surge serve`."""
    return wsgi_servers.get("surge", "raw_wsgi:app")
