"""`set_type_codec` codecs where asyncpg runs them besides the type's own
values: inside arrays of enums and of domains, and inside composite types,
anonymous records and arrays of built-in types (binary and tuple formats),
beside asyncpg on the same server."""

from __future__ import annotations

import json
import struct
from collections.abc import Callable
from typing import Any

import asyncpg
import pytest
import surge.postgres as pg

from tests.postgres.peers import on_connection, plain, same, tenfold_int4

_SETUP = """
DROP TYPE IF EXISTS porting_cc_outer, porting_cc_row, porting_cc_mood CASCADE;
DROP DOMAIN IF EXISTS porting_cc_pos CASCADE;
CREATE TYPE porting_cc_mood AS ENUM ('sad', 'ok', 'happy');
CREATE DOMAIN porting_cc_pos AS int4 CHECK (VALUE > 0);
CREATE TYPE porting_cc_row AS (a int4, t timestamp, j jsonb);
CREATE TYPE porting_cc_outer AS (inner_ porting_cc_row, n int8);
"""


async def _run(c: Any, queries: list[tuple[str, tuple]]) -> list:
    out = []
    for q, args in queries:
        out.append(plain(await c.fetchval(q, *args)))
    return out


@on_connection
async def _text_codecs_in_catalog_arrays(mod: Any, c: Any) -> list:
    await c.execute(_SETUP)
    await c.set_type_codec("porting_cc_mood", encoder=str.lower, decoder=str.upper, format="text")
    await tenfold_int4(c)
    out = await _run(
        c,
        [
            ("SELECT 'ok'::porting_cc_mood", ()),
            ("SELECT ARRAY['sad', NULL, 'ok']::porting_cc_mood[]", ()),
            ("SELECT $1::porting_cc_mood[]", (["SAD", "HAPPY"],)),
            ("SELECT $1::porting_cc_mood[]::text", (["SAD", "HAPPY"],)),
            ("SELECT ARRAY[ARRAY['ok'], ARRAY['sad']]::porting_cc_mood[]", ()),
            ("SELECT ARRAY[1, 2, NULL]::porting_cc_pos[]", ()),
            ("SELECT $1::porting_cc_pos[]", ([10, 20],)),
            ("SELECT $1::porting_cc_pos[]::text", ([10, 20],)),
            ("SELECT '{}'::porting_cc_pos[]", ()),
        ],
    )
    return out


def test_text_codec_runs_inside_arrays_of_enums_and_domains_as_asyncpg(
    dsn: str, arun: Callable
) -> None:
    """A text codec on an enum runs on the elements of its arrays; one on int4
    runs on the elements of an array of an int4 domain (asyncpg uses the base
    type's codec for a domain). Before: the built-in values came back."""

    async def go() -> None:
        theirs = await same(dsn, _text_codecs_in_catalog_arrays)
        assert theirs[1] == ["SAD", None, "OK"] and theirs[5] == [10, 20, None]

    arun(go())


@on_connection
async def _binary_codecs_in_containers(mod: Any, c: Any) -> list:
    await c.execute(_SETUP)
    await tenfold_int4(c, "binary")
    await c.set_type_codec(
        "timestamp",
        schema="pg_catalog",
        encoder=lambda v: (v,),
        decoder=lambda t: t[0],
        format="tuple",
    )
    await c.set_type_codec(
        "jsonb",
        schema="pg_catalog",
        encoder=lambda v: b"\x01" + json.dumps(v).encode(),
        decoder=lambda b: json.loads(b[1:]),
        format="binary",
    )
    row = "ROW(15, '2000-01-01 00:00:01', '{\"a\": 1}')::porting_cc_row"
    out = await _run(
        c,
        [
            ("SELECT 15::int4", ()),
            (f"SELECT {row}", ()),
            ("SELECT $1::porting_cc_row", ((150, 1_000_000, {"b": 2}),)),
            ("SELECT ($1::porting_cc_row).a", ((150, 1_000_000, {"b": 2}),)),
            ("SELECT ($1::porting_cc_row).t::text", ((150, 1_000_000, None),)),
            (f"SELECT ROW({row}, 7)::porting_cc_outer", ()),
            ("SELECT ARRAY[ROW(15, NULL, NULL)::porting_cc_row, NULL]", ()),
            ("SELECT ARRAY[1, NULL, 2]::int4[]", ()),
            ("SELECT $1::int4[]", ([10, None, 20],)),
            ("SELECT $1::int4[]::text", ([10, 20],)),
            ("SELECT ROW(1, 2, 'x'::text)", ()),
            ("SELECT ROW(1, ARRAY[2, 3])", ()),
            ("SELECT int4range(1, 5)", ()),
        ],
    )
    return out


def test_binary_and_tuple_codecs_run_inside_composites_records_and_arrays_as_asyncpg(
    dsn: str, arun: Callable
) -> None:
    """Binary- and tuple-format codecs run on composite fields (nested too),
    anonymous records' fields and array elements, both ways. Before: those
    parts kept the built-in codec (an int4 field came back unscaled, a
    timestamp field as a datetime, a jsonb field as its text)."""

    async def go() -> None:
        theirs = await same(dsn, _binary_codecs_in_containers)
        assert theirs[1] == (150, 1_000_000, {"a": 1}) and theirs[7] == [10, None, 20]

    arun(go())


@on_connection
async def _tuple_codec_on_a_composite(mod: Any, c: Any) -> list:
    await c.execute(_SETUP)
    await c.set_type_codec(
        "porting_cc_row",
        encoder=lambda v: (v[0] + 1, None, None),
        decoder=lambda t: ("row", t[0]),
        format="tuple",
    )
    out = await _run(
        c,
        [
            ("SELECT ROW(1, NULL, NULL)::porting_cc_row", ()),
            ("SELECT $1::porting_cc_row", ((1,),)),
            ("SELECT ARRAY[ROW(1, NULL, NULL)::porting_cc_row, NULL]", ()),
            ("SELECT $1::porting_cc_row[]", ([(1,), None, (5,)],)),
            ("SELECT ROW(ROW(3, NULL, NULL)::porting_cc_row, 4)::porting_cc_outer", ()),
        ],
    )
    return out


def test_tuple_codec_on_a_composite_runs_inside_arrays_and_composites_as_asyncpg(
    dsn: str, arun: Callable
) -> None:
    """A tuple-format codec on a composite type runs on the elements of its
    arrays (a tuple given there is one element, not a dimension) and on fields
    of its type."""

    async def go() -> None:
        theirs = await same(dsn, _tuple_codec_on_a_composite)
        assert theirs[3] == [("row", 2), None, ("row", 6)]

    arun(go())


@on_connection
async def _text_codec_on_a_field(mod: Any, c: Any) -> Any:
    await c.execute(_SETUP)
    await c.set_type_codec("jsonb", schema="pg_catalog", encoder=json.dumps, decoder=json.loads)
    return plain(await c.fetchval("SELECT ROW(1, NULL, '{\"a\": 1}')::porting_cc_row"))


def test_a_text_codec_on_a_composite_field_keeps_the_builtin_codec(
    dsn: str, arun: Callable
) -> None:
    """Where asyncpg refuses a composite with a text-codec field (it cannot read
    a composite in the text form), surge decodes the field with the built-in
    codec (docs/migration/asyncpg.md)."""

    async def go() -> None:
        with pytest.raises(asyncpg.UnsupportedClientFeatureError, match="text encoding"):
            await _text_codec_on_a_field(asyncpg, dsn)
        assert await _text_codec_on_a_field(pg, dsn) == (1, None, '{"a": 1}')

    arun(go())


#: (type, schema, a value to send back, text of the value selected).
_KINDS = [
    ("porting_cc_row", "public", (5, None, None), "ROW(1, NULL, NULL)"),
    ("porting_cc_mood", "public", "sad", "'ok'"),
    ("porting_cc_pos", "public", 4, "3"),
    ("porting_cc_rng", "public", (1.0, 2.0), "'[1,2)'"),
    ("_porting_cc_mood", "public", ["ok"], "'{ok}'"),
    ("int4", "pg_catalog", 8, "7"),
    # SQL's spellings, as asyncpg takes them for pg_catalog's types
    ("Integer", "pg_catalog", 8, "7"),
    ("double precision", "pg_catalog", 1.5, "2.5"),
    ("int4range", "pg_catalog", (1, 3), "'[1,3)'"),
    ("point", "pg_catalog", (1.0, 2.0), "'(1,2)'"),
    ("citext", "public", "Ab", "'Ab'"),  # an extension's type, no codec here
]

#: set_builtin_type_codec(type, schema, codec_name, format) calls: those asyncpg
#: takes and surge gives the same values for, and those both refuse.
_BUILTIN_ALIASES = [
    ("porting_cc_mood", "public", "text", "text"),
    ("porting_cc_mood", "public", "pg_catalog.text", None),
    ("porting_cc_pos", "public", "int4", "binary"),
    ("int4", "pg_catalog", "int4", None),
    ("int4", "pg_catalog", "int4", "tuple"),
    ("porting_cc_row", "public", "text", "text"),
    ("porting_cc_rng", "public", "text", None),
    ("_porting_cc_mood", "public", "text", None),
    ("int4range", "pg_catalog", "int4range", "binary"),
    ("porting_cc_mood", "public", "text", "tuple"),
    ("citext", "public", "text", None),
    ("citext", "public", "varchar", "binary"),
]

#: What each format's codec does: (encoder, decoder), traceable in the results.
_FORMATS: dict[str, tuple[Callable, Callable]] = {
    "text": (lambda v: f"{v}", lambda s: ("text", s)),
    "binary": (lambda v: struct.pack("!i", v), lambda b: ("binary", bytes(b))),
    "tuple": (lambda v: v, lambda t: ("tuple", tuple(t))),
}


async def _codec_kinds(mod: Any, dsn: str) -> list:
    out: list = []
    c = await mod.connect(dsn)
    try:
        await c.execute(
            _SETUP + "CREATE TYPE porting_cc_rng AS RANGE (subtype = float8);"
            "CREATE EXTENSION IF NOT EXISTS citext"
        )
        for typ, schema, value, literal in _KINDS:
            sql = f"SELECT {literal}::{typ}"
            for fmt, (enc, dec) in _FORMATS.items():
                try:
                    await c.set_type_codec(typ, schema=schema, encoder=enc, decoder=dec, format=fmt)
                except mod.InterfaceError as e:
                    out.append((typ, fmt, type(e).__name__))
                    continue
                out.append((typ, fmt, plain(await c.fetchval(sql))))
                if fmt == "tuple":  # the tuple encoder hands the value on as it is
                    out.append(await c.fetchval(f"SELECT $1::{typ}::text", value))
                await c.reset_type_codec(typ, schema=schema)
                out.append(plain(await c.fetchval(sql)))
        for typ, schema, name, fmt in _BUILTIN_ALIASES:
            sql = f"SELECT {dict((k[0], k[3]) for k in _KINDS)[typ]}::{typ}"
            try:
                await c.set_builtin_type_codec(typ, schema=schema, codec_name=name, format=fmt)
            except mod.InterfaceError as e:
                out.append((typ, name, fmt, type(e).__name__))
                continue
            out.append((typ, name, fmt, plain(await c.fetchval(sql))))
            await c.reset_type_codec(typ, schema=schema)
        for bad in ("porting_cc_nope", "nope"):
            with pytest.raises(ValueError, match=f"unknown type: public.{bad}"):
                await c.set_type_codec(bad, encoder=str, decoder=str)
    finally:
        await c.execute("DROP TYPE IF EXISTS porting_cc_rng")
        await c.close()
    return out


def test_set_type_codec_and_builtin_codec_on_every_kind_as_asyncpg(
    dsn: str, arun: Callable
) -> None:
    """set_type_codec and set_builtin_type_codec on composites, enums, domains,
    ranges, arrays and built-in types in each format: what asyncpg takes gives
    the same values, what it refuses is refused with its class. Before: surge took
    codecs on arrays and ranges, gave a composite's tuple decoder a plain tuple
    (asyncpg: a Record), and refused every set_builtin_type_codec but hstore's
    with UnsupportedClientFeatureError, also for a composite or the tuple format
    (asyncpg: InterfaceError)."""

    async def go() -> None:
        theirs = await _codec_kinds(asyncpg, dsn)
        assert await _codec_kinds(pg, dsn) == theirs
        # the refusals compared are there: arrays, ranges, composites in text
        assert ("porting_cc_rng", "text", "InterfaceError") in theirs
        assert ("porting_cc_row", "text", "UnsupportedClientFeatureError") in theirs
        assert ("porting_cc_row", "text", "text", "InterfaceError") in theirs

    arun(go())
