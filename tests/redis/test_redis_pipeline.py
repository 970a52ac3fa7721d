"""Pipelines and MULTI/EXEC transactions: one batch, one list of replies."""

from __future__ import annotations

import asyncio

import pytest
import surge.redis
from surge.redis import DataError, ExecAbortError, ResponseError, WatchError

pytestmark = pytest.mark.timeout(60)


@pytest.mark.parametrize("transaction", [True, False])
def test_pipeline_returns_converted_replies_in_order(url, arun, transaction):
    r = surge.redis.connect(url)

    async def main():
        await r.flushdb()
        async with r.pipeline(transaction=transaction) as p:
            p.set("a", 1).incr("a").get("a").hset("h", "f", "v").hgetall("h")
            p.sadd("s", "x").smembers("s").zadd("z", {"m": 2}).zscore("z", "m").ping()
            assert len(p) == 10
            got = await p.execute()
            assert len(p) == 0
        assert got == [True, 2, b"2", 1, {b"f": b"v"}, 1, {b"x"}, 1, 2.0, True]
        assert await r.pipeline().execute() == []
        await r.close()

    arun(main())


def test_transaction_is_atomic_among_other_coroutines(url, arun):
    r = surge.redis.connect(url)

    async def main():
        await r.flushdb()

        async def txn(i):
            p = r.pipeline()
            p.rpush("log", f"{i}-a").rpush("log", f"{i}-b")
            return await p.execute()

        await asyncio.gather(*(txn(i) for i in range(50)), *(r.incr("n") for _ in range(50)))
        log = await r.lrange("log", 0, -1)
        assert len(log) == 100
        for first, second in zip(log[::2], log[1::2], strict=True):
            assert first[:-1] == second[:-1] and first.endswith(b"a")
        assert await r.get("n") == b"50"
        await r.close()

    arun(main())


def test_errors_in_pipelines(url, arun):
    r = surge.redis.connect(url)

    async def main():
        await r.flushdb()
        await r.rpush("list", 1)
        # A command failing at run time: the others ran.
        p = r.pipeline()
        p.set("a", 1).incr("list").get("a")
        with pytest.raises(ResponseError, match="WRONGTYPE"):
            await p.execute()
        assert await r.get("a") == b"1"
        p = r.pipeline(transaction=False)
        p.set("b", 2).incr("list").get("b")
        res = await p.execute(raise_on_error=False)
        assert res[0] is True and res[2] == b"2"
        assert isinstance(res[1], ResponseError) and res[1].prefix == "WRONGTYPE"
        # A command refused while queueing: nothing ran, the refusal is raised.
        p = r.pipeline()
        p.set("c", 3).execute_command("SET", "only-a-key").get("c")
        with pytest.raises(ResponseError, match="wrong number of arguments") as e:
            await p.execute()
        assert not isinstance(e.value, ExecAbortError)
        assert await r.get("c") is None
        # Unencodable: DataError, nothing sent, the connection stays in sync.
        sent = r.engine.stats["requests"]
        p = r.pipeline()
        p.set("d", 1).set("e", None)
        with pytest.raises(DataError):
            await p.execute()
        assert r.engine.stats["requests"] == sent
        assert await r.get("d") is None
        assert await r.ping() is True
        await r.close()

    arun(main())


def test_watch_on_a_connection_of_its_own(url, arun):
    r = surge.redis.connect(url)
    other = surge.redis.connect(url)

    async def main():
        await r.flushdb()
        await r.set("balance", 10)

        async def spend(amount: int, meddle: bool) -> list:
            async with r.pipeline() as p:
                await p.watch("balance")
                assert p.watching
                current = int(await p.get("balance"))  # runs at once while watching
                if meddle:
                    await other.incr("balance")
                p.multi()
                p.set("balance", current - amount).get("balance")
                return await p.execute()

        assert await spend(3, meddle=False) == [True, b"7"]
        with pytest.raises(WatchError):
            await spend(3, meddle=True)
        assert await r.get("balance") == b"8"  # only the other client's INCR ran
        p = r.pipeline()
        await p.watch("balance")
        await p.unwatch()
        assert not p.watching
        await r.close()
        await other.close()

    arun(main())
