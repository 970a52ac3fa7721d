"""Every type asyncpg decodes, in binary, against the real server and against
asyncpg itself: each value is read by both drivers from the same literal and
must be equal (asyncpg's classes compared by their attributes), and the value
surge read, sent back as a parameter, must be the same value to the server.
Edge values follow asyncpg's own codec tests (tests/test_codecs.py): extremes,
NULLs inside arrays and composites, nested composites, empty and infinite
ranges."""

from __future__ import annotations

import datetime as dt
import ipaddress
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import asyncpg
import pytest
import surge.postgres as pg
from surge.postgres import types as pgt
from surge.postgres.errors import InvalidArgumentError, OutdatedSchemaCacheError

from tests.postgres.peers import both


def norm(v: Any) -> Any:
    """A value with asyncpg's and surge's classes replaced by their attributes
    (and the class name), so the two drivers' values compare."""
    if hasattr(v, "isempty") and hasattr(v, "lower_inc"):
        return ("Range", norm(v.lower), norm(v.upper), v.lower_inc, v.upper_inc, v.isempty)
    if hasattr(v, "points") and hasattr(v, "is_closed"):
        return (type(v).__name__, tuple(tuple(p) for p in v.points), v.is_closed)
    if type(v).__name__ == "BitString":
        return ("BitString", v.bytes, len(v))
    if type(v).__name__ == "Record":
        return ("Record", tuple(v.keys()), tuple(norm(x) for x in v.values()))
    if isinstance(v, list):
        return [norm(x) for x in v]
    if isinstance(v, dict):
        return {k: norm(x) for k, x in v.items()}
    if isinstance(v, tuple):
        return (type(v).__name__, tuple(norm(x) for x in v))
    return (type(v).__name__, v)


async def check(s: Any, a: Any, typ: str, literal: str) -> Any:
    """Both drivers read ``literal::typ`` alike; surge's value written back is
    the same value (compared as the server's text of it)."""
    sql = f"SELECT {literal}::{typ}"
    got_s = await s.fetchval(sql)
    got_a = await a.fetchval(sql)
    assert norm(got_s) == norm(got_a), (typ, literal, got_s, got_a)
    if got_s is not None:
        want = await s.fetchval(f"SELECT ({literal}::{typ})::text")
        back = await s.fetchval(f"SELECT $1::{typ}::text", got_s)
        assert back == want, (typ, literal, got_s, back, want)
    return got_s


def lit(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def test_type_table_matches_the_servers_catalog(dsn: str, arun: Callable) -> None:
    # The one table of built-in oids (read from Rust) against a live pg_type.
    async def go() -> None:
        s = await pg.connect(dsn)
        try:
            rows = await s.fetch(
                "SELECT oid, typname::text, typarray FROM pg_catalog.pg_type"
                " WHERE oid = any($1::oid[])",
                list(pgt.TYPES),
            )
            catalog = {r[0]: (r[1], r[2]) for r in rows}
            for t in pgt.TYPES.values():
                assert catalog.get(t.oid) == (t.name, t.array_oid), t
            assert pgt.type_name(1007) == "_int4" and pgt.type_name(1) == "oid:1"
        finally:
            await s.close()

    arun(go())


#: (type, text literals): edge values, as asyncpg's codec tests pick them.
BUILTIN: list[tuple[str, list[str]]] = [
    ("timetz", ["10:10:00+01:06", "22:30:00+00", "00:00:00-14:59", "23:59:59.999999+14"]),
    ("inet", ["255.255.255.255", "127.0.0.1", "0.0.0.0", "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff",
              "::1", "::", "10.0.0.1/30", "0.0.0.0/0", "255.255.255.255/31", "127.0.0.0/8",
              "127.0.0.1/32", "10.11.12.13/0", "2001:db8::1/64"]),
    ("cidr", ["255.255.255.255/32", "127.0.0.0/8", "127.1.0.0/16", "10.0.0.0/32", "0.0.0.0/0",
              "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff/128", "::1/128", "::/0"]),
    ("macaddr", ["00:00:00:00:00:00", "ff:ff:ff:ff:ff:ff", "08:00:2b:01:02:03"]),
    ("macaddr8", ["00:00:00:00:00:00:00:00", "08:00:2b:01:02:03:04:05"]),
    ("bit(8)", ["00000001", "10000000"]),
    ("varbit", ["", "0", "1", "00010001", "000000001", "1" * 67]),
    ("point", ["(0,0)", "(1,2)", "(-1.5,1e300)", "(Infinity,-Infinity)"]),
    ("line", ["{1,2,3}", "{-1,0,0.5}"]),
    ("lseg", ["[(1,2),(2,2)]"]),
    ("box", ["(1,2),(0,0)", "(-1,-1),(-2,-3)"]),
    ("path", ["[(0,0),(1,1)]", "((0,0),(1,1))", "[(0,0)]"]),
    ("polygon", ["((0,0),(1,0),(1,1),(0,1))", "((5,5))"]),
    ("circle", ["<(0,0),100>", "<(1.5,-2),0>"]),
    ("xid", ["0", "1", "4294967295"]),
    ("xid8", ["0", "1", "18446744073709551615"]),
    ("cid", ["0", "4294967295"]),
    ("tid", ["(100,200)", "(0,0)", "(2147483647,0)", "(4294967295,0)", "(0,65535)",
             "(4294967295,65535)"]),
    ("pg_lsn", ["0/0", "16/B374D848", "7FFFFFFF/FFFFFFFF"]),
    ("txid_snapshot", ["100:1000:100,200,300,400", "10:10:"]),
    ("pg_snapshot", ["100:1000:100,200,300,400"]),
    # (An empty int2vector/oidvector has no binary input form on the server.)
    ("int2vector", ["1 2 3", "-32768"]),
    ("oidvector", ["1 4294967295"]),
    ("money", ["1.50", "-92233720368547758.08", "0"]),
    ("jsonpath", ["$.a[*] ? (@ > 1)"]),
    ("xml", ["<a>b</a>"]),
    ("int4range", ["empty", "[1,5)", "(,5)", "[1,)", "(,)", "[-2147483648,2147483647)"]),
    ("int8range", ["[1,9223372036854775807)", "(,)", "empty"]),
    ("numrange", ["[1.5,2.25]", "(,0)", "empty", "(-1e-20,1e20)"]),
    ("daterange", ["[2000-01-01,2024-02-29)", "[,infinity)", "(-infinity,infinity)", "empty"]),
    ("tsrange", ["[2000-01-01 00:00,2000-01-01 00:00:00.000001)", "(,)"]),
    ("tstzrange", ["[2000-01-01 00:00+00,2001-01-01 12:00+05)", "empty"]),
    ("int4multirange", ["{}", "{[1,2),[5,7)}", "{(,3),[10,)}"]),
    ("nummultirange", ["{[1.5,2.5]}"]),
    ("datemultirange", ["{[2020-01-01,2020-02-01),[2021-01-01,)}"]),
    ("int8multirange", ["{(,)}"]),
    ("tsmultirange", ["{}"]),
    ("tstzmultirange", ["{[2000-01-01 00:00+00,)}"]),
]  # fmt: skip


def test_builtin_types_equal_asyncpg_and_round_trip(dsn: str, arun: Callable) -> None:
    async def go() -> None:
        async with both(dsn) as (s, a):
            await s.execute("SET TimeZone = 'UTC'")
            await a.execute("SET TimeZone = 'UTC'")
            for typ, values in BUILTIN:
                for v in values:
                    await check(s, a, typ, lit(v))
                # The array of the type, with a NULL inside, and its NULL.
                elems = ", ".join(f"{lit(v)}::{typ}" for v in values[:3])
                await check(s, a, f"{typ}[]", f"ARRAY[{elems}, NULL]")
                await check(s, a, typ, "NULL")

    arun(go())


#: Integer arrays come back in the text format (cheaper for the server): the
#: same lists as asyncpg's binary ones, bounds and NULLs included.
INT_ARRAYS: list[tuple[str, list[str]]] = [
    ("int2[]", ["{}", "{-32768,32767,NULL}", "{{1,2},{3,4}}", "{{{NULL}}}"]),
    ("int4[]", ["{-2147483648,2147483647,0}", "{{1},{NULL}}", "{NULL,NULL}"]),
    ("int8[]", ["{-9223372036854775808,9223372036854775807}", "{{-1,-22},{333,4444}}"]),
]
#: Arrays with lower bounds other than 1: lists lose them (as asyncpg's do).
INT_ARRAYS_BOUNDED = ["'[0:1]={7,8}'::int4[]", "'[-3:-2][5:5]={{1},{2}}'::int8[]"]


def test_integer_arrays_in_text_equal_asyncpg(dsn: str, arun: Callable) -> None:
    async def go() -> None:
        async with both(dsn) as (s, a):
            for typ, values in INT_ARRAYS:
                for v in values:
                    await check(s, a, typ, lit(v))
            for sql in INT_ARRAYS_BOUNDED:
                assert await s.fetchval(f"SELECT {sql}") == await a.fetchval(f"SELECT {sql}")
            # inside a composite (binary there) and through a cursor: the same lists
            q = "SELECT ROW(ARRAY[1, NULL, 3]::int8[]), x FROM (VALUES ('{5,6}'::int2[])) v(x)"
            got = await s.fetchrow(q)
            assert (list(got[0]), got[1]) == ([[1, None, 3]], [5, 6])
            async with s.transaction():
                rows = [
                    r async for r in s.cursor("SELECT ARRAY[i, -i] FROM generate_series(1, 3) i")
                ]
            assert [r[0] for r in rows] == [[1, -1], [2, -2], [3, -3]]

    arun(go())


def test_python_values_as_asyncpg_gives_them(dsn: str, arun: Callable) -> None:
    async def go() -> None:
        async with both(dsn) as (s, a):
            # The exact Python objects (ipaddress, timezone, classes) asyncpg returns.
            assert await s.fetchval("SELECT '127.0.0.1/32'::inet") == ipaddress.IPv4Address(
                "127.0.0.1"
            )
            assert await s.fetchval("SELECT '10.0.0.1/30'::inet") == ipaddress.IPv4Interface(
                "10.0.0.1/30"
            )
            assert await s.fetchval("SELECT '::/0'::cidr") == ipaddress.IPv6Network("::/0")
            t = await s.fetchval("SELECT '10:10+01:30'::timetz")
            assert t == dt.time(10, 10, tzinfo=dt.timezone(dt.timedelta(minutes=90)))
            # An offset with seconds is kept (asyncpg rounds it to minutes: a
            # different value; surge never changes one).
            t = await s.fetchval("SELECT '10:10+01:06:40'::timetz")
            assert t.utcoffset() == dt.timedelta(hours=1, minutes=6, seconds=40)
            assert await s.fetchval("SELECT $1::timetz::text", t) == "10:10:00+01:06:40"
            r = await s.fetchval("SELECT '[1,5)'::int4range")
            assert isinstance(r, pgt.Range) and (r.lower, r.upper, r.lower_inc) == (1, 5, True)
            assert repr(r) == repr(await a.fetchval("SELECT '[1,5)'::int4range"))
            assert not await s.fetchval("SELECT 'empty'::int4range")
            inf = await s.fetchval("SELECT '(,)'::int4range")
            assert inf.lower_inf and inf.upper_inf and inf == pgt.Range(None, None)
            b = await s.fetchval("SELECT B'000000011'::varbit")
            assert b == pgt.BitString("0000 0001 1") and b.as_string() == "0000 0001 1"
            assert repr(b) == repr(await a.fetchval("SELECT B'000000011'"))
            p = await s.fetchval("SELECT '(1,2)'::point")
            assert p == pgt.Point(1, 2) == asyncpg.Point(1, 2) and p.x == 1.0
            box = await s.fetchval("SELECT '(1,2),(0,0)'::box")
            assert box.high == (1.0, 2.0) and box.low == (0.0, 0.0)
            c = await s.fetchval("SELECT '<(1,2),3>'::circle")
            assert c.center == (1.0, 2.0) and c.radius == 3.0
            assert await s.fetchval("SELECT '(3,4)'::tid") == (3, 4)
            assert await s.fetchval("SELECT ''::int2vector") == []
            assert await s.fetchval("SELECT ''::oidvector") == []
            # Parameters of asyncpg's own classes go in as well.
            for v, typ in [
                (asyncpg.Point(1, 2), "point"),
                (asyncpg.Box((1, 2), (0, 0)), "box"),
                (asyncpg.Path((0, 0), (1, 1), is_closed=True), "path"),
                (asyncpg.Polygon((0, 0), (1, 0), (1, 1)), "polygon"),
                (asyncpg.Circle((0, 0), 2), "circle"),
                (asyncpg.LineSegment((1, 2), (3, 4)), "lseg"),
                (asyncpg.Line(1, 2, 3), "line"),
                (asyncpg.BitString("101"), "varbit"),
                (asyncpg.Range(1, 4, upper_inc=True), "int4range"),
                ([asyncpg.Range(1, 2), asyncpg.Range(empty=True)], "int4multirange"),
            ]:
                assert await s.fetchval(f"SELECT $1::{typ}::text", v) == await a.fetchval(
                    f"SELECT $1::{typ}::text", v
                )
            # A tuple path is closed and a list path open, as in asyncpg.
            assert await s.fetchval("SELECT $1::path::text", ((0, 0), (1, 1))) == "((0,0),(1,1))"
            assert await s.fetchval("SELECT $1::path::text", [(0, 0), (1, 1)]) == "[(0,0),(1,1)]"
            # A sequence's bounds are both included, as in asyncpg.
            for seq in [(1, 3), [1, 3], (None, 3), (1,), ()]:
                got = await s.fetchval("SELECT $1::int4range::text", seq)
                assert got == await a.fetchval("SELECT $1::int4range::text", seq)
            assert await s.fetchval("SELECT $1::int4range::text", (1, 3)) == "[1,4)"
            assert await s.fetchval("SELECT $1::inet::text", "10.1.2.3/16") == "10.1.2.3/16"
            assert await s.fetchval("SELECT $1::macaddr8::text", "08:00:2b:01:02:03") == (
                "08:00:2b:ff:fe:01:02:03"
            )

    arun(go())


def test_bad_values_raise_and_leave_the_connection_healthy(dsn: str, arun: Callable) -> None:
    async def go() -> None:
        s = await pg.connect(dsn)
        try:
            bad: list[tuple[str, Any]] = [
                ("point", "nope"),
                ("point", (1, 2, 3)),
                ("tid", (1, 70000)),
                ("tid", (-1, 0)),
                ("inet", "300.1.1.1"),
                ("cidr", "10.0.0.1/8"),  # host bits set: not a network
                ("macaddr", "zz:00:00:00:00:00"),
                ("int4range", 5),
                ("int4range", (1, "x")),
                ("varbit", 12),
                ("xid", -1),
                ("xid8", 2**64),
                ("int4multirange", [None]),
            ]
            for typ, v in bad:
                with pytest.raises(InvalidArgumentError):
                    await s.fetchval(f"SELECT $1::{typ}", v)
            assert await s.fetchval("SELECT 1") == 1
            # An anonymous record cannot be a parameter (nor in asyncpg).
            with pytest.raises(InvalidArgumentError):
                await s.fetchval("SELECT $1::record", (1, 2))
            assert await s.fetchval("SELECT $1::int4", 7) == 7
        finally:
            await s.close()

    arun(go())


@asynccontextmanager
async def user_types(dsn: str) -> AsyncIterator[tuple[Any, Any, str]]:
    """Both drivers, with a schema of user-defined types (dropped after)."""
    schema = f"tt_{uuid.uuid4().hex[:10]}"
    async with both(dsn) as (s, a):
        await s.execute(
            f"""
            CREATE EXTENSION IF NOT EXISTS hstore;
            CREATE EXTENSION IF NOT EXISTS citext;
            CREATE SCHEMA {schema};
            SET search_path = {schema}, public;
            CREATE TYPE mood AS ENUM ('sad', 'ok', 'happy', 'très ''bien''');
            CREATE DOMAIN posint AS int CHECK (VALUE > 0);
            CREATE DOMAIN posints AS posint[];
            CREATE DOMAIN label AS text;
            CREATE TYPE floatrange AS RANGE (subtype = float8);
            CREATE TYPE moodrange AS RANGE (subtype = mood);
            CREATE TYPE inner_t AS (x int, label label, m mood, tags text[], n posint);
            CREATE TYPE outer_t AS (id int8, inner_v inner_t, r int4range, fr floatrange,
                                    moods mood[], inners inner_t[], h hstore);
            CREATE TABLE tbl (a int, b text);
            """
        )
        await a.execute(f"SET search_path = {schema}, public")
        # asyncpg returns hstore as text unless its hstore codec is asked for;
        # surge decodes it to a dict by default (as asyncpg with the codec).
        await a.set_builtin_type_codec("hstore", codec_name="pg_contrib.hstore")
        try:
            yield s, a, schema
        finally:
            await s.execute(f"RESET search_path; DROP SCHEMA {schema} CASCADE")


#: (type, literals) of the user-defined types above.
USER: list[tuple[str, list[str]]] = [
    ("mood", ["sad", "très 'bien'"]),
    ("posint", ["1", "2147483647"]),
    ("posints", ["{1,2,3}", "{}"]),
    ("label", ["", "x"]),
    ("floatrange", ["[1.5,2.5)", "empty", "(,)", "(-Infinity,Infinity]"]),
    ("floatmultirange", ["{}", "{[1,2),[3,4]}"]),
    ("moodrange", ["[sad,happy)", "(ok,)"]),
    ("hstore", ['a=>1, b=>NULL, "c d"=>"e\\"f"', "", '"ключ"=>"значение"']),
    ("inner_t", ['(1,x,ok,"{a,NULL}",5)', "(,,,,)", '(2,"",sad,{},)']),
    ("outer_t", [
        '(1,"(1,x,ok,{a},5)","[1,3)","[1.5,)","{sad,NULL,happy}","{""(1,y,sad,{},1)"",NULL}","a=>b")',
        "(,,,,,,)",
        '(9223372036854775807,"(,,,,)",empty,empty,{},{},"")',
    ]),
    ("tbl", ["(1,a)", "(,)"]),
    # An extension's base type with no binary codec here: str, its array a list of str.
    ("citext", ["AbC", 'with "quotes", commas and \\ backslash']),
]  # fmt: skip


def test_user_types_equal_asyncpg_and_round_trip(dsn: str, arun: Callable) -> None:
    async def go() -> None:
        async with user_types(dsn) as (s, a, _):
            for typ, values in USER:
                for v in values:
                    await check(s, a, typ, lit(v))
                elems = ", ".join(f"{lit(v)}::{typ}" for v in values)
                await check(s, a, f"{typ}[]", f"ARRAY[{elems}, NULL]")
                await check(s, a, typ, "NULL")
            # Anonymous records, nested, with NULLs (read only: not a parameter type).
            sql = "SELECT ROW(1, 'a', NULL, ROW(2.5::float8, 'x'::text), 'ok'::mood)"
            got_s, got_a = await s.fetchval(sql), await a.fetchval(sql)
            assert norm(got_s) == norm(got_a)
            assert got_s == (1, "a", None, (2.5, "x"), "ok")
            # An array inside an anonymous record (asyncpg 0.32 cannot decode it:
            # "no decoder for composite type element").
            got = await s.fetchval("SELECT ROW(ARRAY[1, NULL], ROW('[1,2)'::int4range))")
            assert got[0] == [1, None] and got[1][0] == pgt.Range(1, 2)
            # Composites given as tuples, dicts or Records; a NULL field.
            v = await s.fetchval("SELECT $1::inner_t", (3, "z", "happy", ["q", None], None))
            assert tuple(v) == (3, "z", "happy", ["q", None], None)
            d = await s.fetchval("SELECT $1::inner_t", {"x": 4, "m": "sad"})
            assert d["x"] == 4 and d["m"] == "sad" and d["tags"] is None
            assert await s.fetchval("SELECT ($1::inner_t).x", v) == 3
            with pytest.raises(InvalidArgumentError):
                await s.fetchval("SELECT $1::inner_t", (1, 2))
            with pytest.raises(InvalidArgumentError):
                await s.fetchval("SELECT $1::inner_t", {"nope": 1})
            h = await s.fetchval("SELECT $1::hstore", {"k": "v", "n": None})
            assert h == {"k": "v", "n": None}

    arun(go())


def test_types_looked_up_once_and_again_after_a_schema_change(dsn: str, arun: Callable) -> None:
    async def go() -> None:
        async with user_types(dsn) as (s, _a, _):
            codec = s._session.codec
            assert codec.type_count() == 0
            await s.fetchval("SELECT $1::mood", "ok")
            known = codec.type_count()
            assert known >= 1
            # Another statement with the same type: nothing new to look up.
            await s.fetchval("SELECT ARRAY['ok']::mood[] || $1::mood", "sad")
            assert codec.type_count() == known + 1  # only the array type was new
            # Composites are decoded as their fields stood when looked up; a
            # field added later is noticed (as asyncpg: OutdatedSchemaCacheError,
            # and the next query looks the type up again).
            await s.execute("CREATE TABLE holder (v inner_t)")
            await s.execute("INSERT INTO holder VALUES (ROW(1, 'x', 'ok', NULL, 2))")
            assert len(await s.fetchval("SELECT v FROM holder")) == 5
            await s.execute("ALTER TYPE inner_t ADD ATTRIBUTE extra int")
            await s.execute("UPDATE holder SET v.extra = 7")
            with pytest.raises(OutdatedSchemaCacheError):
                await s.fetchval("SELECT v FROM holder")
            got = await s.fetchval("SELECT v FROM holder")
            assert got["extra"] == 7 and len(got) == 6
            await s.reload_schema_state()
            assert codec.type_count() == 0

    arun(go())


def test_copy_records_of_user_and_new_types(dsn: str, arun: Callable) -> None:
    async def go() -> None:
        async with user_types(dsn) as (s, a, _):
            await s.execute(
                "CREATE TABLE c (m mood, i inner_t, r floatrange, p point, n inet, h hstore,"
                " ms mood[])"
            )
            rows = [
                ("ok", (1, "a", "sad", ["t"], 3), pgt.Range(1.5, 2.0), pgt.Point(1, 2),
                 ipaddress.ip_interface("10.0.0.1/8"), {"a": "b"}, ["sad", None]),
                (None, None, pgt.Range(empty=True), None, None, None, None),
            ]  # fmt: skip
            assert await s.copy_records_to_table("c", records=rows) == "COPY 2"
            got = await s.fetch("SELECT * FROM c ORDER BY m NULLS LAST")
            got_a = await a.fetch("SELECT * FROM c ORDER BY m NULLS LAST")
            assert [norm(list(r.values())) for r in got] == [norm(list(r.values())) for r in got_a]
            assert got[0]["r"] == pgt.Range(1.5, 2.0) and got[1]["r"].isempty

    arun(go())


#: A record of k + 1 fields, int4 and text by turns: a new record shape for each k.
_SHAPES_FN = """
CREATE OR REPLACE FUNCTION anon_shape(k int) RETURNS record LANGUAGE plpgsql AS $$
DECLARE r record;
BEGIN
  EXECUTE 'SELECT ' || (SELECT string_agg(CASE WHEN j % 2 = 0 THEN j || '::int4'
                                          ELSE quote_literal('t' || j) || '::text' END, ', ')
                        FROM generate_series(0, k) j) INTO r;
  RETURN r;
END $$
"""


async def _varying_records(c: Any) -> list:
    """Anonymous records whose field types change from row to row of one
    statement, and from run to run of one prepared statement."""
    out: list = []
    for sql in [
        # two row types in one column, by turns
        "SELECT CASE WHEN i % 2 = 0 THEN ROW(i, 'x'::text) ELSE ROW('y'::text, i::float8)"
        " END, i FROM generate_series(1, 6) i",
        # more shapes than a column keeps resolved (MAX_RECORD_SHAPES), twice
        # round; inside a record of a fixed shape, and in arrays
        "SELECT anon_shape(i % 11), ROW(anon_shape(i % 3), i), ARRAY[anon_shape(i % 4)]"
        " FROM generate_series(0, 25) i",
    ]:
        out.append([tuple(r) for r in await c.fetch(sql)])
    st = await c.prepare("SELECT anon_shape($1::int), ROW($1::int, anon_shape($1::int + 1))")
    for k in (0, 3, 1, 3, 0):
        out.append(tuple(await st.fetchrow(k)))
    return out


def test_anonymous_records_of_changing_shapes_equal_asyncpg(dsn: str, arun: Callable) -> None:
    """A record column's field codecs are resolved once per shape (its field
    type oids) and kept: rows and runs whose fields have other types decode by
    their own oids, as asyncpg decodes them."""

    async def go() -> None:
        async with both(dsn) as (s, a):
            await s.execute(_SHAPES_FN)
            got, expected = await _varying_records(s), await _varying_records(a)
            assert got == expected
            assert got[0][:2] == [(("y", 1.0), 1), ((2, "x"), 2)]
            assert got[1][10][0] == (0, "t1", 2, "t3", 4, "t5", 6, "t7", 8, "t9", 10)
            assert got[1][12][0] == (0, "t1") and got[-1] == ((0,), (0, (0, "t1")))

    arun(go())
