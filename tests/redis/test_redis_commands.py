"""Commands against a real Redis: redis-py's names, arguments and return values,
on RESP2 and RESP3, with bytes and with decoded replies."""

from __future__ import annotations

import asyncio
import datetime as dt

import pytest
import surge.redis
from surge.errors import SurgeError
from surge.redis import AuthenticationError, DataError, RedisError, ResponseError

pytestmark = pytest.mark.timeout(60)


@pytest.fixture(params=[2, 3], ids=["resp2", "resp3"])
def protocol(request) -> int:
    return request.param


def test_strings(url, arun, protocol):
    r = surge.redis.connect(url, protocol=protocol)  # made outside any loop

    async def main():
        assert await r.flushdb() is True
        assert await r.ping() is True
        assert await r.get("k") is None
        assert await r.set("k", "v") is True
        assert await r.get("k") == b"v"
        assert await r.set("k", "w", nx=True) is None
        assert await r.set("k", "w", xx=True) is True
        assert await r.set("k", b"x", get=True) == b"w"
        assert await r.set("k", 1, ex=100) is True
        assert 90 < await r.ttl("k") <= 100
        assert await r.set("k", 2, keepttl=True) is True
        assert await r.ttl("k") > 90
        assert await r.set("k", 2.5, px=dt.timedelta(seconds=50)) is True
        assert 40 < await r.ttl("k") <= 50
        assert await r.get("k") == b"2.5"
        assert await r.set("new", "v", xx=True) is None
        assert await r.mset({"a": 1, "b": b"\x00\xff", "c": "é"}) is True
        assert await r.mget(["a", "b", "c", "missing"]) == [b"1", b"\x00\xff", "é".encode(), None]
        assert await r.mget("a", "b") == [b"1", b"\x00\xff"]
        assert await r.exists("a", "b", "missing") == 2
        assert await r.delete("a", "b", "missing") == 2
        assert await r.incr("n") == 1
        assert await r.incr("n", 10) == 11
        assert await r.incrby("n", 2) == 13
        assert await r.decr("n") == 12
        assert await r.decrby("n", 2) == 10
        assert await r.append("s", "ab") == 2
        assert await r.append("s", b"cd") == 4
        assert await r.getdel("s") == b"abcd"
        assert await r.getdel("s") is None
        assert await r.expire("n", 100) is True
        assert await r.expire("missing", 100) is False
        assert await r.ttl("missing") == -2
        assert await r.echo("hi") == b"hi"
        assert await r.dbsize() == 3
        big = b"x" * (1 << 20)
        await r.set("big", big)
        assert await r.get("big") == big
        await r.close()

    arun(main())


def test_hashes_lists_sets_zsets(url, arun, protocol):
    r = surge.redis.connect(url, protocol=protocol)

    async def main():
        await r.flushdb()
        assert await r.hset("h", "f", "v") == 1
        assert await r.hset("h", mapping={"a": 1, "b": 2}) == 2
        assert await r.hset("h", items=["c", 3]) == 1
        assert await r.hget("h", "a") == b"1"
        assert await r.hget("h", "zz") is None
        assert await r.hgetall("h") == {b"f": b"v", b"a": b"1", b"b": b"2", b"c": b"3"}
        assert await r.hgetall("nothing") == {}
        assert await r.hincrby("h", "a", 5) == 6
        assert await r.hdel("h", "a", "b", "zz") == 2

        assert await r.rpush("l", 1, 2, 3) == 3
        assert await r.lpush("l", 0) == 4
        assert await r.lrange("l", 0, -1) == [b"0", b"1", b"2", b"3"]
        assert await r.llen("l") == 4
        assert await r.lpop("l") == b"0"
        assert await r.rpop("l") == b"3"
        assert await r.lpop("l", 5) == [b"1", b"2"]
        assert await r.lpop("l") is None

        assert await r.sadd("s", "a", "b", "c") == 3
        assert await r.srem("s", "c", "zz") == 1
        assert await r.smembers("s") == {b"a", b"b"}
        assert await r.sismember("s", "a") == 1  # an int, as redis-py gives it
        assert await r.sismember("s", "zz") == 0

        assert await r.zadd("z", {"a": 1, "b": 2.5, "c": -1}) == 3
        assert await r.zadd("z", {"a": 5}, nx=True) == 0
        assert await r.zadd("z", {"a": 3}, xx=True, ch=True) == 1
        assert await r.zadd("z", {"a": 1}, incr=True) == 4.0
        assert await r.zrange("z", 0, -1) == [b"c", b"b", b"a"]
        assert await r.zrange("z", 0, 0, desc=True) == [b"a"]
        assert await r.zrange("z", 0, -1, withscores=True) == [
            (b"c", -1.0),
            (b"b", 2.5),
            (b"a", 4.0),
        ]
        assert await r.zrange("z", 0, 0, withscores=True, score_cast_func=int) == [(b"c", -1)]
        assert await r.zscore("z", "b") == 2.5
        assert await r.zscore("z", "zz") is None
        assert await r.zrem("z", "a", "zz") == 1
        await r.close()

    arun(main())


def test_keys_scan_info_and_execute_command(url, arun, protocol):
    r = surge.redis.connect(url, protocol=protocol)

    async def main():
        await r.flushdb()
        await r.mset({f"key:{i}": i for i in range(250)})
        await r.set("other", 1)
        assert sorted(await r.keys("key:1?")) == [f"key:1{i}".encode() for i in range(10)]
        cursor, keys = await r.scan(0, match="key:*", count=50)
        assert isinstance(cursor, int) and all(k.startswith(b"key:") for k in keys)
        seen = {k async for k in r.scan_iter(match="key:*", count=40)}
        assert seen == {f"key:{i}".encode() for i in range(250)}
        info = await r.info()
        assert isinstance(info["redis_version"], str)
        assert isinstance(info["connected_clients"], int)
        ks = await r.info("keyspace")
        assert any(v["keys"] == 251 for v in ks.values())
        assert await r.execute_command("OBJECT", "ENCODING", "key:1") == b"int"
        assert await r.execute_command("STRLEN", "key:100") == 3
        await r.close()

    arun(main())


def test_decode_responses(url, arun, protocol):
    r = surge.redis.connect(url, protocol=protocol, decode_responses=True)

    async def main():
        await r.flushdb()
        await r.set("k", "żółw")
        assert await r.get("k") == "żółw"
        await r.hset("h", mapping={"a": "1"})
        assert await r.hgetall("h") == {"a": "1"}
        assert await r.smembers("nothing") == set()
        await r.set("bin", b"\xff\xfe")
        with pytest.raises(UnicodeDecodeError):
            await r.get("bin")
        assert await r.get("k") == "żółw"  # that reply failed alone; the stream is in sync
        await r.close()

    arun(main())


def test_url_database_and_auth(redis_svc, arun):
    base = f"{redis_svc.host}:{redis_svc.port}"

    async def main():
        admin = surge.redis.connect(f"redis://{base}/0")
        await admin.execute_command("ACL", "SETUSER", "alice", "on", ">s3cret", "~*", "+@all")
        r5 = surge.redis.connect(f"redis://alice:s3cret@{base}/5")
        await r5.set("where", "five")
        r5b = surge.redis.connect(f"redis://{base}?db=5", username="alice", password="s3cret")
        assert await r5b.get("where") == b"five"
        r3 = surge.redis.connect(
            f"redis://{base}/5", protocol=3, username="alice", password="s3cret"
        )
        assert await r3.get("where") == b"five"
        assert await admin.get("where") is None
        bad = surge.redis.connect(f"redis://alice:wrong@{base}/0", connect_timeout=1)
        with pytest.raises(AuthenticationError, match="WRONGPASS"):
            await bad.ping()
        for c in (admin, r5, r5b, r3, bad):
            await c.close()

    arun(main())


def test_server_errors_carry_their_prefix(url, arun, protocol):
    r = surge.redis.connect(url, protocol=protocol)

    async def main():
        await r.flushdb()
        await r.rpush("list", 1)
        with pytest.raises(ResponseError) as e:
            await r.get("list")
        assert e.value.prefix == "WRONGTYPE"
        assert str(e.value).startswith("WRONGTYPE Operation against a key")
        assert isinstance(e.value, RedisError) and isinstance(e.value, SurgeError)
        with pytest.raises(ResponseError, match=r"^ERR unknown command") as e:
            await r.execute_command("NOSUCHCOMMAND", 1)
        assert e.value.prefix == "ERR"
        assert await r.ping() is True
        await r.close()

    arun(main())


@pytest.mark.parametrize("bad", [None, True, [1], {"a": 1}, object(), "\udc80"])
def test_unencodable_arguments_raise_data_error_before_sending(url, arun, bad):
    r = surge.redis.connect(url)

    async def main():
        await r.ping()
        sent = r.engine.stats["requests"]
        with pytest.raises(DataError) as e:
            r.set("k", bad)  # raised at the call, not when awaited
        assert isinstance(e.value, TypeError)
        assert r.engine.stats["requests"] == sent
        assert r.engine.codec.pending() == 0
        # A good command in the same loop iteration goes out alone and in sync.
        got = await asyncio.gather(r.set("k", "ok"), r.get("k"))
        assert got == [True, b"ok"]
        await r.close()

    arun(main())


def test_bad_options_are_data_errors(url):
    r = surge.redis.connect(url)
    with pytest.raises(DataError):
        r.set("k", "v", ex=1, px=1)
    with pytest.raises(DataError):
        r.set("k", "v", nx=True, xx=True)
    with pytest.raises(DataError):
        r.hset("h")
    with pytest.raises(DataError):
        r.zadd("z", {})
    with pytest.raises(DataError):
        surge.redis.connect("http://localhost")
    with pytest.raises(DataError):
        surge.redis.connect(url, protocol=4)
