"""Programs ported from asynctnt beside asynctnt on one server: its connection
keywords, tuples given as dicts by field name, SQL results read through its
names, its exception names."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import asynctnt
import pytest
import surge.tarantool
from surge import services

SPACE = "porting"
_CREATE = (
    f"if box.space.{SPACE} then box.space.{SPACE}:drop() end "
    f"local s = box.schema.space.create('{SPACE}', {{format = {{"
    "{'id', 'unsigned'}, {'name', 'string'}, {'n', 'integer', is_nullable = true}}}) "
    "s:create_index('pk')"
)


@asynccontextmanager
async def _both(tnt: services.Service) -> AsyncIterator[tuple[Any, Any]]:
    """asynctnt's connection and surge's, made with asynctnt's keywords (the same
    call for both), to a fresh space with a format."""
    kw = {
        "host": tnt.host,
        "port": str(tnt.port),
        "username": None,
        "password": None,
        "connect_timeout": 3,
        "request_timeout": -1,
        "reconnect_timeout": 1,
        "ping_timeout": 5,
        "encoding": "utf-8",
        "fetch_schema": True,
        "auto_refetch_schema": True,
    }
    a = asynctnt.Connection(**kw)
    await a.connect()
    s = surge.tarantool.Connection(**kw)
    await s.connect()
    try:
        await a.eval(_CREATE)
        await a.refetch_schema()
        await s.refetch_schema()
        yield a, s
    finally:
        await a.eval(f"box.space.{SPACE}:drop()")
        await a.disconnect()
        await s.disconnect()


def _rows(reply: Any) -> list:
    rows = reply.body if hasattr(reply, "body") else reply
    return [list(r) for r in rows]


def test_tuples_given_as_dicts_are_laid_out_by_the_format(tnt, arun: Callable) -> None:
    """asynctnt takes ``{field: value}`` for insert/replace/upsert (a field not
    given is nil); surge sent the dict as a MessagePack map, which the server refused."""

    async def story(c: Any) -> list:
        await c.eval(f"box.space.{SPACE}:truncate()")
        out = [
            _rows(await c.insert(SPACE, {"id": 1, "name": "a", "n": 3})),
            _rows(await c.insert(SPACE, {"name": "b", "id": 2})),
            _rows(await c.replace(SPACE, {"id": 2, "name": "bb"})),
        ]
        await c.upsert(SPACE, {"id": 3, "name": "c"}, [("=", "n", 1)])
        out.append(_rows(await c.select(SPACE)))
        return out

    async def go() -> None:
        async with _both(tnt) as (a, s):
            theirs = await story(a)
            assert await story(s) == theirs
            # Where asynctnt drops an unknown name with a warning, surge refuses it
            # (nothing is sent): a dropped field is lost data.
            with pytest.raises(surge.tarantool.SchemaError, match="no field named 'zz'"):
                await s.insert(SPACE, {"id": 9, "name": "z", "zz": 1})
            assert _rows(await s.select(SPACE, [9])) == []

    arun(go())


def test_sql_results_and_errors_under_asynctnts_names(tnt, arun: Callable) -> None:
    async def story(c: Any, db_error: type) -> list:
        await c.eval(f"box.space.{SPACE}:truncate()")
        ins = await c.execute(f"INSERT INTO \"{SPACE}\" VALUES (1, 'a', NULL), (2, 'b', 5)")
        sel = await c.execute(f'SELECT "name" FROM "{SPACE}" WHERE "id" > ?', [0])
        out: list = [ins.rowcount, sel.rowcount, [list(r) for r in sel.body]]
        try:
            await c.insert(SPACE, [1, "dup"])
        except db_error as e:
            out.append(e.code)
        return out

    async def go() -> None:
        async with _both(tnt) as (a, s):
            theirs = await story(a, asynctnt.exceptions.TarantoolDatabaseError)
            assert await story(s, surge.tarantool.TarantoolDatabaseError) == theirs
            with pytest.raises(surge.tarantool.TarantoolSchemaError):
                await s.select("porting_no_such_space")

    arun(go())
