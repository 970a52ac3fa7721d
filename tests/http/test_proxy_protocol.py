"""`--proxy-protocol`: HAProxy's PROXY protocol v1 and v2 headers (the examples and
limits of haproxy's proxy-protocol.txt), parsed whole and fed byte by byte, then
end to end: the reported client reaches the app; no header, a bad one or an
untrusted peer gets the connection closed without a response."""

from __future__ import annotations

import asyncio
import json
import socket
import struct
from typing import Any

import pytest
from surge._core import ProxyTrust
from surge.http import App
from surge.http.server import Server
from surge.serve.proxy_protocol import V2_SIGNATURE, ProxyProtocolError, parse

pytestmark = pytest.mark.timeout(30)

FFFF6 = ":".join(["ffff"] * 8)


def v2(command: int, family: int, block: bytes) -> bytes:
    return V2_SIGNATURE + bytes([0x20 | command, family]) + struct.pack("!H", len(block)) + block


def v2_tcp4(src: str, dst: str, sport: int, dport: int, tlvs: bytes = b"") -> bytes:
    block = socket.inet_aton(src) + socket.inet_aton(dst) + struct.pack("!HH", sport, dport)
    return v2(1, 0x11, block + tlvs)


def v2_tcp6(src: str, dst: str, sport: int, dport: int) -> bytes:
    block = socket.inet_pton(socket.AF_INET6, src) + socket.inet_pton(socket.AF_INET6, dst)
    return v2(1, 0x21, block + struct.pack("!HH", sport, dport))


VALID: list[tuple[bytes, tuple[str, int] | None]] = [
    (b"PROXY TCP4 192.168.0.1 192.168.0.11 56324 443\r\n", ("192.168.0.1", 56324)),
    (b"PROXY TCP4 255.255.255.255 255.255.255.255 65535 65535\r\n", ("255.255.255.255", 65535)),
    (f"PROXY TCP6 {FFFF6} {FFFF6} 65535 65535\r\n".encode(), (FFFF6, 65535)),
    (b"PROXY UNKNOWN\r\n", None),
    # The spec's longest line: 107 bytes.
    (f"PROXY UNKNOWN {FFFF6} {FFFF6} 65535 65535\r\n".encode(), None),
    (v2_tcp4("10.1.2.3", "10.0.0.1", 5555, 80), ("10.1.2.3", 5555)),
    (v2_tcp4("10.1.2.3", "10.0.0.1", 1, 80, tlvs=b"\x04\x00\x02ok"), ("10.1.2.3", 1)),
    (v2_tcp6("2001:db8::1", "2001:db8::2", 4711, 443), ("2001:db8::1", 4711)),
    (v2(0, 0x00, b""), None),  # LOCAL: a health check, the real peer stays
    (v2(1, 0x31, b"\x00" * 216), None),  # AF_UNIX: keep the real peer
]

INVALID = [
    b"GET / HTTP/1.1\r\n\r\n",
    b"PROXY TCP4 1.2.3.4 5.6.7.8 80\r\n",
    b"PROXY TCP4 ::1 ::1 1 2\r\n",
    b"PROXY TCP6 1.2.3.4 5.6.7.8 1 2\r\n",
    b"PROXY TCP4 1.2.3.4 5.6.7.8 080 80\r\n",
    b"PROXY TCP4 1.2.3.4 5.6.7.8 65536 80\r\n",
    b"PROXY TCP4 1.2.3.4 5.6.7.8 1 2 \r\n",
    b"PROXY " + b"x" * 120,
    V2_SIGNATURE + b"\x11\x11\x00\x0c" + b"\x00" * 12,  # version 1 in a v2 header
    V2_SIGNATURE + b"\x22\x11\x00\x0c" + b"\x00" * 12,  # command 2
    v2(1, 0x11, b"\x00" * 4),  # short IPv4 block
    V2_SIGNATURE + b"\x21\x11\xff\xff",  # a 64 KiB block
]


@pytest.mark.parametrize(("header", "source"), VALID)
def test_headers_parse_whole_and_byte_by_byte(header: bytes, source: Any) -> None:
    tail = b"GET / HTTP/1.1\r\n"
    assert parse(header + tail) == (source, len(header))
    for cut in range(len(header)):
        assert parse(header[:cut]) is None, cut


@pytest.mark.parametrize("header", INVALID)
def test_bad_headers_are_refused(header: bytes) -> None:
    with pytest.raises(ProxyProtocolError):
        for cut in range(1, len(header) + 1):
            parse(header[:cut])


def _app() -> App:
    app = App()

    @app.get("/who")
    def who(request: Any) -> dict[str, Any]:
        return {"client": list(request.client)}

    return app


async def _exchange(port: int, data: bytes) -> bytes:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(data)
    try:
        return await asyncio.wait_for(reader.read(), 5)
    finally:
        writer.close()


REQUEST = b"GET /who HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"


@pytest.mark.parametrize(
    ("allow", "header", "client"),
    [
        ("127.0.0.1", b"PROXY TCP4 203.0.113.7 10.0.0.1 40000 80\r\n", ["203.0.113.7", 40000]),
        ("127.0.0.1", v2_tcp6("2001:db8::9", "2001:db8::1", 1234, 80), ["2001:db8::9", 1234]),
        ("127.0.0.1", b"PROXY UNKNOWN\r\n", ["127.0.0.1"]),
        ("127.0.0.1", b"", None),  # no header: closed
        ("127.0.0.1", b"PROXY TCP4 nonsense\r\n", None),
        ("10.9.9.9", b"PROXY TCP4 203.0.113.7 10.0.0.1 40000 80\r\n", None),  # untrusted peer
    ],
)
def test_end_to_end(allow: str, header: bytes, client: list[Any] | None) -> None:
    async def run() -> bytes:
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        sock.listen(8)
        server = Server(_app(), proxy_protocol=ProxyTrust(allow))
        await server.serve(sock)
        try:
            return await _exchange(sock.getsockname()[1], header + REQUEST)
        finally:
            await server.shutdown(1.0)

    answer = asyncio.run(run())
    if client is None:
        assert answer == b""
        return
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200"), answer
    got = json.loads(body)["client"]
    assert got[: len(client)] == client


def test_the_proxy_protocol_alone_does_not_believe_forwarding_headers() -> None:
    async def run() -> bytes:
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        sock.listen(8)
        server = Server(_app(), proxy_protocol=ProxyTrust("127.0.0.1"))
        await server.serve(sock)
        header = b"PROXY TCP4 203.0.113.7 10.0.0.1 40000 80\r\n"
        request = REQUEST.replace(b"Host: x\r\n", b"Host: x\r\nX-Forwarded-For: 6.6.6.6\r\n")
        try:
            return await _exchange(sock.getsockname()[1], header + request)
        finally:
            await server.shutdown(1.0)

    body = asyncio.run(run()).partition(b"\r\n\r\n")[2]
    assert json.loads(body)["client"] == ["203.0.113.7", 40000]
