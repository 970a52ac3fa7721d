"""surge.postgres against asyncpg on the same server: the values a ported program
reads and writes, the names it imports and the exceptions it catches are the
same. Each test asks asyncpg what it does, then checks surge does that."""

from __future__ import annotations

import datetime as dt
import decimal
import inspect
import ipaddress
import uuid
from collections.abc import Callable

import asyncpg
import asyncpg.exceptions
import pytest
import surge.postgres as pg

from tests.postgres.peers import both

D = decimal.Decimal


# -- 1. infinity ------------------------------------------------------------------


@pytest.mark.parametrize("typ", ["date", "timestamp", "timestamptz"])
@pytest.mark.parametrize("text", ["infinity", "-infinity"])
def test_infinity_round_trips_as_in_asyncpg(dsn: str, arun: Callable, typ: str, text: str) -> None:
    async def go() -> None:
        async with both(dsn) as (s, a):
            got_a = await a.fetchval(f"SELECT '{text}'::{typ}")
            got_s = await s.fetchval(f"SELECT '{text}'::{typ}")
            assert got_s == got_a and type(got_s) is type(got_a)
            # The value read, written back, is 'infinity' again for both drivers.
            for conn in (a, s):
                back = await conn.fetchval(f"SELECT $1::{typ}::text", got_a)
                assert back == text
            table = f"inf_{typ}_{text.strip('-')}{'_neg' if text[0] == '-' else ''}"
            await s.execute(f"CREATE TEMP TABLE {table} (id int, valid_until {typ})")
            await s.execute(f"INSERT INTO {table} VALUES (1, '{text}'), (2, '2020-01-01')")
            v = await s.fetchval(f"SELECT valid_until FROM {table} WHERE id = 1")
            assert await s.fetchval(f"SELECT id FROM {table} WHERE valid_until = $1", v) == 1
            # A read-modify-write keeps it.
            await s.execute(f"UPDATE {table} SET valid_until = $1 WHERE id = 1", v)
            assert await s.fetchval(f"SELECT valid_until::text FROM {table} WHERE id = 1") == text

    arun(go())


# -- 2. duplicate column names ------------------------------------------------------


def test_duplicate_column_names_last_wins_as_in_asyncpg(dsn: str, arun: Callable) -> None:
    sql = "SELECT 1 AS id, 2 AS x, 3 AS id"

    async def go() -> None:
        async with both(dsn) as (s, a):
            ra, rs = await a.fetchrow(sql), await s.fetchrow(sql)
            assert rs["id"] == ra["id"] == 3
            assert rs.get("id") == ra.get("id")
            assert list(rs.keys()) == list(ra.keys()) == ["id", "x", "id"]
            assert tuple(rs) == tuple(ra)

    arun(go())


# -- 3. 24:00:00 --------------------------------------------------------------------


def test_time_2400_raises_never_clamps(dsn: str, arun: Callable) -> None:
    async def go() -> None:
        async with both(dsn) as (s, a):
            with pytest.raises(ValueError):  # asyncpg: datetime.time(24, ...) fails
                await a.fetchval("SELECT '24:00:00'::time")
            with pytest.raises(Exception, match="24:00:00") as info:
                await s.fetchval("SELECT '24:00:00'::time")
            assert "23:59:59" not in str(info.value)
            # The connection is fine after it, and the text form keeps the value.
            assert await s.fetchval("SELECT '24:00:00'::time::text") == "24:00:00"
            assert await s.fetchval("SELECT '23:59:59.999999'::time") == dt.time(23, 59, 59, 999999)

    arun(go())


# -- 4. intervals -------------------------------------------------------------------

INTERVALS = [
    "5 years 1 month",
    "1 year",
    "11 months",
    "13 months 2 days 3 hours",
    "-5 years -1 month",
    "-13 months",
    "1 year -1 month",
    "-1 year 11 months 4 days -5 seconds",
    "100 years 0.5 seconds",
]


def test_intervals_count_years_and_months_as_asyncpg(dsn: str, arun: Callable) -> None:
    async def go() -> None:
        async with both(dsn) as (s, a):
            for text in INTERVALS:
                q = f"SELECT '{text}'::interval"
                assert await s.fetchval(q) == await a.fetchval(q), text
            assert await s.fetchval("SELECT '5 years 1 month'::interval") == dt.timedelta(1855)

    arun(go())


# -- 5. exceptions ------------------------------------------------------------------


def _asyncpg_classes() -> dict[str, type]:
    return {
        n: c
        for n in dir(asyncpg.exceptions)
        if not n.startswith("_") and inspect.isclass(c := getattr(asyncpg.exceptions, n))
    }


def test_every_asyncpg_exception_name_exists_with_its_inheritance() -> None:
    theirs = _asyncpg_classes()
    missing = [n for n in theirs if not inspect.isclass(getattr(pg, n, None))]
    assert not missing
    wrong = [
        (x, y)
        for x in theirs
        for y in theirs
        if issubclass(theirs[x], theirs[y]) != issubclass(getattr(pg, x), getattr(pg, y))
    ]
    assert not wrong
    # The same SQLSTATE for every class that has one.
    codes = [
        n
        for n, c in theirs.items()
        if getattr(c, "sqlstate", None) and getattr(pg, n).sqlstate != c.sqlstate
    ]
    assert not codes
    # Builtin bases a ported `except ValueError:` relies on.
    for n, c in theirs.items():
        for base in (ValueError, TypeError, Warning, UserWarning, Exception):
            assert issubclass(c, base) == issubclass(getattr(pg, n), base), (n, base)


def test_asyncpg_top_level_names_exist() -> None:
    missing = [n for n in asyncpg.__all__ if not hasattr(pg, n)]
    assert not missing
    assert set(asyncpg.__all__) <= set(pg.__all__)


def test_surge_names_before_asyncpgs_still_work() -> None:
    assert pg.SerializationFailureError is pg.SerializationError
    assert pg.InFailedSqlTransactionError is pg.InFailedSQLTransactionError
    assert pg.RaiseExceptionError is pg.RaiseError
    assert pg.InternalError is pg.InternalServerError
    assert issubclass(pg.InvalidArgumentError, pg.DataError)
    assert issubclass(pg.ProtocolError, pg.InternalClientError)


@pytest.mark.parametrize(
    ("sqlstate", "name"),
    [
        ("40001", "SerializationError"),
        ("40P01", "DeadlockDetectedError"),
        ("25P02", "InFailedSQLTransactionError"),
        ("25006", "ReadOnlySQLTransactionError"),
        ("P0001", "RaiseError"),
        ("XX000", "InternalServerError"),
        ("23505", "UniqueViolationError"),
        ("22012", "DivisionByZeroError"),
        ("HV000", "FDWError"),
        ("2F003", "ProhibitedSQLStatementAttemptedError"),
    ],
)
def test_server_errors_raise_asyncpgs_class(
    dsn: str, arun: Callable, sqlstate: str, name: str
) -> None:
    sql = "DO $$ BEGIN RAISE EXCEPTION USING ERRCODE = '" + sqlstate + "', MESSAGE = 'boom'; END $$"

    async def go() -> None:
        async with both(dsn) as (s, a):
            with pytest.raises(asyncpg.PostgresError) as ea:
                await a.execute(sql)
            with pytest.raises(pg.PostgresError) as es:
                await s.execute(sql)
            assert type(ea.value).__name__ == name
            assert type(es.value) is getattr(pg, name)
            assert es.value.sqlstate == sqlstate
            # The connection still works (retry loops go on).
            assert await s.fetchval("SELECT 1") == 1

    arun(go())


def test_unknown_code_of_a_known_class_raises_the_class(dsn: str, arun: Callable) -> None:
    """A deliberate difference: asyncpg raises UnknownPostgresError for a code it
    does not know; surge raises the code's class (so a retry loop catching
    TransactionRollbackError keeps working when a server adds a code)."""
    sql = "DO $$ BEGIN RAISE EXCEPTION USING ERRCODE = '40P99', MESSAGE = 'x'; END $$"

    async def go() -> None:
        async with both(dsn) as (s, a):
            with pytest.raises(asyncpg.exceptions.UnknownPostgresError):
                await a.execute(sql)
            with pytest.raises(pg.TransactionRollbackError) as es:
                await s.execute(sql)
            assert es.value.sqlstate == "40P99"
            with pytest.raises(pg.UnknownPostgresError):
                await s.execute(sql.replace("40P99", "Q1234"))

    arun(go())


# -- 6. parameter conversions -----------------------------------------------------

CONVERSIONS = [
    ("timestamp", dt.date(2021, 3, 4)),
    ("date", dt.datetime(2021, 3, 4, 5, 6, 7)),
    ("float8", D("1.25")),
    ("float8", D("0.1")),
    ("float4", D("2.5")),
    ("numeric", "12.340"),
    ("numeric", "-1E+5"),
    ('"char"', b"x"),
    ("int_dom", 42),
]


def test_parameter_conversions_as_in_asyncpg(dsn: str, arun: Callable) -> None:
    async def go() -> None:
        async with both(dsn) as (s, a):
            await s.execute(
                "DROP DOMAIN IF EXISTS int_dom; CREATE DOMAIN int_dom AS int4 CHECK (VALUE > 0)"
            )
            for typ, value in CONVERSIONS:
                q = f"SELECT $1::{typ}::text"
                assert await s.fetchval(q, value) == await a.fetchval(q, value), (typ, value)
                q = f"SELECT $1::{typ}"
                got_s, got_a = await s.fetchval(q, value), await a.fetchval(q, value)
                if typ != "int_dom":  # surge reads domains as text until section 2
                    assert got_s == got_a and type(got_s) is type(got_a), (typ, value)
            # timestamptz from a date: midnight local time, as asyncpg.
            q = "SELECT $1::timestamptz"
            day = dt.date(2021, 3, 4)
            assert await s.fetchval(q, day) == await a.fetchval(q, day)
            # "char" comes back as bytes, as in asyncpg.
            q = "SELECT 'a'::\"char\""
            assert await s.fetchval(q) == await a.fetchval(q) == b"a"
            # A domain's constraint is still checked.
            with pytest.raises(pg.CheckViolationError):
                await s.fetchval("SELECT $1::int_dom", -1)
            await s.execute("DROP DOMAIN int_dom")

    arun(go())


@pytest.mark.parametrize(
    ("typ", "value", "words"),
    [
        ("numeric", "12,5", "decimal"),
        ("float8", "1.5", "float"),
        ("date", "2020-01-01", "date"),
        ("timestamp", 5, "datetime"),
        ('"char"', 5, "bytes"),
        ("int4", 1.5, "int"),
        ("int4", True, "int"),
    ],
)
def test_wrong_parameter_types_raise_naming_the_parameter(
    dsn: str, arun: Callable, typ: str, value: object, words: str
) -> None:
    async def go() -> None:
        s = await pg.connect(dsn)
        try:
            with pytest.raises(pg.DataError, match=r"\$2") as info:
                await s.fetchval(f"SELECT $1::int4, $2::{typ}", 1, value)
            assert words in str(info.value)
            assert await s.fetchval("SELECT 1") == 1
        finally:
            await s.close()

    arun(go())


# -- 7. copy_records_to_table -----------------------------------------------------

COPY_TABLE = """
    DROP TABLE IF EXISTS {name};
    CREATE TABLE {name} (
        i2 int2, i4 int4, i8 int8, f4 float4, f8 float8, n numeric, b bool,
        t text, vc varchar(10), bp char(3), ch "char", by bytea, u uuid,
        d date, ts timestamp, tz timestamptz, tm time, iv interval, j jsonb,
        ia int4[], ta text[], mood copy_mood, dm copy_dom, ip inet, net cidr
    )
"""

COPY_RECORDS = [
    (
        1,
        2,
        3,
        1.5,
        2.25,
        D("3.5"),
        True,
        "héllo",
        "vc",
        "abc",
        b"c",
        b"\x00\x01",
        uuid.UUID(int=7),
        dt.date(2020, 1, 2),
        dt.datetime(2020, 1, 2, 3, 4, 5),
        dt.datetime(2020, 1, 2, 3, 4, 5, tzinfo=dt.UTC),
        dt.time(1, 2, 3),
        dt.timedelta(days=1, seconds=2),
        '{"a": 1}',
        [1, None, 3],
        ["x", None],
        "happy",
        5,
        ipaddress.IPv4Address("10.0.0.1"),
        ipaddress.IPv4Network("10.0.0.0/8"),
    ),
    (None,) * 25,
    (
        -1,
        -2,
        -3,
        float("inf"),
        -0.5,
        D("NaN"),
        False,
        "",
        "",
        "  x",
        b"z",
        b"",
        uuid.UUID(int=0),
        dt.date.max,
        dt.datetime.min,
        dt.datetime.max,
        dt.time(23, 59, 59, 999999),
        dt.timedelta(days=-3, microseconds=1),
        "[]",
        [],
        [],
        "sad",
        1,
        ipaddress.IPv6Address("::1"),
        ipaddress.IPv6Network("2001:db8::/32"),
    ),
]


def test_copy_records_to_table_every_type_as_asyncpg(dsn: str, arun: Callable) -> None:
    async def go() -> None:
        async with both(dsn) as (s, a):
            await s.execute(
                "DROP TABLE IF EXISTS copy_s, copy_a; DROP TYPE IF EXISTS copy_mood;"
                " DROP DOMAIN IF EXISTS copy_dom;"
                " CREATE TYPE copy_mood AS ENUM ('sad', 'happy');"
                " CREATE DOMAIN copy_dom AS int4 CHECK (VALUE > 0)"
            )
            await s.execute(COPY_TABLE.format(name="copy_s"))
            await s.execute(COPY_TABLE.format(name="copy_a"))
            status_a = await a.copy_records_to_table("copy_a", records=COPY_RECORDS)
            status_s = await s.copy_records_to_table("copy_s", records=COPY_RECORDS)
            assert status_s == status_a == "COPY 3"
            q = "SELECT array_agg(x::text ORDER BY x::text) FROM {} x"
            assert await s.fetchval(q.format("copy_s")) == await s.fetchval(q.format("copy_a"))
            # With a column list and a domain constraint that fails.
            with pytest.raises(pg.CheckViolationError):
                await s.copy_records_to_table("copy_s", records=[(-5,)], columns=["dm"])
            await s.execute("DROP TABLE copy_s, copy_a; DROP TYPE copy_mood; DROP DOMAIN copy_dom")

    arun(go())


# -- result columns the server sends in text (its cheaper form) --------------------


def test_text_form_columns_as_in_asyncpg(dsn: str, arun: Callable) -> None:
    """bool, "char" (every byte), text-like types, json and enums come back in the
    text format (`Codec::text_result`): the same values and types as asyncpg's
    binary ones, NULLs included, through fetch, fetchrow, fetchval and a cursor."""

    async def go() -> None:
        async with both(dsn) as (s, a):
            await s.execute(
                "DROP TYPE IF EXISTS _tf_mood; CREATE TYPE _tf_mood AS ENUM ('sad', 'ok')"
            )
            q = (
                'SELECT (i - 128)::"char" AS c, i % 3 = 0 AS b,'
                " CASE WHEN i % 5 = 0 THEN NULL ELSE i % 2 = 1 END AS bn,"
                " ('é' || i || E'\\\\ \\t\"')::text AS t, ('x' || i)::varchar(9) AS v,"
                " 'ab'::char(4) AS bp, ('ü' || i)::name AS nm, '{\"k\": [1, \"é\"]}'::json AS j,"
                " (CASE WHEN i % 2 = 0 THEN 'sad' ELSE 'ok' END)::_tf_mood AS m,"
                " typname, typbyval, typcategory, typdelim"
                " FROM generate_series(0, 255) AS i"
                " JOIN pg_type ON pg_type.oid = 16 OR pg_type.oid = 23 AND i % 2 = 0"
            )
            got, want = await s.fetch(q), await a.fetch(q)
            assert len(got) == len(want) == 384
            assert {bytes(r["c"]) for r in got} == {bytes([b]) for b in range(256)}
            for g, w in zip(got, want, strict=True):
                assert tuple(g) == tuple(w)
                assert [type(v) for v in g] == [type(v) for v in w]
            for expr in ("''::\"char\"", "'\\\\'::\"char\"", "false", "NULL::bool", "'é'::name"):
                sql = f"SELECT {expr}"
                assert await s.fetchval(sql) == await a.fetchval(sql), expr
                assert tuple(await s.fetchrow(sql)) == tuple(await a.fetchrow(sql)), expr
            async with s.transaction():
                rows = [r async for r in s.cursor(q, prefetch=50)]
            assert [tuple(r) for r in rows] == [tuple(r) for r in want]
            await s.execute("DROP TYPE _tf_mood")

    arun(go())
