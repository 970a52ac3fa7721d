"""The client under faults that used to keep memory or callers: waits for a pooled
connection leave nothing behind, and with no timeout at all a silent server is
found dead (the `OPTIONS *` probe on a new connection goes unanswered) while a slow
but live one (it answers the probe) is waited for."""

from __future__ import annotations

import asyncio
import time

import pytest
from client_servers import RawServer, read_request
from surge.errors import ConnectionDeadError
from surge.http import Client, ClientLimits, Timeout
from surge.http.client.errors import PoolTimeout

pytestmark = pytest.mark.timeout(30)

OK = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"


def test_pool_waits_leave_nothing_behind(run):
    # The /slow answer waits for the test to release it (not for a fixed time: on a
    # loaded machine the 50 pool timeouts below can take longer than any sleep).
    release: list[asyncio.Event] = []

    async def slow(reader, writer):
        while True:
            head = await read_request(reader)
            if b" /slow " in head:
                await release[0].wait()
            else:
                await asyncio.sleep(0.002)
            writer.write(OK)
            await writer.drain()

    async def main():
        release.append(asyncio.Event())
        limits = ClientLimits(max_connections_per_host=1)
        async with RawServer(slow) as s, Client(limits=limits) as c:
            # 300 requests through one connection: each but one waits for it (the last
            # ones for 300 round trips: no pool bound a loaded machine could outlast).
            queued = Timeout(5, pool=120)
            got = await asyncio.gather(*(c.get(s.url, timeout=queued) for _ in range(300)))
            assert all(r.text == "ok" for r in got)
            # Waits that time out or are cancelled leave nothing either.
            hold = asyncio.ensure_future(c.get(s.url + "/slow"))
            await asyncio.sleep(0.01)
            for _ in range(50):
                with pytest.raises(PoolTimeout):
                    await c.get(s.url, timeout=Timeout(5, pool=0.001))
            waiting = [asyncio.ensure_future(c.get(s.url)) for _ in range(50)]
            await asyncio.sleep(0.001)
            for w in waiting:
                w.cancel()
            await asyncio.gather(*waiting, return_exceptions=True)
            release[0].set()
            await hold
            assert (await c.get(s.url)).text == "ok"
            pool = next(iter(c._pools.hosts.values()))
            assert len(pool.waiters) == 0
            assert len(c._pools.waiting) == 0
            assert s.connections == 1

    run(main())


def test_silent_server_found_dead_with_no_timeout(run):
    async def silent(reader, writer):
        await reader.read()  # takes the request, never answers, never closes

    async def main():
        async with (
            RawServer(silent) as s,
            Client(timeout=None, liveness_interval=0.3, liveness_timeout=0.3) as c,
        ):
            t0 = time.monotonic()
            res = await asyncio.wait_for(
                asyncio.gather(*(c.get(s.url) for _ in range(5)), return_exceptions=True), 10
            )
            assert all(isinstance(r, ConnectionDeadError) for r in res), res
            assert 0.3 <= time.monotonic() - t0 < 0.3 + 2 * 0.3 + 1.5
            assert s.connections >= 6  # five requests, then at least one probe

    run(main())


def test_slow_live_server_is_waited_for(run):
    async def long_poll(reader, writer):
        head = await read_request(reader)
        if head.startswith(b"OPTIONS * "):
            writer.write(b"HTTP/1.1 204 No Content\r\n\r\n")
            return
        await asyncio.sleep(2.0)
        writer.write(OK)
        await writer.drain()
        await reader.read()

    async def main():
        # The probe has 1 s to be answered (the server shares this process's loop,
        # which a loaded machine can hold up for longer than 0.3 s); the answer takes
        # 2 s, so the client probes at least once before it comes.
        async with (
            RawServer(long_poll) as s,
            Client(timeout=None, liveness_interval=0.3, liveness_timeout=1.0) as c,
        ):
            r = await asyncio.wait_for(c.get(s.url), 10)
            assert r.text == "ok"
            assert s.connections >= 2  # the probe(s) came on connections of their own

    run(main())
