"""Apps under `surge serve` and under a peer server (uvicorn, gunicorn), each in a
subprocess, for the differential tests of tests/asgi and tests/wsgi.

Each (server, app) pair is one subprocess on a free loopback port, started on
first use and kept for the session; after every test each running server must
be alive and must not have logged anything that marks a bug on the server's side.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from rawhttp import RawConnection, RawResponse, build_request
from surge.services import free_port

#: Seconds a server has to exit after SIGTERM before it is killed.
STOP_TIMEOUT = 10.0
#: Log lines that only a bug in the server (not a failing app) produces.
BUG_MARKERS = (
    "internal error while handling a request",
    "Exception in callback",
    "exception was never retrieved",
    "Task was destroyed but it is pending",
    "Fatal error on transport",
    "panicked",
    "Segmentation fault",
)

#: (kind, target, port) -> the command line of a peer server.
PeerCommand = Callable[[str, str, int], list[str]]


def surge_command(target: str, port: int) -> list[str]:
    """`surge serve target` on `port`."""
    return [sys.executable, "-m", "surge", "serve", target, "--port", str(port)]


class PeerServer:
    """One server subprocess serving `target` from `apps`."""

    def __init__(
        self, kind: str, target: str, log_dir: Path, apps: Path, command: PeerCommand
    ) -> None:
        self.kind = kind
        self.port = free_port()
        self.log_path = log_dir / f"{kind}-{target.replace(':', '-')}.log"
        self._log = open(self.log_path, "wb")  # noqa: SIM115 - closed in stop()
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        self.proc = subprocess.Popen(
            command(kind, target, self.port),
            cwd=apps,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            env=env,
        )
        self.checked = 0
        self._wait_accepting()

    def _wait_accepting(self, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while True:
            if self.proc.poll() is not None:
                pytest.fail(f"{self.kind} exited with {self.proc.returncode}:\n{self.log()}")
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1.0).close()
                return
            except OSError:
                if time.monotonic() > deadline:
                    pytest.fail(f"{self.kind} not accepting after {timeout} s:\n{self.log()}")
                time.sleep(0.05)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def connect(self, timeout: float = 5.0) -> RawConnection:
        return RawConnection(self.port, timeout=timeout)

    def fetch(
        self, method: str, target: str, headers: dict | None = None, body: bytes | None = None
    ) -> RawResponse:
        """One request on a new connection."""
        conn = self.connect()
        try:
            conn.send(build_request(method, target, headers or {}, body))
            return conn.read_response(method)
        finally:
            conn.sock.close()

    def fetch_in_turn(
        self, requests: list[tuple[str, str, dict, bytes | None]]
    ) -> list[RawResponse]:
        """`requests` one after another on one kept-alive connection."""
        conn = self.connect()
        try:
            got = []
            for method, target, headers, body in requests:
                conn.send(build_request(method, target, headers, body))
                got.append(conn.read_response(method))
            return got
        finally:
            conn.sock.close()

    def check_health(self) -> None:
        text = self.log()
        new, self.checked = text[self.checked :], len(text)
        if self.proc.poll() is not None:
            pytest.fail(f"{self.kind} died:\n{text[-5000:]}")
        bugs = [m for m in BUG_MARKERS if m in new]
        if bugs:
            pytest.fail(f"{self.kind} logged {bugs}:\n{new[-5000:]}")

    def terminate(self) -> None:
        """Ask the server to exit (SIGTERM); `stop` waits for it."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)

    def stop(self, deadline: float | None = None) -> None:
        """Stops the server: SIGTERM, SIGKILL if it has not exited by `deadline`
        (time.monotonic(); 10 s from now by default)."""
        self.terminate()
        if deadline is None:
            deadline = time.monotonic() + STOP_TIMEOUT
        try:
            self.proc.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self._log.close()


class PeerServers:
    """The servers started so far, by (kind, target)."""

    def __init__(self, log_dir: Path, apps: Path, command: PeerCommand) -> None:
        self.log_dir = log_dir
        self.apps = apps
        self.command = command
        self.running: dict[tuple[str, str], PeerServer] = {}

    def get(self, kind: str, target: str) -> PeerServer:
        key = (kind, target)
        if key not in self.running:
            self.running[key] = PeerServer(kind, target, self.log_dir, self.apps, self.command)
        return self.running[key]

    def stop_all(self) -> None:
        # All asked at once, with one deadline: the graceful exits overlap instead
        # of adding up (a gunicorn still holding a kept-alive connection waits
        # out its graceful timeout; three of them took 34 s, 10 s each in turn).
        for server in self.running.values():
            server.terminate()
        deadline = time.monotonic() + STOP_TIMEOUT
        for server in self.running.values():
            server.stop(deadline)


def healthy_after_each_test(name: str) -> Any:
    """An autouse fixture for a conftest: after each test that used the session
    fixture ``name`` (an object with ``running`` servers), every server it started
    must still pass `check_health`."""

    @pytest.fixture(autouse=True)
    def servers_healthy(request: pytest.FixtureRequest) -> Iterator[None]:
        yield
        if name in request.fixturenames:
            for server in request.getfixturevalue(name).running.values():
                server.check_health()

    return servers_healthy


class OwnServers:
    """The servers one test starts (`start`), each logging into a directory of its
    own: two servers of one kind and app would share a log file."""

    def __init__(self, tmp_path: Path) -> None:
        self.tmp_path = tmp_path
        self.started: list[PeerServer] = []

    def start(self, kind: str, target: str, cwd: Path, command: PeerCommand) -> PeerServer:
        logs = self.tmp_path / f"logs{len(self.started)}"
        logs.mkdir()
        server = PeerServer(kind, target, logs, cwd, command)
        self.started.append(server)
        return server


@contextlib.contextmanager
def own_servers(tmp_path: Path) -> Iterator[OwnServers]:
    """For a fixture: when it ends, every server started must still pass
    `check_health`; all are stopped, also when one does not."""
    servers = OwnServers(tmp_path)
    try:
        yield servers
        for server in servers.started:
            server.check_health()
    finally:
        for server in servers.started:
            server.stop()
