"""Programs ported from asyncpg that shape their rows, beside asyncpg on the same
server: ``record_class=`` everywhere asyncpg takes it, rows compared and sorted
as tuples, a prepared statement's status, the statement cache's bounds."""

from __future__ import annotations

import asyncio
import copy
import gc
import json
import pickle
import sys
from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import Any

import asyncpg
import pytest
import surge.postgres as pg

from tests.postgres.peers import on_connection, same, tenfold_int4


def _attr_record(base: type) -> type:
    """The subclass asyncpg's docs show: columns as attributes."""

    class AttrRecord(base):  # type: ignore[misc, valid-type]
        def __getattr__(self, name: str) -> Any:
            try:
                return self[name]
            except KeyError:
                raise AttributeError(name) from None

    return AttrRecord


async def _record_class_story(mod: Any, dsn: str) -> list:
    rc = _attr_record(mod.Record)
    out: list = []
    c = await mod.connect(dsn, record_class=rc)
    row = await c.fetchrow("SELECT 1 AS id, 'a' AS name")
    out += [type(row).__name__, row.id, row.name, repr(row), isinstance(row, mod.Record)]
    rows = await c.fetch("SELECT generate_series(1, 3) AS n")
    out.append([(type(r).__name__, r.n) for r in rows])
    out.append(type(await c.fetchrow("SELECT 1", record_class=mod.Record)).__name__)
    out.append(await c.fetchval("SELECT 7"))
    st = await c.prepare("SELECT $1::int AS v", record_class=rc)
    out.append([(type(r).__name__, r.v) for r in await st.fetch(5)])
    async with c.transaction():
        out.append([type(r).__name__ async for r in c.cursor("SELECT 1 AS x", record_class=rc)])
        cur = await c.cursor("SELECT 2 AS y")
        out.append(type(await cur.fetchrow()).__name__)
    nested = await c.fetchrow("SELECT ROW(1, 'b') AS r")
    out.append(type(nested["r"]).__name__)  # a composite inside stays a Record
    await c.close()
    pool = await mod.create_pool(dsn, min_size=1, max_size=1, record_class=rc)
    out.append(type(await pool.fetchrow("SELECT 1 AS z")).__name__)
    out.append(type(await pool.fetchrow("SELECT 1", record_class=mod.Record)).__name__)
    out.append([type(r).__name__ for r in await pool.fetch("SELECT 1", record_class=rc)])
    got = await pool.fetchmany("SELECT $1::int AS v", [(1,), (2,)], record_class=rc)
    out.append([r.v for r in got])
    async with pool.acquire() as pc:
        out.append((await pc.fetchrow("SELECT 3 AS z")).z)
    await pool.close()

    class Init(mod.Record):  # type: ignore[misc, name-defined]
        def __init__(self) -> None:
            pass

    for bad in (dict, Init):
        with pytest.raises(mod.InterfaceError) as e:
            await mod.connect(dsn, record_class=bad)
        out.append(str(e.value).replace("surge.postgres", "asyncpg"))
    return out


def test_record_class_as_asyncpg(dsn: str, arun: Callable) -> None:
    async def go() -> None:
        assert await _record_class_story(pg, dsn) == await _record_class_story(asyncpg, dsn)
        with pytest.raises(TypeError):
            _attr_record(pg.Record)()  # rows come from queries only

    arun(go())


def test_record_class_rows_are_freed(dsn: str, arun: Callable) -> None:
    """Rows of a Python subclass (with a __dict__) give back their class and their
    attributes when freed: each row holds one reference to its class."""

    async def go() -> None:
        rc = _attr_record(pg.Record)
        c = await pg.connect(dsn, record_class=rc)
        marker = object()
        before = (sys.getrefcount(rc), sys.getrefcount(marker))
        rows = await c.fetch("SELECT generate_series(1, 1000) AS n, 'x' AS s")
        for r in rows:
            r.note = marker
        assert sys.getrefcount(rc) == before[0] + 1000
        assert sys.getrefcount(marker) == before[1] + 1000
        assert rows[999].n == 1000 and rows[0].note is marker
        del rows, r
        await asyncio.sleep(0)  # (the engine lets go of a batch's replies on the next turn)
        gc.collect()
        assert (sys.getrefcount(rc), sys.getrefcount(marker)) == before
        await c.close()

    arun(go())


@on_connection
async def _ordering(mod: Any, c: Any) -> list:
    a = await c.fetchrow("SELECT 1 AS x, 'a' AS y")
    b = await c.fetchrow("SELECT 2 AS x, 'a' AS y")
    out: list = [a < b, a <= b, a > b, a >= b, a == b, a != b, a == a]
    out += [a == (1, "a"), a < (1, "b"), a > (0,), a != (1, "a"), a == (1, "a")]
    out += [[tuple(r) for r in sorted([b, a])], a == 1, a != "x", hash(a) == hash((1, "a"))]
    for other in (1, "s", None):
        with pytest.raises(TypeError):
            _ = a < other  # type: ignore[operator]
    return out


_ROW = "SELECT 1 AS a, 'x'::text AS b, NULL::int AS c, 2 AS a2, ARRAY[1] AS l"


def _outcome(f: Callable[[], Any]) -> Any:
    """What ``f()`` gives, or the name of what it raises (asyncpg's and surge's
    messages name their own modules)."""
    try:
        return f()
    except Exception as e:
        return ("raises", type(e).__name__)


@on_connection
async def _record_surface(mod: Any, c: Any) -> list:
    r = await c.fetchrow(_ROW)
    empty = await c.fetchrow("SELECT")
    dup = await c.fetchrow("SELECT 1 AS id, 2 AS id")
    probes: list[Callable[[], Any]] = [
        lambda: dict(r),
        lambda: (list(r.keys()), list(r.values()), list(r.items())),
        lambda: (r.get("a"), r.get("zz"), r.get("zz", 5)),
        # get() looks names up only (surge's took positions too)
        lambda: (r.get(0), r.get(0, "d"), r.get(-1, "d"), r.get(1.0, "d"), r.get([], "d")),
        lambda: (r[1:3], r[::-1], r[-1], r[-5:], r[True]),
        lambda: r[-6],
        lambda: r[5],
        lambda: r[2**70],
        lambda: r["zz"],
        # a key that is neither a position nor a name: KeyError (surge's: TypeError)
        lambda: r[1.0],
        lambda: r[None],
        lambda: r[b"a"],
        lambda: ("a" in r, "x" in r, 1 in r, None in r, [] in r, ("a", 1) in r.items()),
        lambda: (r == (1, "x", None, 2, [1]), r != (1, "x", None, 2, [1]), r == [1]),
        lambda: (len(r), len(empty), bool(empty), list(reversed(r)), tuple(r)),
        lambda: hash(r),
        lambda: (repr(r), str(r), repr(empty)),
        lambda: (dict(dup), dup["id"], dup.get("id"), list(dup.keys()), repr(dup)),
        lambda: [isinstance(r, t) for t in (Mapping, Sequence, tuple, Hashable)],
        lambda: pickle.dumps(r),
        lambda: copy.copy(r),
        lambda: copy.deepcopy(r),
        lambda: json.dumps(r),
        lambda: r.zz,  # type: ignore[attr-defined]
        lambda: setattr(r, "a", 1),
        lambda: r.get(),
        lambda: r.get("a", 1, 2),
        lambda: mod.Record(),
    ]
    out = [_outcome(p) for p in probes]
    with pytest.raises(IndexError) as e:
        r[9]
    out.append(str(e.value))
    return out


def test_record_mapping_and_sequence_surface_as_asyncpg(dsn: str, arun: Callable) -> None:
    """A row as a port uses it: dict(), get, keys/values/items, slices, negative
    positions, ``in`` (names), equality and hash as a tuple, repr, what raises
    and with which class (neither pickles, copies nor is a Mapping)."""

    async def go() -> None:
        theirs = await same(dsn, _record_surface)
        assert theirs[3] == (None, "d", "d", "d", "d")
        assert theirs[9] == ("raises", "KeyError")

    arun(go())


def test_record_ordering_and_equality_as_asyncpg(dsn: str, arun: Callable) -> None:
    """Records compare as the tuples of their values, with Records and tuples, by
    every operator (surge's compared ``==``/``!=`` only: ``sorted(rows)`` failed)."""

    async def go() -> None:
        await same(dsn, _ordering)

    arun(go())


@on_connection
async def _statusmsg(mod: Any, c: Any) -> list:
    await c.execute("CREATE TEMP TABLE porting_st (x int)")
    st = await c.prepare("SELECT generate_series(1, $1::int)")
    out: list = [st.get_statusmsg()]
    await st.fetch(3)
    out.append(st.get_statusmsg())
    await st.fetchrow(3)  # stops after the row: no status
    out.append(st.get_statusmsg())
    await st.fetchrow(0)
    out.append(st.get_statusmsg())
    await st.fetchval(2)
    out.append(st.get_statusmsg())
    ins = await c.prepare("INSERT INTO porting_st SELECT generate_series(1, $1::int) RETURNING x")
    await ins.fetch(4)
    out.append(ins.get_statusmsg())
    await ins.executemany([(1,), (2,)])  # does not report a status
    out.append(ins.get_statusmsg())
    return out


def test_prepared_statement_statusmsg_as_asyncpg(dsn: str, arun: Callable) -> None:
    async def go() -> None:
        theirs = await same(dsn, _statusmsg)
        assert theirs[1] == "SELECT 3"

    arun(go())


async def _cache_bounds(mod: Any, dsn: str) -> list:
    """How many statements each cache setting leaves prepared on the server."""
    out: list = []
    # (not counting itself: surge runs an uncached query as a named statement
    # closed after use, asyncpg as the unnamed one)
    count = (
        "SELECT count(*) FROM pg_prepared_statements"
        " WHERE statement NOT LIKE '%pg_prepared_statements%'"
    )
    long_query = "SELECT 1 AS " + "x" * 60
    for kwargs in (
        {"statement_cache_size": 0},
        {"max_cacheable_statement_size": 40},
        {},
    ):
        c = await mod.connect(dsn, **kwargs)
        for _ in range(2):
            await c.fetchval("SELECT 1")
            await c.fetchval(long_query)
        out.append(await c.fetchval(count))
        await c.close()
    return out


def test_statement_cache_bounds_as_asyncpg(dsn: str, arun: Callable) -> None:
    """``statement_cache_size=0`` keeps nothing prepared, a query longer than
    ``max_cacheable_statement_size`` is not kept, as asyncpg (counted on the server)."""

    async def go() -> None:
        assert await _cache_bounds(pg, dsn) == await _cache_bounds(asyncpg, dsn)

    arun(go())


def test_cached_statement_lifetime_is_honoured(dsn: str, arun: Callable) -> None:
    """A statement older than ``max_cached_statement_lifetime`` is prepared again
    (its name changes), as in asyncpg; surge's default 0 keeps it."""

    async def go() -> None:
        c = await pg.connect(dsn, max_cached_statement_lifetime=0.2)
        first = (await c.prepare("SELECT 11")).get_name()
        assert (await c.prepare("SELECT 11")).get_name() == first
        await asyncio.sleep(0.3)
        assert (await c.prepare("SELECT 11")).get_name() != first
        await c.close()
        c = await pg.connect(dsn)
        first = (await c.prepare("SELECT 12")).get_name()
        await asyncio.sleep(0.3)
        assert (await c.prepare("SELECT 12")).get_name() == first
        await c.close()

    arun(go())


@on_connection
async def _codec_in_arrays(mod: Any, c: Any) -> list:
    """A text codec on a built-in type also runs on the elements of its arrays
    (NULLs stay None), both ways, one and two dimensions, empty arrays."""
    await tenfold_int4(c)
    await c.set_type_codec(
        "numeric", schema="pg_catalog", encoder=str, decoder=lambda s: "n:" + s, format="text"
    )
    out = [
        await c.fetchval("SELECT ARRAY[1, NULL, 3]::int4[]"),
        await c.fetchval("SELECT $1::int4[]", [10, None, 30]),
        await c.fetchval("SELECT $1::int4[] = ARRAY[1, NULL, 3]", [10, None, 30]),
        await c.fetchval("SELECT ARRAY[ARRAY[1, 2], ARRAY[3, 4]]::int4[]"),
        await c.fetchval("SELECT '{}'::int4[]"),
        await c.fetchval("SELECT 7::int4"),
        await c.fetchval("SELECT ARRAY[1.50, 2]::numeric[]"),
        await c.fetchval("SELECT ARRAY[1, 2]::int8[]"),  # no codec on int8
    ]
    await c.reset_type_codec("int4", schema="pg_catalog")
    out.append(await c.fetchval("SELECT ARRAY[1, NULL, 3]::int4[]"))
    return out


def test_text_codec_runs_inside_arrays_of_any_builtin_type_as_asyncpg(
    dsn: str, arun: Callable
) -> None:
    """(Before: only json[]/jsonb[] elements went through the codec; an int4[]
    came back as built-in ints, not through the decoder.)"""

    async def go() -> None:
        theirs = await same(dsn, _codec_in_arrays)
        assert theirs[0] == [10, None, 30]

    arun(go())
