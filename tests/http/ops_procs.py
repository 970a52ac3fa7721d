"""A `surge serve` (or gunicorn) process for the operations tests, on loopback."""

from __future__ import annotations

import http.client
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from surge.services import free_port

APPS = Path(__file__).parent / "apps"
#: Seconds a server may take to answer its first request, and to exit: generous,
#: as a loaded 2-core CI machine can take tens of seconds to start one (the
#: waits poll, so a quick start costs nothing).
START_TIMEOUT = 60.0
STOP_TIMEOUT = 30.0


class Proc:
    """A server process whose output goes to a file; `get` talks HTTP to it."""

    def __init__(
        self,
        argv: list[str],
        log_path: Path,
        *,
        port: int | None = None,
        uds: str | None = None,
        pass_fds: tuple[int, ...] = (),
    ) -> None:
        self.port = port
        self.uds = uds
        self.log_path = log_path
        self._log = open(log_path, "wb")  # noqa: SIM115 - closed in stop()
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        self.proc = subprocess.Popen(
            argv, cwd=APPS, stdout=self._log, stderr=subprocess.STDOUT, env=env, pass_fds=pass_fds
        )

    @classmethod
    def surge(cls, tmp: Path, *args: str, name: str = "surge", tcp: bool = True) -> Proc:
        port = free_port() if tcp else None
        argv = [sys.executable, "-m", "surge", "serve", *args]
        if port is not None:
            argv += ["--port", str(port)]
        uds = args[args.index("--uds") + 1] if "--uds" in args else None
        return cls(argv, tmp / f"{name}.log", port=port, uds=uds)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def connection(self, timeout: float = 5.0) -> http.client.HTTPConnection:
        if self.uds is not None:
            return UnixHTTPConnection(self.uds, timeout)
        assert self.port is not None
        return http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)

    def get(
        self, path: str, headers: dict[str, str] | None = None, timeout: float = 5.0
    ) -> tuple[int, bytes, dict[str, str]]:
        conn = self.connection(timeout)
        try:
            conn.request("GET", path, headers=headers or {})
            resp = conn.getresponse()
            return resp.status, resp.read(), {k.lower(): v for k, v in resp.getheaders()}
        finally:
            conn.close()

    def wait_ready(self, path: str = "/", timeout: float = START_TIMEOUT) -> None:
        deadline = time.monotonic() + timeout
        while True:
            if self.proc.poll() is not None:
                pytest.fail(f"server exited with {self.proc.returncode}:\n{self.log()}")
            try:
                self.get(path, timeout=10.0)
                return
            except (OSError, http.client.HTTPException):  # not up yet, or cut while starting
                if time.monotonic() > deadline:
                    pytest.fail(f"server did not answer in {timeout} s:\n{self.log()}")
                time.sleep(0.05)

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._log.close()
        return self.proc.returncode


class UnixHTTPConnection(http.client.HTTPConnection):
    """http.client over a Unix socket."""

    def __init__(self, path: str, timeout: float) -> None:
        super().__init__("localhost", timeout=timeout)
        self.path = path

    def connect(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(self.timeout)
        sock.connect(self.path)
        self.sock = sock


def wait_for_lines(path: Path, count: int, timeout: float = 30.0) -> list[str]:
    """The first `count` lines of a log file, waiting for the writer thread (at
    most `timeout` seconds: returns as soon as they are there)."""
    deadline = time.monotonic() + timeout
    while True:
        lines = path.read_text().splitlines() if path.exists() else []
        if len(lines) >= count or time.monotonic() > deadline:
            return lines
        time.sleep(0.02)
