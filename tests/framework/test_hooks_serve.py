"""`on_startup`/`on_shutdown` under `surge serve --workers 2` and `app.run()`: run once
per worker, startup before the first request is served, shutdown after the
requests in progress were answered."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from surge.services import free_port

sys.path.insert(0, str(Path(__file__).parent.parent / "http"))
from rawhttp import RawConnection, build_request

APPS = Path(__file__).parent / "apps"


def fetch(port: int, path: str) -> tuple[int, bytes]:
    conn = RawConnection(port, timeout=10)
    try:
        conn.send(build_request("GET", path))
        r = conn.read_response("GET")
        return r.status, r.body
    finally:
        conn.sock.close()


def wait_accepting(proc: subprocess.Popen, port: int) -> bool:
    """True once the server accepts; False if it exited (e.g. its port was taken)."""
    deadline = time.monotonic() + 20
    while True:
        if proc.poll() is not None:
            return False
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return True
        except OSError:
            assert time.monotonic() < deadline, "server not accepting"
            time.sleep(0.02)


def start(args: list[str], env: dict[str, str], out: Path) -> tuple[subprocess.Popen, int]:
    """The server on a free port; another port if the first was taken meanwhile
    (a busy machine's outgoing connections share the ephemeral range)."""
    for _ in range(4):
        # A try that could not bind may have run its hooks: start the log afresh.
        Path(env["HOOKS_LOG"]).unlink(missing_ok=True)
        port = free_port()
        with open(out, "wb") as sink:
            proc = subprocess.Popen(
                [*args, "--port", str(port)],
                cwd=APPS,
                env=env,
                stdout=sink,
                stderr=subprocess.STDOUT,
            )
        if wait_accepting(proc, port):
            return proc, port
        assert "already in use" in out.read_text(), out.read_text()
    raise AssertionError("no free port after 4 tries")


@pytest.mark.parametrize("how", ["surge serve --workers 2", "app.run()"])
def test_hooks_run_once_per_worker_around_serving(tmp_path, how):
    log = tmp_path / "hooks.log"
    if how == "app.run()":
        args = [sys.executable, "hooks_app.py"]
        workers = 1
    else:
        args = [sys.executable, "-m", "surge", "serve", "hooks_app:app", "--workers", "2"]
        workers = 2
    env = {**os.environ, "HOOKS_LOG": str(log), "PYTHONUNBUFFERED": "1"}
    out = tmp_path / "server.out"
    proc, port = start(args, env, out)
    try:
        for _ in range(20):
            status, body = fetch(port, "/")
            assert status == 200 and json.loads(body)["ready"] is True
        slow: list[tuple[int, bytes]] = []
        thread = threading.Thread(target=lambda: slow.append(fetch(port, "/slow")))
        thread.start()
        time.sleep(0.2)  # the request is in progress when the shutdown starts
        proc.send_signal(signal.SIGTERM)
        thread.join(10)
        assert proc.wait(20) == 0, out.read_text()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert slow == [(200, b"slow")]
    lines = log.read_text().split()
    events = list(zip(lines[::2], lines[1::2], strict=True))
    starts = [pid for what, pid in events if what == "startup"]
    stops = [pid for what, pid in events if what == "shutdown"]
    assert len(starts) == workers and sorted(starts) == sorted(stops), events
    served_by = next(pid for what, pid in events if what == "served")
    assert events.index(("served", served_by)) < events.index(("shutdown", served_by))
