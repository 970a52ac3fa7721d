"""The pipelining memory bound: a client that pipelines many requests for large
responses and never reads pins about one write high-water mark in a `surge
serve` worker, not the sum of every response (it used to grow by hundreds of MB),
for plain, JSON, async, streaming and file responses; other clients are still
answered promptly; and a client that does read gets every response, in order."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.http.conftest import free_port
from tests.processes import stop, wait_accepting

pytestmark = pytest.mark.timeout(120)

ROOT = Path(__file__).resolve().parents[2]
#: What the abuse may add to the worker's RSS (the issue's bound).
MAX_GROWTH = 64 << 20


def _rss(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


@pytest.fixture(scope="module")
def worker() -> Iterator[tuple[int, int]]:
    """`surge serve` as users run it (one worker, uvloop): (its pid, its port)."""
    port = free_port()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    args = [sys.executable, "-m", "surge", "serve", "tests.http.apps.bigapp:app"]
    args += ["--port", str(port)]
    proc = subprocess.Popen(args, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_accepting(proc, port)
    yield proc.pid, port
    stop(proc)


def _get(port: int, path: str = "/", timeout: float = 5.0) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode())
        data = b""
        while chunk := s.recv(65536):
            data += chunk
        return data


@pytest.mark.parametrize(
    ("path", "count"),
    [
        ("/big", 150),
        ("/16k", 12_000),
        ("/json", 12_000),
        ("/abig", 150),
        ("/stream", 150),
        ("/file", 150),
    ],
)
def test_pipelined_never_read_stays_bounded(worker, path, count):
    pid, port = worker
    assert _get(port).endswith(b"ok")  # warm
    before = _rss(pid)
    abusers = []
    for _ in range(2):  # two such connections
        s = socket.create_connection(("127.0.0.1", port))
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        batch = f"GET {path} HTTP/1.1\r\nHost: x\r\n\r\n".encode() * count
        s.setblocking(False)
        sent = 0
        deadline = time.monotonic() + 5
        while sent < len(batch) and time.monotonic() < deadline:
            try:
                sent += s.send(batch[sent:])
            except BlockingIOError:
                time.sleep(0.01)  # the server stopped reading: as it should
        abusers.append(s)
    time.sleep(1.0)  # let the worker do whatever it would do
    growth = _rss(pid) - before
    # Other clients are still answered promptly.
    t0 = time.monotonic()
    assert _get(port).endswith(b"ok")
    assert time.monotonic() - t0 < 1.0
    for s in abusers:
        s.close()
    assert growth < MAX_GROWTH, f"{path}: worker grew by {growth >> 20} MB"


@pytest.mark.parametrize("path", ["/big", "/abig", "/16k", "/stream", "/file"])
def test_pipelined_reader_gets_every_response_in_order(worker, path):
    _, port = worker
    n = 40
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        reqs = b"".join(f"GET {path}?i={i} HTTP/1.1\r\nHost: x\r\n\r\n".encode() for i in range(n))
        s.sendall(reqs + b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        data = bytearray()
        while chunk := s.recv(1 << 20):
            data += chunk
    assert data.count(b"HTTP/1.1 200 OK\r\n") == n + 1
    assert data.endswith(b"ok")


def test_results_rendered_late_keep_their_meaning_and_order(worker):
    """Behind responses over the high-water mark, results are rendered when written:
    None is still 204, an unrenderable one still 500, all in request order."""
    _, port = worker
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        # 16 MiB ahead: more than the kernel's socket buffers take unread.
        paths = ["/abig"] * 16 + ["/anone", "/abad", "/abig", "/anone"]
        reqs = b"".join(f"GET {p} HTTP/1.1\r\nHost: x\r\n\r\n".encode() for p in paths)
        s.sendall(reqs + b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        time.sleep(0.5)  # let the handlers finish while nothing is read
        data = bytearray()
        while chunk := s.recv(1 << 20):
            data += chunk
    statuses = [int(m.group(1)) for m in re.finditer(rb"HTTP/1\.1 (\d{3}) ", data)]
    # (a 1 MiB body of "x" cannot contain "HTTP/1.1 ")
    assert statuses == [200] * 16 + [204, 500, 200, 204, 200]
