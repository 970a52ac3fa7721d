"""`Connection.set_type_codec` in the binary and tuple formats, differential:
the same codec set on an asyncpg connection and a surge one to the same server
must see the same wire values (bytes, tuples) and send values the server reads
back the same."""

from __future__ import annotations

import json
import struct
from collections.abc import Callable

import pytest
import surge.postgres as pg

from tests.postgres.peers import both

#: SQL values per type with a tuple format, ±infinity and edges included.
TUPLE_VALUES = {
    "date": ["'2000-01-01'", "'1970-01-01'", "'infinity'", "'-infinity'", "'4713-01-01 BC'"],
    "timestamp": ["'2000-01-01 00:00:01.5'", "'1900-02-03 04:05:06'", "'infinity'", "'-infinity'"],
    "timestamptz": ["'2024-05-06 07:08:09.123456+02'", "'infinity'", "'-infinity'"],
    "time": ["'00:00'", "'23:59:59.999999'", "'24:00:00'"],
    "timetz": ["'12:34:56.789+05:30'", "'00:00-11'", "'24:00:00+00'"],
    "interval": ["'5 years 1 month 3 days 04:05:06.7'", "'-1 day'", "'0'"],
}

SETUP = """
DROP TYPE IF EXISTS _cc_pair CASCADE;
CREATE TYPE _cc_pair AS (x int, y text, z float8[]);
"""


async def set_both(conns: tuple, *args: object, **kw: object) -> None:
    for c in conns:
        await c.set_type_codec(*args, **kw)


def test_tuple_format_equals_asyncpg(dsn: str, arun: Callable) -> None:
    async def go() -> None:
        async with both(dsn) as (s, a):
            conns = (a, s)
            for typ, values in TUPLE_VALUES.items():
                await set_both(
                    conns, typ, schema="pg_catalog", encoder=tuple, decoder=tuple, format="tuple"
                )
                for v in values:
                    sql = f"SELECT {v}::{typ}"
                    want, got = await a.fetchval(sql), await s.fetchval(sql)
                    assert got == want, (typ, v)
                    assert isinstance(got, tuple)
                    # the tuple sent back: the server reads the same value
                    back = f"SELECT $1::{typ}::text"
                    assert await s.fetchval(back, got) == await a.fetchval(back, want), (typ, v)
                assert await s.fetchval(f"SELECT NULL::{typ}") is None

    arun(go())


def test_tuple_format_of_a_composite_equals_asyncpg(dsn: str, arun: Callable) -> None:
    async def go() -> None:
        async with both(dsn) as (s, a):
            try:
                await s.execute(SETUP)
                seen: dict[str, list] = {"a": [], "s": []}

                def decoder(who: str) -> Callable[[tuple], complex]:
                    def dec(t: tuple) -> complex:
                        seen[who].append(t)
                        return complex(t[0], len(t[1] or ""))

                    return dec

                for who, c in (("a", a), ("s", s)):
                    await c.set_type_codec(
                        "_cc_pair",
                        encoder=lambda z: (int(z.real), "x" * int(z.imag), [1.5, None]),
                        decoder=decoder(who),
                        format="tuple",
                    )
                sql = "SELECT ROW(7, 'abc', ARRAY[2.5, NULL])::_cc_pair"
                assert await s.fetchval(sql) == await a.fetchval(sql) == complex(7, 3)
                # the fields come as a Record (by name too), as asyncpg hands them
                # (surge's were a plain tuple)
                fields = {w: [(type(t).__name__, dict(t)) for t in ts] for w, ts in seen.items()}
                assert fields["s"] == fields["a"]
                assert seen["s"] == [(7, "abc", [2.5, None])] and seen["s"][0]["y"] == "abc"
                back = "SELECT $1::_cc_pair::text"
                assert await s.fetchval(back, 4 + 2j) == await a.fetchval(back, 4 + 2j)
                rows = await s.fetch(
                    "SELECT ROW(i, NULL, NULL)::_cc_pair AS p FROM generate_series(1, 3) i"
                )
                assert [r["p"] for r in rows] == [1, 2, 3]
            finally:
                await s.execute("DROP TYPE IF EXISTS _cc_pair CASCADE")

    arun(go())


def test_binary_format_sees_the_wire_bytes_as_asyncpg(dsn: str, arun: Callable) -> None:
    async def go() -> None:
        async with both(dsn) as (s, a):
            conns = (a, s)
            # int8 as raw big-endian bytes, both ways
            await set_both(
                conns,
                "int8",
                schema="pg_catalog",
                encoder=lambda v: struct.pack("!q", v),
                decoder=lambda b: ("raw", b),
                format="binary",
            )
            sql = "SELECT $1::int8 * 2"
            assert await s.fetchval(sql, 21) == await a.fetchval(sql, 21)
            assert await s.fetchval(sql, 21) == ("raw", struct.pack("!q", 42))
            # jsonb's binary form: a version byte, then the text
            await set_both(
                conns,
                "jsonb",
                schema="pg_catalog",
                encoder=lambda v: b"\x01" + json.dumps(v).encode(),
                decoder=lambda b: (b[0], json.loads(b[1:])),
                format="binary",
            )
            sql = "SELECT $1::jsonb || '{\"b\": 2}'"
            assert await s.fetchval(sql, {"a": 1}) == await a.fetchval(sql, {"a": 1})
            # uuid's 16 bytes
            await set_both(
                conns, "uuid", schema="pg_catalog", encoder=bytes, decoder=bytes, format="binary"
            )
            sql = "SELECT $1::uuid::text::uuid"
            raw = bytes(range(16))
            assert await s.fetchval(sql, raw) == await a.fetchval(sql, raw) == raw
            # an encoder that returns the wrong type: a clear error, the connection goes on
            await s.set_type_codec(
                "int8", schema="pg_catalog", encoder=str, decoder=bytes, format="binary"
            )
            with pytest.raises(pg.DataError, match="must return bytes"):
                await s.fetchval("SELECT $1::int8", 5)
            assert await s.fetchval("SELECT 1") == 1

    arun(go())


def test_bad_formats_are_refused_as_asyncpg(dsn: str, arun: Callable) -> None:
    async def go() -> None:
        async with both(dsn) as (s, a):
            try:
                with pytest.raises(Exception) as want:
                    await a.set_type_codec(
                        "int4", schema="pg_catalog", encoder=tuple, decoder=tuple, format="tuple"
                    )
                with pytest.raises(pg.InterfaceError) as got:
                    await s.set_type_codec(
                        "int4", schema="pg_catalog", encoder=tuple, decoder=tuple, format="tuple"
                    )
                assert type(got.value).__name__ == type(want.value).__name__
                # a composite takes the tuple format only, a domain none (asyncpg's rules)
                await s.execute(SETUP + "CREATE DOMAIN _cc_dom AS int CHECK (VALUE > 0);")
                for typ, fmt in (("_cc_pair", "binary"), ("_cc_dom", "text")):
                    with pytest.raises(Exception) as want:
                        await a.set_type_codec(typ, encoder=str, decoder=str, format=fmt)
                    with pytest.raises(pg.InterfaceError) as got:
                        await s.set_type_codec(typ, encoder=str, decoder=str, format=fmt)
                    assert type(got.value).__name__ == type(want.value).__name__
                with pytest.raises(pg.InterfaceError):
                    await s.set_type_codec(
                        "int4", schema="pg_catalog", encoder=str, decoder=str, format="hex"
                    )
                # a bad tuple from an encoder: a clear error, the connection goes on
                await s.set_type_codec(
                    "date",
                    schema="pg_catalog",
                    encoder=lambda v: (1, 2),
                    decoder=tuple,
                    format="tuple",
                )
                with pytest.raises(pg.DataError, match="tuple of 1"):
                    await s.fetchval("SELECT $1::date", 0)
                assert await s.fetchval("SELECT 2") == 2
            finally:
                await s.execute(
                    "DROP TYPE IF EXISTS _cc_pair CASCADE; DROP DOMAIN IF EXISTS _cc_dom"
                )

    arun(go())
