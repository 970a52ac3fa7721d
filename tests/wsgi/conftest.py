"""Fixtures of the WSGI tests (servers in `wsgiservers.py`)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parent.parent / "http"))
from peer_servers import healthy_after_each_test
from wsgiservers import WsgiServer, WsgiServers


@pytest.fixture(scope="session")
def wsgi_servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WsgiServers]:
    servers = WsgiServers(tmp_path_factory.mktemp("wsgi-logs"))
    yield servers
    servers.stop_all()


_wsgi_servers_healthy = healthy_after_each_test("wsgi_servers")


@pytest.fixture
def raw_surge(wsgi_servers: WsgiServers) -> WsgiServer:
    """The raw WSGI app under `surge serve`."""
    return wsgi_servers.get("surge", "raw_wsgi:app")
