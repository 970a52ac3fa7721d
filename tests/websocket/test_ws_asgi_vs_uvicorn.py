"""The ASGI websocket scope: a Starlette/FastAPI app under `surge serve` and under
uvicorn (websockets library) must give the same messages, close codes and
denial responses."""

from __future__ import annotations

import json
import signal
import socket
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from websockets.exceptions import ConnectionClosed, InvalidStatus
from websockets.sync.client import connect
from wsraw import TEXT, RawWebSocket, frame, handshake_request

sys.path.insert(0, str(Path(__file__).parent.parent / "http"))
from peer_servers import PeerServers, surge_command

APPS = Path(__file__).parent / "apps"
TARGET = "starlette_ws:app"
KINDS = ["surge", "uvicorn"]


def command(kind: str, target: str, port: int) -> list[str]:
    if kind == "surge":
        return surge_command(target, port)
    args = [sys.executable, "-m", "uvicorn", target, "--port", str(port), "--ws", "websockets"]
    return [*args, "--loop", "uvloop", "--http", "httptools", "--no-access-log"]


@pytest.fixture(scope="module")
def peers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PeerServers]:
    servers = PeerServers(tmp_path_factory.mktemp("ws-asgi-logs"), APPS, command)
    yield servers
    servers.stop_all()


@pytest.fixture(autouse=True)
def _servers_healthy(peers: PeerServers) -> Iterator[None]:
    yield
    for server in peers.running.values():
        server.check_health()


def url(peers: PeerServers, kind: str, path: str) -> str:
    return f"ws://127.0.0.1:{peers.get(kind, TARGET).port}{path}"


def both(peers: PeerServers, scenario) -> dict[str, object]:
    """Runs `scenario(kind)` against both servers; returns their results by kind."""
    return {kind: scenario(kind) for kind in KINDS}


def test_echo_text_and_bytes_compressed(peers):
    def scenario(kind):
        out = []
        with connect(url(peers, kind, "/echo"), max_size=None) as c:
            out.append([e.name for e in c.protocol.extensions])
            for m in ["hello", b"\x00\x01\x02", "é" * 100_000, b"z" * 300_000]:
                c.send(m)
                out.append(c.recv() == m)
            c.close(3001, "client done")
        return out

    results = both(peers, scenario)
    assert results["surge"] == results["uvicorn"] == [["permessage-deflate"], *[True] * 4]


def test_server_close_code_and_reason(peers):
    def scenario(kind):
        with connect(url(peers, kind, "/close")) as c:
            with pytest.raises(ConnectionClosed):
                c.recv()
            return c.close_code, c.close_reason

    results = both(peers, scenario)
    assert results["surge"] == results["uvicorn"] == (4001, "custom reason")


def test_client_close_code_reaches_the_app(peers):
    def scenario(kind):
        with connect(url(peers, kind, "/disconnect")) as c:
            c.close(4321, "bye bye")
        deadline = time.monotonic() + 5
        while True:  # the app records it after the close handshake: poll
            with connect(url(peers, kind, "/last-disconnect")) as c:
                seen = json.loads(c.recv())
            if seen or time.monotonic() > deadline:
                return seen
            time.sleep(0.02)

    results = both(peers, scenario)
    assert results["surge"] == results["uvicorn"] == [4321, "bye bye"]


def test_close_before_accept_is_403(peers):
    def scenario(kind):
        with pytest.raises(InvalidStatus) as info:
            connect(url(peers, kind, "/deny"))
        return info.value.response.status_code

    results = both(peers, scenario)
    assert results["surge"] == results["uvicorn"] == 403


def test_denial_response_extension(peers):
    def scenario(kind):
        port = peers.get(kind, TARGET).port
        with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
            s.sendall(handshake_request("/deny-response"))
            out = b""
            while chunk := s.recv(65536):
                out += chunk
        head, _, body = out.partition(b"\r\n\r\n")
        lines = head.decode().lower().split("\r\n")
        return lines[0].split(" ")[1], "x-why: token" in lines, body

    results = both(peers, scenario)
    assert results["surge"] == results["uvicorn"] == ("401", True, b"no token")


def test_app_failing_before_accept_is_500(peers):
    def scenario(kind):
        with pytest.raises(InvalidStatus) as info:
            connect(url(peers, kind, "/fail-before"))
        return info.value.response.status_code

    results = both(peers, scenario)
    assert results["surge"] == results["uvicorn"] == 500


def test_app_failing_after_accept_is_1011(peers):
    def scenario(kind):
        with connect(url(peers, kind, "/fail-after")) as c:
            c.send("go")
            with pytest.raises(ConnectionClosed):
                c.recv()
            return c.close_code

    results = both(peers, scenario)
    # surge sends close 1011 (internal error, RFC 6455 7.4.1); uvicorn 0.54 with
    # websockets drops the TCP connection without a close frame (1006 at the client).
    assert results["surge"] == 1011
    assert results["uvicorn"] in (1006, 1011)


def test_scope(peers):
    def scenario(kind):
        with connect(
            url(peers, kind, "/scope?a=1&b=%20"),
            subprotocols=["other", "chat"],
            additional_headers={"X-Test": "yes"},
        ) as c:
            return c.subprotocol, c.response.headers.get("x-extra"), json.loads(c.recv())

    results = both(peers, scenario)
    sub, extra, scope = results["surge"]
    assert (sub, extra) == ("chat", "1")
    assert scope["spec_version"] == "2.4"
    assert scope["extensions"] == ["websocket.http.response"]
    assert scope == {**results["uvicorn"][2], "spec_version": "2.4"}
    assert results["surge"][:2] == results["uvicorn"][:2]


def test_fastapi_path_and_query(peers):
    def scenario(kind):
        with connect(url(peers, kind, "/api/items/7?q=abc")) as c:
            c.send("one")
            return json.loads(c.recv())

    results = both(peers, scenario)
    assert results["surge"] == results["uvicorn"] == {"item_id": 7, "q": "abc", "got": "one"}


@pytest.mark.parametrize("bad", [b"\xff\xfe", b"\xed\xa0\x80"])
def test_invalid_utf8_close_code(peers, bad):
    def scenario(kind):
        ws = RawWebSocket(peers.get(kind, TARGET).port, "/echo")
        ws.send(frame(TEXT, bad))
        return ws.expect_close()[0]

    results = both(peers, scenario)
    assert results["surge"] == results["uvicorn"] == 1007


def test_pipelined_request_before_upgrade_and_early_frame(peers):
    # A plain request, the upgrade and a first frame in one write: the 404 first,
    # then the 101, then the echo (surge keeps the bytes read past the head).
    def scenario(kind):
        port = peers.get(kind, TARGET).port
        data = b"GET /nothing HTTP/1.1\r\nHost: t\r\n\r\n" + handshake_request("/echo")
        with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
            s.sendall(data + frame(TEXT, b"early frame"))
            buf = b""
            while b"early frame" not in buf:
                chunk = s.recv(65536)
                if not chunk:
                    break
                buf += chunk
        marks = [buf.find(m) for m in (b"HTTP/1.1 404", b"HTTP/1.1 101", b"early frame")]
        return min(marks) >= 0 and marks == sorted(marks)

    assert scenario("surge") is True


def test_sigterm_closes_with_1001(tmp_path):
    # `surge serve` stopping (SIGTERM: graceful drain) closes open WebSockets with
    # 1001 (going away, RFC 6455 7.4.1) at once instead of waiting out the grace
    # period; uvicorn 0.54 also closes at once, with 1012 (service restart).
    def scenario(kind):
        servers = PeerServers(tmp_path / kind, APPS, command)
        (tmp_path / kind).mkdir()
        server = servers.get(kind, TARGET)
        with connect(url(servers, kind, "/echo")) as c:
            c.send("before")
            assert c.recv() == "before"
            started = time.monotonic()
            server.proc.send_signal(signal.SIGTERM)
            with pytest.raises(ConnectionClosed):
                c.recv()
            elapsed = time.monotonic() - started
        server.proc.wait(10)
        servers.stop_all()
        return c.close_code, elapsed < 3.0

    results = both(None, scenario)
    assert results["surge"] == (1001, True)
    assert results["uvicorn"] in ((1001, True), (1012, True))


@pytest.mark.parametrize("kind", KINDS)
def test_ws_command_line_options(tmp_path, kind):
    # uvicorn's option names: --ws-max-size (1009 past it), --ws-per-message-deflate.
    def with_options(k: str, target: str, port: int) -> list[str]:
        options = ["--ws-max-size", "1000", "--ws-per-message-deflate", "false"]
        return [*command(k, target, port), *options]

    servers = PeerServers(tmp_path, APPS, with_options)
    try:
        with connect(url(servers, kind, "/echo")) as c:
            assert c.protocol.extensions == []
            c.send("x" * 1000)
            assert c.recv() == "x" * 1000
            c.send("x" * 1001)
            with pytest.raises(ConnectionClosed):
                c.recv()
            assert c.close_code == 1009
    finally:
        servers.stop_all()
