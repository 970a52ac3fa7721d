"""asynctnt calls that once failed, or did something else, on surge: each run
through asynctnt and surge.tarantool on one server, their results compared.

Caught here: asynctnt's keyword names (``func_name``, ``expression``, ``args``,
``operations``, ``replace=``), ``call16``, call/eval ``args=None`` (was sent as
nil: the server answered "Invalid MsgPack") and a scalar there (was sent, now a
TypeError at the call as asynctnt's), update operations on a JSON path (were
refused as an unknown field name), dict keys laid out by the index's parts (were
sent as a map), an SQL reply's ``schema_id`` after DDL (was the connection's
old one), asynctnt's `PreparedStatement`, and ``except TarantoolNotConnectedError``
around a lost or closed connection (caught nothing: it was only `ConnectError`),
``reconnect_timeout=0`` (a refused connect was retried for ``connect_timeout``)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import asynctnt
import pytest
import surge.tarantool
from surge import services

SPACE = "port_audit"
_CREATE = (
    f"if box.space.{SPACE} then box.space.{SPACE}:drop() end "
    f"local s = box.schema.space.create('{SPACE}', {{format = {{"
    "{'id', 'unsigned'}, {'grp', 'string'}, {'meta', 'map', is_nullable = true}}}) "
    "s:create_index('pk') "
    "s:create_index('by_grp', {unique = false, parts = {{2, 'string'}, {1, 'unsigned'}}}) "
    "function port_audit_many() return 1, 'a', {2, 3} end"
)
_FILL = (
    f"local s = box.space.{SPACE} s:truncate() "
    "for i = 1, 4 do s:insert{i, i % 2 == 0 and 'even' or 'odd', {n = i}} end"
)


@asynccontextmanager
async def _both(tnt: services.Service) -> AsyncIterator[tuple[Any, Any]]:
    """asynctnt's connection and surge's, to a fresh space with a format."""
    a = asynctnt.Connection(host=tnt.host, port=tnt.port)
    await a.connect()
    s = surge.tarantool.Connection(host=tnt.host, port=tnt.port)
    await s.connect()
    try:
        await a.eval(_CREATE)
        await a.eval(_FILL)
        await a.refetch_schema()
        await s.refetch_schema()
        yield a, s
    finally:
        await a.eval(f"box.space.{SPACE}:drop()")
        await a.disconnect()
        await s.disconnect()


async def _same(a: Any, s: Any, call: Callable[[Any], Any]) -> list:
    """``call`` on both connections (the space refilled before each); their
    replies as plain lists, asserted equal."""
    out = []
    for conn in (a, s):
        await conn.eval(_FILL)
        out.append(_plain(await call(conn)))
    assert out[0] == out[1]
    return out[1]


def _plain(v: Any) -> Any:
    if hasattr(v, "body") and hasattr(v, "code"):
        v = v.body
    if isinstance(v, dict):
        return {k: _plain(x) for k, x in v.items()}
    if isinstance(v, list | tuple) or type(v).__name__ in ("TarantoolTuple", "Tuple"):
        return [_plain(x) for x in v]
    return v


def test_asynctnts_keyword_names(tnt: services.Service, arun: Callable) -> None:
    async def main() -> None:
        async with _both(tnt) as (a, s):
            got = await _same(a, s, lambda c: c.call(func_name="port_audit_many", args=None))
            assert got == [1, "a", [2, 3]]
            assert await _same(a, s, lambda c: c.eval(expression="return ...", args=[7])) == [7]
            sql = await _same(a, s, lambda c: c.execute("select ? as x", args=[5]))
            assert sql == [[5]]
            await _same(a, s, lambda c: c.execute("select 1 as x", parse_metadata=True))
            row = await _same(a, s, lambda c: c.insert(SPACE, [1, "new"], replace=True))
            assert row == [[1, "new"]]
            ops = [["=", "grp", "x"]]
            assert await _same(a, s, lambda c: c.update(SPACE, [2], operations=ops)) == [
                [2, "x", {"n": 2}]
            ]

            async def upsert_then_select(c: Any) -> Any:
                assert _plain(await c.upsert(SPACE, [3, "y"], operations=ops)) == []
                return await c.select(SPACE, [3])

            assert await _same(a, s, upsert_then_select) == [[3, "x", {"n": 3}]]
            # No operations (asynctnt takes None): the tuple as it is.
            assert await _same(a, s, lambda c: c.update(SPACE, [4], None)) == [
                [4, "even", {"n": 4}]
            ]
            with pytest.raises(TypeError, match="not both"):
                s.update(SPACE, [4], ops, operations=ops)

    arun(main())


def test_call16_wraps_each_value_as_asynctnts(tnt: services.Service, arun: Callable) -> None:
    async def main() -> None:
        async with _both(tnt) as (a, s):
            got = await _same(a, s, lambda c: c.call16("port_audit_many"))
            assert got == [[1], ["a"], [2, 3]]
            assert await _same(a, s, lambda c: c.call16("tonumber", ["12"])) == [[12]]

    arun(main())


def test_call_and_eval_arguments_as_asynctnts(tnt: services.Service, arun: Callable) -> None:
    async def main() -> None:
        async with _both(tnt) as (a, s):
            assert await _same(a, s, lambda c: c.call("port_audit_many", None)) == [1, "a", [2, 3]]
            assert await _same(a, s, lambda c: c.eval("return select('#', ...)", None)) == [0]
            for bad in (5, "ab", {"x": 1}):
                for conn in (a, s):
                    with pytest.raises(TypeError):
                        await conn.call("tonumber", bad)
                    with pytest.raises(TypeError):
                        await conn.eval("return ...", bad)
            assert await s.ping() is not None  # nothing malformed reached the server

    arun(main())


def test_update_on_a_json_path_as_asynctnts(tnt: services.Service, arun: Callable) -> None:
    async def main() -> None:
        async with _both(tnt) as (a, s):
            got = await _same(a, s, lambda c: c.update(SPACE, [1], [["=", "meta.n", 10]]))
            assert got == [[1, "odd", {"n": 10}]]
            got = await _same(a, s, lambda c: c.update(SPACE, [1], [["+", "[3].n", 5]]))
            assert got == [[1, "odd", {"n": 6}]]
            # A plain name the format lacks stays an error before sending (kept: on a
            # missing key or in an upsert the server would skip it without a word).
            with pytest.raises(surge.tarantool.SchemaError):
                await s.update(SPACE, [1], [["=", "nope", 1]])

    arun(main())


def test_dict_keys_are_laid_out_by_the_index(tnt: services.Service, arun: Callable) -> None:
    async def main() -> None:
        async with _both(tnt) as (a, s):
            assert await _same(a, s, lambda c: c.select(SPACE, {"id": 2})) == [
                [2, "even", {"n": 2}]
            ]
            got = await _same(a, s, lambda c: c.select(SPACE, {"grp": "odd"}, index="by_grp"))
            assert [r[0] for r in got] == [1, 3]
            key = {"id": 3, "grp": "odd"}
            got = await _same(a, s, lambda c: c.select(SPACE, key, index="by_grp"))
            assert [r[0] for r in got] == [3]
            assert await _same(a, s, lambda c: c.delete(SPACE, {"id": 4})) == [
                [4, "even", {"n": 4}]
            ]
            ops = [["=", 1, "z"]]
            assert await _same(a, s, lambda c: c.update(SPACE, {"id": 1}, ops)) == [
                [1, "z", {"n": 1}]
            ]
            # asynctnt skips an unknown name with a warning (a wider select than
            # asked for) and shifts the parts after a missing one: surge refuses both.
            with pytest.raises(surge.tarantool.SchemaError, match="no field named 'nope'"):
                await s.select(SPACE, {"nope": 1})
            with pytest.raises(surge.tarantool.SchemaError, match="'grp'"):
                await s.select(SPACE, {"id": 1}, index="by_grp")

    arun(main())


def test_sql_schema_id_is_the_replys(tnt: services.Service, arun: Callable) -> None:
    async def main() -> None:
        async with _both(tnt) as (a, s):
            for conn in (a, s):
                r = await conn.execute("create table port_audit_t (id int primary key)")
                after = (await conn.ping()).schema_id
                await conn.execute("drop table port_audit_t")
                assert r.schema_id == after, type(conn)

    arun(main())


def test_prepared_statements_as_asynctnts(tnt: services.Service, arun: Callable) -> None:
    async def main() -> None:
        async with _both(tnt) as (a, s):
            q = f'select "grp" from "{SPACE}" where "id" = ?'
            for conn in (a, s):
                async with conn.prepare(q) as stmt:
                    assert stmt.id > 0 and stmt.params_count == 1
                    assert [f.name for f in stmt.params.fields] == ["?"]
                    assert _plain(await stmt.execute([2])) == [["even"]]
                    assert _plain(await conn.execute(stmt.id, [3])) == [["odd"]]
                    sid = stmt.id
                assert stmt.id is None
                # Unprepared on the server: its id is gone.
                errors = (asynctnt.exceptions.TarantoolDatabaseError, surge.tarantool.DatabaseError)
                with pytest.raises(errors, match="does not exist"):
                    await conn.execute(sid, [1])
                stmt = conn.prepare(query=q)
                assert await stmt.prepare() == stmt.id
                await stmt.unprepare()
            # surge's own way still gives the id.
            sid = await s.prepare(q)
            assert _plain(await s.execute(sid, [1])) == [["odd"]]
            await s.unprepare_iproto(sid)

    arun(main())


def test_not_connected_errors_caught_as_asynctnts(
    tnt: services.Service, arun: Callable, proxy_cls: Any
) -> None:
    """``except TarantoolNotConnectedError`` catches a request cut by a lost
    connection, one pending at ``disconnect()`` and one made after it, in both."""

    async def main() -> None:
        proxy = await proxy_cls(tnt.host, tnt.port).start()
        try:
            for lib, make in (
                (asynctnt, asynctnt.Connection),
                (surge.tarantool, surge.tarantool.Connection),
            ):
                not_connected = lib.exceptions.TarantoolNotConnectedError
                conn = make(host="127.0.0.1", port=proxy.port)
                await conn.connect()
                slow = asyncio.ensure_future(conn.eval("require('fiber').sleep(5)"))
                await asyncio.sleep(0.05)
                proxy.cut()
                with pytest.raises(not_connected):
                    await slow
                await conn.disconnect()
                conn = make(host="127.0.0.1", port=proxy.port)
                await conn.connect()
                slow = asyncio.ensure_future(conn.eval("require('fiber').sleep(5)"))
                await asyncio.sleep(0.05)
                await conn.disconnect()
                with pytest.raises(not_connected):
                    await slow
                with pytest.raises(not_connected):
                    await conn.ping()
        finally:
            await proxy.stop()

    arun(main())


def test_tuples_answer_in_and_hash_as_asynctnts(tnt: services.Service, arun: Callable) -> None:
    async def main() -> None:
        async with _both(tnt) as (a, s):
            for conn in (a, s):
                [row] = await conn.select(SPACE, [1])
                # `in` asks about field names, as a mapping's (and asyncpg's Record).
                assert "grp" in row and "meta" in row
                assert "odd" not in row and "nope" not in row and 1 not in row
                # Hashable (rows of plain values): sets of rows work.
                one, two = [(await conn.execute(f"select {i} as a, 'x' as b"))[0] for i in (1, 2)]
                assert len({one, two, one}) == 2
            assert hash(one) == hash((1, "x"))  # surge's equals its values' tuple

    arun(main())


def test_reconnect_timeout_zero_fails_a_refused_connect_at_once(arun: Callable) -> None:
    """asynctnt's ``reconnect_timeout=0``: no retry, the refusal is raised at once
    (surge retried for the whole ``connect_timeout``)."""

    async def main() -> None:
        port = services.free_port()
        for make in (asynctnt.Connection, surge.tarantool.Connection):
            conn = make(host="127.0.0.1", port=port, connect_timeout=5, reconnect_timeout=0)
            t0 = time.monotonic()
            with pytest.raises(OSError):
                await conn.connect()
            assert time.monotonic() - t0 < 2.5, make
            await conn.disconnect()

    arun(main())
