"""uvicorn's response-header options under uvicorn and `surge serve` side by side:
--header NAME:VALUE (repeatable), --no-server-header, --no-date-header, for ASGI
and WSGI apps and a surge `App`, on the app's responses and on the server's own
(400 malformed, 413, 404, 500 of a failing app).

Where surge differs on purpose: a header the app sets itself replaces the
server's of that name (uvicorn sends both: two Date fields, or two X-Frame-Options
values that browsers then ignore), and a --header that is not NAME:VALUE or holds
CR/LF is refused at start (uvicorn crashes with a traceback on the first, and
sends the injected line on the second).
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from peer_servers import PeerServer, own_servers, surge_command
from rawhttp import RawResponse
from surge._core import HeadDefaults, encode_response_head, wsgi_response_head
from surge.http import App, Limits

pytestmark = pytest.mark.timeout(90)

ASGI_APP = """
    async def app(scope, receive, send):
        if scope["type"] == "websocket":
            await receive()
            if scope["path"] == "/deny":
                await send({"type": "websocket.close"})
                return
            own = [(b"x-a", b"app")] if scope["path"] == "/own" else []
            await send({"type": "websocket.accept", "headers": own})
            await send({"type": "websocket.close"})
            return
        if scope["type"] != "http":
            return
        if scope["path"] == "/boom":
            raise RuntimeError("failing on purpose")
        headers = [(b"content-type", b"text/plain")]
        if scope["path"] == "/own":
            headers += [(b"server", b"app"), (b"date", b"mine"), (b"x-a", b"app")]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": b"hi"})
"""

WSGI_APP = """
    def app(environ, start_response):
        if environ["PATH_INFO"] == "/boom":
            raise RuntimeError("failing on purpose")
        headers = [("content-type", "text/plain")]
        if environ["PATH_INFO"] == "/own":
            headers += [("server", "app"), ("date", "mine"), ("x-a", "app")]
        start_response("200 OK", headers)
        return [b"hi"]
"""

SURGE_APP = """
    from surge.http import App, Response

    app = App()


    @app.get("/")
    def hello(request):
        return "hi"


    @app.get("/own")
    def own(request):
        return Response("hi", headers=[("Server", "app"), ("Date", "mine"), ("X-A", "app")])


    @app.get("/boom")
    def boom(request):
        raise RuntimeError("failing on purpose")


    @app.post("/up")
    def up(request):
        return str(len(request.body))
"""

TWO_HEADERS = ("--header", "x-a:b", "--header", "X-B: c d")
OPTIONS = [(), ("--no-server-header",), ("--no-date-header",), TWO_HEADERS]
MALFORMED = b"GET / HTTP/1.1\r\nHost: x\r\nbad header line\r\n\r\n"


@pytest.fixture
def start(tmp_path: Path) -> Iterator[Callable[..., PeerServer]]:
    """Starts `kind` ("surge" or "uvicorn") serving `target` with `options`."""
    for name, text in (("hdr_asgi", ASGI_APP), ("hdr_wsgi", WSGI_APP), ("hdr_surge", SURGE_APP)):
        (tmp_path / f"{name}.py").write_text(textwrap.dedent(text))

    def start(kind: str, target: str, *options: str) -> PeerServer:
        def command(kind: str, target: str, port: int) -> list[str]:
            if kind == "surge":
                return [*surge_command(target, port), *options]
            # uvicorn calls ASGI 3 "asgi3".
            theirs = ["asgi3" if o == "asgi" else o for o in options]
            return [sys.executable, "-m", "uvicorn", target, "--port", str(port), *theirs]

        return servers.start(kind, target, tmp_path, command)

    with own_servers(tmp_path) as servers:
        yield start


def _malformed(server: PeerServer) -> RawResponse:
    conn = server.connect()
    try:
        conn.send(MALFORMED)
        return conn.read_response("GET")
    finally:
        conn.sock.close()


def _ours(resp: RawResponse) -> dict[str, list[str]]:
    """The server-added headers of a response: which are there, with what values
    (the Server value is the server's name, so only its presence is compared)."""
    return {
        "server": ["present"] * len(resp.getall("server")),
        "date": ["present"] * len(resp.getall("date")),
        "x-a": resp.getall("x-a"),
        "x-b": resp.getall("x-b"),
    }


@pytest.mark.parametrize("interface", ["asgi", "wsgi"])
@pytest.mark.parametrize("options", OPTIONS, ids=["default", "no-server", "no-date", "headers"])
def test_headers_as_uvicorn(
    start: Callable[..., PeerServer], interface: str, options: tuple[str, ...]
) -> None:
    target = f"hdr_{interface}:app"
    extra = ("--interface", interface)
    uvicorn = start("uvicorn", target, *extra, *options)
    surge = start("surge", target, *extra, *options)
    for path in ("/", "/boom"):
        theirs, mine = uvicorn.fetch("GET", path), surge.fetch("GET", path)
        assert (mine.status, mine.body) == (theirs.status, theirs.body)
        assert _ours(mine) == _ours(theirs), (path, mine, theirs)
    # The server's own 400 for a request it cannot parse carries them too.
    theirs, mine = _malformed(uvicorn), _malformed(surge)
    assert mine.status == theirs.status == 400
    assert _ours(mine) == _ours(theirs), (mine, theirs)
    if options == TWO_HEADERS:
        # Surrounding blanks are not part of the value (uvicorn keeps one: "x-b:  c d").
        assert mine.getall("x-b") == ["c d"]
    if "--no-server-header" in options:
        assert mine.header("server") is None
    else:
        assert mine.getall("server") == ["surge"]


@pytest.mark.parametrize("interface", ["asgi", "wsgi"])
def test_a_header_the_app_sets_replaces_ours(
    start: Callable[..., PeerServer], interface: str
) -> None:
    target = f"hdr_{interface}:app"
    uvicorn = start("uvicorn", target, "--interface", interface, *TWO_HEADERS)
    surge = start("surge", target, "--interface", interface, *TWO_HEADERS)
    theirs, mine = uvicorn.fetch("GET", "/own"), surge.fetch("GET", "/own")
    # uvicorn sends its own and the app's: two Server, two Date, two X-A.
    assert theirs.getall("server") == ["uvicorn", "app"]
    assert theirs.getall("date")[1] == "mine"
    assert theirs.getall("x-a") == ["b", "app"]
    # surge sends the app's only; the headers the app did not set stay. The
    # second time the ASGI head comes from its cache (equal header list): the same.
    for resp in (mine, surge.fetch("GET", "/own")):
        assert resp.getall("server") == ["app"]
        assert resp.getall("date") == ["mine"]
        assert resp.getall("x-a") == ["app"]
        assert resp.getall("x-b") == theirs.getall("x-b")
    # And a response without them right after gets all of ours again.
    plain = surge.fetch("GET", "/")
    assert (plain.getall("server"), plain.getall("x-a")) == (["surge"], ["b"])
    assert len(plain.getall("date")) == 1


def _upgrade(server: PeerServer, path: str) -> RawResponse:
    conn = server.connect()
    try:
        conn.send(
            f"GET {path} HTTP/1.1\r\nHost: t\r\nUpgrade: websocket\r\n".encode()
            + b"Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
            + b"Sec-WebSocket-Version: 13\r\n\r\n"
        )
        return conn.read_response("HEAD")  # the head only: a 101 has no body to frame
    finally:
        conn.sock.close()


def test_websocket_handshake_as_uvicorn(start: Callable[..., PeerServer]) -> None:
    uvicorn = start("uvicorn", "hdr_asgi:app", *TWO_HEADERS)
    surge = start("surge", "hdr_asgi:app", *TWO_HEADERS)
    theirs, mine = _upgrade(uvicorn, "/"), _upgrade(surge, "/")
    assert mine.status == theirs.status == 101
    assert _ours(mine) == _ours(theirs), (mine, theirs)
    # The app's own header in its accept replaces ours (uvicorn sends both).
    assert _upgrade(uvicorn, "/own").getall("x-a") == ["b", "app"]
    assert _upgrade(surge, "/own").getall("x-a") == ["app"]
    # A denial is a response of the server's too (uvicorn's, from the websockets
    # library, leaves its own headers out).
    denied = _upgrade(surge, "/deny")
    assert (denied.status, denied.getall("server"), denied.getall("x-a")) == (403, ["surge"], ["b"])


def test_surge_app(start: Callable[..., PeerServer]) -> None:
    server = start(
        "surge", "hdr_surge:app", "--no-server-header", *TWO_HEADERS, "--max-body", "100"
    )
    for method, path, status in (("GET", "/", 200), ("GET", "/nope", 404), ("GET", "/boom", 500)):
        resp = server.fetch(method, path)
        assert resp.status == status, resp
        assert resp.header("server") is None
        assert len(resp.getall("date")) == 1
        assert (resp.getall("x-a"), resp.getall("x-b")) == (["b"], ["c d"])
    too_large = server.fetch("POST", "/up", {}, b"x" * 1000)
    assert too_large.status == 413
    assert (too_large.getall("x-a"), too_large.header("server")) == (["b"], None)
    malformed = _malformed(server)
    assert (malformed.status, malformed.getall("x-a")) == (400, ["b"])
    own = server.fetch("GET", "/own")
    assert (own.getall("server"), own.getall("date"), own.getall("x-a")) == (
        ["app"],
        ["mine"],
        ["app"],
    )
    assert own.getall("x-b") == ["c d"]


@pytest.mark.parametrize("target", ["hdr_surge:app", "hdr_asgi:app"])
def test_over_limit_concurrency_503_carries_them(
    start: Callable[..., PeerServer], target: str
) -> None:
    server = start("surge", target, "--limit-concurrency", "1", *TWO_HEADERS)
    for _ in range(100):  # until the readiness probe's connection is gone
        held = server.connect()
        held.send(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n")
        if held.read_response("GET").status == 200:
            break  # open and counted
        held.sock.close()
        time.sleep(0.02)
    try:
        busy = server.fetch("GET", "/")
        assert busy.status == 503
        assert (busy.getall("server"), busy.getall("x-a"), busy.getall("x-b")) == (
            ["surge"],
            ["b"],
            ["c d"],
        )
    finally:
        held.sock.close()


def test_surge_app_keywords(start: Callable[..., PeerServer], tmp_path: Path) -> None:
    # The same through App(...) for a program that does not use `surge serve`'s flags.
    (tmp_path / "hdr_kw.py").write_text(
        textwrap.dedent(
            """
            from surge.http import App

            app = App(date_header=False, default_headers=[("X-Frame-Options", "DENY")])


            @app.get("/")
            def hello(request):
                return "hi"
            """
        )
    )
    server = start("surge", "hdr_kw:app", "--header", "x-a:b")
    resp = server.fetch("GET", "/")
    assert resp.header("date") is None
    assert resp.getall("server") == ["surge"]
    # --header adds to the app's own default headers.
    assert (resp.getall("x-frame-options"), resp.getall("x-a")) == (["DENY"], ["b"])


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("x-a", "--header 'x-a': expected NAME:VALUE"),
        ("x-a:b\r\nx-evil: 1", "value may not contain CR, LF or NUL"),
        ("bad name:b", "invalid header name"),
        ("date:today", "the Date header is the server's"),
    ],
)
def test_invalid_header_is_refused(tmp_path: Path, value: str, message: str) -> None:
    (tmp_path / "hdr_asgi.py").write_text(textwrap.dedent(ASGI_APP))
    done = subprocess.run(
        [sys.executable, "-m", "surge", "serve", "hdr_asgi:app", "--port", "0", "--header", value],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("surge: error: --header"), done.stderr
    assert message in lines[0]


def test_head_defaults_block() -> None:
    # The encoded block itself: date first, then server, then the added headers
    # (names lowercased, blanks around values dropped); a `server` given replaces ours.
    lines = HeadDefaults(True, True, [("X-A", " b "), ("x-c", "d")]).lines()
    assert lines.startswith(b"date: ") and lines[35:37] == b"\r\n"
    assert lines[37:] == b"server: surge\r\nx-a: b\r\nx-c: d\r\n"
    assert HeadDefaults(True, False, [("Server", "mine")]).lines() == b"server: mine\r\n"
    assert HeadDefaults(False, False).lines() == b""
    for bad in [("x a", "b"), ("x", "b\r\nc: d"), ("x", "b\x00"), ("date", "x"), ("x", "\u20ac")]:
        with pytest.raises(ValueError):
            HeadDefaults(True, True, [bad])


def test_app_headers_replace_ours_in_every_encoder() -> None:
    ours = HeadDefaults(True, True, [("X-A", "b"), ("X-C", "d")])
    head = encode_response_head(200, [("x-a", "app"), ("Date", "mine")], None, 0, True, ours=ours)
    wsgi, *_ = wsgi_response_head(
        "200 OK", [("X-A", "app"), ("date", "mine")], False, False, True, ours
    )
    for data in (head, wsgi):
        lines = data.lower().split(b"\r\n")
        assert lines.count(b"x-a: app") == 1 and b"x-a: b" not in lines
        assert [line for line in lines if line.startswith(b"date:")] == [b"date: mine"]
        assert b"x-c: d" in lines and b"server: surge" in lines
    with pytest.raises(ValueError, match="limit max_body must be positive"):
        Limits(max_body=0)
    with pytest.raises(ValueError, match="CR, LF or NUL"):
        App(default_headers=[("X-A", "b\nc")])
