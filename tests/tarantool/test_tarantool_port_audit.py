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
``reconnect_timeout=0`` (a refused connect was retried for ``connect_timeout``;
a lost connection was reconnected by the next request), malformed update
operations (surge raised `InterfaceError` or sent them: ``except TypeError``
caught nothing), `Tuple` reads (``get(1)`` raised TypeError, no ordering),
connect/close/disconnect in any order, server errors' ``error.trace``, streams
before 2.10, a Unix socket, requests not awaited."""

from __future__ import annotations

import asyncio
import time
import warnings
from collections.abc import Callable
from typing import Any

import asynctnt
import pytest
import surge.tarantool
from asynctnt_peer import both, plain
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


def _both(tnt: services.Service) -> Any:
    """asynctnt's connection and surge's, to a fresh space with a format."""
    return both(tnt, SPACE, _CREATE, _FILL)


async def _same(a: Any, s: Any, call: Callable[[Any], Any]) -> list:
    """``call`` on both connections (the space refilled before each); their
    replies as plain lists, asserted equal."""
    out = []
    for conn in (a, s):
        await conn.eval(_FILL)
        out.append(plain(await call(conn)))
    assert out[0] == out[1]
    return out[1]


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
                assert plain(await c.upsert(SPACE, [3, "y"], operations=ops)) == []
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
                    assert plain(await stmt.execute([2])) == [["even"]]
                    assert plain(await conn.execute(stmt.id, [3])) == [["odd"]]
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
            assert plain(await s.execute(sid, [1])) == [["odd"]]
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
    (surge retried for the whole ``connect_timeout``), a `ConnectionRefusedError`
    in both (surge's `ConnectError` was not one)."""

    async def main() -> None:
        port = services.free_port()
        for make in (asynctnt.Connection, surge.tarantool.Connection):
            conn = make(host="127.0.0.1", port=port, connect_timeout=5, reconnect_timeout=0)
            t0 = time.monotonic()
            with pytest.raises(ConnectionRefusedError):
                await conn.connect()
            assert time.monotonic() - t0 < 2.5, make
            await conn.disconnect()

    arun(main())


#: Malformed operations and the builtin class asynctnt raises for each, before
#: anything is sent (surge raised InterfaceError, or sent the short ones and the
#: unknown operators for the server to refuse).
_BAD_OPS: list[tuple[Any, type]] = [
    ([5], TypeError),
    ([("=",)], IndexError),
    ([("=", 1)], IndexError),
    ([("=", "grp")], IndexError),
    ([("?", 1, "x")], TypeError),
    ([("==", 1, "x")], TypeError),
    ([(None, 1, "x")], TypeError),
    ([("=", 1.5, "x")], TypeError),
    ([("=", None, "x")], TypeError),
    ([(":", 1, 0, 1)], ValueError),
    ([(":", 1, "a", 1, "x")], TypeError),
    ("abc", TypeError),
    ({"a": 1}, TypeError),
]


def test_malformed_update_operations_raise_asynctnts_classes(
    tnt: services.Service, arun: Callable
) -> None:
    async def main() -> None:
        async with _both(tnt) as (a, s):
            lazy = surge.tarantool.Connection(host=tnt.host, port=tnt.port)  # (the `_later` path)
            for ops, builtin in _BAD_OPS:
                for conn in (a, s, lazy):
                    for call in (
                        lambda c, o: c.update(SPACE, [1], o),
                        lambda c, o: c.upsert(SPACE, [1, "odd"], o),
                    ):
                        with pytest.raises(builtin) as got:
                            await call(conn, ops)
                        if conn is not a:
                            assert isinstance(got.value, surge.tarantool.UpdateOperationError)
                            assert isinstance(got.value, surge.errors.InterfaceError)
            assert plain(await s.select(SPACE, [1])) == [[1, "odd", {"n": 1}]]  # nothing sent
            await lazy.close()
            # asynctnt takes the operator as bytes too.
            got = await _same(a, s, lambda c: c.update(SPACE, [1], [(b"=", 1, "b")]))
            assert got == [[1, "b", {"n": 1}]]
            # Kept: a bool field (asynctnt updates field 1: True is an int to it) and a
            # list of operations given as a tuple (asynctnt: TypeError).
            assert plain(await a.update(SPACE, [2], [("=", True, "t")])) == [[2, "t", {"n": 2}]]
            with pytest.raises(TypeError):
                await s.update(SPACE, [2], [("=", True, "t")])
            got = await _same(a, s, lambda c: c.update(SPACE, [3], [("=", 1, "u")]))
            assert plain(await s.update(SPACE, [3], (("=", 1, "v"),))) == [[3, "v", {"n": 3}]]
            # Kept: an operation with an item too many (asynctnt drops it without a
            # word); surge sends it and the server refuses it.
            assert plain(await a.update(SPACE, [4], [("=", 1, "w", "x")])) == [[4, "w", {"n": 4}]]
            with pytest.raises(surge.tarantool.DatabaseError, match="wrong number of arguments"):
                await s.update(SPACE, [4], [("=", 1, "y", "x")])

    arun(main())


def _outcome(f: Callable[[], Any]) -> Any:
    """What a read of a tuple gives: its value (tuples as plain lists, the class
    name out of reprs) or the builtin class of what it raises."""
    try:
        v = f()
    except Exception as e:
        return next(c for c in type(e).__mro__ if c.__module__ == "builtins").__name__
    if isinstance(v, str):
        return v.replace("TarantoolTuple", "Tuple")
    return plain(v)


def test_tuples_read_as_asynctnts(tnt: services.Service, arun: Callable) -> None:
    """Every read of a tuple a port may make: ``get`` by name, by position
    (None: asynctnt's ``get`` looks names up only; surge raised TypeError), with a
    default; ``keys``/``values``/``items``; ``len``, iteration, indexing from
    either end, slices, ``==`` and ordering with tuples, ``sorted``, ``repr``."""

    async def story(c: Any) -> list:
        await c.eval(f"box.space.{SPACE}:replace{{5, 'five', {{n = 5}}, 'extra'}}")
        [t] = await c.select(SPACE, [1])
        [w] = await c.select(SPACE, [5])
        [sql] = await c.execute("select 1 as a, 'x' as b")
        reads: list[Callable[[], Any]] = [
            lambda: t.get(1),
            lambda: t.get(-1),
            lambda: t.get(1, "D"),
            lambda: t.get(None),
            lambda: t.get([]),
            lambda: t.get("grp"),
            lambda: t.get("nope", "D"),
            lambda: w.get(3),
            lambda: list(t.keys()),
            lambda: list(t.values()),
            lambda: list(t.items()),
            lambda: list(w.items()),
            lambda: list(w.values()),
            lambda: (len(t), len(w), bool(t)),
            lambda: list(t),
            lambda: list(reversed(w)),
            lambda: (t[0], t[-1], t[-3], w[3], t[True]),
            lambda: t[3],
            lambda: t[-4],
            lambda: t["meta"],
            lambda: t["nope"],
            lambda: t[1.0],
            lambda: (t[0:2], t[::-1], t[-2:], type(t[1:]).__name__),
            lambda: (t == (1, "odd", {"n": 1}), t != (1, "odd", {"n": 1}), t == w),
            lambda: (t < w, t <= t, w > t, t >= w, t < (2,), (0,) < t),  # noqa: SIM300
            lambda: t < [2],
            lambda: t > None,
            lambda: sorted([w, t]),
            lambda: repr(t),
            lambda: str(w),
            lambda: repr(sql),
            lambda: (list(sql.keys()), sql.get("a"), sql.get("A"), sql.get(0)),
            lambda: ("grp" in t, "odd" in t, 1 in t),
            lambda: dict(t.items()),
        ]
        return [_outcome(f) for f in reads]

    async def main() -> None:
        async with _both(tnt) as (a, s):
            theirs = await story(a)
            assert await story(s) == theirs
            assert theirs[:3] == [None, None, "D"]
            assert theirs[-6] == "<Tuple id=1 grp='odd' meta={'n': 1}>"
            # Kept: equal to a list of its values (asynctnt's is not), and hashed as
            # the tuple it equals (asynctnt's hash differs from the equal tuple's).
            [t] = await s.select(SPACE, [1])
            assert t == [1, "odd", {"n": 1}]
            [row] = await s.execute("select 1 as a, 'x' as b")
            assert hash(row) == hash((1, "x"))

    arun(main())


def test_reconnect_timeout_zero_stays_down_after_a_loss(arun: Callable) -> None:
    """asynctnt's ``reconnect_timeout=0`` after a lost connection: requests fail at
    once with ``TarantoolNotConnectedError`` and the state is DISCONNECTED, even
    once the server is back, until ``connect()`` (surge's next request reconnected)."""

    async def story(lib: Any, port: int) -> list:
        svc = services.start_tarantool(port=port)
        out: list = []
        try:
            conn = lib.Connection(host="127.0.0.1", port=port, reconnect_timeout=0)
            await conn.connect()
            svc.kill()
            for _ in range(100):  # until the loss is seen
                if not conn.is_connected:
                    break
                await asyncio.sleep(0.02)
            svc.stop()
            svc = services.start_tarantool(port=port)
            await asyncio.sleep(0.3)  # nothing reconnects in the background either
            out.append((int(conn.state), conn.is_connected))
            t0 = time.monotonic()
            with pytest.raises(lib.exceptions.TarantoolNotConnectedError):
                await conn.ping()
            out.append(time.monotonic() - t0 < 1.0)
            await conn.connect()
            out.append((int(conn.state), conn.is_connected, plain(await conn.eval("return 7"))))
            await conn.disconnect()
        finally:
            svc.stop()
        return out

    async def main() -> None:
        port = services.free_port()
        theirs = await story(asynctnt, port)
        assert await story(surge.tarantool, port) == theirs
        assert theirs == [(5, False), True, (2, True, [7])]

    arun(main())


def test_connect_close_and_disconnect_as_asynctnts(tnt: services.Service, arun: Callable) -> None:
    """connect/disconnect twice in a row, ``connect()`` after ``disconnect()`` (surge
    refused it: ClosedError for good), asynctnt's plain ``close()`` not awaited (a
    never-awaited coroutine in surge: the connection stayed open), a request on a
    closed connection, ``async with``, ``await connect(host=, port=)`` (surge's
    ``connect`` took them twice: TypeError), the connection's ``repr``, its
    ``features`` (a frozenset of bits: no ``features.streams``)."""

    async def story(lib: Any) -> list:
        out: list = []
        conn = lib.Connection(host=tnt.host, port=tnt.port)
        await conn.connect()
        await conn.connect()
        out.append(int(conn.state))
        # IPROTO_ID's features (none from Tarantool 2.6: it does not know IPROTO_ID).
        out.append((repr(conn.features), conn.features.streams, conn.features.watchers))
        assert conn.close() is None or lib is surge.tarantool  # a plain call in asynctnt
        out.append(int(conn.state))
        with pytest.raises(lib.exceptions.TarantoolNotConnectedError):
            await conn.ping()
        await conn.disconnect()
        await conn.disconnect()
        out.append((int(conn.state), conn.is_connected))
        await conn.connect()
        out += [int(conn.state), plain(await conn.eval("return 1"))]
        await conn.disconnect()
        async with lib.Connection(host=tnt.host, port=tnt.port) as c:
            out += [int(c.state), plain(await c.eval("return 2"))]
        out.append(int(c.state))
        c = await lib.connect(host=tnt.host, port=tnt.port)
        out += [int(c.state), repr(c).split(" ", 1)[1]]
        await c.disconnect()
        return out

    async def main() -> None:
        theirs = await story(asynctnt)
        with warnings.catch_warnings():
            warnings.simplefilter("error", RuntimeWarning)  # "never awaited"
            assert await story(surge.tarantool) == theirs
        assert theirs[0] == 2 and theirs[2:5] == [5, (5, False), 2]

    arun(main())


def test_server_errors_read_as_asynctnts(tnt: services.Service, arun: Callable) -> None:
    """``code``, ``message`` and ``error.trace`` (each frame's ``error_type``,
    ``message``, ``code``, ``file``, ``line``, ``err_no``, ``fields``) of a server
    error (surge's had ``info`` only: ``e.error`` raised AttributeError)."""

    async def story(c: Any, db_error: type) -> list:
        out = []
        for expr in (
            "error('boom')",
            "box.error{code = 777, reason = 'custom'}",
            f"box.space.{SPACE}:insert{{1, 'dup'}}",
            "local e = box.error.new{code = 5, reason = 'inner'}"
            " local o = box.error.new{code = 6, reason = 'outer'} o:set_prev(e) o:raise()",
        ):
            with pytest.raises(db_error) as got:
                await c.eval(expr)
            e = got.value
            frames = [
                # (no fields: asynctnt's are None, surge's {}, as ErrorInfo always had)
                (f.error_type, f.message, f.code, f.file, f.line, f.err_no, f.fields or None)
                for f in e.error.trace
            ]
            out.append((e.code, e.message, frames))
        return out

    async def main() -> None:
        async with _both(tnt) as (a, s):
            theirs = await story(a, asynctnt.exceptions.TarantoolDatabaseError)
            assert await story(s, surge.tarantool.TarantoolDatabaseError) == theirs
            assert [len(frames) for _, _, frames in theirs] == [1, 1, 1, 2]

    arun(main())


def test_streams_refused_before_2_10_as_asynctnts(tnt: services.Service, arun: Callable) -> None:
    """``async with conn.stream()`` on Tarantool 2.6 (no streams): a `TarantoolError`
    naming 2.10 in both, nothing sent (surge had no ``stream()``)."""

    async def main() -> None:
        for lib in (asynctnt, surge.tarantool):
            conn = lib.Connection(host=tnt.host, port=tnt.port)
            await conn.connect()
            with pytest.raises(lib.exceptions.TarantoolError, match=r"2\.10"):
                async with conn.stream() as s:
                    await s.insert("tester", (987654, "never"))
            assert plain(await conn.select("tester", [987654])) == []
            await conn.disconnect()

    arun(main())


def test_unix_socket_as_asynctnts(tnt: services.Service, arun: Callable, tmp_path: Any) -> None:
    """asynctnt's Unix socket: ``host="unix/"``, ``port`` the socket's path (surge
    raised ValueError: ``int(port)``). A relay on a Unix socket stands for the
    server's own (Debian's Tarantool 2.6 listens on one address)."""

    async def relay(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        ur, uw = await asyncio.open_connection(tnt.host, tnt.port)

        async def pump(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
            while data := await src.read(65536):
                dst.write(data)
            dst.close()

        await asyncio.gather(pump(r, uw), pump(ur, w), return_exceptions=True)

    async def main() -> None:
        path = str(tmp_path / "tnt.sock")
        server = await asyncio.start_unix_server(relay, path)
        try:
            out = []
            for lib in (asynctnt, surge.tarantool):
                conn = lib.Connection(host="unix/", port=path)
                await conn.connect()
                got = plain(await conn.eval("return 5"))
                out.append((got, conn.host, conn.port, repr(conn).split(" ", 1)[1]))
                await conn.disconnect()
            assert out[0] == out[1]
            assert out[0][:3] == ([5], "unix/", path)
        finally:
            server.close()

    arun(main())


def test_requests_not_awaited_still_go_out_as_asynctnts(
    tnt: services.Service, arun: Callable
) -> None:
    """asynctnt's requests are futures: one never awaited (fire and forget) is
    still sent. surge's were too on the fast path, but never `execute` (a
    coroutine, never run: a "never awaited" warning), nor a call that had to wait
    (a name the cached schema lacks, the in-flight limit)."""

    async def story(c: Any, other: Any, name: str) -> list:
        await other.eval(
            f"if box.space.{name} then box.space.{name}:drop() end "
            f"local s = box.schema.space.create('{name}', {{format = {{"
            "{'id', 'unsigned'}, {'v', 'string'}}}) s:create_index('pk')"
        )
        await c.refetch_schema()
        c.insert(name, [1, "insert"])
        c.execute(f"""insert into "{name}" values (2, 'sql')""")
        c.eval(f"box.space.{name}:insert{{3, 'eval'}}")
        await asyncio.sleep(0.3)
        return plain(await other.select(name))

    async def main() -> None:
        async with _both(tnt) as (a, s):
            with warnings.catch_warnings():
                warnings.simplefilter("error", RuntimeWarning)
                theirs = await story(a, a, "port_audit_ff")
                assert await story(s, a, "port_audit_ff") == theirs
                assert theirs == [[1, "insert"], [2, "sql"], [3, "eval"]]
                # A space another connection made: surge waits for its name (asynctnt
                # raises at the call) and sends the insert, awaited or not.
                await a.eval(
                    "local s = box.schema.space.create('port_audit_ff2') s:create_index('pk')"
                )
                s.insert("port_audit_ff2", [1, "after a reload"])
                # Over the in-flight limit (the engine's wait): sent once there is room.
                tight = surge.tarantool.Connection(host=tnt.host, port=tnt.port, max_in_flight=1)
                await tight.connect()
                slow = tight.eval("require('fiber').sleep(0.1)")
                tight.replace(SPACE, [9, "queued"])
                await slow
                await asyncio.sleep(0.3)
                assert plain(await a.select("port_audit_ff2")) == [[1, "after a reload"]]
                assert plain(await a.select(SPACE, [9])) == [[9, "queued"]]
                await tight.close()
            await a.eval("box.space.port_audit_ff:drop() box.space.port_audit_ff2:drop()")

    arun(main())
