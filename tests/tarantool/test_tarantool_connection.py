"""The Tarantool driver against a real Tarantool 2.6 on loopback, on asyncio and uvloop."""

from __future__ import annotations

import asyncio
import decimal
import time
import uuid

import pytest
import surge.tarantool as st
from surge.errors import ConnectError, ConnectionLostError, InterfaceError, RequestTimeoutError
from surge.tarantool.errors import (
    AuthenticationError,
    DatabaseError,
    DuplicateKeyError,
    LuaError,
    NoSuchProcedureError,
    SchemaError,
    SQLError,
    TupleTooLargeError,
)

pytestmark = pytest.mark.timeout(60)


def test_crud_with_field_names(tnt, arun):
    async def main():
        async with st.connect(tnt.url) as c:
            base = 1000 if arun.kind == "uvloop" else 2000
            [row] = await c.insert("tester", (base, "hello"))
            assert row == (base, "hello") and row["data"] == "hello" and row[-1] == "hello"
            assert row.as_dict() == {"id": base, "data": "hello"} and row.keys() == ["id", "data"]
            assert (await c.select("tester", base))[0]["id"] == base
            assert await c.update("tester", base, [("=", "data", "bye")]) == [(base, "bye")]
            assert await c.update("tester", base, [("=", 1, "again")]) == [(base, "again")]
            assert await c.replace("tester", (base, "replaced")) == [(base, "replaced")]
            assert await c.upsert("tester", (base, "new"), [("=", "data", "upserted")]) == []
            assert (await c.select("tester", [base]))[0]["data"] == "upserted"
            assert await c.delete("tester", base) == [(base, "upserted")]
            assert await c.select("tester", base) == []
            assert await c.delete("tester", base) == []
            assert (await c.ping()).body is None

    arun(main())


def test_select_index_iterator_limit_offset(tnt, arun):
    async def main():
        async with st.connect(tnt.url) as c:
            await c.eval("box.space.sorted:truncate()")
            for i in range(10):
                await c.insert("sorted", (i, f"n{i % 3}", i * 10))
            assert [r["id"] for r in await c.select("sorted")] == list(range(10))
            got = await c.select("sorted", 5, iterator="GE", limit=3, offset=1)
            assert [r[0] for r in got] == [6, 7, 8]
            got = await c.select("sorted", 5, iterator=st.ITERATORS["LT"])
            assert [r[0] for r in got] == [4, 3, 2, 1, 0]
            by_name = await c.select("sorted", "n1", index="by_name")
            assert sorted(r["n"] for r in by_name) == [10, 40, 70]
            by_id = await c.select(c.schema.space("sorted").id, "n2", index=1)
            assert len(by_id) == 3

    arun(main())


def test_call_eval_and_lua_errors(tnt, arun):
    async def main():
        async with st.connect(tnt.url) as c:
            assert await c.call("add2", (2, 3)) == [5]
            assert await c.eval("local a, b = ... return a, b, {a = 1}", (1, "x")) == [
                1,
                "x",
                {"a": 1},
            ]
            with pytest.raises(LuaError) as e:
                await c.eval("error('boom')")
            assert "boom" in e.value.message and e.value.code == 32
            with pytest.raises(NoSuchProcedureError):
                await c.call("no_such_function")
            assert (await c.ping()).body is None

    arun(main())


def test_sql_execute_and_prepare(tnt, arun):
    async def main():
        async with st.connect(tnt.url) as c:
            t = f"SQL_{arun.kind.upper()}"
            await c.execute(f'DROP TABLE IF EXISTS "{t}"')
            await c.execute(f'CREATE TABLE "{t}" (id INTEGER PRIMARY KEY, name TEXT)')
            r = await c.execute(f'INSERT INTO "{t}" VALUES (?, ?), (?, ?)', [1, "a", 2, "b"])
            assert r.row_count == 2
            r = await c.execute(f'SELECT * FROM "{t}" WHERE id >= :min ORDER BY id', {"min": 1})
            assert r.columns == ["ID", "NAME"] and [tuple(x) for x in r] == [(1, "a"), (2, "b")]
            assert r[1]["NAME"] == "b"
            sid = await c.prepare(f'SELECT name FROM "{t}" WHERE id = ?')
            assert [x["NAME"] for x in await c.execute(sid, [2])] == ["b"]
            with pytest.raises(SQLError):
                await c.execute("SELEKT nonsense")
            # A space made by SQL is visible by name at once (schema reloaded on demand).
            assert (await c.select(t, 1))[0]["NAME"] == "a"

    arun(main())


def test_server_error_keeps_connection_usable(tnt, arun):
    async def main():
        async with st.connect(tnt.url) as c:
            await c.replace("tester", (1, "x"))
            with pytest.raises(DuplicateKeyError) as e:
                await c.insert("tester", (1, "y"))
            assert isinstance(e.value, DatabaseError) and e.value.code == 3
            assert "Duplicate key" in str(e.value)
            # Errors interleaved with successes in one batch resolve the right futures.
            res = await asyncio.gather(
                *(c.insert("tester", (1, "dup")) for _ in range(5)),
                c.select("tester", 1),
                return_exceptions=True,
            )
            assert all(isinstance(x, DuplicateKeyError) for x in res[:5])
            assert res[5] == [(1, "x")]

    arun(main())


def test_bad_input_raises_before_sending(tnt, arun):
    async def main():
        async with st.connect(tnt.url) as c:
            sent = c.engine.stats["requests"]
            loads = c.schema_loads
            # An unknown name costs one schema reload (two selects) and raises at await.
            with pytest.raises(SchemaError):
                await c.select("no_such_space")
            with pytest.raises(SchemaError):
                await c.select("tester", 1, index="no_such_index")
            with pytest.raises(SchemaError):
                await c.update("tester", 1, [("=", "no_such_field", 1)])
            assert c.schema_loads - loads == 3
            with pytest.raises(TypeError):
                c.insert("tester", (5, object()))
            with pytest.raises(OverflowError):
                c.insert("tester", (2**64, "x"))
            with pytest.raises(InterfaceError):
                c.select("tester", 1, iterator="SIDEWAYS")
            # Three reloads of two selects each, nothing else went out.
            assert c.engine.stats["requests"] - sent == 6
            assert c.engine.codec.pending() == 0
            assert await c.replace("tester", (5, "ok")) == [(5, "ok")]

    arun(main())


def test_tuple_over_server_limit(tnt, arun):
    async def main():
        async with st.connect(tnt.url) as c:
            with pytest.raises(TupleTooLargeError):
                await c.replace("tester", (7, "x" * (2 << 20)))
            assert await c.replace("tester", (7, "small")) == [(7, "small")]

    arun(main())


def test_auth(tnt, arun):
    async def main():
        c = st.connect(tnt.address, user="surge", password="surge-secret")
        assert await c.eval("return box.session.user()") == ["surge"]
        await c.close()
        bad = st.connect(tnt.address, user="surge", password="wrong", connect_timeout=5)
        t0 = time.monotonic()
        with pytest.raises(AuthenticationError):
            await bad.ping()
        assert time.monotonic() - t0 < 2, "auth errors are not retried"
        await bad.close()

    arun(main())


def test_lazy_connect_outside_loop(tnt, arun):
    c = st.connect(tnt.address)  # no loop running here
    assert not c.is_connected

    async def main():
        assert (await c.ping()).body is None
        assert c.is_connected and c.version[0] == 2
        await c.close()

    arun(main())


def test_schema_reloads_after_ddl(tnt, arun):
    async def main():
        async with st.connect(tnt.url) as c:
            name = f"ddl_{arun.kind}"
            await c.eval(
                "local name = ... if box.space[name] then box.space[name]:drop() end "
                "box.schema.space.create(name, {format = {{name = 'k', type = 'unsigned'}}})"
                ":create_index('pk')",
                (name,),
            )
            # The reply carried a new schema version; the next lookup finds the space.
            [row] = await c.insert(name, (1,))
            assert row["k"] == 1
            assert c.schema.version == c.engine.codec.schema_version

    arun(main())


def test_ext_types_through_the_server(tnt, arun):
    async def main():
        async with st.connect(tnt.url) as c:
            d = decimal.Decimal("-12345.678901234567890123")
            u = uuid.uuid4()
            await c.replace("anything", (1, d, u))
            [row] = await c.select("anything", 1)
            assert row[1] == d and row[2] == u
            assert await c.eval("return require('decimal').new('1.5') * 2") == [
                decimal.Decimal("3.0")
            ]
            assert await c.eval("return require('uuid').fromstr(...)", (str(u),)) == [u]
            # 2.6 sends error objects as MP_ERROR when error marshaling is on.
            [err] = await c.eval(
                "box.session.settings.error_marshaling_enabled = true "
                "return box.error.new({code = 77, reason = 'custom'})"
            )
            assert isinstance(err, st.ErrorInfo) and err.code == 77
            assert err.message == "custom"

    arun(main())


def test_many_coroutines_share_few_writes(tnt, arun):
    async def main():
        async with st.connect(tnt.url) as c:
            w0, r0 = c.engine.stats["writes"], c.engine.stats["requests"]
            res = await asyncio.gather(
                *(c.replace("tester", (10_000 + i, "v")) for i in range(2000))
            )
            assert [r[0]["id"] for r in res] == [10_000 + i for i in range(2000)]
            writes = c.engine.stats["writes"] - w0
            assert c.engine.stats["requests"] - r0 == 2000
            assert writes <= 40, writes  # one write per loop iteration (plus size flushes)

    arun(main())


def test_request_timeout_keeps_stream_in_sync(tnt, arun):
    async def main():
        async with st.connect(tnt.url, request_timeout=5) as c:
            with pytest.raises(RequestTimeoutError):
                await c.engine.request(c.engine.codec.call, "slow", (0.3, "late"), timeout=0.05)
            # The late reply arrives and is dropped; later replies still match.
            r = await asyncio.gather(c.call("slow", (0.4, "a")), c.call("add2", (1, 1)))
            assert r == [["a"], [2]]

    arun(main())


def test_cancellation_keeps_stream_in_sync(tnt, arun):
    async def main():
        async with st.connect(tnt.url) as c:
            tasks = [asyncio.ensure_future(c.call("slow", (0.2, i))) for i in range(20)]
            await asyncio.sleep(0.05)
            for t in tasks[::2]:
                t.cancel()
            done = await asyncio.gather(*tasks, return_exceptions=True)
            for i, d in enumerate(done):
                if i % 2:
                    assert d == [i]
                else:
                    assert isinstance(d, asyncio.CancelledError)
            assert await c.call("add2", (2, 2)) == [4]
            assert c.engine.in_flight == 0

    arun(main())


def test_in_flight_limit_waits_not_fails(tnt, arun):
    async def main():
        async with st.connect(tnt.url, max_in_flight=7) as c:
            seen = []
            orig = c.engine._on_data

            def spy(data):
                seen.append(c.engine.in_flight)
                orig(data)

            c.engine._on_data = spy
            res = await asyncio.gather(*(c.call("add2", (i, 1)) for i in range(300)))
            assert res == [[i + 1] for i in range(300)]
            assert max(seen) <= 7

    arun(main())


def test_dead_server_fails_fast(arun):
    from surge.services import free_port

    async def main():
        c = st.connect(f"127.0.0.1:{free_port()}", connect_timeout=0.3)
        t0 = time.monotonic()
        with pytest.raises(ConnectError):
            await c.ping()
        assert time.monotonic() - t0 < 2
        assert isinstance(ConnectError("x"), ConnectionError)

    arun(main())


def test_connection_lost_fails_all_pending_then_reconnects(tnt, arun, proxy_cls):
    async def main():
        proxy = await proxy_cls(tnt.host, tnt.port).start()
        c = st.connect(f"127.0.0.1:{proxy.port}")
        await c.ping()
        pending = [asyncio.ensure_future(c.call("slow", (5, i))) for i in range(50)]
        await asyncio.sleep(0.05)
        t0 = time.monotonic()
        proxy.cut()
        res = await asyncio.gather(*pending, return_exceptions=True)
        assert time.monotonic() - t0 < 1
        assert all(isinstance(r, ConnectionLostError) for r in res), res[:3]
        assert isinstance(res[0], ConnectionError)
        # The next request reconnects by itself.
        assert await c.call("add2", (3, 4)) == [7]
        assert c.engine.stats["connects"] == 2
        await c.close()
        await proxy.stop()

    arun(main())


def test_features_missing_on_2_6(tnt, arun):
    # Debian's 2.6 does not know IPROTO_ID: no features, and the 2.10+ APIs say so.
    async def main():
        async with st.connect(tnt.url) as c:
            assert c.protocol_version is None and c.features == frozenset()
            with pytest.raises(st.FeatureNotSupportedError, match="IPROTO_ID"):
                async with c.transaction():
                    pass
            with pytest.raises(st.FeatureNotSupportedError, match="watchers"):
                await c.watch("k", lambda k, v: None)
            assert await c.call("add2", (1, 2)) == [3]  # still usable

    arun(main())


def test_replies_read_together_reach_their_callers(tnt, arun):
    # One write of 60 requests whose replies come back in one or a few reads, errors
    # in between: the codec resolves the plain replies natively (EngineReader.feed_resolve) and
    # hands the rest, from the first error on, to the engine; each caller must get
    # its own reply, the per-request deadlines must go with them.
    async def main():
        async with st.connect(tnt.url) as c:
            base = 5000 if arun.kind == "uvloop" else 6000
            await c.insert("tester", (base, "taken"))
            calls = []
            for i in range(60):
                if i % 7 == 3:
                    calls.append(c.insert("tester", (base, "dup")))
                elif i % 11 == 5:
                    calls.append(c.call("no_such_function_here", ()))
                else:
                    calls.append(c.call("add2", (i, 1), timeout=30 if i % 2 else None))
            got = await asyncio.gather(*calls, return_exceptions=True)
            for i, r in enumerate(got):
                if i % 7 == 3:
                    assert isinstance(r, DuplicateKeyError), (i, r)
                elif i % 11 == 5:
                    assert isinstance(r, NoSuchProcedureError), (i, r)
                else:
                    assert r == [i + 1], (i, r)
            assert c.engine.in_flight == 0 and not c.engine._deadline_of
            assert await c.delete("tester", base) == [(base, "taken")]

    arun(main())
