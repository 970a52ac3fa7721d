"""Programs ported from asynctnt beside asynctnt on one server: its connection
keywords, tuples given as dicts by field name, SQL results read through its
names, its exception names."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import asynctnt
import pytest
import surge.tarantool
from asynctnt_peer import both
from surge import services

SPACE = "porting"
_CREATE = (
    f"if box.space.{SPACE} then box.space.{SPACE}:drop() end "
    f"local s = box.schema.space.create('{SPACE}', {{format = {{"
    "{'id', 'unsigned'}, {'name', 'string'}, {'n', 'integer', is_nullable = true}}}) "
    "s:create_index('pk')"
)


def _both(tnt: services.Service) -> Any:
    """asynctnt's connection and surge's, made with asynctnt's keywords (the same
    call for both), to a fresh space with a format."""
    return both(
        tnt,
        SPACE,
        _CREATE,
        port=str(tnt.port),
        username=None,
        password=None,
        connect_timeout=3,
        request_timeout=-1,
        reconnect_timeout=1,
        ping_timeout=5,
        encoding="utf-8",
        fetch_schema=True,
        auto_refetch_schema=True,
    )


def _body(reply: Any) -> list:
    """A call's or eval's return values (asynctnt's ``Response.body``)."""
    return list(reply.body if hasattr(reply, "body") else reply)


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


def test_push_messages_as_asynctnt(tnt, arun: Callable) -> None:
    """``push_subscribe=True`` on call and eval: ``PushIterator(fut)`` yields each
    ``box.session.push`` as it comes, ``await fut`` the return values; pushes of an
    unsubscribed request are dropped; a failing request's error ends the iteration."""

    async def story(c: Any, mod: Any) -> list:
        out: list = []
        fut = c.eval(
            "box.session.push('x') require('fiber').sleep(0.05) box.session.push({1, 2})"
            " return 'done', 5",
            push_subscribe=True,
        )
        out.append([item async for item in mod.PushIterator(fut)])
        out.append(_body(await fut))
        fut = c.call("box.session.push", ["q"], push_subscribe=True)
        out.append([item async for item in mod.PushIterator(fut)])
        out.append(_body(await fut))
        out.append(_body(await c.eval("box.session.push('dropped') return 2")))
        # many at once on the one connection: each gets its own pushes
        futs = [
            c.eval("for i = 1, 3 do box.session.push(...) end return ...", [n], push_subscribe=True)
            for n in range(5)
        ]
        out.append([[item async for item in mod.PushIterator(f)] for f in futs])
        with pytest.raises(ValueError, match="push_subscribe=True"):
            mod.PushIterator(c.eval("return 1"))
        return out

    async def failing(c: Any, mod: Any) -> list:
        fut = c.eval("box.session.push('z') error('boom')", push_subscribe=True)
        got = []
        with pytest.raises(Exception, match="boom"):
            async for item in mod.PushIterator(fut):
                got.append(item)
        return got

    async def go() -> None:
        async with _both(tnt) as (a, s):
            theirs = await story(a, asynctnt)
            assert await story(s, surge.tarantool) == theirs
            assert theirs[0] == [["x"], [[1, 2]]]
            # Where asynctnt drops the pushes that came before the error, surge
            # yields them, then raises the error.
            assert await failing(a, asynctnt) == []
            assert await failing(s, surge.tarantool) == [["z"]]
            await asyncio.sleep(0)
            assert s._pushes == {}  # nothing kept once answered

    arun(go())


def test_connection_state_and_schema_id_as_asynctnt(tnt, arun: Callable) -> None:
    async def story(c: Any) -> list:
        out: list = [int(c.state), c.is_connected, c.is_fully_connected, c.schema_id]
        await c.connect()
        out += [int(c.state), c.is_connected, c.is_fully_connected, type(c.schema_id).__name__]
        before = c.schema_id
        await c.eval("box.schema.space.create('porting_state', {if_not_exists = true})")
        await c.ping()
        await c.refetch_schema()
        out.append(c.schema_id > before)
        await c.eval("box.space.porting_state:drop()")
        await c.disconnect()
        out += [int(c.state), c.is_connected, c.is_fully_connected, c.schema_id]
        return out

    async def go() -> None:
        kw = {"host": tnt.host, "port": tnt.port}
        theirs = await story(asynctnt.Connection(**kw))
        assert await story(surge.tarantool.Connection(**kw)) == theirs
        assert theirs[4:7] == [2, True, True]

    arun(go())


def test_connection_properties_and_reconnect_as_asynctnt(tnt, arun: Callable) -> None:
    """asynctnt's read-only connection properties give what the connection was
    made with (surge had none of them: ``conn.host`` raised AttributeError), and
    ``reconnect()`` gives a working connection."""

    async def story(mod: Any, **kw: Any) -> list:
        c = mod.Connection(host=tnt.host, port=tnt.port, **kw)
        names = [
            "host",
            "port",
            "username",
            "fingerprint",
            "request_timeout",
            "reconnect_timeout",
            "auto_refetch_schema",
            "encoding",
            "initial_read_buffer_size",
            "fetch_schema",
        ]
        out: list = [getattr(c, n) for n in names]
        if kw:
            out.append(c.connect_timeout)  # (the defaults differ: 3 s and 5 s)
        await c.connect()
        await c.reconnect()
        out += [int(c.state), c.is_fully_connected, _body(await c.eval("return 1"))]
        await c.disconnect()
        return out

    async def go() -> None:
        kw = {
            "connect_timeout": 2.5,
            "request_timeout": 7.0,
            "reconnect_timeout": 0.5,
            "initial_read_buffer_size": 65536,
            "encoding": "utf-8",
        }
        for given in ({}, kw):
            theirs = await story(asynctnt, **given)
            assert await story(surge.tarantool, **given) == theirs
        assert theirs[:3] == [tnt.host, tnt.port, None]

    arun(go())


_RESPONSE = [
    "autoincrement_ids",
    "body",
    "code",
    "encoding",
    "errmsg",
    "error",
    "params",
    "params_count",
    "return_code",
    "rowcount",
    "schema_id",
    "stmt_id",
]


def _response(r: Any) -> list:
    """Every attribute of an `execute` reply (but ``sync``), metadata field by field."""
    out: list = [getattr(r, n) for n in _RESPONSE]
    out[1] = None if r.body is None else [list(t) for t in r.body]
    # (the schema version moves with each story's DDL: its type and sign compare)
    out[_RESPONSE.index("schema_id")] = type(r.schema_id).__name__, r.schema_id > 0
    out += [r.done(), len(r), r.body is not None and [list(t) for t in r], repr(r.metadata)]
    if r.metadata is not None:
        fields = r.metadata.fields
        out.append(
            [(f.name, f.type, f.collation, f.is_nullable, f.is_autoincrement) for f in fields]
        )
        out.append(r.metadata.name_id_map)
    return out


def test_sql_response_attributes_as_asynctnt(tnt, arun: Callable) -> None:
    """Every `Response` attribute of an SQL reply: rows, DML with and without
    autoincrement ids, column metadata (surge's were missing or differed: no
    ``code``/``schema_id``/``done()``, ``metadata`` a list of raw maps,
    ``body`` and ``autoincrement_ids`` [] where asynctnt has None)."""

    async def story(c: Any) -> list:
        await c.execute("DROP TABLE IF EXISTS porting_sql")
        await c.execute(
            "CREATE TABLE porting_sql (id INTEGER PRIMARY KEY AUTOINCREMENT,"
            ' v TEXT COLLATE "unicode", n INTEGER)'
        )
        out = [
            _response(await c.execute("INSERT INTO porting_sql (v) VALUES ('a'), ('b')")),
            _response(await c.execute("INSERT INTO porting_sql VALUES (10, 'c', 1)")),
            _response(
                await c.execute("SELECT id, v, n + 1 AS m FROM porting_sql WHERE id > ?", [1])
            ),
            _response(await c.execute("SELECT * FROM porting_sql WHERE id < 0")),
            _response(await c.execute("UPDATE porting_sql SET n = 2")),
        ]
        await c.execute("DROP TABLE porting_sql")
        return out

    async def go() -> None:
        async with _both(tnt) as (a, s):
            theirs = await story(a)
            assert await story(s) == theirs
            assert theirs[0][0] == [1, 2] and theirs[1][0] is None

    arun(go())


def test_tuples_iterators_and_exceptions_under_asynctnts_names(tnt, arun: Callable) -> None:
    """``TarantoolTuple.items()``/``values()``, ``Iterator`` members as select's
    iterator, ``exceptions.TarantoolDatabaseError`` (surge had none of them)."""

    async def story(c: Any, mod: Any) -> list:
        await c.eval(f"box.space.{SPACE}:truncate()")
        short = (await c.insert(SPACE, [1, "a"]))[0]
        long = (await c.insert(SPACE, [2, "b", 3, "extra"]))[0]
        out: list = [[list(t.items()), list(t.values()), list(t.keys())] for t in (short, long)]
        for it in (mod.Iterator.GE, mod.Iterator.LT, mod.Iterator.ALL):
            out.append(
                _rows(await c.select(SPACE, [2] if it != mod.Iterator.ALL else [], iterator=it))
            )
        try:
            await c.insert(SPACE, [1, "dup"])
        except mod.exceptions.TarantoolDatabaseError as e:
            out.append(e.code)
        return out

    async def go() -> None:
        async with _both(tnt) as (a, s):
            theirs = await story(a, asynctnt)
            assert await story(s, surge.tarantool) == theirs
            assert theirs[0][0] == [("id", 1), ("name", "a")]

    arun(go())
