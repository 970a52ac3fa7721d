"""The opening handshake on surge's App: accepted, refused, denied, and the HTTP
connection's hand-over (pipelined requests first, bytes after the head kept)."""

from __future__ import annotations

import base64
import hashlib
import json
import socket
import time

import pytest
from websockets.exceptions import ConnectionClosed, InvalidStatus
from websockets.sync.client import connect
from wsraw import KEY, TEXT, RawWebSocket, frame, handshake_request

GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"


def raw_exchange(port: int, request: bytes) -> bytes:
    """Sends `request`, reads until the server closes."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(request)
        out = b""
        while chunk := s.recv(65536):
            out += chunk
    return out


def test_accept_key_and_echo(server):
    ws = RawWebSocket(server.port)
    assert ws.status == 101
    expected = base64.b64encode(hashlib.sha1((KEY + GUID).encode()).digest()).decode()
    assert ws.header("Sec-WebSocket-Accept") == expected
    assert ws.header("Upgrade").lower() == "websocket"
    ws.send(frame(TEXT, "héllo".encode()))
    assert ws.recv_message() == (TEXT, "héllo".encode())
    ws.close()


@pytest.mark.parametrize(
    ("headers", "status", "expect"),
    [
        ("Sec-WebSocket-Version: 8\r\n", 426, b"Sec-WebSocket-Version: 13"),
        ("", 400, b"Sec-WebSocket-Key"),
        ("Sec-WebSocket-Key: tooshort\r\n", 400, b"invalid Sec-WebSocket-Key"),
    ],
)
def test_bad_handshakes_are_refused(server, headers, status, expect):
    version = "" if "Version" in headers else "Sec-WebSocket-Version: 13\r\n"
    key = "" if "Key" in headers or status == 400 else f"Sec-WebSocket-Key: {KEY}\r\n"
    request = (
        "GET /echo HTTP/1.1\r\nHost: t\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        f"{version}{key}{headers}\r\n"
    ).encode()
    out = raw_exchange(server.port, request)
    assert out.startswith(f"HTTP/1.1 {status} ".encode()), out
    assert expect in out


def test_no_connection_upgrade_is_400(server):
    request = handshake_request().replace(b"Connection: Upgrade", b"Connection: keep-alive")
    assert raw_exchange(server.port, request).startswith(b"HTTP/1.1 400 ")


def test_plain_get_on_websocket_route_is_426(server):
    out = raw_exchange(server.port, b"GET /echo HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
    assert out.startswith(b"HTTP/1.1 426 ")
    assert b"upgrade: websocket" in out.lower()


def test_unknown_path_is_404(server):
    assert raw_exchange(server.port, handshake_request("/nope")).startswith(b"HTTP/1.1 404 ")


def test_close_before_accept_is_403(server):
    with pytest.raises(InvalidStatus) as info:
        connect(f"ws://127.0.0.1:{server.port}/deny")
    assert info.value.response.status_code == 403


def test_deny_with_a_response(server):
    out = raw_exchange(server.port, handshake_request("/deny-response"))
    assert out.startswith(b"HTTP/1.1 401 ")
    assert b"x-why: token" in out.lower()
    assert out.endswith(b"no token\n")


def test_handler_failing_before_accept_is_500(server):
    assert raw_exchange(server.port, handshake_request("/fail-before")).startswith(b"HTTP/1.1 500 ")


def test_subprotocol_params_query_headers(server):
    with connect(
        f"ws://127.0.0.1:{server.port}/params/42?q=x",
        additional_headers={"X-Test": "t1"},
    ) as c:
        assert c.response.headers["x-accepted"] == "yes"
        data = json.loads(c.recv())
        assert data == {"name": 42, "path_params": {"name": 42}, "q": "x", "h": "t1"}
        with pytest.raises(ConnectionClosed):
            c.recv()
        assert c.close_code == 4000
        assert c.close_reason == "bye"
    with connect(f"ws://127.0.0.1:{server.port}/echo", subprotocols=["x", "chat"]) as c:
        assert c.subprotocol == "chat"


def test_pipelined_requests_before_the_upgrade_and_frames_in_the_same_write(server):
    # Two plain requests, the upgrade, and a first frame in ONE write: the two
    # responses come first, in order, then the 101, then the echo of the frame.
    data = (
        b"GET / HTTP/1.1\r\nHost: t\r\n\r\n" * 2
        + handshake_request("/echo")
        + frame(TEXT, b"early frame")
    )
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as s:
        s.sendall(data)
        buf = b""
        while buf.count(b"early frame") < 1:
            chunk = s.recv(65536)
            assert chunk, buf
            buf += chunk
    first = buf.index(b"HTTP/1.1 200")
    second = buf.index(b"HTTP/1.1 200", first + 1)
    switching = buf.index(b"HTTP/1.1 101")
    assert first < second < switching < buf.index(b"early frame")
    assert buf.count(b"index") == 2


def test_frames_before_accept_are_held_and_decoded(server):
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as s:
        s.sendall(handshake_request("/slow-accept") + frame(TEXT, b"first"))
        time.sleep(0.05)  # the app is still deciding: these arrive before the 101
        s.sendall(frame(TEXT, b"second") + frame(TEXT, b"x" * 100_000))
        buf = b""
        while buf.count(b"x" * 100_000) < 1:
            chunk = s.recv(1 << 20)
            assert chunk, buf[:200]
            buf += chunk
    assert buf.startswith(b"HTTP/1.1 101 ")
    assert buf.index(b"first") < buf.index(b"second") < buf.index(b"x" * 100_000)
