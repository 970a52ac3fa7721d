"""The fault proxy itself, against a tiny echo server (plain blocking sockets, so
no event loop of the test is involved): each mode does what its docstring says,
exactly (a cut at n bytes is at n, not about n), and nothing leaks."""

from __future__ import annotations

import contextlib
import socket
import socketserver
import threading
import time
from collections.abc import Iterator

import pytest
from proxy import FaultProxy

pytestmark = pytest.mark.timeout(30)


class _Echo(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        server: EchoServer = self.server  # type: ignore[assignment]
        # A reset (the point of most tests here) ends the connection quietly.
        with self.request as sock, contextlib.suppress(OSError):
            while data := sock.recv(65536):
                server.received += len(data)
                if server.echo:
                    sock.sendall(data)


class EchoServer(socketserver.ThreadingTCPServer):
    """Echoes what it gets (or only counts it, with ``echo`` off)."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Echo)
        self.received = 0
        self.echo = True


@pytest.fixture
def echo() -> Iterator[EchoServer]:
    server = EchoServer()
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    yield server
    server.shutdown()
    server.server_close()


@pytest.fixture
def proxy(echo: EchoServer) -> Iterator[FaultProxy]:
    with FaultProxy(*echo.server_address) as p:
        yield p


def connect(proxy: FaultProxy, timeout: float = 2.0) -> socket.socket:
    return socket.create_connection((proxy.host, proxy.port), timeout=timeout)


def recv_exactly(sock: socket.socket, n: int) -> bytes:
    out = b""
    while len(out) < n:
        chunk = sock.recv(n - len(out))
        if not chunk:
            break
        out += chunk
    return out


def recv_all(sock: socket.socket) -> tuple[bytes, BaseException | None]:
    """Everything until EOF or reset, and how it ended (None for EOF)."""
    out = b""
    while True:
        try:
            chunk = sock.recv(65536)
        except OSError as exc:
            return out, exc
        if not chunk:
            return out, None
        out += chunk


def wait_for(cond, timeout: float = 3.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(0.01)
    return cond()


def test_pass_forwards_both_ways_and_counts(proxy: FaultProxy) -> None:
    with connect(proxy) as s:
        s.sendall(b"hello" * 1000)
        assert recv_exactly(s, 5000) == b"hello" * 1000
        assert proxy.open_flows == 1
    assert proxy.accepted == 1
    assert (proxy.bytes_up, proxy.bytes_down) == (5000, 5000)
    # The client's FIN reaches the server, whose close comes back: the flow ends.
    assert wait_for(lambda: proxy.open_flows == 0)


def test_latency_delays_each_chunk(proxy: FaultProxy) -> None:
    proxy.latency(0.2)
    with connect(proxy) as s:
        t0 = time.monotonic()
        s.sendall(b"x")
        assert recv_exactly(s, 1) == b"x"
        # One delay on the way up and one on the way down.
        assert time.monotonic() - t0 >= 0.38
        proxy.passthrough()
        t0 = time.monotonic()
        s.sendall(b"y")
        assert recv_exactly(s, 1) == b"y"
        assert time.monotonic() - t0 < 0.2


def test_bandwidth_throttles(proxy: FaultProxy) -> None:
    proxy.bandwidth(100_000)
    with connect(proxy, timeout=5) as s:
        t0 = time.monotonic()
        s.sendall(b"z" * 30_000)
        assert recv_exactly(s, 30_000) == b"z" * 30_000
        # 30 kB at 100 kB/s takes 0.3 s each way (the two directions overlap).
        assert time.monotonic() - t0 >= 0.28


def test_blackhole_forwards_nothing_and_closes_nothing(proxy: FaultProxy, echo: EchoServer) -> None:
    with connect(proxy) as old:
        old.sendall(b"a")
        assert recv_exactly(old, 1) == b"a"
        proxy.blackhole()
        old.settimeout(0.3)
        with connect(proxy, timeout=0.3) as new:  # new connections are accepted too
            for s in (old, new):
                s.sendall(b"lost")
                with pytest.raises(TimeoutError):
                    s.recv(1)
        assert echo.received == 1  # nothing went up either
        assert proxy.open_flows == 2
        # Leaving the blackhole resets the flows that lost bytes (they cannot resume).
        proxy.passthrough()
        old.settimeout(2)
        got, how = recv_all(old)
        assert got == b""
        assert isinstance(how, ConnectionResetError), how
    with connect(proxy) as s:
        s.sendall(b"b")
        assert recv_exactly(s, 1) == b"b"


def test_reset_on_accept(proxy: FaultProxy, echo: EchoServer) -> None:
    proxy.reset_on_accept()
    for _ in range(3):
        try:
            # The reset may land before connect() returns, or at the first send.
            with connect(proxy) as s:
                s.sendall(b"ping")
                got, how = recv_all(s)
        except ConnectionResetError as exc:
            got, how = b"", exc
        assert got == b""
        assert isinstance(how, ConnectionResetError), how
    assert proxy.accepted == 3
    assert proxy.open_flows == 0
    assert echo.received == 0


@pytest.mark.parametrize("n", [0, 1, 7, 4096, 100_000])
def test_cut_after_down_at_exactly_n(proxy: FaultProxy, n: int) -> None:
    proxy.cut_after(n, "down")
    with connect(proxy) as s:
        s.sendall(b"q" * 200_000)
        got, how = recv_all(s)
    assert len(got) == n
    assert isinstance(how, ConnectionResetError), how
    assert wait_for(lambda: proxy.open_flows == 0)


@pytest.mark.parametrize("n", [0, 1, 10, 50_000])
def test_cut_after_up_at_exactly_n(proxy: FaultProxy, echo: EchoServer, n: int) -> None:
    echo.echo = False
    proxy.cut_after(n, "up")
    with connect(proxy) as s:
        with contextlib.suppress(ConnectionResetError):  # the cut may land while we send
            s.sendall(b"u" * 100_000)
        _, how = recv_all(s)
    assert isinstance(how, ConnectionResetError), how
    assert wait_for(lambda: echo.received == n)
    time.sleep(0.05)
    assert echo.received == n


def test_cut_applies_to_new_flows_only(proxy: FaultProxy) -> None:
    with connect(proxy) as old:
        old.sendall(b"!")  # a round trip: the proxy has taken this flow in
        assert recv_exactly(old, 1) == b"!"
        proxy.cut_after(3, "down")
        old.sendall(b"0123456789")
        assert recv_exactly(old, 10) == b"0123456789"
        with connect(proxy) as new:
            new.sendall(b"0123456789")
            assert recv_all(new)[0] == b"012"


def test_half_close_sends_fin_but_keeps_reading(proxy: FaultProxy, echo: EchoServer) -> None:
    with connect(proxy) as s:
        s.sendall(b"before")
        assert recv_exactly(s, 6) == b"before"
        proxy.half_close()
        assert recv_all(s) == (b"", None)  # FIN, not a reset
        s.sendall(b"after")  # still read, and forwarded to the server
        assert wait_for(lambda: echo.received == 11)
    # The client's close goes on, the server closes too: nothing is left open.
    assert wait_for(lambda: proxy.open_flows == 0)


def test_reset_all_and_refuse(proxy: FaultProxy) -> None:
    socks = [connect(proxy) for _ in range(3)]
    for s in socks:
        s.sendall(b"1")
        assert recv_exactly(s, 1) == b"1"
    proxy.reset_all()
    for s in socks:
        assert isinstance(recv_all(s)[1], ConnectionResetError)
        s.close()
    assert proxy.open_flows == 0
    port = proxy.port
    proxy.refuse(0.5)
    with pytest.raises(ConnectionRefusedError):
        connect(proxy)
    time.sleep(0.7)
    assert proxy.port == port
    with connect(proxy) as s:
        s.sendall(b"2")
        assert recv_exactly(s, 1) == b"2"


def test_stop_closes_everything(echo: EchoServer) -> None:
    proxy = FaultProxy(*echo.server_address).start()
    s = connect(proxy)
    s.sendall(b"1")
    assert recv_exactly(s, 1) == b"1"
    proxy.stop()
    assert isinstance(recv_all(s)[1], ConnectionResetError)
    s.close()
    with pytest.raises(ConnectionRefusedError):
        connect(proxy)
    assert proxy.open_flows == 0
