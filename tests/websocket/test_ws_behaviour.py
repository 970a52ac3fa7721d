"""Connection behaviour: a well-behaved client (the websockets library),
back-pressure, clients that vanish, keep-alive pings, server shutdown."""

from __future__ import annotations

import socket
import time

import pytest
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect
from ws_apps import events
from ws_server import LiveServer
from wsraw import BINARY, PING, PONG, TEXT, RawWebSocket, frame, handshake_request


def wait_for(predicate, timeout=5.0):
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


def rss() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS")


def test_websockets_client_with_compression(server):
    with connect(f"ws://127.0.0.1:{server.port}/echo", max_size=None) as c:
        assert [e.name for e in c.protocol.extensions] == ["permessage-deflate"]
        big = "surge " * 200_000
        for message in ["hi", b"\x00\xff" * 10, big, big.encode()]:
            c.send(message)
            assert c.recv() == message


def test_websockets_client_without_compression(server):
    with connect(f"ws://127.0.0.1:{server.port}/echo", compression=None) as c:
        assert c.protocol.extensions == []
        c.send("plain")
        assert c.recv() == "plain"


def test_send_many_batches_and_clean_close(server):
    with connect(f"ws://127.0.0.1:{server.port}/batch") as c:
        c.send("5")
        assert [c.recv() for _ in range(5)] == [f"m{i}" for i in range(5)]
        with pytest.raises(ConnectionClosed):
            c.recv()
        assert c.close_code == 1000


def test_receive_text_refuses_binary_with_1003(server):
    ws = RawWebSocket(server.port, "/text")
    ws.send(frame(TEXT, b"abc"))
    assert ws.recv_message() == (TEXT, b"ABC")
    ws.send(frame(BINARY, b"abc"))
    assert ws.expect_close()[0] == 1003


def test_send_back_pressure_bounds_memory(server):
    # The client never reads: the handler's send_bytes must block once the
    # transport is over its high-water mark, so what it managed to send (and the
    # server's memory) stays bounded instead of growing with time.
    events.pop("flood_sent", None)
    events.pop("flood_close", None)
    before = rss()
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
    s.connect(("127.0.0.1", server.port))
    s.sendall(handshake_request("/flood"))
    assert wait_for(lambda: events.get("flood_sent", 0) > 0)
    # Where it stalls: unchanged for 0.5 s. Filling the buffers can take longer
    # than a fixed sleep on a loaded machine; without back-pressure the count
    # never stalls and passes the bound within milliseconds.
    bound = 16 << 20  # kernel buffers + one high-water mark, not more
    stalled_at, deadline = -1, time.monotonic() + 15
    while events["flood_sent"] != stalled_at and events["flood_sent"] < bound:
        assert time.monotonic() < deadline, "send did not wait for the client"
        stalled_at = events["flood_sent"]
        time.sleep(0.5)
    assert events["flood_sent"] == stalled_at, "send did not wait for the client"
    assert stalled_at < bound
    assert rss() - before < 64 << 20
    s.close()
    assert wait_for(lambda: "flood_close" in events)


def test_receive_back_pressure_bounds_memory(server):
    # The app never receives: reading must pause, so the client's sends block
    # (kernel buffers fill) instead of the server queueing everything.
    before = rss()
    ws = RawWebSocket(server.port, "/deaf")
    assert ws.status == 101
    message = frame(BINARY, b"m" * (256 * 1024))
    ws.sock.settimeout(1.0)
    sent = 0
    with pytest.raises(TimeoutError):
        while sent < 512 << 20:
            ws.sock.sendall(message)
            sent += len(message)
    assert sent < 64 << 20, f"the server took {sent >> 20} MiB from a client it did not read"
    assert rss() - before < 64 << 20
    ws.close()


def test_client_vanishing_mid_message(server):
    events.pop("watch_close", None)
    ws = RawWebSocket(server.port, "/watch")
    assert ws.status == 101
    ws.send(frame(TEXT, b"whole"))
    ws.send(frame(BINARY, b"x" * 1000)[:500])  # half a frame, then gone
    ws.sock.close()
    assert wait_for(lambda: events.get("watch_close") == 1006)


def test_client_leaving_before_accept(server):
    events.pop("late_accept", None)
    s = socket.create_connection(("127.0.0.1", server.port))
    s.sendall(handshake_request("/late-accept"))
    time.sleep(0.05)
    s.close()
    assert wait_for(lambda: "late_accept" in events)
    assert events["late_accept"] == 1006


def test_keepalive_pings_and_timeout():
    srv = LiveServer(ws_ping_interval=0.2, ws_ping_timeout=0.3)
    try:
        ws = RawWebSocket(srv.port, "/hold")
        _fin, _rsv, op, payload = ws.recv_frame()
        assert op == PING
        ws.send(frame(PONG, payload))
        ws.send(frame(TEXT, b"still here"))
        while True:  # a pong kept it open: more pings, and the echo
            _fin, _rsv, op, data = ws.recv_frame()
            if op == TEXT:
                assert data == b"still here"
                break
            assert op == PING
        # Now stop answering pings: closed with 1011 after the timeout.
        started = time.monotonic()
        code, _ = ws.expect_close(answer=False)
        assert code == 1011
        assert time.monotonic() - started < 2.0
    finally:
        srv.stop()


def test_server_shutdown_closes_with_1001():
    import asyncio

    srv = LiveServer()
    try:
        with connect(f"ws://127.0.0.1:{srv.port}/hold") as c:
            c.send("before")
            assert c.recv() == "before"
            started = time.monotonic()
            done = asyncio.run_coroutine_threadsafe(srv.server.shutdown(grace=5.0), srv.loop)
            with pytest.raises(ConnectionClosed):
                c.recv()
            assert c.close_code == 1001
            done.result(5)
            # The close handshake completed: no waiting out the grace period.
            assert time.monotonic() - started < 2.0
    finally:
        srv.stop()
