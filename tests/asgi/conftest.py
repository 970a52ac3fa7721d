"""Live ASGI servers for the tests: an app from `apps/` under `surge serve` and under uvicorn.

Each (server, app) pair is one subprocess on a free loopback port, started on
first use and kept for the session. After every test each running server must be
alive and must not have logged anything that marks a bug on the server's side.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent.parent / "http"))
from peer_servers import (
    PeerServer,
    PeerServers,
    free_port,
    healthy_after_each_test,
    surge_command,
)

APPS = Path(__file__).parent / "apps"

AsgiServer = PeerServer
__all__ = ["APPS", "AsgiServer", "AsgiServers", "free_port"]


def command(kind: str, target: str, port: int) -> list[str]:
    """`surge serve` or uvicorn (uvloop, httptools) for `target`."""
    if kind == "surge":
        return surge_command(target, port)
    args = [sys.executable, "-m", "uvicorn", target, "--port", str(port)]
    return [*args, "--loop", "uvloop", "--http", "httptools", "--no-access-log"]


class AsgiServers(PeerServers):
    """The apps of `apps/` under surge and uvicorn, started on first use."""

    def __init__(self, log_dir: Path) -> None:
        super().__init__(log_dir, APPS, command)


@pytest.fixture(scope="session")
def asgi_servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PeerServers]:
    servers = AsgiServers(tmp_path_factory.mktemp("asgi-logs"))
    yield servers
    servers.stop_all()


_asgi_servers_healthy = healthy_after_each_test("asgi_servers")


@pytest.fixture
def raw_surge(asgi_servers: PeerServers) -> PeerServer:
    """The raw ASGI app under `surge serve`."""
    return asgi_servers.get("surge", "raw_app:app")
