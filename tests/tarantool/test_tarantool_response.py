"""Replies read through asynctnt's `Response` names, beside asynctnt on one server.

Every request runs on both clients in the same order against a fresh space, and
each reply is read the way a ported program reads asynctnt's: ``.body``,
``.code``, ``.return_code``, ``.schema_id``, ``.rowcount``, ``.done()``,
``.errmsg``, ``.metadata``, ..., ``len``, indexing, iteration, truth. The two
views must be equal. surge's reply is also still the list of rows it always was
(``isinstance(r, list)``, ``r == [...]``, JSON)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import asynctnt
import orjson
import pytest
import surge.tarantool
from surge import services

SPACE = "responses"
_CREATE = (
    f"if box.space.{SPACE} then box.space.{SPACE}:drop() end "
    f"local s = box.schema.space.create('{SPACE}', {{format = {{"
    "{'id', 'unsigned'}, {'name', 'string'}, {'n', 'integer', is_nullable = true}}}) "
    "s:create_index('pk') "
    "function responses_nothing() end"
)
#: Attributes whose values asynctnt gives every reply that arrived.
ATTRS = (
    "code",
    "return_code",
    "rowcount",
    "errmsg",
    "error",
    "metadata",
    "params",
    "params_count",
    "autoincrement_ids",
    "stmt_id",
    "encoding",
)


def _plain(v: Any) -> Any:
    """A tuple (asynctnt's or surge's) as a list, anything else as it is."""
    if isinstance(v, asynctnt.TarantoolTuple | surge.tarantool.Tuple):
        return list(v)
    return v


def _view(r: Any, schema_id: int | None) -> dict:
    """What a ported program can read of a reply."""
    body = r.body
    view = {a: getattr(r, a) for a in ATTRS}
    view.update(
        body=None if body is None else [_plain(v) for v in body],
        len=len(r),
        truth=bool(r),
        done=r.done(),
        schema_id_is_the_servers=r.schema_id == schema_id,
        sync_type=type(r.sync),
    )
    if body is not None:
        view["iterated"] = [_plain(v) for v in r]
        view["first"] = _plain(r[0]) if len(r) else None
    return view


async def _story(c: Any) -> list[tuple[str, Any]]:
    """Every kind of request, each reply as `_view` reads it."""
    await c.eval(f"box.space.{SPACE}:truncate()")
    schema_id = (await c.eval("return box.internal.schema_version()")).body[0]
    replies = [
        ("ping", await c.ping()),
        ("select none", await c.select(SPACE, [1])),
        ("insert", await c.insert(SPACE, [1, "a", 5])),
        ("replace", await c.replace(SPACE, [2, "b"])),
        ("select one", await c.select(SPACE, [1])),
        ("select all", await c.select(SPACE)),
        ("update", await c.update(SPACE, [1], [("+", 2, 1)])),
        ("update miss", await c.update(SPACE, [9], [("+", 2, 1)])),
        ("upsert", await c.upsert(SPACE, [3, "c"], [("=", 1, "cc")])),
        ("delete", await c.delete(SPACE, [2])),
        ("delete miss", await c.delete(SPACE, [2])),
        ("call", await c.call("add", [1, 2])),
        ("call nothing", await c.call("responses_nothing")),
        ("eval many", await c.eval("return 1, 'x', {2, 3}, nil")),
        ("eval nothing", await c.eval("local x = 1")),
    ]
    syncs = [r.sync for _, r in replies]
    # A reply's sync is its request's: one per request, in the order sent.
    assert syncs == sorted(set(syncs)), syncs
    return [(name, _view(r, schema_id)) for name, r in replies]


async def _connected(tnt: services.Service) -> tuple[Any, Any]:
    a = asynctnt.Connection(host=tnt.host, port=tnt.port)
    await a.connect()
    s = await surge.tarantool.connect(f"{tnt.host}:{tnt.port}")
    await a.eval(_CREATE)
    await a.refetch_schema()
    await s.refetch_schema()
    return a, s


def test_replies_read_as_asynctnts(tnt: services.Service, arun: Callable) -> None:
    async def main() -> None:
        a, s = await _connected(tnt)
        try:
            theirs = await _story(a)
            ours = await _story(s)
        finally:
            await a.eval(f"box.space.{SPACE}:drop()")
            await a.disconnect()
            await s.close()
        for (name, t), (_, o) in zip(theirs, ours, strict=True):
            assert o == t, name

    arun(main())


def test_replies_are_still_the_lists(tnt: services.Service, arun: Callable) -> None:
    async def main() -> None:
        async with surge.tarantool.connect(f"{tnt.host}:{tnt.port}") as c:
            got = await c.eval("return 1, 'x', {2, 3}")
            assert isinstance(got, list) and isinstance(got, surge.tarantool.Response)
            assert got == [1, "x", [2, 3]] and got[1:] == ["x", [2, 3]]
            assert got.body is got
            assert json.loads(json.dumps(got)) == [1, "x", [2, 3]]
            assert orjson.loads(orjson.dumps(got)) == [1, "x", [2, 3]]
            rows = await c.select("tester", [10**9])
            assert rows == [] and not rows and rows.body == [] and rows.rowcount == 0
            pong = await c.ping()
            assert pong == [] and pong.body is None and pong.code == 0

    arun(main())


def test_plain_lists_when_turned_off(tnt: services.Service, arun: Callable) -> None:
    async def main() -> None:
        c = surge.tarantool.connect(f"{tnt.host}:{tnt.port}", responses=False)
        try:
            got = await c.eval("return 1, 2")
            assert type(got) is list and got == [1, 2]
            assert type(await c.select("tester", [10**9])) is list
            assert await c.ping() is None
        finally:
            await c.close()

    arun(main())


def test_errors_raise_as_asynctnts(tnt: services.Service, arun: Callable) -> None:
    """A failed request has no reply to read: both raise, with the same code."""

    async def codes(c: Any, error: type[Exception]) -> list[int]:
        await c.eval(f"box.space.{SPACE}:truncate()")
        await c.insert(SPACE, [1, "a"])
        out = []
        for make in (
            lambda: c.insert(SPACE, [1, "again"]),
            lambda: c.eval("error('boom')"),
            lambda: c.call("no_such_function"),
        ):
            with pytest.raises(error) as e:
                await make()
            out.append(e.value.code)
        return out

    async def main() -> None:
        a, s = await _connected(tnt)
        try:
            theirs = await codes(a, asynctnt.exceptions.TarantoolDatabaseError)
            ours = await codes(s, surge.tarantool.TarantoolDatabaseError)
        finally:
            await a.eval(f"box.space.{SPACE}:drop()")
            await a.disconnect()
            await s.close()
        assert ours == theirs

    arun(main())
