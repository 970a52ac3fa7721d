"""Blocking commands run on connections of their own: they never stall the
pipelined connection, and a cancelled one never eats a later item."""

from __future__ import annotations

import asyncio
import time

import pytest
import surge.redis
from surge.errors import ClosedError, RequestTimeoutError

pytestmark = pytest.mark.timeout(60)


def test_blpop_does_not_stall_get_set(url, arun):
    r = surge.redis.connect(url)

    async def main():
        await r.flushdb()
        # 100 waiters, pool of 100: all of them sit in BLPOP at once.
        r2 = surge.redis.connect(url, max_blocking_connections=100)
        waiters = [asyncio.create_task(r2.blpop("q", 10)) for _ in range(100)]
        await asyncio.sleep(0.2)  # they are all blocked on the server now
        assert r2.blocking_pool.in_use == 100

        slowest = 0.0

        async def worker(i: int) -> None:
            nonlocal slowest
            for j in range(5):
                t = time.monotonic()
                await r2.set(f"k{i}", j)
                assert await r2.get(f"k{i}") == str(j).encode()
                slowest = max(slowest, time.monotonic() - t)

        await asyncio.gather(*(worker(i) for i in range(1000)))
        # Not held behind a 10 s BLPOP; half of that leaves room for a loaded
        # machine (a busy 2-core run took 2.4 s for the slowest call).
        assert slowest < 5.0, slowest
        assert not any(w.done() for w in waiters)
        await r.rpush("q", *range(100))
        got = await asyncio.gather(*waiters)
        assert sorted(int(v) for _, v in got) == list(range(100))
        assert all(k == b"q" for k, _ in got)
        await r2.close()
        await r.close()

    arun(main(), timeout=30)


def test_execute_command_blocking_goes_aside(url, arun):
    r = surge.redis.connect(url)

    async def main():
        await r.flushdb()
        t = asyncio.ensure_future(r.execute_command("BLPOP", "q", 5))
        x = asyncio.ensure_future(r.execute_command(b"xread", "block", 5000, "streams", "s", "$"))
        await asyncio.sleep(0.1)
        start = time.monotonic()
        assert await r.execute_command("PING") in (b"PONG", "PONG", True)
        assert time.monotonic() - start < 1.0
        assert r.blocking_pool.in_use == 2
        await r.rpush("q", "item")
        assert await t == [b"q", b"item"]
        await r.xadd("s", {"f": "v"})
        got = await x
        assert got[0][0] == b"s"
        await r.close()

    arun(main())


def test_cancelled_blpop_does_not_eat_the_next_item(url, arun):
    r = surge.redis.connect(url, max_blocking_connections=1)

    async def main():
        await r.flushdb()
        for _ in range(3):
            t = asyncio.create_task(r.blpop("q", 5))
            await asyncio.sleep(0.1)
            t.cancel()
            with pytest.raises(asyncio.CancelledError):
                await t
            await asyncio.sleep(0.05)  # the server sees the close
            await r.rpush("q", "item")
            # The next user of the (only) pool slot gets the item: nobody ate it.
            assert await r.blpop("q", 1) == (b"q", b"item")
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(r.brpop("q", 5), 0.2)
        await r.rpush("q", "again")
        assert await r.lpop("q") == b"again"
        await r.close()

    arun(main())


def test_pool_limit_waits_then_times_out(url, arun):
    r = surge.redis.connect(url, max_blocking_connections=2, blocking_pool_timeout=0.3)

    async def main():
        await r.flushdb()
        held = [asyncio.create_task(r.blpop("q", 3)) for _ in range(2)]
        await asyncio.sleep(0.1)
        start = time.monotonic()
        with pytest.raises(RequestTimeoutError):
            await r.blpop("q", 1)
        assert 0.25 < time.monotonic() - start < 1.5
        third = asyncio.create_task(r.blpop("q", 3))  # waits for a free slot
        await r.rpush("q", "a", "b", "c")
        got = sorted([v for _, v in await asyncio.gather(*held, third)])
        assert got == [b"a", b"b", b"c"]
        await r.close()

    arun(main())


def test_blocking_command_replies_like_redis_py(url, arun):
    redis_py = pytest.importorskip("redis.asyncio")
    r = surge.redis.connect(url)
    theirs = redis_py.Redis.from_url(url)

    async def state() -> None:
        await r.flushdb()
        await r.rpush("l", "a", "b", "c")
        await r.zadd("z", {"a": 1, "b": 2, "c": 3})

    async def main():
        for name, args in [
            ("blpop", (["l"], 1)),
            ("brpop", ("l", 1)),
            ("brpoplpush", ("l", "l2", 1)),
            ("blmove", ("l", "l2", 1, "LEFT", "RIGHT")),
            ("bzpopmin", ("z", 1)),
            ("bzpopmax", ("z", 1)),
            ("blpop", ("nothing", 0.05)),
            ("bzpopmin", ("nothing", 0.05)),
            ("wait", (0, 10)),
        ]:
            await state()
            ours = await getattr(r, name)(*args)
            await state()
            want = await getattr(theirs, name)(*args)
            assert type(ours) is type(want) and ours == want, (name, ours, want)
        await state()
        ours = await r.blmpop(1, 1, "l", direction="LEFT", count=2)
        await state()
        want = await theirs.blmpop(1, 1, "l", direction="LEFT", count=2)
        assert ours == want == [b"l", [b"a", b"b"]]
        await state()
        ours = await r.bzmpop(1, 1, ["z"], min=True)
        await state()
        want = await theirs.bzmpop(1, 1, ["z"], min=True)
        assert ours == want
        await r.close()
        await theirs.aclose()

    arun(main())


def test_close_fails_a_waiting_blocking_command(url, arun):
    r = surge.redis.connect(url)

    async def main():
        t = asyncio.create_task(r.blpop("never", 10))
        await asyncio.sleep(0.1)
        start = time.monotonic()
        await r.close()
        with pytest.raises(ClosedError):
            await t
        assert time.monotonic() - start < 2
        assert r.blocking_pool.in_use == 0

    arun(main())
