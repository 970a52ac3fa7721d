"""redis-py's whole Redis 7.0 command surface, differentially: every method that
`tests/redis/redis_py_surface.json` (recorded from the installed redis-py by
``scripts/redis_py_surface.py``) marks as a 7.0 command is called through redis-py
and through surge against one real server, in all four modes (RESP2/RESP3 x
decode_responses off/on), and the results compared.

Each scenario works on keys of its own: an argument ``"@name"`` becomes
``"<side><n>:name"`` (``ours3:name`` for surge, ``theirs3:name`` for redis-py), so
commands that change data compare like with like; key names in replies are
compared with the side's prefix taken out. A step's ``mode`` says how results
are compared: ``eq`` (values, and on RESP2 the container types too), ``shape``
(types and dict keys only: clocks, ids, random members), ``err`` (both raise the
exception of the same class name).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
from pathlib import Path
from typing import Any

import pytest
import surge.redis

from tests.redis.test_redis_differential import (  # noqa: F401
    assert_same,
    clients,
    mode,
    same_shape,
)

pytest.importorskip("redis.asyncio")
#: The bound of one call: a hang is caught here, by its name. The whole list of
#: scenarios (1000 calls, 2 s quiet) has only the generous bounds below: at load
#: 10 it took 16 s, and the old 30 s bound on it ran out mid-list (at script_kill).
STEP_TIMEOUT = 10.0
ARUN_TIMEOUT = 300.0
pytestmark = pytest.mark.timeout(600)

SURFACE = json.loads((Path(__file__).parent / "redis_py_surface.json").read_text())

Step = tuple[str, tuple[Any, ...], dict[str, Any], str]


def C(method: str, *args: Any, _mode: str = "eq", **kwargs: Any) -> Step:
    """One call: method, arguments, keyword arguments, how to compare."""
    return (method, args, kwargs, _mode)


#: A function library; %LIB% becomes the side's prefix (library and function names
#: are global on the server).
RO_SHA = hashlib.sha1(b"return 'ro'").hexdigest()
LUA_LIB = (
    "#!lua name=%LIB%lib\n"
    "redis.register_function('%LIB%echo', function(keys, args) return args[1] end)"
)

#: Scenarios: each a list of calls run in order on fresh keys.
SCENARIOS: list[list[Step]] = [
    # -- strings ----------------------------------------------------------------
    [C("set", "@s", "hello"), C("get", "@s"), C("append", "@s", " world"), C("strlen", "@s")],
    [C("set", "@s", "v", nx=True), C("set", "@s", "w", nx=True), C("set", "@s", "x", get=True)],
    [C("set", "@s", "v", xx=True), C("set", "@s", "v", ex=100), C("ttl", "@s")],
    [C("set", "@s", "v", px=100_000, keepttl=False), C("set", "@s", "w", keepttl=True)],
    [C("mset", {"@a": "1", "@b": "2"}), C("mget", ["@a", "@b", "@c"]), C("mget", "@a", "@b")],
    [C("msetnx", {"@a": "1", "@b": "2"}), C("msetnx", {"@a": "3", "@c": "4"}), C("mget", "@c")],
    [C("incr", "@n"), C("incr", "@n", 5), C("incrby", "@n", 2), C("decr", "@n")],
    [C("decrby", "@n", 3), C("incrbyfloat", "@f", 1.5), C("incrbyfloat", "@f")],
    [C("set", "@s", "abcdef"), C("getrange", "@s", 1, 3), C("setrange", "@s", 2, "ZZ")],
    [C("set", "@s", "abcdef"), C("substr", "@s", 1, 3), C("substr", "@s", 2)],
    [C("set", "@s", "v"), C("getset", "@s", "w"), C("getdel", "@s"), C("getdel", "@s")],
    [C("set", "@s", "v"), C("getex", "@s", ex=100), C("ttl", "@s"), C("getex", "@s", persist=True)],
    [C("getex", "@s", px=5000), C("set", "@s", "v"), C("getex", "@s", exat=4_000_000_000)],
    [C("set", "@s", "v"), C("getex", "@s", pxat=4_000_000_000_000), C("pttl", "@s", _mode="shape")],
    [C("setnx", "@s", "1"), C("setnx", "@s", "2"), C("setex", "@s", 100, "x"), C("ttl", "@s")],
    [C("psetex", "@s", 100_000, "x"), C("get", "@s"), C("pttl", "@s", _mode="shape")],
    [C("set", "@a", "ohmytext"), C("set", "@b", "mynewtext"), C("lcs", "@a", "@b")],
    [C("set", "@a", "ohmytext"), C("set", "@b", "mynewtext"), C("lcs", "@a", "@b", len=True)],
    [
        C("set", "@a", "ohmytext"),
        C("set", "@b", "mynewtext"),
        C("lcs", "@a", "@b", idx=True, minmatchlen=2, withmatchlen=True),
    ],
    # -- bitmaps and HyperLogLog ------------------------------------------------
    [C("setbit", "@b", 7, 1), C("getbit", "@b", 7), C("bitcount", "@b"), C("bitpos", "@b", 1)],
    [C("set", "@a", "ab"), C("set", "@b", "cd"), C("bitop", "AND", "@c", "@a", "@b")],
    [C("set", "@a", "foobar"), C("bitcount", "@a", 1, 1), C("bitcount", "@a", 5, 30, "BIT")],
    [C("bitfield_ro", "@b", "u8", 0, items=[("u4", 4)])],
    [C("pfadd", "@h", "a", "b", "c"), C("pfadd", "@g", "c", "d"), C("pfcount", "@h", "@g")],
    [C("pfadd", "@h", "a"), C("pfmerge", "@m", "@h"), C("pfcount", "@m")],
    # -- keys -------------------------------------------------------------------
    [
        C("set", "@a", "1"),
        C("exists", "@a", "@b"),
        C("type", "@a", _mode="status"),
        C("delete", "@a", "@b"),
    ],
    [C("set", "@a", "1"), C("unlink", "@a"), C("touch", "@a"), C("exists", "@a")],
    [C("set", "@a", "1"), C("expire", "@a", 100), C("expire", "@a", 50, gt=True), C("ttl", "@a")],
    [C("set", "@a", "1"), C("expireat", "@a", 4_000_000_000), C("expiretime", "@a")],
    [C("set", "@a", "1"), C("pexpire", "@a", 100_000), C("persist", "@a"), C("pttl", "@a")],
    [C("set", "@a", "1"), C("pexpireat", "@a", 4_000_000_000_000), C("pexpiretime", "@a")],
    [C("set", "@a", "1"), C("expire", "@a", 10, nx=True), C("expire", "@a", 10, xx=True)],
    [C("set", "@a", "1"), C("rename", "@a", "@b"), C("renamenx", "@b", "@c"), C("get", "@c")],
    [
        C("set", "@a", "1"),
        C("copy", "@a", "@b"),
        C("copy", "@a", "@b"),
        C("copy", "@a", "@b", replace=True),
    ],
    [C("set", "@a", "1"), C("object", "encoding", "@a"), C("object", "refcount", "@a")],
    [C("rpush", "@l", "3", "1", "2"), C("sort", "@l"), C("sort", "@l", desc=True, start=0, num=2)],
    [C("rpush", "@l", "b", "a"), C("sort", "@l", alpha=True), C("sort_ro", "@l", alpha=True)],
    [C("rpush", "@l", "2", "1"), C("sort", "@l", store="@d"), C("lrange", "@d", 0, -1)],
    [
        C("rpush", "@l", "1", "2"),
        C("set", "@w_1", "x"),
        C("set", "@w_2", "y"),
        C("sort", "@l", get=["#", "@w_*"], groups=True),
    ],
    [
        C("set", "@a", "\x00bin"),
        C("dump", "@a", _mode="shape"),
        C("memory_usage", "@a", _mode="shape"),
    ],
    [C("set", "@a", "1"), C("randomkey", _mode="shape"), C("dbsize", _mode="shape")],
    [C("set", "@a", "1"), C("keys", "@*"), C("scan", 0, match="@*", count=100, _mode="shape")],
    [C("set", "@a", "1"), C("scan", 0, match="@*", _type="string", _mode="shape")],
    [C("move", "@a", "%DB%"), C("set", "@a", "1"), C("move", "@a", "%DB%"), C("delete", "@a")],
    # -- hashes -----------------------------------------------------------------
    [C("hset", "@h", "f", "v"), C("hset", "@h", mapping={"a": "1", "b": "2"}), C("hgetall", "@h")],
    [C("hset", "@h", items=["a", "1"]), C("hget", "@h", "a"), C("hmget", "@h", ["a", "x"])],
    [C("hmset", "@h", {"a": "1"}), C("hexists", "@h", "a"), C("hlen", "@h"), C("hkeys", "@h")],
    [C("hset", "@h", "a", "1"), C("hvals", "@h"), C("hdel", "@h", "a", "b"), C("hgetall", "@h")],
    [C("hincrby", "@h", "n", 3), C("hincrbyfloat", "@h", "f", 1.25), C("hstrlen", "@h", "n")],
    [C("hsetnx", "@h", "a", "1"), C("hsetnx", "@h", "a", "2"), C("hrandfield", "@h")],
    [C("hset", "@h", "a", "1"), C("hrandfield", "@h", 1, withvalues=True)],
    [C("hset", "@h", "a", "1"), C("hscan", "@h"), C("hscan", "@h", 0, match="a*", count=10)],
    # -- lists ------------------------------------------------------------------
    [C("lpush", "@l", "a", "b"), C("rpush", "@l", "c"), C("lrange", "@l", 0, -1), C("llen", "@l")],
    [C("rpush", "@l", "a", "b", "c"), C("lpop", "@l"), C("rpop", "@l"), C("lpop", "@l", 2)],
    [C("rpush", "@l", "a", "b", "c"), C("rpop", "@l", 2), C("lpop", "@x"), C("lpop", "@x", 2)],
    [C("lpushx", "@l", "a"), C("rpushx", "@l", "a"), C("rpush", "@l", "x"), C("lpushx", "@l", "y")],
    [C("rpush", "@l", "a", "b"), C("lindex", "@l", 1), C("linsert", "@l", "BEFORE", "b", "z")],
    [C("rpush", "@l", "a", "b", "a"), C("lrem", "@l", 0, "a"), C("lset", "@l", 0, "q")],
    [C("rpush", "@l", "a", "b", "c"), C("ltrim", "@l", 0, 1), C("lrange", "@l", 0, -1)],
    [C("rpush", "@l", "a", "b", "a"), C("lpos", "@l", "a"), C("lpos", "@l", "a", count=0)],
    [C("rpush", "@l", "a", "b", "a"), C("lpos", "@l", "a", rank=-1, maxlen=10)],
    [
        C("rpush", "@l", "a", "b"),
        C("rpoplpush", "@l", "@m"),
        C("lmove", "@l", "@m", "LEFT", "LEFT"),
    ],
    [C("rpush", "@l", "a", "b"), C("lmpop", 2, "@l", "@m", direction="LEFT", count=2)],
    [
        C("rpush", "@l", "a", "b"),
        C("lmpop", 1, "@l", direction="RIGHT"),
        C("lmpop", 1, "@x", direction="RIGHT"),
    ],
    [C("rpush", "@l", "a"), C("blpop", ["@l"], 1), C("rpush", "@l", "b"), C("brpop", "@l", 1)],
    [C("rpush", "@l", "a"), C("brpoplpush", "@l", "@m", 1), C("blmove", "@m", "@l", 1)],
    [C("rpush", "@l", "a", "b"), C("blmpop", 1, 1, "@l", direction="LEFT", count=5)],
    [C("blpop", ["@empty"], 0.05), C("brpop", ["@empty"], 0.05)],
    # -- sets -------------------------------------------------------------------
    [C("sadd", "@s", "a", "b"), C("srem", "@s", "b"), C("smembers", "@s"), C("scard", "@s")],
    [C("sadd", "@s", "a"), C("sismember", "@s", "a"), C("smismember", "@s", ["a", "z"])],
    [C("sadd", "@s", "a"), C("smismember", "@s", "a", "z"), C("smove", "@s", "@t", "a")],
    [
        C("sadd", "@a", "1", "2"),
        C("sadd", "@b", "2", "3"),
        C("sdiff", "@a", "@b"),
        C("sinter", ["@a", "@b"]),
    ],
    [
        C("sadd", "@a", "1"),
        C("sadd", "@b", "2"),
        C("sunion", "@a", "@b"),
        C("sunionstore", "@c", "@a", "@b"),
    ],
    [
        C("sadd", "@a", "1", "2"),
        C("sadd", "@b", "2"),
        C("sdiffstore", "@c", ["@a"], "@b"),
        C("sinterstore", "@d", "@a", "@b"),
    ],
    [
        C("sadd", "@a", "1", "2"),
        C("sadd", "@b", "2"),
        C("sintercard", 2, ["@a", "@b"]),
        C("sintercard", 2, ["@a", "@b"], limit=1),
    ],
    [
        C("sadd", "@s", "a"),
        C("spop", "@s"),
        C("spop", "@s"),
        C("sadd", "@s", "b"),
        C("spop", "@s", 1),
    ],
    [
        C("sadd", "@s", "a"),
        C("srandmember", "@s"),
        C("srandmember", "@s", 2),
        C("srandmember", "@x"),
    ],
    [C("sadd", "@s", "a"), C("sscan", "@s"), C("sscan", "@s", 0, match="a", count=5)],
    # -- sorted sets ------------------------------------------------------------
    [
        C("zadd", "@z", {"a": 1, "b": 2}),
        C("zadd", "@z", {"a": 5}, xx=True, ch=True),
        C("zscore", "@z", "a"),
    ],
    [
        C("zadd", "@z", {"a": 1}),
        C("zadd", "@z", {"a": 2}, incr=True),
        C("zadd", "@z", {"a": 1}, gt=True),
    ],
    [
        C("zadd", "@z", {"a": 1, "b": 2}),
        C("zcard", "@z"),
        C("zcount", "@z", 0, 1),
        C("zincrby", "@z", 2, "a"),
    ],
    [
        C("zadd", "@z", {"a": 0, "b": 0}),
        C("zlexcount", "@z", "-", "+"),
        C("zrangebylex", "@z", "-", "+"),
    ],
    [
        C("zadd", "@z", {"a": 0, "b": 0, "c": 0}),
        C("zrangebylex", "@z", "[a", "[c", 1, 1),
        C("zrevrangebylex", "@z", "+", "-", 0, 2),
    ],
    [
        C("zadd", "@z", {"a": 1, "b": 2}),
        C("zrange", "@z", 0, -1, withscores=True),
        C("zrevrange", "@z", 0, -1),
    ],
    [
        C("zadd", "@z", {"a": 1, "b": 2}),
        C("zrevrange", "@z", 0, -1, withscores=True),
        C("zrevrange", "@z", 0, 0, True, int),
    ],
    [
        C("zadd", "@z", {"a": 1, "b": 2}),
        C("zrangebyscore", "@z", 0, 5),
        C("zrangebyscore", "@z", "-inf", "+inf", withscores=True),
    ],
    [
        C("zadd", "@z", {"a": 1, "b": 2}),
        C("zrangebyscore", "@z", 0, 5, 1, 1),
        C("zrevrangebyscore", "@z", 5, 0, withscores=True),
    ],
    [C("zadd", "@z", {"a": 1, "b": 2}), C("zrevrangebyscore", "@z", "+inf", "-inf", 0, 1)],
    [
        C("zadd", "@z", {"a": 1, "b": 2}),
        C("zrank", "@z", "b"),
        C("zrevrank", "@z", "b"),
        C("zrank", "@z", "x"),
    ],
    [C("zadd", "@z", {"a": 1, "b": 2}), C("zrem", "@z", "a"), C("zmscore", "@z", ["a", "b"])],
    [
        C("zadd", "@z", {"a": 1, "b": 2, "c": 3}),
        C("zremrangebyrank", "@z", 0, 0),
        C("zremrangebyscore", "@z", 2, 2),
    ],
    [
        C("zadd", "@z", {"a": 0, "b": 0}),
        C("zremrangebylex", "@z", "[a", "[a"),
        C("zrange", "@z", 0, -1),
    ],
    [C("zadd", "@z", {"a": 1, "b": 2}), C("zpopmin", "@z"), C("zpopmax", "@z"), C("zpopmin", "@z")],
    [C("zadd", "@z", {"a": 1, "b": 2, "c": 3}), C("zpopmin", "@z", 2), C("zpopmax", "@z", 1)],
    [
        C("zadd", "@z", {"a": 1}),
        C("zrandmember", "@z"),
        C("zrandmember", "@z", 1),
        C("zrandmember", "@z", 1, withscores=True),
    ],
    [
        C("zadd", "@a", {"x": 1, "y": 2}),
        C("zadd", "@b", {"y": 3}),
        C("zdiff", ["@a", "@b"]),
        C("zdiff", ["@a", "@b"], withscores=True),
    ],
    [
        C("zadd", "@a", {"x": 1, "y": 2}),
        C("zadd", "@b", {"y": 3}),
        C("zdiffstore", "@c", ["@a", "@b"]),
        C("zrange", "@c", 0, -1),
    ],
    [
        C("zadd", "@a", {"x": 1, "y": 2}),
        C("zadd", "@b", {"y": 3}),
        C("zinter", ["@a", "@b"]),
        C("zinter", ["@a", "@b"], "MAX", True),
    ],
    [
        C("zadd", "@a", {"x": 1, "y": 2}),
        C("zadd", "@b", {"y": 3}),
        C("zunion", ["@a", "@b"]),
        C("zunion", {"@a": 2, "@b": 1}, withscores=True),
    ],
    [
        C("zadd", "@a", {"x": 1, "y": 2}),
        C("zadd", "@b", {"y": 3}),
        C("zinterstore", "@c", ["@a", "@b"], "MIN"),
        C("zunionstore", "@d", {"@a": 1, "@b": 2}),
    ],
    [
        C("zadd", "@a", {"x": 1, "y": 2}),
        C("zadd", "@b", {"y": 3}),
        C("zintercard", 2, ["@a", "@b"]),
        C("zintercard", 2, ["@a", "@b"], limit=1),
    ],
    [
        C("zadd", "@z", {"a": 1, "b": 2, "c": 3}),
        C("zrangestore", "@d", "@z", 0, 1),
        C("zrangestore", "@d", "@z", 1, 3, byscore=True, desc=False, offset=0, num=1),
    ],
    [
        C("zadd", "@z", {"a": 1, "b": 2}),
        C("zmpop", 1, ["@z"], min=True),
        C("zmpop", 1, ["@z"], max=True, count=5),
        C("zmpop", 1, ["@z"], min=True),
    ],
    [
        C("zadd", "@z", {"a": 1, "b": 2}),
        C("bzmpop", 1, 1, ["@z"], max=True),
        C("bzpopmin", ["@z"], 1),
        C("bzpopmax", "@z", 0.05),
    ],
    [C("zadd", "@z", {"a": 1}), C("zscan", "@z"), C("zscan", "@z", 0, match="*", count=10)],
    [
        C("zadd", "@z", {"a": 1, "b": 2}),
        C("zrange", "@z", "(1", "+inf", byscore=True, withscores=True, offset=0, num=1),
    ],
    # -- geo --------------------------------------------------------------------
    [
        C("geoadd", "@g", [13.361389, 38.115556, "Palermo", 15.087269, 37.502669, "Catania"]),
        C("geodist", "@g", "Palermo", "Catania", "km"),
        C("geohash", "@g", "Palermo", "Nowhere"),
        C("geopos", "@g", "Palermo", "Nowhere"),
    ],
    [
        C("geoadd", "@g", [13.361389, 38.115556, "Palermo", 15.087269, 37.502669, "Catania"]),
        C("georadius", "@g", 15, 37, 200, "km"),
        C("georadius", "@g", 15, 37, 200, "km", withdist=True, withcoord=True, sort="ASC"),
        C("georadius", "@g", 15, 37, 200, "km", withhash=True, count=1, any=True),
    ],
    [
        C("geoadd", "@g", [13.361389, 38.115556, "Palermo", 15.087269, 37.502669, "Catania"]),
        C("georadiusbymember", "@g", "Palermo", 200, "km", withdist=True, sort="DESC"),
        C("georadius", "@g", 15, 37, 200, "km", store="@d"),
        C("georadiusbymember", "@g", "Palermo", 200, "km", store_dist="@e"),
    ],
    [
        C("geoadd", "@g", [13.361389, 38.115556, "Palermo", 15.087269, 37.502669, "Catania"]),
        C(
            "geosearch",
            "@g",
            longitude=15,
            latitude=37,
            radius=200,
            unit="km",
            withdist=True,
            sort="ASC",
        ),
        C("geosearch", "@g", member="Palermo", width=400, height=400, unit="km", withcoord=True),
        C("geosearchstore", "@d", "@g", longitude=15, latitude=37, radius=200, unit="km"),
        C(
            "geosearchstore",
            "@e",
            "@g",
            member="Palermo",
            radius=200,
            unit="km",
            storedist=True,
            count=1,
        ),
    ],
    # -- streams ----------------------------------------------------------------
    [
        C("xadd", "@x", {"f": "v"}, id="1-1"),
        C("xadd", "@x", {"f": "w"}, id="2-1", maxlen=10, approximate=False),
        C("xlen", "@x"),
        C("xrange", "@x"),
        C("xrevrange", "@x", count=1),
        C("xread", {"@x": "0-0"}, count=1),
        C("xdel", "@x", "1-1"),
        C("xtrim", "@x", maxlen=0, approximate=False),
    ],
    [
        C("xadd", "@x", {"f": "v"}, id="1-1"),
        C("xgroup_create", "@x", "g", id="0"),
        C("xgroup_createconsumer", "@x", "g", "c2"),
        C("xreadgroup", "g", "c", {"@x": ">"}, count=5),
        C("xpending", "@x", "g"),
        C("xpending_range", "@x", "g", "-", "+", 10, _mode="shape"),
        C("xack", "@x", "g", "1-1"),
        C("xgroup_setid", "@x", "g", "0"),
        C("xgroup_delconsumer", "@x", "g", "c2"),
        C("xgroup_destroy", "@x", "g"),
    ],
    [
        C("xadd", "@x", {"f": "v"}, id="1-1"),
        C("xgroup_create", "@x", "g", id="0", mkstream=True),
        C("xreadgroup", "g", "c", {"@x": ">"}),
        C("xclaim", "@x", "g", "d", 0, ["1-1"], justid=True),
        C("xautoclaim", "@x", "g", "e", 0, justid=True),
        C("xinfo_groups", "@x", _mode="shape"),
        C("xinfo_consumers", "@x", "g", _mode="shape"),
        C("xinfo_stream", "@x", _mode="shape"),
    ],
    [
        C("xadd", "@x", {"f": "v"}, id="1-1"),
        C("xread", {"@x": "$"}, block=20),
        C("xread", {"@x": "0"}, block=20),
    ],
    # -- scripting and functions ------------------------------------------------
    [C("eval", "return {KEYS[1], ARGV[1]}", 1, "@k", "a"), C("eval_ro", "return ARGV[1]", 0, "x")],
    [
        C("script_load", "return 7"),
        C("evalsha", "e8c6ed2b6e0f4cc8a5e3df0bd4c7ce3bd6f7f3b9", 0, _mode="err"),
        C("script_exists", "not-a-sha"),
    ],
    [
        C("function_load", LUA_LIB, replace=True),
        C("fcall", "%LIB%echo", 0, "x"),
        C("fcall_ro", "%LIB%echo", 0, "y", _mode="err"),
    ],
    [
        C("function_load", LUA_LIB, replace=True),
        C("function_list", "%LIB%lib", _mode="shape"),
        C("function_stats", _mode="shape"),
    ],
    [
        C("function_load", LUA_LIB, replace=True),
        C("function_dump", _mode="shape"),
        C("function_delete", "%LIB%lib"),
    ],
    [C("function_kill", _mode="err"), C("script_kill", _mode="err")],
    # -- pub/sub introspection ------------------------------------------------------
    [
        C("publish", "@ch", "m"),
        C("spublish", "@ch", "m"),
        C("pubsub_channels", "@nothing*"),
        C("pubsub_numpat"),
    ],
    [
        C("pubsub_numsub", "@ch"),
        C("pubsub_shardchannels", "@nothing*"),
        C("pubsub_shardnumsub", "@ch"),
    ],
    # -- server -----------------------------------------------------------------
    [C("ping"), C("echo", "hi"), C("time", _mode="shape"), C("lastsave", _mode="shape")],
    [C("info", _mode="shape"), C("info", "server", _mode="shape"), C("dbsize", _mode="shape")],
    [
        C("config_get", "maxmemory"),
        C("config_get", "maxmemory*", "timeout"),
        C("config_set", "timeout", 0),
    ],
    [
        C("config_set", "slowlog-max-len", 128, "timeout", 0),
        C("config_resetstat"),
        C("config_rewrite", _mode="status"),
    ],
    [C("slowlog_len", _mode="shape"), C("slowlog_get", 1, _mode="shape"), C("slowlog_reset")],
    [C("role"), C("lolwut", _mode="shape"), C("lolwut", 5, 1, 1, _mode="shape")],
    [
        C("command_count"),
        C("command_getkeys", "SET", "a", "b"),
        C("command_getkeysandflags", "SET", "a", "b", _mode="flags"),
    ],
    [
        C("command_list", _mode="shape"),
        C("command_list", category="hyperloglog"),
        C("command", _mode="shape"),
    ],
    [
        C("memory_stats", _mode="shape"),
        C("memory_doctor", _mode="ours"),
        C("memory_malloc_stats", _mode="shape"),
        C("memory_purge"),
    ],
    [
        C("latency_latest"),
        C("latency_history", "command"),
        C("latency_reset"),
        C("latency_doctor", _mode="ours"),
    ],
    [
        C("latency_histogram", "set", _mode="ours"),
        C("module_list"),
        C("debug_object", "@x", _mode="err"),
    ],
    [
        C("client_id", _mode="shape"),
        C("client_getname"),
        C("client_info", _mode="shape"),
        C("client_list", _mode="shape"),
    ],
    [C("client_list", "normal", _mode="shape"), C("client_getredir"), C("client_trackinginfo")],
    [
        C("client_kill", "127.0.0.1:1", _mode="err"),
        C("client_kill_filter", _id=999_999),
        C("client_unblock", 999_999),
    ],
    [
        C("client_pause", 1),
        C("client_unpause", _mode="status"),
        C("client_no_evict", "off", _mode="status"),
        C("client_reply", "ON", _mode="status"),
    ],
    [
        C("client_tracking_off", _mode="status"),
        C("client_tracking", on=False, _mode="status"),
        C("client_tracking_on", bcast=True, prefix=["@"], _mode="status"),
        C("client_tracking_off", _mode="status"),
    ],
    [
        C(
            "acl_setuser",
            "@u",
            enabled=True,
            passwords=["+pw"],
            categories=["+@read"],
            keys=["a*"],
            commands=["+get"],
        )
    ],
    [
        C("acl_setuser", "@u", nopass=True, channels=["c*"]),
        C("acl_getuser", "@u", _mode="flags"),
        C("acl_getuser", "@none"),
    ],
    [
        C("acl_setuser", "@u"),
        C("acl_deluser", "@u", "@none"),
        C("acl_users", _mode="shape"),
        C("acl_whoami"),
    ],
    [
        C("acl_cat"),
        C("acl_cat", "hyperloglog"),
        C("acl_genpass", _mode="shape"),
        C("acl_genpass", 32, _mode="shape"),
    ],
    [
        C("acl_setuser", "@u", enabled=True, nopass=True, commands=["+get"], keys=["*"]),
        C("acl_dryrun", "@u", "get", "x", _mode="status"),
        C("acl_dryrun", "@u", "set", "x", "y"),
    ],
    [
        C("acl_list", _mode="shape"),
        C("acl_help", _mode="status"),
        C("acl_log", _mode="shape"),
        C("acl_log_reset"),
    ],
    [C("acl_load", _mode="err"), C("acl_save", _mode="err"), C("auth", "wrong", _mode="err")],
    [C("bgsave", _mode="any"), C("bgrewriteaof", _mode="any"), C("save", _mode="any")],
    [C("swapdb", 14, 15), C("swapdb", 14, 15), C("wait", 0, 10), C("readonly", _mode="err")],
    [C("flushall", asynchronous=False), C("flushdb", asynchronous=True), C("dbsize")],
    [C("replicaof", "NO", "ONE", _mode="status"), C("slaveof")],
    [C("client_setname", "@name"), C("client_getname"), C("client_setname", "")],
    [
        C("script_load", "return 'ro'"),
        C("evalsha_ro", RO_SHA, 0),
        C("script_flush"),
        C("script_flush", "ASYNC"),
    ],
    [C("function_flush"), C("function_flush", "ASYNC"), C("function_list")],
    [
        C("module_load", "/nonexistent/module.so", _mode="err"),
        C("module_unload", "nomodule", _mode="err"),
    ],
    [C("module_loadex", "/nonexistent/module.so", options=["a", "b"], args=["x"], _mode="err")],
    [C("migrate", "127.0.0.1", 1, "@none", 0, 100, _mode="status")],
]

#: redis-py command methods called by these scenarios only through another form, or
#: checked by tests of their own (the name must still exist on surge).
ELSEWHERE = {
    "bitfield": "a builder object: test_redis_families.py",
    "bzmpop": "called above",
    "register_script": "test_redis_families.py",
    "restore": "test_dump_restore below",
    "function_restore": "test_dump_restore below",
    "select": "test_connection_state below",
    "quit": "test_connection_state below",
    "pubsub": "test_redis_pubsub.py",
    "xclaim": "called above with justid; entries in test_redis_families.py",
    "xautoclaim": "called above",
    "zadd": "called above",
    "xinfo_stream": "called above",
}
#: redis-py command methods surge answers differently on purpose, and why.
DIFFERENT = {
    "watch": "WATCH belongs to one connection and surge's is shared: DataError naming "
    "pipeline().watch()/transaction() (redis-py only warns and sends nothing)",
    "unwatch": "as watch",
    "reset": "RESET would undo the shared connection's AUTH/SELECT/HELLO: DataError",
    "client_reply": "OFF/SKIP would desynchronise the shared connection: only ON is taken",
    "sync": "a replica's stream, not a request/reply: NotImplementedError",
    "psync": "as sync",
    "shutdown": "stops the test server; sent as redis-py sends it (not run here)",
    "monitor": "not a command method in redis-py's sense: test_helpers below",
}
#: Refused by redis-py itself (NotImplementedError) but run by surge: called on
#: surge only ("ours"): MEMORY DOCTOR, LATENCY DOCTOR, LATENCY HISTOGRAM.
#: Refused by redis-py itself (NotImplementedError); surge refuses them too.
REFUSED_BY_REDIS_PY = {
    "command_docs",
    "command_info",
    "hello",
    "failover",
    "latency_graph",
    "memory_help",
    "script_debug",
    "debug_segfault",
}


def _side(v: Any, prefix: str) -> Any:
    if v == "%DB%":
        # Another database than the test's own (MOVE's target): the prefix holds it.
        return (int(prefix[1:].split("x")[0]) + 1) % 16
    if isinstance(v, str) and "%LIB%" in v:
        return v.replace("%LIB%", prefix.replace(":", "_"))
    if isinstance(v, str) and v.startswith("@"):
        return prefix + v[1:]
    if isinstance(v, list):
        return [_side(x, prefix) for x in v]
    if isinstance(v, tuple):
        return tuple(_side(x, prefix) for x in v)
    if isinstance(v, dict):
        return {_side(k, prefix): _side(x, prefix) for k, x in v.items()}
    return v


def _unside(v: Any, prefix: str) -> Any:
    lib = prefix.replace(":", "_")
    if isinstance(v, str):
        return v.replace(prefix, "@").replace(lib, "%LIB%")
    if isinstance(v, bytes):
        return v.replace(prefix.encode(), b"@").replace(lib.encode(), b"%LIB%")
    if isinstance(v, list):
        return [_unside(x, prefix) for x in v]
    if isinstance(v, tuple):
        return tuple(_unside(x, prefix) for x in v)
    if isinstance(v, set):
        return {_unside(x, prefix) for x in v}
    if isinstance(v, dict):
        return {_unside(k, prefix): _unside(x, prefix) for k, x in v.items()}
    return v


def shape(v: Any) -> Any:
    """Types, and the keys of dicts: for replies whose values change from call to call."""
    if isinstance(v, dict):
        return ("dict", sorted(map(str, v)))
    if isinstance(v, list | tuple):
        return ("seq", shape(v[0]) if v else None)
    if isinstance(v, set):
        return ("set",)
    if isinstance(v, bool):
        return "bool"
    return type(v).__name__


async def _call(client: Any, method: str, args: Any, kwargs: Any) -> Any:
    bound = asyncio.timeout(STEP_TIMEOUT)
    try:
        async with bound:
            return await getattr(client, method)(*args, **kwargs)
    except Exception as e:  # compared by class name
        if bound.expired():
            pytest.fail(f"{type(client).__module__} {method}{args} took over {STEP_TIMEOUT} s")
        return e


def _texts(v: Any) -> Any:
    if isinstance(v, bytes):
        return v.decode("utf-8", "replace")
    if isinstance(v, list | tuple):
        return [_texts(x) for x in v]
    if isinstance(v, dict):
        return {_texts(k): _texts(x) for k, x in v.items()}
    return v


def _sorted(v: Any) -> Any:
    if isinstance(v, dict):
        return {k: _sorted(x) for k, x in v.items()}
    if isinstance(v, list | tuple):
        items = [_sorted(x) for x in v]
        return sorted(items, key=repr) if all(isinstance(x, str) for x in items) else items
    return v


def _compare(protocol: int, how: str, a: Any, b: Any, what: Any) -> None:
    if how == "any":
        # Server-state commands whose answer depends on what ran just before
        # (BGSAVE while a child is busy): only surge's call must not fail.
        assert (
            not isinstance(a, Exception)
            or not isinstance(b, Exception)
            or (type(a).__name__ == type(b).__name__)
        ), (what, a, b)
        return
    if how == "ours":
        assert not isinstance(a, Exception), (what, a)
        return
    if how == "err":
        assert isinstance(a, Exception) and isinstance(b, Exception), (what, a, b)
        assert type(a).__name__ == type(b).__name__, (what, a, b)
        return
    assert not isinstance(a, Exception), (what, a, b)
    assert not isinstance(b, Exception), (what, a, b)
    if how == "shape":
        assert shape(a) == shape(b), (what, a, b)
        return
    if how == "status":
        # Status replies (+OK, TYPE's +string, flags) are str in surge; redis-py
        # gives bytes unless decode_responses (README: "where it differs").
        assert _texts(a) == _texts(b), (what, a, b)
        return
    if how == "flags":
        # As status, and RESP3 sets (flags) compared without their order.
        assert _sorted(_texts(a)) == _sorted(_texts(b)), (what, a, b)
        return
    assert_same(protocol, a, b, what)


async def run_scenarios(ours: Any, theirs: Any, db: int) -> tuple[set[str], list[str]]:
    """Run every scenario; the methods called and the mismatches (all of them, so one
    run shows every difference)."""
    called: set[str] = set()
    failures: list[str] = []
    for n, steps in enumerate(SCENARIOS):
        po, pt = f"o{db}x{n}:", f"t{db}x{n}:"
        for method, args, kwargs, how in steps:
            a = await _call(ours, method, _side(args, po), _side(kwargs, po))
            if how == "ours":
                b = None  # redis-py refuses the method (NotImplementedError)
            else:
                b = await _call(theirs, method, _side(args, pt), _side(kwargs, pt))
            a, b = _unside(a, po), _unside(b, pt)
            try:
                _compare(ours.protocol, how, a, b, (n, method, args, kwargs))
            except AssertionError as e:
                failures.append(str(e)[:400])
            called.add(method)
    return called, failures


def test_every_command_through_both_clients(url, arun, mode):  # noqa: F811
    ours, theirs = clients(url, mode)
    db = int(url.rsplit("/", 1)[1])

    async def main():
        try:
            await theirs.flushdb()
            called, failures = await run_scenarios(ours, theirs, db)
        finally:
            await theirs.flushall()
            await ours.close()
            await theirs.aclose()
        assert not failures, "\n".join(failures)
        commands = {n for n, e in SURFACE.items() if e.get("kind") == "command"}
        left = commands - called - set(ELSEWHERE) - set(DIFFERENT) - REFUSED_BY_REDIS_PY
        assert not left, sorted(left)

    arun(main())


def test_coverage_of_redis_py_names():
    """Every redis-py method that sends a Redis 7.0 command exists on surge's Redis,
    and so do redis-py's client helpers that make sense on one shared connection."""
    commands = sorted(n for n, e in SURFACE.items() if e.get("kind") == "command")
    missing = [n for n in commands if not hasattr(surge.redis.Redis, n)]
    assert not missing, missing
    assert len(commands) >= 290
    for helper in ("lock", "transaction", "monitor", "get_encoder", "from_url", "pipeline"):
        assert hasattr(surge.redis.Redis, helper), helper
    for helper in ("scan_iter", "hscan_iter", "sscan_iter", "zscan_iter", "register_script"):
        assert hasattr(surge.redis.Redis, helper), helper


def test_dump_restore(url, arun, mode):  # noqa: F811
    """DUMP's payload stays bytes under decode_responses (as redis-py's), and
    RESTOREs through either client."""
    ours, theirs = clients(url, mode)

    async def main():
        await ours.set("d:src", "\x00\xffbinary?")
        payload = await ours.dump("d:src")
        assert isinstance(payload, bytes) and payload == await theirs.dump("d:src")
        ok = await ours.restore("d:copy", 0, payload)
        assert str(ok) == str(_texts(await theirs.restore("d:copy2", 0, payload))) == "OK"
        assert await ours.restore("d:copy", 0, payload, replace=True) == "OK"
        assert await ours.get("d:copy") == await theirs.get("d:copy2")
        await ours.function_load(LUA_LIB.replace("%LIB%", "dumped"), replace=True)
        functions = await ours.function_dump()
        assert isinstance(functions, bytes) and functions == await theirs.function_dump()
        await ours.function_flush()
        assert await ours.function_restore(functions) is True
        assert await ours.fcall("dumpedecho", 0, "back") == ("back" if mode[1] else b"back")
        await ours.function_flush()
        await ours.close()
        await theirs.aclose()

    arun(main())


def test_connection_state(url, arun, mode):  # noqa: F811
    """SELECT and QUIT on the shared connection: SELECT moves every coroutine to the
    database (as redis-py's would move its connection), QUIT is followed by a reconnect."""
    ours, _theirs = clients(url, mode)

    async def main():
        db = int(url.rsplit("/", 1)[1])
        assert await ours.select(db) is True
        assert await ours.quit() is True
        assert await ours.ping() is True  # reconnected
        await ours.close()
        await _theirs.aclose()

    arun(main())


def test_surface_file_is_redis_py_s():
    """The committed surface is the installed redis-py's (rerun the script after an upgrade)."""
    import redis

    assert SURFACE["__meta__"]["redis_py"] == redis.__version__
    assert re.match(r"7\.0\.", SURFACE["__meta__"]["redis_server_spec"])
