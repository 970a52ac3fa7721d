"""A chunked request body that grows past --max-body, under `surge serve`: the
server answers 413 itself and closes when the app's response has not begun (h11
and nginx do the same; uvicorn has no limit), the app sees `http.disconnect`
(ASGI) or an error from `wsgi.input` (WSGI), and the worker stays healthy with
bounded memory while the client keeps sending.
"""

from __future__ import annotations

import socket
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from peer_servers import PeerServer, own_servers, surge_command

pytestmark = pytest.mark.timeout(60)

MAX_BODY = 10_000

APPS = {
    # A raw ASGI app reading its body; what it saw is the response body.
    "chunk_asgi": """
        async def app(scope, receive, send):
            if scope["type"] != "http":
                return
            size = 0
            while True:
                message = await receive()
                if message["type"] == "http.disconnect":
                    break
                size += len(message["body"])
                if not message.get("more_body"):
                    break
            await send({"type": "http.response.start", "status": 200, "headers": []})
            await send({"type": "http.response.body", "body": str(size).encode()})
    """,
    # FastAPI turns the disconnect into its own 500: the server's 413 went first.
    "chunk_fastapi": """
        from fastapi import FastAPI, Request

        app = FastAPI()


        @app.post("/")
        async def up(request: Request):
            size = 0
            async for chunk in request.stream():
                size += len(chunk)
            return {"size": size}
    """,
    # Flask turns the error from `wsgi.input` into its own 500 page: the server's
    # 413 replaces it.
    "chunk_flask": """
        from flask import Flask, request

        app = Flask(__name__)


        @app.post("/")
        def up():
            return str(len(request.get_data()))
    """,
    "chunk_wsgi": """
        def app(environ, start_response):
            data = environ["wsgi.input"].read()
            start_response("200 OK", [("Content-Type", "text/plain")])
            return [str(len(data)).encode()]
    """,
}


@pytest.fixture
def start(tmp_path: Path) -> Iterator[Callable[..., PeerServer]]:
    for name, text in APPS.items():
        (tmp_path / f"{name}.py").write_text(textwrap.dedent(text))

    def start(target: str, *options: str) -> PeerServer:
        def command(kind: str, target: str, port: int) -> list[str]:
            return [*surge_command(target, port), "--max-body", str(MAX_BODY), *options]

        return servers.start("surge", target, tmp_path, command)

    with own_servers(tmp_path) as servers:
        yield start


def _rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


def _send_too_much(port: int, total: int) -> tuple[bytes, bool]:
    """POSTs a chunked body of `total` bytes in 4 KiB chunks, sending until the
    server stops taking it; what came back, and whether the server closed."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    sock.sendall(b"POST / HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n")
    chunk = b"1000\r\n" + b"x" * 4096 + b"\r\n"
    try:
        for _ in range(total // 4096):
            sock.sendall(chunk)
    except OSError:
        pass  # closed by the server: expected once it has answered
    got, closed = b"", False
    try:
        while True:
            data = sock.recv(65536)
            if not data:
                closed = True
                break
            got += data
    except ConnectionResetError:
        closed = True  # what it sent may be lost to the reset: the caller checks
    finally:
        sock.close()
    return got, closed


@pytest.mark.parametrize(
    ("target", "interface"),
    [
        ("chunk_asgi", "asgi"),
        ("chunk_fastapi", "asgi"),
        ("chunk_wsgi", "wsgi"),
        ("chunk_flask", "wsgi"),
    ],
)
def test_chunked_body_over_max_body_gets_413(
    start: Callable[..., PeerServer], target: str, interface: str
) -> None:
    server = start(f"{target}:app", "--interface", interface)
    # A small overrun first: the client stops sending soon after, so the answer
    # is read before any reset.
    got, closed = _send_too_much(server.port, 4 * MAX_BODY)
    assert got.startswith(b"HTTP/1.1 413 "), got[:300]
    assert b"\r\nserver: surge\r\n" in got
    assert closed
    before = _rss_kib(server.proc.pid)
    for _ in range(5):  # 5 x 8 MiB pushed at it: refused, not buffered
        _send_too_much(server.port, 8 << 20)
    assert _rss_kib(server.proc.pid) - before < 32 * 1024
    # Healthy: the next client is served.
    resp = server.fetch("POST", "/", {}, b"y" * 100)
    assert resp.status == 200
    assert b"100" in resp.body
