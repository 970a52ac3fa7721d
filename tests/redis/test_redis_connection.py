"""One connection shared by many coroutines: answers matched in order, batched
writes, cancellation and timeouts that keep the stream in sync, a server killed
mid-flight and restarted."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import time

import pytest
import surge.redis
from surge import services
from surge.errors import (
    ClosedError,
    ConnectError,
    ConnectionLostError,
    ProtocolError,
    RequestTimeoutError,
)

pytestmark = pytest.mark.timeout(60)


def test_1000_coroutines_get_their_own_answers(url, arun):
    r = surge.redis.connect(url)

    async def main():
        await r.flushdb()

        async def worker(i: int) -> tuple:
            await r.set(f"k{i}", i)
            got = await r.get(f"k{i}")
            n = await r.incr(f"n{i % 7}")
            return got, n

        writes = r.engine.stats["writes"]
        res = await asyncio.gather(*(worker(i) for i in range(1000)))
        assert [g for g, _ in res] == [str(i).encode() for i in range(1000)]
        assert sorted(n for _, n in res)[-1] <= 143
        # Three rounds of 1000 commands leave in a handful of writes, not thousands.
        assert r.engine.stats["writes"] - writes <= 30
        assert r.engine.stats["connects"] == 1
        await r.close()

    arun(main())


def test_cancelled_and_timed_out_requests_keep_the_stream_in_sync(url, arun):
    r = surge.redis.connect(url)

    async def main():
        await r.flushdb()
        await r.set("k", "v")
        t = asyncio.ensure_future(r.execute_command("ECHO", "cancelled"))
        await asyncio.sleep(0)
        t.cancel()
        slow = asyncio.ensure_future(r.execute_command("BLPOP", "nothing", "0.3"))
        await asyncio.sleep(0.01)
        slow.cancel()
        assert await r.get("k") == b"v"  # its answer comes after BLPOP's nil, not instead of it
        with pytest.raises(RequestTimeoutError):
            await r.engine.request(r._codec.command, "BLPOP", "nothing", "0.2", timeout=0.05)
        assert await r.echo("next") == b"next"
        timed = surge.redis.connect(url, request_timeout=0.05)
        with pytest.raises(RequestTimeoutError):
            await timed.execute_command("BLPOP", "nothing", "0.2")
        await asyncio.sleep(0.25)  # BLPOP's late nil arrives and is dropped
        assert await timed.ping() is True
        await timed.close()
        await r.close()
        with pytest.raises(ClosedError):
            await r.ping()

    arun(main())


def _wait_refused(port: int) -> None:
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), 0.1).close()
        except ConnectionRefusedError:
            return
        except OSError:
            pass
        time.sleep(0.01)


def test_server_killed_mid_flight_then_restarted(arun, tmp_path):
    port = services.free_port()
    svc = services.start_redis(port=port, base_dir=str(tmp_path))
    # Each BLPOP on a connection of its own (all 50 at once).
    r = surge.redis.connect(
        f"redis://127.0.0.1:{port}", connect_timeout=5, max_blocking_connections=50
    )

    async def main():
        nonlocal svc
        await r.set("k", "v")
        blocked = [
            asyncio.ensure_future(r.execute_command("BLPOP", f"q{i}", "10")) for i in range(50)
        ]
        # All 50 connected and blocked in the server before it dies (connecting
        # takes longer than a fixed sleep on a busy machine).
        deadline = time.monotonic() + 10
        while (await r.info("clients"))["blocked_clients"] < 50:
            assert time.monotonic() < deadline, "the BLPOPs never all blocked"
            await asyncio.sleep(0.02)
        t0 = time.monotonic()
        os.kill(svc.pid, signal.SIGKILL)
        res = await asyncio.gather(*blocked, return_exceptions=True)
        assert time.monotonic() - t0 < 2  # at once, not after BLPOP's 10 s
        assert all(isinstance(x, ConnectionLostError) for x in res), res[:3]
        # Down (once the dying process has closed its listening socket): a new
        # command keeps retrying within the connect timeout, then fails.
        _wait_refused(port)
        down = surge.redis.connect(f"redis://127.0.0.1:{port}", connect_timeout=0.3)
        with pytest.raises(ConnectError):
            await down.ping()
        svc = services.start_redis(port=port, base_dir=str(tmp_path))
        assert await r.ping() is True  # reconnected
        assert await r.get("k") is None  # a fresh server
        assert r.engine.stats["connects"] == 2
        await r.close()

    try:
        arun(main(), timeout=20)
    finally:
        os.kill(svc.pid, signal.SIGKILL)


def test_unknown_host_port_fails_within_the_connect_timeout(arun):
    r = surge.redis.connect(f"127.0.0.1:{services.free_port()}", connect_timeout=0.3)

    async def main():
        t0 = time.monotonic()
        with pytest.raises(ConnectError):
            await r.get("k")
        assert time.monotonic() - t0 < 2

    arun(main())


def test_a_reply_that_is_not_resp_fails_the_connection_not_the_process(arun):
    async def main():
        async def garbage(reader, writer):
            await reader.read(100)
            writer.write(b"+OK\r\n?this is not RESP\r\n")
            await writer.drain()

        server = await asyncio.start_server(garbage, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        r = surge.redis.connect(f"127.0.0.1:{port}", reconnect=False)
        res = await asyncio.gather(r.set("a", 1), r.get("a"), r.get("b"), return_exceptions=True)
        # The reply before the bad bytes stands; the one they stand for is a
        # ProtocolError; the ones behind cannot be matched and fail with the connection.
        assert res[0] is True
        assert isinstance(res[1], ProtocolError) and "type byte" in str(res[1])
        assert isinstance(res[2], ConnectionLostError)
        await r.close()
        server.close()
        await server.wait_closed()

    arun(main())
