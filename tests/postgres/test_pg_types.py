"""Every type with a binary codec, both ways, against the real server: values
sent as parameters come back equal, NULLs included, and values the server
makes decode to what Python expects."""

from __future__ import annotations

import datetime as dt
import decimal
import uuid

import pytest
import surge.postgres as pg
from hypothesis import given
from hypothesis import strategies as st
from surge.errors import InterfaceError
from surge.postgres.types import Point

UTC = dt.UTC
D = decimal.Decimal

ROUND_TRIPS = [
    ("bool", [True, False]),
    ("int2", [0, -32768, 32767]),
    ("int4", [0, -(2**31), 2**31 - 1]),
    ("int8", [0, -(2**63), 2**63 - 1]),
    ("float4", [0.0, 1.5, -2.25]),
    ("float8", [0.0, 1e300, -1.0000000001, float("inf")]),
    (
        "numeric",
        [D("0"), D("1.5"), D("-123456789012345678901234567890.0123456789"), D("1E+30"), D("NaN")],
    ),
    ("text", ["", "héllo wörld ✓", "x" * 10000]),
    ("varchar", ["abc"]),
    ("name", ["pg_type"]),
    ("bpchar", ["a"]),
    ("bytea", [b"", b"\x00\xff" * 100]),
    ("uuid", [uuid.UUID("12345678-1234-5678-1234-567812345678")]),
    ("date", [dt.date(2000, 1, 1), dt.date(1, 1, 1), dt.date(9999, 12, 31), dt.date(1969, 7, 20)]),
    ("time", [dt.time(0, 0), dt.time(23, 59, 59, 999999), dt.time(12, 30, 1, 5)]),
    ("timestamp", [dt.datetime(2000, 1, 1), dt.datetime(1900, 3, 4, 5, 6, 7, 8)]),
    (
        "timestamptz",
        [dt.datetime(2020, 5, 6, 7, 8, 9, 10, tzinfo=UTC), dt.datetime(1950, 1, 1, tzinfo=UTC)],
    ),
    ("interval", [dt.timedelta(0), dt.timedelta(days=-3, seconds=5, microseconds=7)]),
    ("jsonb", ['{"a": [1, 2, null]}']),
    ("json", ['{"b":1}']),
    ("oid", [0, 4294967295]),
    ("int4[]", [[], [1, None, 3], [[1, 2], [3, 4]]]),
    ("text[]", [["a", None, "b,c"], []]),
    ("int8[]", [[2**40]]),
    ("numeric[]", [[D("1.1"), None]]),
    ("bool[]", [[True, False, None]]),
    ("bytea[]", [[b"x", b""]]),
    ("date[]", [[dt.date(2001, 2, 3)]]),
    ("timestamptz[]", [[dt.datetime(2001, 2, 3, tzinfo=UTC)]]),
    ("uuid[]", [[uuid.UUID(int=1)]]),
    ("float8[]", [[1.5, None]]),
    ("varchar[]", [["x"]]),
    ("jsonb[]", [['{"a": 1}']]),
]


def same(a: object, b: object) -> bool:
    """Equal, counting NaN equal to NaN."""
    return a == b or (a != a and b != b)


def test_round_trips(arun, dsn):
    async def main():
        conn = await pg.connect(dsn)
        try:
            for typ, values in ROUND_TRIPS:
                for v in values:
                    got = await conn.fetchval(f"SELECT $1::{typ}", v)
                    assert same(got, v), (typ, v, got)
                assert await conn.fetchval(f"SELECT $1::{typ}", None) is None, typ
        finally:
            await conn.close()

    arun(main())


def test_server_made_values(arun, dsn):
    async def main():
        conn = await pg.connect(dsn)
        try:
            r = await conn.fetchrow(
                "SELECT 'infinity'::date AS dpos, '-infinity'::timestamp AS tneg,"
                " '2020-01-01 12:00+05'::timestamptz AS tz, interval '1 month 2 days' AS iv,"
                " 'NaN'::float8 AS nan, ARRAY[[1,2],[3,4]]::int2[] AS m, '{}'::text[] AS e,"
                " 12345678901234567890.5::numeric AS big, 'x'::\"char\" AS c,"
                " '(1,2)'::point AS p, '{\"k\": 1}'::jsonb AS j"
            )
            assert r["dpos"] == dt.date.max
            assert r["tneg"] == dt.datetime.min
            assert r["tz"] == dt.datetime(2020, 1, 1, 7, tzinfo=UTC)
            assert r["iv"] == dt.timedelta(days=32)
            assert r["nan"] != r["nan"]
            assert r["m"] == [[1, 2], [3, 4]]
            assert r["e"] == []
            assert r["big"] == D("12345678901234567890.5")
            assert r["c"] == b"x"  # "char" is a byte, as in asyncpg
            assert r["p"] == Point(1, 2)
            assert r["j"] == '{"k": 1}'
            # A session time zone does not change what timestamptz decodes to.
            await conn.execute("SET TIME ZONE 'America/New_York'")
            v = await conn.fetchval("SELECT '2020-06-01 00:00:00+00'::timestamptz")
            assert v == dt.datetime(2020, 6, 1, tzinfo=UTC)
            aware = dt.datetime(2020, 6, 1, 3, tzinfo=dt.timezone(dt.timedelta(hours=3)))
            assert await conn.fetchval("SELECT $1::timestamptz", aware) == v
            # json parameters take any JSON value, not only str.
            assert await conn.fetchval("SELECT ($1::jsonb)->>'a'", {"a": "b"}) == "b"
        finally:
            await conn.close()

    arun(main())


def test_bad_arguments_raise_before_sending(arun, dsn):
    async def main():
        conn = await pg.connect(dsn)
        try:
            await conn.fetchval("SELECT 1")
            sent = conn.engine.stats["requests"]
            cases = [
                ("SELECT $1::int4", ("x",)),
                ("SELECT $1::int2", (70000,)),
                ("SELECT $1::bool", (1,)),
                ("SELECT $1::int4", (True,)),
                ("SELECT $1::int4[]", ([[1], [2, 3]],)),
                ("SELECT $1::text", (b"bytes",)),
                ("SELECT $1::date", ("2020-01-01",)),
                ("SELECT $1::int4", ()),
                ("SELECT $1::int4", (1, 2)),
                ("SELECT $1::uuid", ("not-a-uuid",)),
            ]
            for q, args in cases:
                with pytest.raises(pg.DataError):
                    await conn.fetchval(q, *args)
            # Only the Parse of each new query went out, never a Bind.
            assert conn.engine.stats["requests"] - sent <= len(cases)
            assert await conn.fetchval("SELECT $1::int4", 5) == 5
            with pytest.raises(IndexError):
                await conn.fetchval("SELECT 1", column=3)
        finally:
            await conn.close()

    arun(main())


@given(
    st.one_of(
        st.tuples(st.just("int8"), st.integers(-(2**63), 2**63 - 1)),
        st.tuples(st.just("text"), st.text().filter(lambda s: "\x00" not in s)),
        st.tuples(
            st.just("numeric"),
            st.decimals(allow_nan=False, allow_infinity=False, places=None).filter(
                lambda d: abs(d.adjusted()) < 1000
            ),
        ),
        st.tuples(st.just("float8"), st.floats(allow_nan=False)),
        st.tuples(st.just("bytea"), st.binary()),
        st.tuples(st.just("int4[]"), st.lists(st.none() | st.integers(-(2**31), 2**31 - 1))),
        st.tuples(
            st.just("timestamptz"),
            st.datetimes(min_value=dt.datetime(1, 1, 2), max_value=dt.datetime(9999, 12, 30)).map(
                lambda d: d.replace(tzinfo=UTC)
            ),
        ),
    )
)
def test_property_round_trip(dsn, typ_value):
    import asyncio

    typ, value = typ_value

    async def main():
        conn = await pg.connect(dsn)
        try:
            got = await conn.fetchval(f"SELECT $1::{typ}", value)
        finally:
            await conn.close()
        assert got == value

    asyncio.run(main())


def test_types_without_a_binary_codec_go_as_text(arun, dsn):
    async def main():
        conn = await pg.connect(dsn)
        try:
            await conn.execute(
                f"DROP TYPE IF EXISTS mood_{arun.kind}; "
                f"CREATE TYPE mood_{arun.kind} AS ENUM ('sad', 'happy')"
            )
            assert await conn.fetchval(f"SELECT $1::mood_{arun.kind}", "happy") == "happy"
            # money and reg* go as text, as in asyncpg (their text depends on
            # server settings and catalog names).
            assert await conn.fetchval("SELECT '1.50'::money") == "$1.50"
            assert await conn.fetchval("SELECT 'pg_type'::regclass") == "pg_type"
            assert await conn.fetchval("SELECT $1::regclass::oid", "pg_type") == 1247
            assert await conn.fetchval("SELECT ARRAY['1'::money, NULL]") == ["$1.00", None]
            with pytest.raises(pg.DataError, match="pass it as str"):
                await conn.fetchval("SELECT $1::money", 5.0)
            # An int goes as its (exact) text: the server judges it.
            assert await conn.fetchval("SELECT $1::regclass", 1247) == "pg_type"
            await conn.execute(f"DROP TYPE mood_{arun.kind}")
        finally:
            await conn.close()

    arun(main())


def test_custom_type_codec(arun, dsn):
    import json

    async def main():
        conn = await pg.connect(dsn)
        try:
            await conn.fetchval("SELECT '{}'::jsonb")  # cached with the built-in codec
            await conn.set_type_codec(
                "jsonb", schema="pg_catalog", encoder=json.dumps, decoder=json.loads
            )
            assert await conn.fetchval("SELECT '{}'::jsonb") == {}
            assert await conn.fetchval("SELECT $1::jsonb", {"a": [1, None]}) == {"a": [1, None]}
            assert await conn.fetchval("SELECT NULL::jsonb") is None
            r = await conn.fetchrow("SELECT '[1]'::jsonb AS j, 2 AS n")
            assert dict(r) == {"j": [1], "n": 2}
            # A range is refused, as asyncpg refuses it (its subtype's codec is
            # the one to replace); a scalar such as point takes a text codec.
            with pytest.raises(InterfaceError, match="neither a scalar"):
                await conn.set_type_codec(
                    "int4range", schema="pg_catalog", encoder=str, decoder=str
                )
            await conn.set_type_codec(
                "point",
                schema="pg_catalog",
                encoder=lambda t: f"({t[0]},{t[1]})",
                decoder=lambda s: tuple(int(x) for x in s[1:-1].split(",")),
            )
            assert await conn.fetchval("SELECT $1::point", (3, 7)) == (3, 7)
            with pytest.raises(pg.DataError, match="must return str"):
                await conn.set_type_codec(
                    "point", schema="pg_catalog", encoder=lambda t: 5, decoder=str
                )
                await conn.fetchval("SELECT $1::point", (3, 7))
            await conn.reset_type_codec("jsonb", schema="pg_catalog")
            assert await conn.fetchval("SELECT '{}'::jsonb") == "{}"
            with pytest.raises(InterfaceError):
                await conn.set_type_codec("nope", encoder=str, decoder=str)
        finally:
            await conn.close()

    arun(main())
