"""Servers for the framework tests: apps from `apps/` under `surge serve` and
(Starlette peers) under uvicorn, started on first use and kept for the session."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent.parent / "http"))
from peer_servers import PeerServers, surge_command

APPS = Path(__file__).parent / "apps"


def command(kind: str, target: str, port: int) -> list[str]:
    """`surge serve` or uvicorn (uvloop, httptools) for `target`."""
    if kind == "surge":
        return surge_command(target, port)
    args = [sys.executable, "-m", "uvicorn", target, "--port", str(port)]
    return [*args, "--loop", "uvloop", "--http", "httptools", "--no-access-log"]


@pytest.fixture(scope="session")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PeerServers]:
    running = PeerServers(tmp_path_factory.mktemp("framework-logs"), APPS, command)
    yield running
    running.stop_all()


@pytest.fixture(autouse=True)
def _servers_healthy(request: pytest.FixtureRequest) -> Iterator[None]:
    yield
    if "servers" in request.fixturenames:
        for server in request.getfixturevalue("servers").running.values():
            server.check_health()
