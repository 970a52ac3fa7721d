"""Live servers for the HTTP tests.

Each server is `apps/serve_httpapp.py` in a subprocess on a free loopback port,
started on first use and kept for the whole session (one per loop, variant and
options), stopped at the end. After every test, each running server must still
be alive and must not have logged anything that marks a bug on its side.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from peer_servers import healthy_after_each_test
from rawhttp import RawConnection
from surge.services import free_port

APPS = Path(__file__).parent / "apps"
RUNNER = APPS / "serve_httpapp.py"
#: Seconds a test server may take to start accepting: generous, as a loaded
#: 2-core CI machine running other suites can take tens of seconds to import
#: and start one (the wait polls, so a quick start costs nothing).
START_TIMEOUT = 60.0

#: Log lines that only a bug in the server (not a failing handler) produces.
BUG_MARKERS = (
    "internal error while handling a request",
    "Exception in callback",
    "exception was never retrieved",
    "Fatal error on transport",
    "Fatal write error",
    "panicked",
    "Segmentation fault",
)


class ServerProcess:
    """One server subprocess; `port` to talk to it, `log()` for what it logged."""

    def __init__(self, log_dir: Path, data_dir: Path, loop: str, variant: str, options: dict):
        self.loop = loop
        self.variant = variant
        self.options = options
        self.port = free_port()
        name = "-".join([loop, variant, *(f"{k}={v}" for k, v in sorted(options.items()))])
        self.log_path = log_dir / f"{name}.log"
        self._log = open(self.log_path, "wb")  # noqa: SIM115 - closed in stop()
        args = [sys.executable, str(RUNNER), "--port", str(self.port), "--loop", loop]
        args += ["--variant", variant]
        for k, v in options.items():
            args += ["--set", f"{k}={v}"]
        env = {**os.environ, "PYTHONUNBUFFERED": "1", "SURGE_TEST_DATA": str(data_dir)}
        self.proc = subprocess.Popen(args, stdout=self._log, stderr=subprocess.STDOUT, env=env)
        self.checked = 0
        self._wait_accepting()

    def _wait_accepting(self, timeout: float = START_TIMEOUT) -> None:
        deadline = time.monotonic() + timeout
        while True:
            if self.proc.poll() is not None:
                pytest.fail(f"test server exited with {self.proc.returncode}:\n{self.log()}")
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1.0).close()
                return
            except OSError:
                if time.monotonic() > deadline:
                    pytest.fail(f"test server not accepting after {timeout} s:\n{self.log()}")
                time.sleep(0.02)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def new_log(self) -> str:
        """What was logged since the last call."""
        text = self.log()
        new, self.checked = text[self.checked :], len(text)
        return new

    def connect(self, timeout: float = 5.0) -> RawConnection:
        return RawConnection(self.port, timeout=timeout)

    def url(self, path: str = "/") -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def check_health(self) -> None:
        new = self.new_log()
        if self.proc.poll() is not None:
            pytest.fail(f"test server {self.log_path.name} died:\n{self.log()[-5000:]}")
        bugs = [m for m in BUG_MARKERS if m in new]
        if bugs:
            pytest.fail(f"test server {self.log_path.name} logged {bugs}:\n{new[-5000:]}")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._log.close()


class Servers:
    """Starts servers on demand and keeps them for the session."""

    def __init__(self, log_dir: Path, data_dir: Path) -> None:
        self.log_dir = log_dir
        self.data_dir = data_dir
        self.running: dict[tuple, ServerProcess] = {}

    def get(self, loop: str = "uvloop", variant: str = "main", **options) -> ServerProcess:
        key = (loop, variant, tuple(sorted(options.items())))
        if key not in self.running:
            self.running[key] = ServerProcess(self.log_dir, self.data_dir, loop, variant, options)
        return self.running[key]

    def stop_all(self) -> None:
        for server in self.running.values():
            server.stop()


@pytest.fixture(scope="session")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Files the FileResponse routes serve."""
    d = tmp_path_factory.mktemp("data")
    (d / "random.bin").write_bytes(os.urandom(3 * 1024 * 1024 + 17))
    (d / "empty.txt").write_bytes(b"")
    (d / "hello.txt").write_bytes(b"hello from a file\n")
    return d


@pytest.fixture(scope="session")
def servers(tmp_path_factory: pytest.TempPathFactory, data_dir: Path) -> Iterator[Servers]:
    s = Servers(tmp_path_factory.mktemp("server-logs"), data_dir)
    yield s
    s.stop_all()


_servers_healthy = healthy_after_each_test("servers")


@pytest.fixture(params=["uvloop", "asyncio"])
def server(request: pytest.FixtureRequest, servers: Servers) -> ServerProcess:
    """The main app, once on uvloop and once on plain asyncio."""
    return servers.get(request.param)


@pytest.fixture
def uv_server(servers: Servers) -> ServerProcess:
    """The main app on uvloop (for tests where the loop does not matter)."""
    return servers.get("uvloop")


@pytest.fixture
def hooks_server(servers: Servers) -> ServerProcess:
    """The app with before/after hooks and 404/500 handlers."""
    return servers.get("uvloop", "hooks")


@pytest.fixture
def debug_server(servers: Servers) -> ServerProcess:
    """The app with debug=True (tracebacks in 500 responses)."""
    return servers.get("uvloop", "debug")


@pytest.fixture
def timeout_server(servers: Servers) -> ServerProcess:
    """The app with a 1 s header deadline and a 1 s keep-alive timeout."""
    return servers.get("uvloop", "main", header_timeout=1.0, keepalive_timeout=1.0)


@pytest.fixture(scope="session")
def run_curl():
    """Runs curl with the given arguments; returns the CompletedProcess (stdout as bytes)."""
    curl = shutil.which("curl")
    if curl is None:
        pytest.fail("curl is not installed (make system-deps installs it)")

    def run(*args: str, input: bytes | None = None, timeout: float = 20.0, check: bool = True):
        return subprocess.run(
            [curl, *args], input=input, capture_output=True, timeout=timeout, check=check
        )

    return run
