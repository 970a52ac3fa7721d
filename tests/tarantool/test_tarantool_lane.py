"""The native request lane (`surge._core.IprotoLane`) against the Python methods it
stands in for: the same calls on a real Tarantool give the same replies, the same
errors and the same request counts, whether the lane serves them or hands them on."""

from __future__ import annotations

import asyncio
import warnings
from typing import Any

import asynctnt
import pytest
import surge.tarantool as st
from surge import engine
from surge.errors import ConnectionLostError
from surge.tarantool import connection as tconn

from tests.loops import new_loop

pytestmark = pytest.mark.timeout(60)


def _outcome(call: Any) -> Any:
    """A call's awaitable, or the error it raised at once (as type and message)."""
    try:
        return call()
    except Exception as exc:
        return (type(exc).__name__, str(exc))


async def _settle(x: Any) -> Any:
    if isinstance(x, tuple) and len(x) == 2 and isinstance(x[0], str):
        return ("raised", *x)
    try:
        r = await x
    except Exception as exc:
        return ("failed", type(exc).__name__, str(exc))
    if isinstance(r, list):
        return [tuple(t) for t in r]
    return r


async def _scenario(c: st.Connection) -> list[Any]:
    await c.eval("box.space.sorted:truncate()")
    calls = [
        lambda: c.insert("sorted", (1, "a", 10)),
        lambda: c.insert("sorted", [2, "b", 20]),
        lambda: c.replace("sorted", (3, "a", 30)),
        lambda: c.insert("sorted", (1, "dup", 0)),  # duplicate key: the server's error
        lambda: c.select("sorted", 1),
        lambda: c.select("sorted", [2]),
        lambda: c.select("sorted", (3,)),
        lambda: c.select("sorted"),
        lambda: c.select("sorted", None, limit=2, offset=1),
        lambda: c.select("sorted", 1, iterator=5, limit=2),
        lambda: c.select("sorted", 2, iterator="LE"),  # by name: the Python path
        lambda: c.select("sorted", "a", index="by_name"),
        lambda: c.select("sorted", "a", index=1),
        lambda: c.select("sorted", 1, index="no_such_index"),
        lambda: c.select("no_such_space", 1),
        lambda: c.select(c.schema.by_name["sorted"].id, 1),  # by id: the Python path
        lambda: c.select("sorted", 1, timeout=5),  # a timeout: the Python path
        lambda: c.select("sorted", 1, iterator="NOPE"),
        # An explicit None is not the default (asynctnt refuses it too).
        lambda: c.select("sorted", 1, index=None),
        lambda: c.select("sorted", None, offset=None),
        lambda: c.update("sorted", 1, [("=", 2, 12)], index=None),
        lambda: c.delete("sorted", 1, index=None),
        lambda: c.update("sorted", 1, [("=", 2, 11)]),
        lambda: c.update("sorted", [2], [["+", 2, 1]], index=0),
        lambda: c.update("sorted", 3, [("=", "n", 33)]),  # a field name
        lambda: c.update("sorted", 3, [("=", "no_field", 1)]),
        lambda: c.update("sorted", 3, ["bad op"]),
        lambda: c.upsert("sorted", (4, "d", 40), [("+", 2, 1)]),
        lambda: c.upsert("sorted", (4, "d", 40), [("+", "n", 1)]),
        lambda: c.insert("sorted", (5, "e", object())),  # MessagePack cannot hold it
        lambda: c.insert("sorted", (6, "f", 2**64)),
        lambda: c.select("sorted", 4),
        lambda: c.delete("sorted", 4),
        lambda: c.delete("sorted", "a", index="by_name"),  # non-unique: the server's error
        lambda: c.delete("sorted", 3, index="primary"),
        lambda: c.delete("sorted", 2, timeout=0),
        lambda: c.select("sorted"),
    ]
    out = []
    for call in calls:
        out.append(await _settle(_outcome(call)))
    # Many at once, pipelined: the lane's futures and the engine's early flush.
    got = await asyncio.gather(*(c.insert("sorted", (100 + i, "p", i)) for i in range(50)))
    out.append([tuple(r[0]) for r in got])
    got = await asyncio.gather(*(c.select("sorted", 100 + i) for i in range(50)))
    out.append([tuple(r[0]) for r in got])
    # Replies larger than one read (the native reader's buffer is 256 KiB) among
    # small ones: each split across reads, its tail kept by the codec.
    await c.insert("sorted", (7, "x" * 300_000, 7))
    got = await asyncio.gather(*(c.select("sorted", k) for k in (7, 100, 7, 101, 7)))
    out.append([[(t[0], len(t[1]), t[1].count("x"), t[2]) for t in r] for r in got])
    await c.delete("sorted", 7)
    return out


def test_lane_matches_python_methods(tnt, arun, monkeypatch):
    async def main():
        async with st.connect(tnt.url) as native:
            # The lane serves the methods (a native method, not the class's function).
            assert type(native.select).__name__ == "builtin_function_or_method"
            # ... and reads go through the engine's native read path, a buffered
            # protocol (the loop reads into the reader's buffer).
            proto = native.engine._protocol
            assert isinstance(proto, asyncio.BufferedProtocol)
            assert not isinstance(proto, asyncio.Protocol)  # else uvloop calls data_received
            assert type(proto.buffer_updated).__name__ == "builtin_function_or_method"
            want = await _scenario(native)
            native_ops = dict(native.engine.ops)
        monkeypatch.setattr(engine, "NATIVE_READ", False)
        async with st.connect(tnt.url) as py_read:
            assert type(py_read.engine._protocol).__name__ == "_StreamProtocol"
            assert await _scenario(py_read) == want
            assert dict(py_read.engine.ops) == native_ops
        monkeypatch.setattr(tconn, "NATIVE_LANE", False)
        async with st.connect(tnt.url) as plain:
            assert type(plain.select).__name__ == "method"
            got = await _scenario(plain)
            plain_ops = dict(plain.engine.ops)
        assert got == want
        # Every request counted alike (the lane counts under the codec's methods).
        assert native_ops == plain_ops
        assert native_ops["insert"] >= 50 and native_ops["select"] >= 50
        # The cases the lane hands on did reach the Python path's errors.
        kinds = {x[1] for x in want if isinstance(x, tuple) and x and x[0] in ("raised", "failed")}
        assert {"DuplicateKeyError", "SchemaError", "InterfaceError", "TypeError"} <= kinds

    arun(main())


def test_lane_keeps_the_engines_flush_rules(tnt, arun):
    # As the engine's own path (tests/test_engine.py): ten requests in one
    # iteration leave in two writes, the first EARLY_FLUSH at once (nothing on
    # the wire), the rest at the end of the iteration.

    async def main():
        c = st.connect(f"{tnt.host}:{tnt.port}")
        try:
            await c.eval("box.space.sorted:truncate()")
            w0, r0 = c.engine.stats["writes"], c.engine.stats["requests"]
            got = await asyncio.gather(*(c.insert("sorted", (i, "x", i)) for i in range(10)))
            assert [tuple(t) for r in got for t in r] == [(i, "x", i) for i in range(10)]
            assert c.engine.stats["requests"] - r0 == 10
            assert c.engine.ops["insert"] == 10  # counted by the lane: it served them
            assert c.engine.stats["writes"] - w0 == 2
        finally:
            await c.close()

    arun(main())


def test_lane_sees_the_engine_state_python_sets(tnt, arun):
    """The state the lane reads per request lives in native slots (the engine's
    `EngineState` base, the connection's `IprotoConnState`), one copy: what the
    Python side sets (writing paused by the transport, here) shuts the lane's
    gate at once, and the instance dicts hold no second copy that could drift."""

    async def main():
        c = st.connect(f"{tnt.host}:{tnt.port}")
        try:
            await c.eval("box.space.sorted:truncate()")
            e = c.engine
            slots = {"_ready", "_paused", "_pending", "_flush_scheduled", "_loop", "_tbuf"}
            assert not slots & set(vars(e))
            assert not {"_names", "_tx_open"} & set(vars(c))
            sent = e.stats["requests"]
            e._protocol.pause_writing()
            assert e._paused is True
            held = asyncio.ensure_future(c.insert("sorted", (1, "x", 1)))
            await asyncio.sleep(0.05)
            assert not held.done() and e.stats["requests"] == sent  # the lane did not send it
            e._protocol.resume_writing()
            assert [tuple(t) for t in await held] == [(1, "x", 1)]
            assert e.stats["requests"] == sent + 1
        finally:
            await c.close()

    arun(main())


def test_lane_reads_the_limits_python_sets(tnt, arun):
    """The engine's limits are native slots as well (one copy, none in the
    instance dict): a new ``max_in_flight`` or ``request_timeout`` set between
    batches gates the lane's next batch."""

    async def main():
        c = st.connect(f"{tnt.host}:{tnt.port}")
        try:
            await c.eval("box.space.sorted:truncate()")
            await c.insert("sorted", (1, "x", 1))
            e = c.engine
            limits = {"max_in_flight", "max_in_flight_bytes", "request_timeout"}
            assert not limits & set(vars(e))
            e.max_in_flight = 2
            calls = [c.select("sorted", 1) for _ in range(3)]
            # Two admitted by the lane (futures in the pending table); the third
            # is over the limit: the Python path, which waits for room (a task, so
            # it goes out unawaited too, as asynctnt's futures do).
            assert len(e._pending) == 2
            assert [isinstance(x, asyncio.Task) for x in calls] == [False, False, True]
            got = await asyncio.gather(*calls)
            assert [[tuple(t) for t in r] for r in got] == [[(1, "x", 1)]] * 3
            e.max_in_flight = engine.DEFAULT_MAX_IN_FLIGHT
            # A timed request takes the engine's own path, which gives it a
            # deadline (the lane never does).
            e.request_timeout = 30.0
            timed = c.select("sorted", 1)
            assert len(e._deadline_of) == 1
            assert [tuple(t) for t in await timed] == [(1, "x", 1)]
            e.request_timeout = None
            untimed = c.select("sorted", 1)
            assert not e._deadline_of
            assert [tuple(t) for t in await untimed] == [(1, "x", 1)]
        finally:
            await c.close()

    arun(main())


@pytest.mark.parametrize("kind", ["asyncio", "uvloop"])
def test_lane_futures_belong_to_the_engines_loop(tnt, kind):
    """A lane call inside the engine's running loop and one made while no loop
    runs both get a future of the engine's loop, and no warning about a
    missing current loop (the lane never asks for the running loop)."""
    loop = new_loop(kind)
    c = st.connect(f"{tnt.host}:{tnt.port}")
    try:
        loop.run_until_complete(c.eval("box.space.sorted:truncate()"))
        loop.run_until_complete(c.insert("sorted", (1, "x", 1)))

        async def inside() -> asyncio.Future[Any]:
            return c.select("sorted", 1)

        fut = loop.run_until_complete(inside())
        assert fut.get_loop() is loop
        assert [tuple(t) for t in loop.run_until_complete(fut)] == [(1, "x", 1)]
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            fut = c.select("sorted", 1)  # no loop running
        assert isinstance(fut, asyncio.Future) and fut.get_loop() is loop
        assert [tuple(t) for t in loop.run_until_complete(fut)] == [(1, "x", 1)]
    finally:
        loop.run_until_complete(c.close())
        loop.close()


def test_explicit_none_index_and_offset_refused_like_asynctnt(tnt, arun):
    """index=None and offset=None raise TypeError at the call, as asynctnt's do,
    on the lane, on the Python path and before connecting; nothing is sent."""

    async def main():
        theirs = asynctnt.Connection(host=tnt.host, port=tnt.port)
        await theirs.connect()
        try:
            calls = [
                lambda c: c.select("sorted", 1, index=None),
                lambda c: c.select("sorted", offset=None),
                lambda c: c.update("sorted", 1, [("=", 2, 1)], index=None),
                lambda c: c.delete("sorted", 1, index=None),
            ]
            for call in calls:
                with pytest.raises(TypeError):
                    call(theirs)
            fresh = st.connect(tnt.url)  # not connected: the Python path
            try:
                for call in calls:
                    with pytest.raises(TypeError):
                        call(fresh)
                await fresh.connect()
                sent = fresh.engine.stats["requests"]
                for call in calls:
                    with pytest.raises(TypeError):
                        call(fresh)
                assert fresh.engine.stats["requests"] == sent
                # Left out, they are the primary index and no offset on both.
                await fresh.eval("box.space.sorted:truncate()")
                await fresh.insert("sorted", (1, "a", 1))
                assert await fresh.select("sorted", 1) == [(1, "a", 1)]
                assert list((await theirs.select("sorted", [1]))[0]) == [1, "a", 1]
            finally:
                await fresh.close()
        finally:
            await theirs.disconnect()

    arun(main())


def test_lane_before_connect_and_after_reconnect(tnt, arun, proxy_cls):
    async def main():
        proxy = await proxy_cls(tnt.host, tnt.port).start()
        c = st.connect(f"127.0.0.1:{proxy.port}")
        try:
            # Not connected yet: the Python path connects, then the lane serves.
            await c.eval("box.space.sorted:truncate()")
            assert await c.insert("sorted", (1, "x", 1)) == [(1, "x", 1)]
            writes = c.engine.stats["requests"]
            assert await c.select("sorted", 1) == [(1, "x", 1)]
            assert c.engine.stats["requests"] == writes + 1
            proxy.cut()  # nothing has seen it yet: the lane still sends
            with pytest.raises(ConnectionLostError):
                await c.select("sorted", 1, iterator="ALL", limit=5)
            # Lost: the next call reconnects through the Python path.
            assert await c.select("sorted", 1) == [(1, "x", 1)]
            assert await c.delete("sorted", 1) == [(1, "x", 1)]
        finally:
            await c.close()
            await proxy.stop()

    arun(main())
