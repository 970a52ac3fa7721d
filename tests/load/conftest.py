"""Fixtures for the load generator tests: surge's own server, raw misbehaving servers.

`surge_server` is `loadapp.py` served by ``surge serve`` in a subprocess on a free
loopback port, kept for the whole session. The raw servers run in threads of the
test process and answer with what a test wants: garbage, silence, a hang-up.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from rawservers import RawServer
from surge.services import (
    free_port,
    postgres_service,  # noqa: F401 - a real PostgreSQL, per session
)

from tests.processes import stop, wait_accepting

HERE = Path(__file__).parent


class SurgeServer:
    def __init__(self, port: int, proc: subprocess.Popen, log: Path) -> None:
        self.port = port
        self.proc = proc
        self.log = log
        self.scheme = "https" if "--ssl-certfile" in proc.args else "http"

    def url(self, path: str = "/", host: str = "127.0.0.1") -> str:
        return f"{self.scheme}://{host}:{self.port}{path}"

    def get(self, path: str) -> bytes:
        with urllib.request.urlopen(self.url(path), timeout=5) as r:
            return r.read()


@pytest.fixture(scope="session")
def surge_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SurgeServer]:
    """loadapp:app under `surge serve --workers 1`."""
    log = tmp_path_factory.mktemp("load-server") / "server.log"
    server = start_surge([], log)
    yield server
    stop_surge(server)


def start_surge(extra: list[str], log: Path) -> SurgeServer:
    """loadapp:app under `surge serve` with `extra` options, accepting connections."""
    port = free_port()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE), *sys.path])}
    args = [sys.executable, "-m", "surge", "serve", "loadapp:app", "--port", str(port), *extra]
    with open(log, "wb") as out:
        proc = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=HERE)
    wait_accepting(proc, port, log.read_text)
    return SurgeServer(port, proc, log)


def stop_surge(server: SurgeServer) -> None:
    stop(server.proc)


@pytest.fixture
def raw_server() -> Iterator[Callable[[Callable[[socket.socket], None]], RawServer]]:
    """Start raw servers with a given handler; all stopped after the test."""
    started: list[RawServer] = []

    def start(handle: Callable[[socket.socket], None]) -> RawServer:
        s = RawServer(handle)
        started.append(s)
        return s

    yield start
    for s in started:
        s.close()
