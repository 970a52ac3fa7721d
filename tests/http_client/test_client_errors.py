"""surge.http.Client against scripted raw servers: malformed, truncated, slow and
missing replies, refused and hanging connects, the pool limit, keep-alive
races and cancellation. Every wait is bounded; nothing may hang."""

from __future__ import annotations

import asyncio
import socket
import time

import pytest
from client_servers import RawServer, read_request, refused_port
from surge._core import HttpResponseParser
from surge.errors import ConnectError, ConnectionLostError
from surge.http import Client, ClientLimits, Timeout
from surge.http.client.errors import (
    ConnectTimeout,
    PoolTimeout,
    ReadTimeout,
    RemoteProtocolError,
)

pytestmark = pytest.mark.timeout(20)

OK = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"


def replying(*replies: bytes, close: bool = False, delay: float = 0.0):
    """A handler answering successive requests with `replies`, then closing."""

    async def handler(reader, writer):
        for reply in replies:
            await read_request(reader)
            if delay:
                await asyncio.sleep(delay)
            writer.write(reply)
            await writer.drain()
        if close:
            return
        await reader.read()  # hold the connection until the client closes it

    return handler


async def silent(reader, writer):
    await read_request(reader)
    await asyncio.sleep(30)


def test_malformed_reply(run):
    async def main():
        bad_header = b"HTTP/1.1 200 OK\r\nBad Header\r\n\r\n"
        async with RawServer(replying(bad_header)) as s, Client() as c:
            with pytest.raises(RemoteProtocolError, match="malformed header"):
                await c.get(s.url)
        async with RawServer(replying(b"SSH-2.0-OpenSSH_9\r\n")) as s, Client() as c:
            with pytest.raises(RemoteProtocolError, match="status line"):
                await c.get(s.url)
        both = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n"
        async with RawServer(replying(both)) as s, Client() as c:
            with pytest.raises(RemoteProtocolError, match="both Content-Length"):
                await c.get(s.url)

    run(main())


def test_truncated_and_missing_replies(run):
    async def main():
        cut = b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nhalf"
        async with RawServer(replying(cut, close=True)) as s, Client() as c:
            with pytest.raises(RemoteProtocolError, match="before the end"):
                await c.get(s.url)
        half_head = b"HTTP/1.1 200 OK\r\nContent-"
        async with RawServer(replying(half_head, close=True)) as s, Client() as c:
            with pytest.raises(RemoteProtocolError, match="middle of a response head"):
                await c.get(s.url)

        async def hang_up(reader, writer):
            await read_request(reader)

        async with RawServer(hang_up) as s, Client() as c:
            with pytest.raises(ConnectionLostError):
                await c.get(s.url)

    run(main())


def test_framings_from_a_raw_server(run):
    async def main():
        chunked = (
            b"HTTP/1.1 100 Continue\r\n\r\n"
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
            b"3\r\nabc\r\n2;ext=1\r\nde\r\n0\r\nTrailer: x\r\n\r\n"
        )
        until_close = b"HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\n\r\nto the end"
        async with RawServer(replying(chunked, until_close, close=True)) as s, Client() as c:
            r = await c.get(s.url)
            assert r.content == b"abcde"
            r = await c.get(s.url)
            assert r.text == "to the end"
            assert s.connections == 1

    run(main())


def test_connection_close_retires_the_connection(run):
    async def main():
        closing = b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok"
        async with RawServer(replying(closing, close=True)) as s, Client() as c:
            for _ in range(3):
                assert (await c.get(s.url)).text == "ok"
            assert s.connections == 3

    run(main())


def test_stale_keep_alive_is_retried_once(run):
    async def main():
        # The server answers one request per connection but says nothing of
        # closing: the next GET finds the connection gone and is retried.
        async with RawServer(replying(OK, close=True)) as s, Client() as c:
            assert (await c.get(s.url)).text == "ok"
            await asyncio.sleep(0.05)
            assert (await c.get(s.url)).text == "ok"
            assert s.connections == 2

    run(main())


def test_refused_connect_fails_at_once(run):
    async def main():
        async with Client(timeout=5) as c:
            t0 = time.monotonic()
            with pytest.raises(ConnectError) as info:
                await c.get(f"http://127.0.0.1:{refused_port()}/")
            assert not isinstance(info.value, ConnectTimeout)
            assert time.monotonic() - t0 < 1.0

    run(main())


def test_connect_timeout(run):
    async def main():
        # A listener with a full backlog that never accepts: SYNs go unanswered.
        lsock = socket.socket()
        lsock.bind(("127.0.0.1", 0))
        lsock.listen(0)
        port = lsock.getsockname()[1]
        fillers = []
        for _ in range(4):
            f = socket.socket()
            f.setblocking(False)
            f.connect_ex(("127.0.0.1", port))
            fillers.append(f)
        await asyncio.sleep(0.05)
        try:
            async with Client(timeout=Timeout(connect=0.3, read=5)) as c:
                t0 = time.monotonic()
                with pytest.raises(ConnectTimeout):
                    await c.get(f"http://127.0.0.1:{port}/")
                assert time.monotonic() - t0 < 2.0
        finally:
            for f in fillers:
                f.close()
            lsock.close()

    run(main())


def test_slow_name_resolution_is_within_the_connect_timeout(run):
    if run.kind == "uvloop":
        pytest.skip("uvloop resolves names in C; the hook below is asyncio's")

    async def main():
        loop = asyncio.get_running_loop()

        async def slow_getaddrinfo(*args, **kwargs):
            await asyncio.sleep(10)

        loop.getaddrinfo = slow_getaddrinfo  # type: ignore[method-assign]
        async with Client(timeout=Timeout(connect=0.2)) as c:
            t0 = time.monotonic()
            with pytest.raises(ConnectTimeout):
                await c.get("http://slow.invalid/")
            assert time.monotonic() - t0 < 1.5

    run(main())


def test_read_timeout_then_the_client_carries_on(run):
    async def main():
        async with (
            RawServer(silent) as bad,
            RawServer(replying(OK)) as good,
            Client(timeout=Timeout(read=0.2)) as c,
        ):
            t0 = time.monotonic()
            with pytest.raises(ReadTimeout):
                await c.get(bad.url)
            assert time.monotonic() - t0 < 1.5
            # The next request is answered (with room for a loaded machine: the
            # client's own 0.2 s read bound is what was proven above).
            assert (await c.get(good.url, timeout=Timeout(read=10))).text == "ok"
            # The timed-out connection was retired, not reused.
            assert bad.connections == 1
            assert len(c._pools.get(("http", "127.0.0.1", bad.port)).conns) == 0

    run(main())


def test_total_timeout_bounds_a_dripping_server(run):
    async def main():
        async def drip(reader, writer):
            await read_request(reader)
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n")
            for _ in range(100):
                writer.write(b"x")
                await writer.drain()
                await asyncio.sleep(0.05)

        async with RawServer(drip) as s, Client(timeout=Timeout(read=5, total=0.3)) as c:
            t0 = time.monotonic()
            with pytest.raises(ReadTimeout, match="total"):
                await c.get(s.url)
            assert time.monotonic() - t0 < 1.5

    run(main())


def test_streamed_body_read_timeout_and_cut(run):
    async def main():
        async def stall(reader, writer):
            await read_request(reader)
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc")
            await asyncio.sleep(30)

        async with (
            RawServer(stall) as s,
            Client(timeout=Timeout(read=0.2)) as c,
            c.stream("GET", s.url) as r,
        ):
            got = []
            with pytest.raises(ReadTimeout):
                async for chunk in r.aiter_bytes():
                    got.append(chunk)
            assert got == [b"abc"]

        cut = b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc"
        async with (
            RawServer(replying(cut, close=True)) as s,
            Client() as c,
            c.stream("GET", s.url) as r,
        ):
            with pytest.raises(RemoteProtocolError, match="before the end"):
                await r.read()

    run(main())


def test_pool_timeout(run):
    async def main():
        limits = ClientLimits(max_connections_per_host=1)
        async with (
            RawServer(silent) as s,
            Client(timeout=Timeout(read=2, pool=0.2), limits=limits) as c,
        ):
            first = asyncio.ensure_future(c.get(s.url))
            await asyncio.sleep(0.05)
            with pytest.raises(PoolTimeout):
                await c.get(s.url)
            first.cancel()
            with pytest.raises(asyncio.CancelledError):
                await first

    run(main())


def test_cancelled_request_leaves_the_pool_usable(run):
    async def main():
        limits = ClientLimits(max_connections_per_host=1)
        async with RawServer(replying(OK, OK, delay=0.3)) as s, Client(limits=limits) as c:
            task = asyncio.ensure_future(c.get(s.url))
            await asyncio.sleep(0.05)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            # The cancelled request's reply must not be taken for the next one's.
            assert (await c.get(s.url)).text == "ok"
            assert s.connections == 2

    run(main())


def test_pipelined_timeout_keeps_the_stream_in_step(run):
    async def main():
        replies = [f"HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\n{i}".encode() for i in range(3)]

        async def slow_first(reader, writer):
            for i, reply in enumerate(replies):
                await read_request(reader)
                if i == 0:
                    await asyncio.sleep(0.3)
                writer.write(reply)
            await reader.read()

        async with RawServer(slow_first) as s, Client(pipelining=True) as c:
            with pytest.raises(ReadTimeout):
                await c.get(s.url, timeout=Timeout(read=0.1))
            assert (await c.get(s.url)).text == "1"
            assert (await c.get(s.url)).text == "2"
            assert s.connections == 1

    run(main())


def test_response_parser_for_load_generators(run):
    async def main():
        replies = [OK, b"HTTP/1.1 503 Busy\r\nContent-Length: 0\r\n\r\n", OK]
        async with RawServer(replying(*replies)) as s:
            reader, writer = await asyncio.open_connection("127.0.0.1", s.port)
            writer.write(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n" * 3)
            parser = HttpResponseParser()
            statuses: list[int] = []
            while len(statuses) < 3:
                statuses += parser.feed_statuses(await reader.read(65536))
            assert statuses == [200, 503, 200]
            assert (parser.responses, parser.body_bytes) == (3, 4)
            writer.close()

    run(main())
