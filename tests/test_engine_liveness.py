"""The engine under the faults that used to lose callers, with tiny hostile servers
and a real Redis: a peer that accepts and resets at once, a peer that goes silent
(found dead by the liveness check with no timeout set), a busy but live server
(not found dead), TCP keepalive set on every connection, and per-request timeouts
that keep nothing once their request is done."""

from __future__ import annotations

import asyncio
import gc
import socket
import struct
import threading
import time
from collections.abc import Iterator

import pytest
import surge.http
import surge.redis
from surge import services
from surge.engine import (
    DEFAULT_LIVENESS_INTERVAL,
    DEFAULT_LIVENESS_TIMEOUT,
    TCP_KEEPALIVE_IDLE,
    Liveness,
    PipelinedConnection,
)
from surge.errors import (
    ConnectError,
    ConnectionDeadError,
    ConnectionLostError,
    RequestTimeoutError,
    SurgeConnectionError,
)

from tests.test_engine import RespCodec

pytestmark = pytest.mark.timeout(90)


@pytest.fixture(scope="module")
def redis_svc():
    with services.redis() as svc:
        yield svc


class RawServer:
    """A listening socket served by a thread: ``reset`` accepts and resets each
    connection at once (a load balancer whose backend is down); ``silent`` accepts,
    reads and never answers nor closes (a blackhole)."""

    def __init__(self, mode: str) -> None:
        self.mode = mode
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.accepted = 0
        self._held: list[socket.socket] = []
        self._stop = False
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        self.sock.settimeout(0.1)
        while not self._stop:
            try:
                c, _ = self.sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            self.accepted += 1
            if self.mode == "reset":
                c.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                c.close()
            else:
                self._held.append(c)  # the kernel takes what is sent; nobody reads

    def close(self) -> None:
        self._stop = True
        self.sock.close()
        self._thread.join()
        for c in self._held:
            c.close()


@pytest.fixture
def reset_server() -> Iterator[RawServer]:
    s = RawServer("reset")
    yield s
    s.close()


@pytest.fixture
def silent_server() -> Iterator[RawServer]:
    s = RawServer("silent")
    yield s
    s.close()


def test_accept_then_reset_fails_the_request_not_hangs(reset_server, arun):
    async def main():
        codec = RespCodec()
        conn = PipelinedConnection("127.0.0.1", reset_server.port, codec, connect_timeout=1.0)
        t0 = time.monotonic()
        with pytest.raises((ConnectError, ConnectionLostError)):
            await conn.request(codec.command, "PING", timeout=None)
        # Refused-like faults are retried within the connect timeout, then fail.
        assert time.monotonic() - t0 < 2.5
        assert reset_server.accepted >= 1
        await conn.close()

    arun(main())


def test_accept_then_reset_redis_and_http_client(reset_server, arun):
    async def main():
        r = surge.redis.connect(f"redis://127.0.0.1:{reset_server.port}", connect_timeout=1.0)
        t0 = time.monotonic()
        with pytest.raises(SurgeConnectionError) as e:
            await r.ping()
        assert not isinstance(e.value, TimeoutError)
        assert time.monotonic() - t0 < 2.5
        await r.close()
        async with surge.http.Client(timeout=None) as client:
            t0 = time.monotonic()
            with pytest.raises(SurgeConnectionError) as e:
                await client.get(f"http://127.0.0.1:{reset_server.port}/")
            assert not isinstance(e.value, TimeoutError)
            assert time.monotonic() - t0 < 2.5

    arun(main())


def test_silent_peer_found_dead_without_any_timeout(silent_server, arun):
    interval, timeout = 0.4, 0.3

    async def main():
        codec = RespCodec()
        live = Liveness(interval, timeout, ping=lambda: codec.command("PING"), probe=b"PING\r\n")
        conn = PipelinedConnection("127.0.0.1", silent_server.port, codec, liveness=live)
        t0 = time.monotonic()
        calls = [
            asyncio.ensure_future(conn.request(codec.command, "GET", f"k{i}")) for i in range(200)
        ]
        res = await asyncio.gather(*calls, return_exceptions=True)
        took = time.monotonic() - t0
        assert all(isinstance(x, ConnectionDeadError) for x in res), res[:3]
        assert "dead" in str(res[0])
        # Not before the interval; within interval + 2 x timeout (+ slack for a busy VM).
        assert interval <= took < live.bound() + 1.5
        assert conn.stats["dead"] == 1
        # The ping went out, then a probe on a new connection (also unanswered).
        assert silent_server.accepted >= 2
        await conn.close()

    arun(main())


def test_busy_server_is_not_found_dead(redis_svc, arun):
    """A blocking command holds the in-band PING behind it; the probe on a new
    connection is answered, so the connection is busy, not dead."""

    async def main():
        r = surge.redis.connect(
            f"redis://{redis_svc.host}:{redis_svc.port}/1",
            liveness_interval=0.3,
            liveness_timeout=0.3,
        )
        t0 = time.monotonic()
        assert await r.execute_command("BLPOP", "surge-liveness-nothing", 2) is None
        assert time.monotonic() - t0 >= 1.9
        assert r.engine.stats["dead"] == 0
        assert r.engine.stats["lost"] == 0
        assert await r.ping() is True
        await r.close()

    arun(main())


def test_tcp_keepalive_is_on_by_default(redis_svc, arun):
    async def main():
        r = surge.redis.connect(f"redis://{redis_svc.host}:{redis_svc.port}")
        await r.ping()
        sock = r.engine._transport.get_extra_info("socket")
        assert sock.getsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE) == 1
        assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPIDLE) == TCP_KEEPALIVE_IDLE
        assert r.engine.liveness is not None
        assert r.engine.liveness.interval == DEFAULT_LIVENESS_INTERVAL
        assert r.engine.liveness.bound() <= 30
        await r.close()
        off = surge.redis.connect(
            f"redis://{redis_svc.host}:{redis_svc.port}",
            tcp_keepalive=False,
            liveness_interval=None,
        )
        await off.ping()
        sock = off.engine._transport.get_extra_info("socket")
        assert sock.getsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE) == 0
        assert off.engine.liveness is None
        await off.close()

    arun(main())


def test_bad_liveness_settings_raise():
    with pytest.raises(ValueError):
        surge.redis.connect("redis://127.0.0.1:1", liveness_interval=0)
    with pytest.raises(ValueError):
        surge.http.Client(liveness_timeout=-1)
    assert DEFAULT_LIVENESS_INTERVAL + 2 * DEFAULT_LIVENESS_TIMEOUT <= 30


def test_request_timeouts_keep_nothing_once_done(redis_svc, arun):
    """A 60 s timeout on every request: what the engine keeps follows the requests
    in flight, not the timeout's length (it used to keep ~120 bytes per request
    until its deadline)."""

    async def main():
        r = surge.redis.connect(f"redis://{redis_svc.host}:{redis_svc.port}/2", request_timeout=60)
        await r.set("k", "v")
        engine = r.engine
        peak = 0

        async def worker(n: int) -> None:
            nonlocal peak
            for _ in range(n):
                assert await r.get("k") == b"v"
                peak = max(peak, len(engine._deadlines))

        await asyncio.gather(*(worker(400) for _ in range(500)))  # 200k requests
        # Bounded by twice the requests in flight (500) plus the rebuild slack.
        assert peak <= 2 * 500 + 64 + 1
        assert len(engine._deadline_of) == 0
        gc.collect()
        await r.close()

    arun(main(), timeout=60)


def test_timed_out_requests_still_expire_after_heap_rebuilds(redis_svc, arun):
    async def main():
        r = surge.redis.connect(f"redis://{redis_svc.host}:{redis_svc.port}/3", request_timeout=30)
        for _ in range(20):  # finished requests: their deadlines are dropped, the heap rebuilt
            await asyncio.gather(*(r.ping() for _ in range(200)))
        assert len(r.engine._deadlines) <= 2 * 200 + 64 + 1
        t0 = time.monotonic()
        with pytest.raises(RequestTimeoutError):
            await r.engine.request(r._command, "BLPOP", "surge-nothing", "2", timeout=0.3)
        assert 0.25 <= time.monotonic() - t0 < 1.5
        await r.close()

    arun(main())


def test_defaults_documented_bound():
    assert DEFAULT_LIVENESS_TIMEOUT > 0
    assert Liveness().bound() == DEFAULT_LIVENESS_INTERVAL + 2 * DEFAULT_LIVENESS_TIMEOUT
