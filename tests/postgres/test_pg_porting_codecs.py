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

_SETUP = """
DROP TYPE IF EXISTS porting_cc_outer, porting_cc_row, porting_cc_mood CASCADE;
DROP DOMAIN IF EXISTS porting_cc_pos CASCADE;
CREATE TYPE porting_cc_mood AS ENUM ('sad', 'ok', 'happy');
CREATE DOMAIN porting_cc_pos AS int4 CHECK (VALUE > 0);
CREATE TYPE porting_cc_row AS (a int4, t timestamp, j jsonb);
CREATE TYPE porting_cc_outer AS (inner_ porting_cc_row, n int8);
"""


def _plain(v: Any) -> Any:
    """Rows and composites as tuples, ranges as their bounds, recursively
    (asyncpg's and surge's Records and Ranges are different classes)."""
    if isinstance(v, (asyncpg.Range, pg.Range)):
        return ("range", v.lower, v.upper, v.lower_inc, v.upper_inc, v.isempty)
    if isinstance(v, (asyncpg.Record, pg.Record, tuple)):
        return tuple(_plain(x) for x in v)
    if isinstance(v, list):
        return [_plain(x) for x in v]
    return v


async def _run(c: Any, queries: list[tuple[str, tuple]]) -> list:
    out = []
    for q, args in queries:
        out.append(_plain(await c.fetchval(q, *args)))
    return out


async def _text_codecs_in_catalog_arrays(mod: Any, dsn: str) -> list:
    c = await mod.connect(dsn)
    await c.execute(_SETUP)
    await c.set_type_codec("porting_cc_mood", encoder=str.lower, decoder=str.upper, format="text")
    await c.set_type_codec(
        "int4",
        schema="pg_catalog",
        encoder=lambda v: str(v // 10),
        decoder=lambda s: int(s) * 10,
        format="text",
    )
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
    await c.close()
    return out


def test_text_codec_runs_inside_arrays_of_enums_and_domains_as_asyncpg(
    dsn: str, arun: Callable
) -> None:
    """A text codec on an enum runs on the elements of its arrays; one on int4
    runs on the elements of an array of an int4 domain (asyncpg uses the base
    type's codec for a domain). Before: the built-in values came back."""

    async def go() -> None:
        theirs = await _text_codecs_in_catalog_arrays(asyncpg, dsn)
        assert await _text_codecs_in_catalog_arrays(pg, dsn) == theirs
        assert theirs[1] == ["SAD", None, "OK"] and theirs[5] == [10, 20, None]

    arun(go())


async def _binary_codecs_in_containers(mod: Any, dsn: str) -> list:
    c = await mod.connect(dsn)
    await c.execute(_SETUP)
    await c.set_type_codec(
        "int4",
        schema="pg_catalog",
        encoder=lambda v: struct.pack("!i", v // 10),
        decoder=lambda b: struct.unpack("!i", b)[0] * 10,
        format="binary",
    )
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
    await c.close()
    return out


def test_binary_and_tuple_codecs_run_inside_composites_records_and_arrays_as_asyncpg(
    dsn: str, arun: Callable
) -> None:
    """Binary- and tuple-format codecs run on composite fields (nested too),
    anonymous records' fields and array elements, both ways. Before: those
    parts kept the built-in codec (an int4 field came back unscaled, a
    timestamp field as a datetime, a jsonb field as its text)."""

    async def go() -> None:
        theirs = await _binary_codecs_in_containers(asyncpg, dsn)
        assert await _binary_codecs_in_containers(pg, dsn) == theirs
        assert theirs[1] == (150, 1_000_000, {"a": 1}) and theirs[7] == [10, None, 20]

    arun(go())


async def _tuple_codec_on_a_composite(mod: Any, dsn: str) -> list:
    c = await mod.connect(dsn)
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
    await c.close()
    return out


def test_tuple_codec_on_a_composite_runs_inside_arrays_and_composites_as_asyncpg(
    dsn: str, arun: Callable
) -> None:
    """A tuple-format codec on a composite type runs on the elements of its
    arrays (a tuple given there is one element, not a dimension) and on fields
    of its type."""

    async def go() -> None:
        theirs = await _tuple_codec_on_a_composite(asyncpg, dsn)
        assert await _tuple_codec_on_a_composite(pg, dsn) == theirs
        assert theirs[3] == [("row", 2), None, ("row", 6)]

    arun(go())


async def _text_codec_on_a_field(mod: Any, dsn: str) -> Any:
    c = await mod.connect(dsn)
    try:
        await c.execute(_SETUP)
        await c.set_type_codec("jsonb", schema="pg_catalog", encoder=json.dumps, decoder=json.loads)
        return _plain(await c.fetchval("SELECT ROW(1, NULL, '{\"a\": 1}')::porting_cc_row"))
    finally:
        await c.close()


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
