"""redis-py's helpers on surge: lock(), transaction(), monitor(), get_encoder(), the
scan iterators; each checked against redis-py on the same server (the two locks
exclude each other on one key; the monitors see the same command)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
import surge.redis
from surge.redis import DataError, LockError, LockNotOwnedError

from tests.redis.test_redis_differential import clients, mode  # noqa: F401

redis_py = pytest.importorskip("redis.asyncio")
pytestmark = pytest.mark.timeout(60)


def test_lock_excludes_redis_py_s_lock_and_follows_its_rules(url, arun, mode):  # noqa: F811
    ours, theirs = clients(url, mode)

    async def main():
        mine = ours.lock("lk", timeout=5)
        assert await mine.acquire(blocking=False) is True
        assert await mine.locked() and await mine.owned()
        other = theirs.lock("lk", timeout=5)
        assert await other.acquire(blocking=False) is False  # redis-py sees it taken
        assert await other.acquire(blocking_timeout=0.2) is False
        assert await mine.extend(10) is True
        assert 9_000 < await ours.pttl("lk") <= 15_000
        assert await mine.reacquire() is True
        assert 4_000 < await ours.pttl("lk") <= 5_000
        await mine.release()
        assert await other.acquire(blocking=False) is True  # and free once released
        with pytest.raises(LockError):
            await mine.release()  # not held any more
        # Expired and taken by someone else: release and extend say it is not ours.
        short = ours.lock("lk2", timeout=0.05)
        assert await short.acquire()
        await asyncio.sleep(0.15)
        thief = theirs.lock("lk2", timeout=5)
        assert await thief.acquire(blocking=False)
        with pytest.raises(LockNotOwnedError):
            await short.extend(1)
        with pytest.raises(LockNotOwnedError):
            await short.release()
        with pytest.raises(LockError):
            await ours.lock("nt").extend(1)  # unlocked
        async with ours.lock("cm", timeout=5) as held:
            assert await held.owned()
        assert not await ours.lock("cm").locked()
        with pytest.raises(LockError):
            async with ours.lock("lk", blocking_timeout=0.1):
                pass  # redis-py's lock holds it
        await other.release()
        await thief.release()
        await ours.close()
        await theirs.aclose()

    arun(main())


def test_transaction_retries_on_a_watched_change(url, arun, mode):  # noqa: F811
    ours, theirs = clients(url, mode)

    async def main():
        await ours.set("tx", 0)
        runs = 0

        async def incr(pipe: Any) -> Any:
            nonlocal runs
            runs += 1
            value = int(await pipe.get("tx"))
            if runs == 1:
                await theirs.set("tx", 100)  # someone else writes between read and EXEC
            pipe.multi()
            pipe.set("tx", value + 1)
            return value

        result = await ours.transaction(incr, "tx")
        assert runs == 2 and result == [True]
        assert int(await ours.get("tx")) == 101
        got = await ours.transaction(incr, "tx", value_from_callable=True)
        assert got == 101
        await ours.close()
        await theirs.aclose()

    arun(main())


def test_monitor_sees_what_redis_py_s_monitor_sees(url, arun, mode):  # noqa: F811
    ours, theirs = clients(url, mode)

    async def main():
        async def next_set(mon: Any) -> dict[str, Any]:
            while True:  # skip handshakes (HELLO, SELECT) of connections opening
                cmd = await mon.next_command()
                if cmd["command"].startswith("SET mon"):
                    return cmd

        await ours.ping()
        async with ours.monitor() as m, theirs.monitor() as t:
            await ours.set("mon", 'a "quoted" value')
            a, b = await next_set(m), await next_set(t)
            for d in (a, b):
                d.pop("client_port")
                d.pop("time")
            assert a == b
            assert a["command"] == 'SET mon a "quoted" value'
        await ours.close()
        await theirs.aclose()

    arun(main())


def test_encoder_takes_and_refuses_what_redis_py_s_does(url, mode):  # noqa: F811
    ours = surge.redis.connect(url, decode_responses=mode[1])
    theirs = redis_py.Redis.from_url(url, decode_responses=mode[1])
    a, b = ours.get_encoder(), theirs.get_encoder()
    for v in (b"x", "x\u00e9", 1, -7, 1.5, memoryview(b"mv")):
        assert a.encode(v) == b.encode(v), v
    for v in (None, True, {"a": 1}, [1], object()):
        with pytest.raises(DataError):
            a.encode(v)
        with pytest.raises(Exception) as theirs_error:
            b.encode(v)
        assert type(theirs_error.value).__name__ == "DataError"
    assert a.decode(b"x") == b.decode(b"x")
    # The commands themselves refuse the same values, at the call, nothing sent.
    for v in (None, True, {"a": 1}, [1]):
        with pytest.raises(DataError):
            ours.set("enc", v)
        with pytest.raises(DataError):
            ours.hset("enc-h", "f", v)


def test_scan_iterators_yield_everything(url, arun, mode):  # noqa: F811
    ours, theirs = clients(url, mode)

    async def main():
        await ours.mset({f"it:{i}": i for i in range(300)})
        await ours.hset("ih", mapping={f"f{i}": i for i in range(300)})
        await ours.sadd("is", *range(300))
        await ours.zadd("iz", {f"m{i}": i for i in range(300)})
        a = {k async for k in ours.scan_iter(match="it:*", count=50)}
        b = {k async for k in theirs.scan_iter(match="it:*", count=50)}
        assert a == b and len(a) == 300
        assert dict([x async for x in ours.hscan_iter("ih")]) == dict(
            [x async for x in theirs.hscan_iter("ih")]
        )
        assert {x async for x in ours.sscan_iter("is")} == {
            x async for x in theirs.sscan_iter("is")
        }
        za = sorted([tuple(x) async for x in ours.zscan_iter("iz")])
        zb = sorted([tuple(x) async for x in theirs.zscan_iter("iz")])
        assert za == zb and len(za) == 300
        await ours.close()
        await theirs.aclose()

    arun(main())


def test_refused_on_a_shared_connection(url, arun):
    r = surge.redis.connect(url)
    for call in (lambda: r.watch("k"), r.unwatch, r.reset, lambda: r.client_reply("OFF")):
        with pytest.raises(DataError):
            call()

    async def main():
        await r.close()

    arun(main())


def test_dump_in_a_decoding_pipeline_is_refused_up_front(url, arun, mode):  # noqa: F811
    ours, _theirs = clients(url, mode)

    async def main():
        pipe = ours.pipeline()
        pipe.set("pd", "v")
        if mode[1]:
            with pytest.raises(DataError):
                pipe.dump("pd")
            assert await pipe.execute() == [True]  # the rest of the batch is intact
        else:
            pipe.dump("pd")
            ok, payload = await pipe.execute()
            assert ok is True and payload == await ours.dump("pd")
        await ours.close()
        await _theirs.aclose()

    arun(main())
