"""Server processes the tests start: waiting until one accepts, stopping it."""

from __future__ import annotations

import signal
import socket
import subprocess
import time
from collections.abc import Callable

import pytest

#: How long a server process may take to accept (a busy 2-core CI machine).
START_TIMEOUT = 30.0


def wait_accepting(
    proc: subprocess.Popen,
    port: int,
    why: Callable[[], str] = lambda: "",
    timeout: float = START_TIMEOUT,
) -> None:
    """Return once 127.0.0.1:``port`` accepts a connection; if ``proc`` exits first
    or ``timeout`` passes, kill it and fail the test with ``why()`` (its log)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            exited = proc.poll() is not None
            if exited or time.monotonic() > deadline:
                if not exited:
                    proc.kill()
                    proc.wait()
                what = "exited" if exited else f"not accepting after {timeout:g} s"
                pytest.fail(f"server {what} (port {port}):\n{why()}")
            time.sleep(0.02)


def stop(proc: subprocess.Popen, sig: int = signal.SIGTERM, timeout: float = 5.0) -> None:
    """Send ``sig``; kill the process if it has not exited within ``timeout`` s."""
    proc.send_signal(sig)
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
