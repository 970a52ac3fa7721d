"""Streams, scripting, bitmaps, HyperLogLog, geo and scans: the same calls through
redis-py and surge against one server, results compared in all four modes; and
the table-driven layer checked against the server's recorded COMMAND DOCS."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import surge.redis
from surge.redis import NoScriptError
from surge.redis.table import TABLE, _parse

from tests.redis.test_redis_differential import (  # noqa: F401
    assert_same,
    clients,
    mode,
    same_shape,
    typed,
)

pytest.importorskip("redis.asyncio")
pytestmark = pytest.mark.timeout(60)

SPEC = Path(surge.redis.__file__).parent / "command_spec.json"


def _tokens(args: list[dict[str, Any]]) -> set[str]:
    out: set[str] = set()
    for a in args:
        if "token" in a:
            out.add(a["token"].upper())
        out |= _tokens(a.get("arguments", []))
    return out


def test_table_rows_match_the_recorded_command_docs():
    spec = json.loads(SPEC.read_text())["commands"]
    assert len(spec) > 200
    for method, (words, params, _) in TABLE.items():
        parts = words.split()
        doc = spec[parts[0]]
        if len(parts) > 1:
            doc = doc["subcommands"][f"{parts[0]}|{parts[1]}"]
        tokens = _tokens(doc.get("arguments", []))
        for kind, _name, token, _ in _parse(params):
            if kind in ("opt", "flag") and token:
                for word in token:
                    assert word in tokens, (method, word, sorted(tokens))


K = "{key}"
"""In `twin` calls, the key: surge works on ``<key>:ours``, redis-py on ``<key>:theirs``,
so commands that change what they touch compare like with like."""


async def same(ours: Any, theirs: Any, method: str, *args: Any, **kwargs: Any) -> Any:
    """Read-only calls: the same arguments through both clients."""
    a = await getattr(ours, method)(*args, **kwargs)
    b = await getattr(theirs, method)(*args, **kwargs)
    assert_same(ours.protocol, a, b, (method, args, kwargs))
    return a


def _on(args: tuple[Any, ...], side: str) -> list[Any]:
    return [a.replace(K, side) if isinstance(a, str) and K in a else a for a in args]


async def twin(ours: Any, theirs: Any, method: str, *args: Any, **kwargs: Any) -> Any:
    """Calls that change data: each client on its own copy of the keys."""
    a = await getattr(ours, method)(*_on(args, "ours"), **kwargs)
    b = await getattr(theirs, method)(*_on(args, "theirs"), **kwargs)
    # Key names come back in some replies: compare them with the side's name taken out.
    if ours.protocol == 2:
        sa, sb = repr(typed(a)), repr(typed(b))
    else:
        sa, sb = repr(same_shape(a)), repr(same_shape(b))
    assert sa.replace("ours", "#") == sb.replace("theirs", "#"), (method, args, kwargs, a, b)
    return a


def run(url: str, mode: tuple[int, bool], arun: Any, body: Any) -> None:  # noqa: F811
    ours, theirs = clients(url, mode)

    async def main():
        await ours.flushdb()
        try:
            await body(ours, theirs)
        finally:
            await ours.close()
            await theirs.aclose()

    arun(main())


def test_streams(url, arun, mode):  # noqa: F811
    async def body(r, p):
        S = "s" + K
        for i in range(1, 6):
            await twin(r, p, "xadd", S, {"f": i, "g": "x"}, id=f"{i}-0")
        await twin(r, p, "xlen", S)
        await twin(r, p, "xrange", S)
        await twin(r, p, "xrange", S, "2-0", "+", count=2)
        await twin(r, p, "xrevrange", S, count=2)
        for side, c in (("ours", r), ("theirs", p)):
            got = await c.xread({f"s{side}": 0}, count=2)
            want = await (p if c is r else r).xread({f"s{side}": 0}, count=2)
            assert same_shape(got) == same_shape(want)
            assert same_shape(await c.xread({f"s{side}": "$"}, block=10)) == same_shape(
                await (p if c is r else r).xread({f"s{side}": "$"}, block=10)
            )
        await twin(r, p, "xgroup_create", S, "g", "0")
        for side, c in (("ours", r), ("theirs", p)):
            got = await c.xreadgroup("g", "c", {f"s{side}": ">"}, count=2)
            assert same_shape(got) in (
                [
                    [
                        f"s{side}".encode(),
                        [[b"1-0", {b"f": b"1", b"g": b"x"}], [b"2-0", {b"f": b"2", b"g": b"x"}]],
                    ]
                ],
                [[f"s{side}", [["1-0", {"f": "1", "g": "x"}], ["2-0", {"f": "2", "g": "x"}]]]],
                {
                    f"s{side}".encode(): [
                        [[b"1-0", {b"f": b"1", b"g": b"x"}], [b"2-0", {b"f": b"2", b"g": b"x"}]]
                    ]
                },
                {f"s{side}": [[["1-0", {"f": "1", "g": "x"}], ["2-0", {"f": "2", "g": "x"}]]]},
            ), got
        await twin(r, p, "xpending", S, "g")
        pr = await r.xpending_range("sours", "g", "-", "+", 10)
        pp = await p.xpending_range("stheirs", "g", "-", "+", 10)
        assert [(x["message_id"], x["consumer"]) for x in pr] == [
            (x["message_id"], x["consumer"]) for x in pp
        ]
        assert set(pr[0]) == set(pp[0])
        await twin(r, p, "xclaim", S, "g", "c2", 0, ["1-0"], justid=True)
        await twin(r, p, "xclaim", S, "g", "c2", 0, ["2-0"])
        await twin(r, p, "xautoclaim", S, "g", "c3", 0, count=1)
        await twin(r, p, "xautoclaim", S, "g", "c3", 0, justid=True)
        await twin(r, p, "xack", S, "g", "1-0")
        await twin(r, p, "xinfo_stream", S)
        gs = await r.xinfo_groups("sours")
        assert [sorted(g) for g in gs] == [sorted(g) for g in await p.xinfo_groups("stheirs")]
        cs = await r.xinfo_consumers("sours", "g")
        assert [c["name"] for c in cs] == [
            c["name"] for c in await p.xinfo_consumers("stheirs", "g")
        ]
        assert set(cs[0]) == set((await p.xinfo_consumers("stheirs", "g"))[0])
        await twin(r, p, "xgroup_createconsumer", S, "g", "c9")
        await twin(r, p, "xgroup_delconsumer", S, "g", "c9")
        await twin(r, p, "xgroup_setid", S, "g", "0")
        await twin(r, p, "xdel", S, "5-0")
        await twin(r, p, "xtrim", S, maxlen=3, approximate=False)
        await twin(r, p, "xtrim", S, minid="4-0", approximate=False)
        await twin(r, p, "xgroup_destroy", S, "g")
        await twin(r, p, "xgroup_destroy", S, "g")
        await twin(r, p, "xrange", S)

    run(url, mode, arun, body)


def test_scripting(url, arun, mode):  # noqa: F811
    async def body(r, p):
        src = "return {KEYS[1], ARGV[1], 7}"
        await same(r, p, "eval", src, 1, "k", "a")
        sha = await same(r, p, "script_load", src)
        await same(r, p, "script_exists", sha, "0" * 40)
        await same(r, p, "evalsha", sha, 1, "k", "b")
        await same(r, p, "evalsha_ro", sha, 1, "k", "c")
        await same(r, p, "script_flush")
        await same(r, p, "script_exists", sha)
        with pytest.raises(NoScriptError):
            await r.evalsha(sha, 1, "k", "b")
        ours = r.register_script("return redis.call('INCRBY', KEYS[1], ARGV[1])")
        theirs = p.register_script("return redis.call('INCRBY', KEYS[1], ARGV[1])")
        assert ours.sha == theirs.sha
        assert await ours(keys=["n"], args=[2]) == 2  # NOSCRIPT: loaded, then run
        assert await theirs(keys=["n"], args=[3]) == 5
        await r.script_flush()
        assert await ours(keys=["n"], args=[1]) == 6  # flushed: loaded again, run once
        assert await r.get("n") == await p.get("n")

    run(url, mode, arun, body)


def test_bitmaps_and_hyperloglog(url, arun, mode):  # noqa: F811
    async def body(r, p):
        B, other = "b" + K, "o" + K
        for off in (1, 7, 8, 30):
            await twin(r, p, "setbit", B, off, 1)
        await twin(r, p, "setbit", other, 3, 1)
        await twin(r, p, "getbit", B, 7)
        await twin(r, p, "bitcount", B)
        await twin(r, p, "bitcount", B, 0, 0)
        await twin(r, p, "bitcount", B, 0, 9, "BIT")
        await twin(r, p, "bitpos", B, 1)
        await twin(r, p, "bitpos", B, 0, 1)
        await twin(r, p, "bitpos", B, 1, 2, -1, "BIT")
        await twin(r, p, "bitop", "OR", "d" + K, B, other)
        await twin(r, p, "bitop", "NOT", "n" + K, B)
        await twin(r, p, "getbit", "n" + K, 0)
        await twin(r, p, "setbit", B, 1, 0)
        for c, side in ((r, "ours"), (p, "theirs")):
            bf = c.bitfield("bf" + side)
            bf.set("u8", 0, 255).get("u8", 0).incrby("u8", 0, 10)
            bf.overflow("SAT").incrby("i8", 8, 200).overflow("FAIL").incrby("u4", "#1", 100)
            assert await bf.execute() == [0, 255, 9, 127, None], side
            assert await c.bitfield_ro("bf" + side, "u8", 0, items=[("i8", 8)]) == [9, 127]
            sat = c.bitfield("bs" + side, default_overflow="SAT")
            assert await sat.incrby("u8", 0, 300).execute() == [255]
        await twin(r, p, "pfadd", "h1" + K, "a", "b", "c")
        await twin(r, p, "pfadd", "h1" + K, "a")
        await twin(r, p, "pfadd", "h2" + K, "c", "d")
        await twin(r, p, "pfcount", "h1" + K, "h2" + K)
        await twin(r, p, "pfmerge", "h3" + K, "h1" + K, "h2" + K)
        await twin(r, p, "pfcount", "h3" + K)

    run(url, mode, arun, body)


def test_geo(url, arun, mode):  # noqa: F811
    async def body(r, p):
        places = (13.361389, 38.115556, "Palermo", 15.087269, 37.502669, "Catania")
        assert await r.geoadd("g", places) == await p.geoadd("h", places) == 2
        assert await r.geoadd("g", (13.5, 38.2, "Palermo"), xx=True, ch=True) == 1
        assert await p.geoadd("h", (13.5, 38.2, "Palermo"), xx=True, ch=True) == 1
        assert await r.geoadd("g", (1, 1, "Nowhere"), xx=True) == 0
        for key in ("g", "h"):
            await same(r, p, "geodist", key, "Palermo", "Catania")
            await same(r, p, "geodist", key, "Palermo", "Catania", "km")
            await same(r, p, "geodist", key, "Palermo", "nowhere")
            await same(r, p, "geopos", key, "Palermo", "nowhere")
            await same(r, p, "geohash", key, "Palermo", "Catania")
            await same(r, p, "geosearch", key, longitude=15, latitude=37, radius=200, unit="km")
            await same(r, p, "geosearch", key, member="Palermo", radius=300, unit="km", sort="DESC")
            await same(
                r,
                p,
                "geosearch",
                key,
                longitude=15,
                latitude=37,
                width=400,
                height=400,
                unit="km",
                sort="ASC",
                count=1,
                withdist=True,
                withcoord=True,
                withhash=True,
            )
            await same(
                r, p, "geosearch", key, member="Catania", radius=500, unit="km", withdist=True
            )

    run(url, mode, arun, body)


def test_scans(url, arun, mode):  # noqa: F811
    async def body(r, p):
        await r.hset("h", mapping={f"f{i}": i for i in range(300)})
        await r.sadd("s", *range(300))
        await r.zadd("z", {f"m{i}": i / 2 for i in range(300)})
        await same(r, p, "hscan", "h", 0, match="f1*", count=1000)
        await same(r, p, "sscan", "s", 0, count=1000)
        await same(r, p, "zscan", "z", 0, count=1000)
        ours = {k: v async for k, v in r.hscan_iter("h", count=20)}
        theirs = {k: v async for k, v in p.hscan_iter("h", count=20)}
        assert ours == theirs and len(ours) == 300
        ours_s = {m async for m in r.sscan_iter("s", match="1*")}
        assert ours_s == {m async for m in p.sscan_iter("s", match="1*")} and ours_s
        ours_z = sorted([tuple(x) async for x in r.zscan_iter("z", count=20)])
        theirs_z = sorted([tuple(x) async for x in p.zscan_iter("z", count=20)])
        assert ours_z == theirs_z and len(ours_z) == 300

    run(url, mode, arun, body)


def test_table_rows_of_the_other_families(url, arun, mode):  # noqa: F811
    async def body(r, p):
        S, L, H, Z, T = ("s" + K, "l" + K, "h" + K, "z" + K, "t" + K)
        await twin(r, p, "set", S, "hello world")
        await twin(r, p, "getrange", S, 0, 4)
        await twin(r, p, "setrange", S, 6, "redis")
        await twin(r, p, "setnx", S, "x")
        await twin(r, p, "setnx", "new" + K, "x")
        await twin(r, p, "incrbyfloat", "f" + K, 1.5)
        await twin(r, p, "strlen", S)
        # Status words are str in surge whatever decode_responses says (documented).
        assert await r.type("sours") == "string"
        assert await p.type("stheirs") in (b"string", "string")
        await twin(r, p, "hset", H, mapping={"a": 1})
        await twin(r, p, "hsetnx", H, "a", 2)
        await twin(r, p, "hsetnx", H, "b", 2)
        await twin(r, p, "hincrbyfloat", H, "a", 0.25)
        await twin(r, p, "hstrlen", H, "a")
        await twin(r, p, "hexists", H, "zz")
        await twin(r, p, "hlen", H)
        await twin(r, p, "hkeys", H)
        await twin(r, p, "hvals", H)
        await twin(r, p, "hmget", H, ["a", "zz"], "b")
        await twin(r, p, "rpush", L, "a", "b", "c", "b")
        await twin(r, p, "lindex", L, 1)
        await twin(r, p, "linsert", L, "BEFORE", "c", "x")
        await twin(r, p, "lrem", L, 1, "b")
        await twin(r, p, "lset", L, 0, "first")
        await twin(r, p, "ltrim", L, 0, 2)
        await twin(r, p, "lpushx", L, "y")
        await twin(r, p, "rpushx", "missing" + K, "y")
        await twin(r, p, "rpoplpush", L, L)
        await twin(r, p, "lmove", L, L, "LEFT", "RIGHT")
        await twin(r, p, "lrange", L, 0, -1)
        await twin(r, p, "sadd", "a" + K, 1, 2, 3)
        await twin(r, p, "sadd", "b" + K, 2, 3, 4)
        await twin(r, p, "sdiff", ["a" + K], "b" + K)
        await twin(r, p, "sinter", "a" + K, "b" + K)
        await twin(r, p, "sunion", ["a" + K, "b" + K])
        await twin(r, p, "sdiffstore", "d" + K, ["a" + K, "b" + K])
        await twin(r, p, "sinterstore", "d" + K, ["a" + K, "b" + K])
        await twin(r, p, "sunionstore", "d" + K, ["a" + K], "b" + K)
        await twin(r, p, "smove", "a" + K, "b" + K, 1)
        await twin(r, p, "scard", "b" + K)
        await twin(r, p, "zadd", Z, {"a": 1, "b": 2, "c": 3})
        await twin(r, p, "zincrby", Z, 2.5, "a")
        await twin(r, p, "zcard", Z)
        await twin(r, p, "zcount", Z, 2, "+inf")
        await twin(r, p, "zlexcount", Z, "-", "+")
        await twin(r, p, "zremrangebyrank", Z, 0, 0)
        await twin(r, p, "zremrangebyscore", Z, "-inf", 2)
        await twin(r, p, "zremrangebylex", Z, "-", "+")
        await twin(r, p, "renamenx", S, T)
        await twin(r, p, "rename", T, S)
        await twin(r, p, "touch", S, T)
        await twin(r, p, "persist", S)
        await twin(r, p, "pttl", S)
        await twin(r, p, "unlink", S, T)

    run(url, mode, arun, body)
