"""What an app moved from uvicorn (ASGI) or gunicorn (WSGI) relies on, found by sending
both servers the same raw requests: here, a chunked request body cut by a framing
error (a bad chunk size, chunk data not followed by CRLF) is never handed to the
app as a complete, shorter body.

uvicorn and gunicorn answer 400 and the app never sees the body complete; surge's
ASGI and WSGI apps once got the chunks before the error as the whole body
(`more_body` False, `wsgi.input` at its end) when the error came in the read that
brought the head: a truncated upload processed as valid.

Every server is a real subprocess (`peer_servers.PeerServer`) on a free loopback
port; the apps record what they saw, and a second request asks for it.
"""

from __future__ import annotations

import sys
import textwrap
import time
from collections.abc import Iterator

import pytest
from peer_servers import PeerServer, surge_command
from rawhttp import RawConnection

pytestmark = pytest.mark.timeout(60)

ASGI_APP = """
    seen = []


    async def app(scope, receive, send):
        if scope["type"] != "http":
            return
        if scope["path"] == "/seen":
            body = repr(seen).encode()
            seen.clear()
        else:
            got = b""
            while True:
                message = await receive()
                if message["type"] == "http.disconnect":
                    seen.append("disconnect")
                    return
                got += message.get("body", b"")
                if not message.get("more_body", False):
                    break
            seen.append(f"complete {got!r}")
            body = got
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", b"text/plain")]})
        await send({"type": "http.response.body", "body": body})
"""

WSGI_APP = """
    import threading

    seen = []
    lock = threading.Lock()


    def app(environ, start_response):
        if environ["PATH_INFO"] == "/seen":
            with lock:
                body = repr(seen).encode()
                seen.clear()
        else:
            try:
                body = environ["wsgi.input"].read()
            except Exception as exc:  # the server's error for a body cut short
                with lock:
                    seen.append(f"error {type(exc).__name__}")
                raise
            with lock:
                seen.append(f"complete {body!r}")
        start_response("200 OK", [("content-type", "text/plain")])
        return [body]
"""

HEAD = b"POST /upload HTTP/1.1\r\nhost: x\r\ntransfer-encoding: chunked\r\n\r\n"
#: Bodies whose framing breaks after a first good chunk ("abc").
BROKEN = {
    "bad-size": b"3\r\nabc\r\nzz\r\nmore\r\n0\r\n\r\n",
    "no-crlf": b"3\r\nabcXX\r\n0\r\n\r\n",
}


def _command(kind: str, target: str, port: int) -> list[str]:
    if kind == "surge":
        return [*surge_command(target, port), "--threads", "2"]
    if kind == "uvicorn":
        return [sys.executable, "-m", "uvicorn", target, "--port", str(port)]
    # One process: the record of what the app saw lives in it.
    args = [sys.executable, "-m", "gunicorn", "-k", "gthread", "--threads", "2"]
    return [*args, "--workers", "1", "-b", f"127.0.0.1:{port}", target]


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, PeerServer]]:
    apps = tmp_path_factory.mktemp("audit-apps")
    (apps / "audit_asgi.py").write_text(textwrap.dedent(ASGI_APP))
    (apps / "audit_wsgi.py").write_text(textwrap.dedent(WSGI_APP))
    started = {}
    try:
        for name, kind, target in [
            ("asgi-surge", "surge", "audit_asgi:app"),
            ("asgi-uvicorn", "uvicorn", "audit_asgi:app"),
            ("wsgi-surge", "surge", "audit_wsgi:app"),
            ("wsgi-gunicorn", "gunicorn", "audit_wsgi:app"),
        ]:
            started[name] = PeerServer(kind, target, apps, apps, _command)
        yield started
    finally:
        for server in started.values():
            server.stop()


def _exchange(server: PeerServer, parts: list[bytes]) -> tuple[bytes, bool]:
    """Sends `parts` (a pause between them), then reads to the close: (reply, closed)."""
    conn = RawConnection(server.port, timeout=5.0)
    try:
        for i, part in enumerate(parts):
            if i:
                time.sleep(0.2)  # its own read on the server
            conn.sock.sendall(part)
        reply = b""
        while True:
            chunk = conn.sock.recv(65536)
            if not chunk:
                return reply, True
            reply += chunk
    except TimeoutError:
        return reply, False
    finally:
        conn.sock.close()


def _seen(server: PeerServer) -> str:
    return server.fetch("GET", "/seen").body.decode()


@pytest.mark.parametrize("name", ["asgi-surge", "asgi-uvicorn", "wsgi-surge", "wsgi-gunicorn"])
@pytest.mark.parametrize("split", [False, True], ids=["one-read", "two-reads"])
@pytest.mark.parametrize("body", list(BROKEN))
def test_broken_chunked_body_never_reaches_the_app_complete(
    servers: dict[str, PeerServer], name: str, split: bool, body: str
) -> None:
    server = servers[name]
    _seen(server)  # start from an empty record
    head_and_first = HEAD + BROKEN[body][:8]
    parts = [head_and_first, BROKEN[body][8:]] if split else [HEAD + BROKEN[body]]
    reply, closed = _exchange(server, parts)
    assert closed, (name, reply)
    assert not reply.startswith(b"HTTP/1.1 200"), (name, reply)
    time.sleep(0.2)  # the app records after the server's answer
    assert "complete" not in _seen(server), name
    server.check_health()


@pytest.mark.parametrize("name", ["asgi-surge", "asgi-uvicorn", "wsgi-surge", "wsgi-gunicorn"])
def test_good_chunked_body_reaches_the_app_whole(servers: dict[str, PeerServer], name: str) -> None:
    # The same request framed well: the check above is not met by refusing all.
    server = servers[name]
    _seen(server)
    conn = RawConnection(server.port, timeout=5.0)
    try:
        conn.send(HEAD + b"3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n")
        resp = conn.read_response()
    finally:
        conn.sock.close()
    assert (resp.status, resp.body) == (200, b"abcde")
    assert _seen(server) == "[\"complete b'abcde'\"]"


@pytest.mark.parametrize("name", ["asgi-surge", "wsgi-surge"])
def test_declared_body_over_the_limit_is_413_without_the_app(
    servers: dict[str, PeerServer], name: str
) -> None:
    # uvicorn and gunicorn have no body limit; surge's (1 MiB by default,
    # --max-body) answers a larger declared body itself. The app once got the
    # request with its body cut at once, and answered 400 or 500 its own way.
    server = servers[name]
    _seen(server)
    head = b"POST /upload HTTP/1.1\r\nhost: x\r\ncontent-length: %d\r\n\r\n" % (2 << 20)
    reply, closed = _exchange(server, [head + b"x" * 1000])
    assert closed
    assert reply.startswith(b"HTTP/1.1 413 "), reply
    time.sleep(0.2)
    assert _seen(server) == "[]", name
    server.check_health()
