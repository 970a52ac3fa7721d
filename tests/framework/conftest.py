"""Servers for the framework tests: apps from `apps/` under `surge serve` and
(Starlette peers) under uvicorn, started on first use and kept for the session."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent.parent / "http"))
from peer_servers import PeerServer, PeerServers, healthy_after_each_test, surge_command

APPS = Path(__file__).parent / "apps"


def command(kind: str, target: str, port: int) -> list[str]:
    """`surge serve` or uvicorn (uvloop, httptools) for `target`."""
    if kind == "surge":
        return surge_command(target, port)
    args = [sys.executable, "-m", "uvicorn", target, "--port", str(port)]
    return [*args, "--loop", "uvloop", "--http", "httptools", "--no-access-log"]


class RetryingServers(PeerServers):
    """`PeerServers` that try another port when the one `free_port` gave was taken
    before the server bound it (other processes on a busy machine use the same
    ephemeral range for their outgoing connections)."""

    def get(self, kind: str, target: str) -> PeerServer:
        for _ in range(4):
            try:
                return super().get(kind, target)
            except pytest.fail.Exception as exc:
                if "already in use" not in str(exc):
                    raise
        return super().get(kind, target)


@pytest.fixture(scope="session")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PeerServers]:
    running = RetryingServers(tmp_path_factory.mktemp("framework-logs"), APPS, command)
    yield running
    running.stop_all()


_servers_healthy = healthy_after_each_test("servers")
