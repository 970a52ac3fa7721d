"""The same calls through redis-py and surge against one server, results compared
(RESP2 and RESP3, decode_responses off and on)."""

from __future__ import annotations

import asyncio
import datetime as dt
from typing import Any

import pytest
import surge.redis
from surge.redis import DataError

redis_py = pytest.importorskip("redis.asyncio")

pytestmark = pytest.mark.timeout(60)


@pytest.fixture(
    params=[(2, False), (2, True), (3, False), (3, True)],
    ids=["resp2-bytes", "resp2-decoded", "resp3-bytes", "resp3-decoded"],
)
def mode(request) -> tuple[int, bool]:
    return request.param


def clients(url: str, mode: tuple[int, bool]) -> tuple[Any, Any]:
    protocol, decode = mode
    ours = surge.redis.connect(url, protocol=protocol, decode_responses=decode)
    theirs = redis_py.Redis.from_url(url, protocol=protocol, decode_responses=decode)
    return ours, theirs


def same_shape(v: Any) -> Any:
    """Tuples and lists alike (surge gives pairs as tuples on RESP3 too)."""
    if isinstance(v, list | tuple):
        return [same_shape(x) for x in v]
    if isinstance(v, dict):
        return {k: same_shape(x) for k, x in v.items()}
    return v


def typed(v: Any) -> Any:
    """The value with every container's type kept (list and tuple told apart)."""
    if isinstance(v, list | tuple):
        return (type(v).__name__, [typed(x) for x in v])
    if isinstance(v, dict):
        return {k: typed(x) for k, x in v.items()}
    return (type(v).__name__, v)


def assert_same(protocol: int, a: Any, b: Any, what: Any) -> None:
    """Equal values; on RESP2 also the same types (tuples where redis-py gives tuples).
    On RESP3 surge keeps RESP2's tuples where redis-py gives lists."""
    assert same_shape(a) == same_shape(b), (what, a, b)
    if protocol == 2:
        assert typed(a) == typed(b), (what, a, b)


async def both(ours: Any, theirs: Any, method: str, *args: Any, **kwargs: Any) -> Any:
    a = await getattr(ours, method)(*args, **kwargs)
    b = await getattr(theirs, method)(*args, **kwargs)
    assert_same(ours.protocol, a, b, (method, args, kwargs))
    return a


def test_zrange_combinations(url, arun, mode):
    ours, theirs = clients(url, mode)

    async def main():
        await ours.flushdb()
        await ours.zadd("z", {"a": 1, "b": 2.5, "c": 3, "d": 3, "e": 10})
        await ours.zadd("lex", dict.fromkeys("abcdefg", 0))
        for desc in (False, True):
            for withscores in (False, True):
                await both(ours, theirs, "zrange", "z", 0, -1, desc=desc, withscores=withscores)
                for lo, hi in ((1, 3), ("(1", "+inf"), ("-inf", "(3")):
                    a, b = (hi, lo) if desc else (lo, hi)
                    kw = {"desc": desc, "withscores": withscores, "byscore": True}
                    await both(ours, theirs, "zrange", "z", a, b, **kw)
                    await both(ours, theirs, "zrange", "z", a, b, offset=1, num=2, **kw)
            lo, hi = ("[b", "(f")
            a, b = (hi, lo) if desc else (lo, hi)
            await both(ours, theirs, "zrange", "lex", a, b, desc=desc, bylex=True)
            await both(ours, theirs, "zrange", "lex", a, b, desc=desc, bylex=True, offset=1, num=2)
        with pytest.raises(DataError):
            ours.zrange("z", 0, 1, byscore=True, bylex=True)
        with pytest.raises(DataError):
            ours.zrange("z", 0, 1, byscore=True, offset=1)
        await ours.close()
        await theirs.aclose()

    arun(main())


def test_score_cast_func_sees_the_servers_score(url, arun, mode):
    ours, theirs = clients(url, mode)

    async def main():
        await ours.flushdb()
        await ours.zadd("z", {"a": 1, "b": 2.5})
        seen_ours: list[Any] = []
        seen_theirs: list[Any] = []
        a = await ours.zrange(
            "z", 0, -1, withscores=True, score_cast_func=lambda s: seen_ours.append(s) or s
        )
        b = await theirs.zrange(
            "z", 0, -1, withscores=True, score_cast_func=lambda s: seen_theirs.append(s) or s
        )
        assert seen_ours == seen_theirs
        assert same_shape(a) == same_shape(b)
        if mode[0] == 2:  # RESP2: the server's text, bytes or str as redis-py gives it
            assert seen_ours == (["1", "2.5"] if mode[1] else [b"1", b"2.5"])
        await both(ours, theirs, "zrange", "z", 0, -1, withscores=True, score_cast_func=int)
        await both(ours, theirs, "zrange", "z", 0, -1, withscores=True, score_cast_func=str)
        await ours.close()
        await theirs.aclose()

    arun(main())


def run_both(url: str, mode: tuple[int, bool], arun: Any, body: Any) -> None:
    ours, theirs = clients(url, mode)

    async def main():
        await ours.flushdb()
        try:
            await body(ours, theirs)
        finally:
            await ours.close()
            await theirs.aclose()

    arun(main())


def test_mget_of_no_keys(url, arun, mode):
    async def body(ours, theirs):
        assert await both(ours, theirs, "mget", []) == []
        pipe = ours.pipeline()
        pipe.set("k", 1).mget([]).get("k")
        assert await pipe.execute() == [True, [], "1" if mode[1] else b"1"]

    run_both(url, mode, arun, body)


def test_sismember_is_an_int(url, arun, mode):
    async def body(ours, theirs):
        await ours.sadd("s", "x")
        assert type(await both(ours, theirs, "sismember", "s", "x")) is int
        assert await both(ours, theirs, "sismember", "s", "y") == 0

    run_both(url, mode, arun, body)


def test_info_of_several_sections(url, arun, mode):
    async def body(ours, theirs):
        a = await ours.info("server", "clients")
        b = await theirs.info("server", "clients")
        assert set(a) == set(b) and "redis_version" in a and "connected_clients" in a
        assert a["redis_version"] == b["redis_version"]

    run_both(url, mode, arun, body)


def test_set_exat_pxat_datetime(url, arun, mode):
    async def body(ours, theirs):
        at = dt.datetime.now() + dt.timedelta(seconds=100)
        assert await ours.set("e", "v", exat=at) is True
        assert 95 <= await ours.ttl("e") <= 100
        assert await ours.set("p", "v", pxat=at) is True
        assert 95 <= await ours.ttl("p") <= 100
        assert 95_000 <= await theirs.pttl("p") <= 100_000

    run_both(url, mode, arun, body)


def test_memoryview_values_before_connecting_and_in_pipelines(url, arun, mode):
    async def body(ours, theirs):
        fresh = surge.redis.connect(url, protocol=mode[0], decode_responses=mode[1])
        # The very first command: not connected yet, its encoding waits in the engine.
        assert await fresh.set("first", memoryview(b"one")) is True
        pipe = fresh.pipeline()
        pipe.set("p", memoryview(b"two")).get("p")
        assert (await pipe.execute())[1] == ("two" if mode[1] else b"two")
        await fresh.close()
        assert await both(ours, theirs, "get", "first") == ("one" if mode[1] else b"one")

    run_both(url, mode, arun, body)


def test_memoryview_values(url, arun, mode):
    async def body(ours, theirs):
        assert await ours.set("mv", memoryview(b"\x00mv")) is True
        assert await ours.rpush("l", memoryview(b"a"), memoryview(bytearray(b"b"))) == 2
        assert await theirs.set("mv2", memoryview(b"\x00mv")) is True
        assert await both(ours, theirs, "lrange", "l", 0, -1)
        assert await both(ours, theirs, "get", "mv") == await ours.get("mv2")

    run_both(url, mode, arun, body)


def test_async_pubsub_handler_is_awaited(url, arun, mode):
    ours, theirs = clients(url, mode)

    async def main():
        got_ours: list[Any] = []
        got_theirs: list[Any] = []

        async def on_ours(msg):
            await asyncio.sleep(0)
            got_ours.append(msg["data"])

        async def on_theirs(msg):
            await asyncio.sleep(0)
            got_theirs.append(msg["data"])

        ps, tps = ours.pubsub(), theirs.pubsub()
        await ps.subscribe(ch=on_ours)
        await tps.subscribe(ch=on_theirs)
        for m in ("one", "two"):
            await ours.publish("ch", m)
        for _ in range(20):
            await ps.get_message(timeout=0.05)
            await tps.get_message(timeout=0.05)
            if len(got_ours) == 2 and len(got_theirs) == 2:
                break
        assert got_ours == got_theirs and len(got_ours) == 2
        await ps.close()
        await tps.aclose()
        await ours.close()
        await theirs.aclose()

    arun(main())
