"""`--proxy-headers`: the client, scheme and host behind a trusted proxy.

Differential: for each trust setting and set of headers, the ASGI scope surge
builds is compared with what uvicorn's `ProxyHeadersMiddleware` makes of the
same scope (same peer address and port, same headers); surge's own App and a
WSGI app served by surge must agree with it. RFC 7239 `Forwarded`, which
uvicorn does not read, is checked against a table.
"""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import Callable
from typing import Any

import pytest
from surge._core import ProxyTrust
from surge.asgi import AsgiApp
from surge.http import App
from surge.http.server import Server
from surge.wsgi import WsgiApp
from uvicorn.middleware.proxy_headers import ProxyHeadersMiddleware

pytestmark = pytest.mark.timeout(60)

TRUSTS = ["127.0.0.1", "*", "10.0.0.0/8, 127.0.0.0/8", "192.168.1.1", "127.0.0.1, 203.0.113.0/24"]

HEADERS: list[list[tuple[str, str]]] = [
    [],
    [("X-Forwarded-For", "1.2.3.4")],
    [("X-Forwarded-For", "1.2.3.4, 10.0.0.1")],
    [("X-Forwarded-For", "1.2.3.4:5678"), ("X-Forwarded-Proto", "https")],
    [("X-Forwarded-For", "[2001:db8::1]:443"), ("X-Forwarded-Proto", "http")],
    [("X-Forwarded-For", "1.1.1.1"), ("X-Forwarded-For", "2.2.2.2, 10.1.1.1")],
    [("X-Forwarded-Proto", "https, http")],
    [("X-Forwarded-For", "")],
    [("X-Forwarded-For", "10.0.0.2, 10.0.0.3")],
    [("X-Forwarded-For", "unknown, 203.0.113.9, 10.0.0.7")],
    [("X-Forwarded-For", "2001:db8::7")],
]


async def _asgi_echo(scope: dict[str, Any], receive: Any, send: Any) -> None:
    body = json.dumps(
        {"client": scope["client"], "scheme": scope["scheme"], "server": scope["server"]}
    ).encode()
    headers = [(b"content-length", b"%d" % len(body))]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def _wsgi_echo(environ: dict[str, Any], start_response: Any) -> list[bytes]:
    body = json.dumps(
        {
            "client": [environ["REMOTE_ADDR"], int(environ["REMOTE_PORT"] or 0)],
            "scheme": environ["wsgi.url_scheme"],
            "host": environ.get("HTTP_HOST"),
        }
    ).encode()
    start_response("200 OK", [("Content-Length", str(len(body)))])
    return [body]


def _native() -> App:
    app = App()

    @app.get("/")
    def who(request: Any) -> dict[str, Any]:
        return {"client": list(request.client), "scheme": request.scheme, "host": request.host}

    return app


async def _uvicorn_view(trust: str, peer: tuple[str, int], headers: list[tuple[str, str]]):
    seen: dict[str, Any] = {}

    async def inner(scope: dict[str, Any], receive: Any, send: Any) -> None:
        seen.update(client=list(scope["client"]), scheme=scope["scheme"])

    scope = {
        "type": "http",
        "scheme": "http",
        "client": peer,
        "headers": [(k.lower().encode(), v.encode()) for k, v in headers],
    }
    await ProxyHeadersMiddleware(inner, trusted_hosts=trust)(scope, None, None)  # type: ignore[arg-type]
    return seen


async def _ask(port: int, headers: list[tuple[str, str]]) -> tuple[dict[str, Any], tuple[str, int]]:
    """One request from a socket whose local port is known; (answer, peer address)."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    peer = sock.getsockname()
    sock.setblocking(False)
    await asyncio.get_running_loop().sock_connect(sock, ("127.0.0.1", port))
    reader, writer = await asyncio.open_connection(sock=sock)
    lines = "".join(f"{k}: {v}\r\n" for k, v in headers)
    writer.write(
        f"GET / HTTP/1.1\r\nHost: backend:8000\r\n{lines}Connection: close\r\n\r\n".encode()
    )
    data = await asyncio.wait_for(reader.read(), 5)
    writer.close()
    head, _, body = data.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200"), data
    return json.loads(body), peer


async def _serve(app: Any, trust: str) -> tuple[Server, int]:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    server = Server(app, proxy_trust=ProxyTrust(trust))
    await server.serve(sock)
    return server, sock.getsockname()[1]


@pytest.mark.parametrize("trust", TRUSTS)
def test_client_and_scheme_as_uvicorn_proxy_headers_middleware(trust: str) -> None:
    async def run() -> None:
        servers = [
            await _serve(AsgiApp(_asgi_echo), trust),
            await _serve(_native(), trust),
            await _serve(WsgiApp(_wsgi_echo), trust),
        ]
        try:
            for headers in HEADERS:
                expected = None
                for kind, (_, port) in zip(("asgi", "native", "wsgi"), servers, strict=True):
                    answer, peer = await _ask(port, headers)
                    want = await _uvicorn_view(trust, peer, headers)
                    got = {"client": answer["client"], "scheme": answer["scheme"]}
                    assert got == want, (kind, trust, headers)
                    expected = want
                assert expected is not None
        finally:
            for server, _ in servers:
                await server.shutdown(1.0)

    asyncio.run(run())


FORWARDED: list[tuple[str, list[tuple[str, str]], tuple[str, str, str]]] = [
    # (trusted peers, headers, (client host, scheme, host))
    (
        "127.0.0.1",
        [("Forwarded", "for=192.0.2.60;proto=https;host=example.com")],
        ("192.0.2.60", "https", "example.com"),
    ),
    (
        "127.0.0.1",
        [("Forwarded", 'for="[2001:db8:cafe::17]:4711";proto=http')],
        ("2001:db8:cafe::17", "http", "backend:8000"),
    ),
    # Rightmost untrusted: the element the first trusted proxy wrote wins.
    (
        "127.0.0.1, 10.0.0.0/8",
        [("Forwarded", "for=6.6.6.6;host=evil, for=192.0.2.1;proto=https;host=good, for=10.0.0.5")],
        ("192.0.2.1", "https", "good"),
    ),
    # Forwarded wins over X-Forwarded-*.
    (
        "127.0.0.1",
        [("X-Forwarded-For", "5.5.5.5"), ("Forwarded", "for=192.0.2.9")],
        ("192.0.2.9", "http", "backend:8000"),
    ),
    # An untrusted peer's headers are ignored.
    (
        "192.168.1.1",
        [("Forwarded", "for=192.0.2.60;proto=https;host=example.com")],
        ("127.0.0.1", "http", "backend:8000"),
    ),
    (
        "127.0.0.1",
        [("X-Forwarded-Host", "public.example"), ("X-Forwarded-Proto", "https")],
        ("127.0.0.1", "https", "public.example"),
    ),
    # A host that cannot be one is not believed.
    ("127.0.0.1", [("X-Forwarded-Host", "a b, c")], ("127.0.0.1", "http", "backend:8000")),
]


@pytest.mark.parametrize(("trust", "headers", "expected"), FORWARDED)
def test_forwarded_and_x_forwarded_host(
    trust: str, headers: list[tuple[str, str]], expected: tuple[str, str, str]
) -> None:
    async def run() -> None:
        native = await _serve(_native(), trust)
        wsgi = await _serve(WsgiApp(_wsgi_echo), trust)
        asgi = await _serve(AsgiApp(_asgi_echo), trust)
        try:
            answer, _ = await _ask(native[1], headers)
            assert (answer["client"][0], answer["scheme"], answer["host"]) == expected
            answer, _ = await _ask(wsgi[1], headers)
            assert (answer["client"][0], answer["scheme"], answer["host"]) == expected
            answer, _ = await _ask(asgi[1], headers)
            assert (answer["client"][0], answer["scheme"]) == expected[:2]
            if expected[2] != "backend:8000":  # the proxy reported the host
                port = 443 if expected[1] == "https" else 80
                assert answer["server"] == [expected[2], port]
            else:  # the listening socket, as uvicorn reports it
                assert answer["server"][0] == "127.0.0.1"
        finally:
            for server, _ in (native, wsgi, asgi):
                await server.shutdown(1.0)

    asyncio.run(run())


def test_without_the_option_headers_are_ignored() -> None:
    async def run() -> None:
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        sock.listen(8)
        server = Server(_native())
        await server.serve(sock)
        try:
            answer, peer = await _ask(
                sock.getsockname()[1],
                [("X-Forwarded-For", "1.2.3.4"), ("X-Forwarded-Proto", "https")],
            )
            assert answer == {"client": list(peer), "scheme": "http", "host": "backend:8000"}
        finally:
            await server.shutdown(1.0)

    asyncio.run(run())


@pytest.mark.parametrize("bad", ["10.0.0.0/33", "nonsense/8", "::1/200"])
def test_malformed_networks_are_refused(bad: str) -> None:
    with pytest.raises(ValueError, match="forwarded-allow-ips"):
        ProxyTrust(bad)


def test_trust_matches_hosts_networks_and_mapped_addresses() -> None:
    trust = ProxyTrust("10.0.0.0/8, 127.0.0.1, ::1, fd00::/8")
    check: Callable[[str], bool] = trust.trusts
    assert check("10.1.2.3") and check("127.0.0.1") and check("::ffff:127.0.0.1")
    assert check("fd12::1") and check("::1")
    assert not check("11.0.0.1") and not check("") and not check("127.0.0.2")
