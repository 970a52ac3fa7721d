"""The server as a whole: its listening socket and many clients at once."""

from __future__ import annotations

import shutil
import subprocess

import pytest
from rawhttp import build_request

pytestmark = pytest.mark.timeout(60)


def test_listen_backlog_is_kept(server):
    """`serve()` listens with a backlog of 2048; the loop's create_server must not
    shrink it to asyncio's default of 100 when it starts serving."""
    ss = shutil.which("ss")
    if ss is None:
        pytest.skip("ss (iproute2) is not installed")
    out = subprocess.run(
        [ss, "-ltnH", f"sport = :{server.port}"], capture_output=True, text=True, check=True
    ).stdout.split()
    assert out[0] == "LISTEN"
    assert int(out[2]) == 2048  # Send-Q of a listening socket is its backlog


def test_many_connections_at_once(server):
    conns = [server.connect(timeout=20) for _ in range(300)]
    try:
        for i, c in enumerate(conns):
            c.send(build_request("GET", f"/fast/{i}" if i % 2 else f"/afast/{i}"))
        for i, c in enumerate(conns):
            kind = "fast" if i % 2 else "afast"
            assert c.read_response().body == f"{kind} {i}".encode()
        # And again on the same connections, pipelined two at a time.
        for c in conns:
            c.send(build_request("GET", "/") + build_request("GET", "/ret/async-str"))
        for c in conns:
            assert [c.read_response().body for _ in range(2)] == [b"hello", b"async hello"]
    finally:
        for c in conns:
            c.close()
