"""Per-call ``timeout=`` on every request method, against a real Tarantool.

A Lua `fiber.sleep` keeps a call from answering; a Lua busy loop (no yield)
holds the server's transaction thread, so every request queued behind it
(select, insert, ping, ...) answers late. On expiry the call raises a
`TimeoutError` (asyncio.TimeoutError, as asynctnt raises), the connection stays
usable and the late reply is dropped.
"""

from __future__ import annotations

import asyncio
import time

import asynctnt
import pytest
import surge.tarantool as st
from surge.errors import RequestTimeoutError

pytestmark = pytest.mark.timeout(60)

#: Holds the server's tx thread (no yield) for `...` seconds.
BUSY = "local c = require('clock') local t = c.monotonic() while c.monotonic() - t < ... do end"
HOLD = 0.4
SHORT = 0.1


def test_sleeping_call_and_eval_time_out_and_the_connection_stays_usable(tnt, arun):
    async def main():
        async with st.connect(tnt.url) as c:
            t0 = time.monotonic()
            with pytest.raises(asyncio.TimeoutError) as info:
                await c.call("slow", (HOLD, "late"), timeout=SHORT)
            assert isinstance(info.value, RequestTimeoutError)
            assert time.monotonic() - t0 < HOLD
            with pytest.raises(asyncio.TimeoutError):
                await c.eval("require('fiber').sleep(...) return 'late'", (HOLD,), timeout=SHORT)
            # Usable at once, while the two late replies are still to come.
            assert (await c.ping(timeout=1)).body is None
            assert await c.call("add2", (1, 2), timeout=1) == [3]
            await asyncio.sleep(HOLD + 0.1)  # the late replies arrive and are dropped
            assert c.engine.stats["timeouts"] == 2
            assert c.engine.in_flight == 0
            assert await c.call("slow", (0.01, "on time"), timeout=1) == ["on time"]

    arun(main())


def test_every_request_method_takes_a_timeout(tnt, arun):
    calls = {
        "select": lambda c, t: c.select("tester", 901, timeout=t),
        "insert": lambda c, t: c.insert("tester", (902, "ins"), timeout=t),
        "replace": lambda c, t: c.replace("tester", (903, "rep"), timeout=t),
        "update": lambda c, t: c.update("tester", 904, [("=", "data", "upd")], timeout=t),
        "upsert": lambda c, t: c.upsert("tester", (905, "ups"), [("=", 1, "ups2")], timeout=t),
        "delete": lambda c, t: c.delete("tester", 906, timeout=t),
        "call": lambda c, t: c.call("add2", (1, 2), timeout=t),
        "eval": lambda c, t: c.eval("return 1", timeout=t),
        "ping": lambda c, t: c.ping(timeout=t),
        "execute": lambda c, t: c.execute("SELECT 1", timeout=t),
        "prepare": lambda c, t: c.prepare("SELECT 2", timeout=t),
    }

    async def main():
        async with st.connect(tnt.url) as c:
            for k in (901, 903, 904, 905, 906):
                await c.replace("tester", (k, "before"))
            await c.delete("tester", 902)
            busy = asyncio.ensure_future(c.eval(BUSY, (HOLD,)))
            await asyncio.sleep(0.02)  # the busy loop is running on the server
            t0 = time.monotonic()
            results = await asyncio.gather(
                *(call(c, SHORT) for call in calls.values()), return_exceptions=True
            )
            assert time.monotonic() - t0 < HOLD
            for name, r in zip(calls, results, strict=True):
                assert isinstance(r, asyncio.TimeoutError), (name, r)
            await busy
            # A timeout is the client giving up, not a cancel: the insert ran.
            assert await c.select("tester", 902) == [(902, "ins")]
            await c.delete("tester", 902)
            # The same calls with room to answer go through on the same connection.
            for name, call in calls.items():
                assert not isinstance(await call(c, 5), BaseException), name
            assert c.engine.in_flight == 0

    arun(main())


def test_asynctnt_raises_the_same_exception_type(tnt, arun):
    async def main():
        theirs = asynctnt.Connection(host=tnt.host, port=tnt.port)
        await theirs.connect()
        try:
            with pytest.raises(asyncio.TimeoutError):
                await theirs.call("slow", [HOLD, "late"], timeout=SHORT)
        finally:
            await theirs.disconnect()
        async with st.connect(tnt.url) as c:
            with pytest.raises(asyncio.TimeoutError):
                await c.call("slow", (HOLD, "late"), timeout=SHORT)

    arun(main())


def test_timeout_none_is_the_connection_default_and_zero_is_none(tnt, arun):
    async def main():
        async with st.connect(tnt.url, request_timeout=SHORT) as c:
            with pytest.raises(asyncio.TimeoutError):
                await c.call("slow", (HOLD, "x"))  # request_timeout applies
            with pytest.raises(asyncio.TimeoutError):
                await c.call("slow", (HOLD, "x"), timeout=-1)  # asynctnt's "default"
            assert await c.call("slow", (HOLD, "x"), timeout=0) == ["x"]  # none at all
            assert await c.call("slow", (HOLD, "x"), timeout=HOLD * 3) == ["x"]

    arun(main())


def test_timeout_covers_the_wait_for_a_schema_reload(tnt, arun):
    """A request that must wait for a schema reload still answers within its timeout
    (here the reload is held up by the busy server)."""

    async def main():
        async with st.connect(tnt.url) as c:
            busy = asyncio.ensure_future(c.eval(BUSY, (HOLD,)))
            await asyncio.sleep(0.02)
            t0 = time.monotonic()
            with pytest.raises(asyncio.TimeoutError):
                await c.select("tester", 1, index="not_yet_known", timeout=SHORT)
            assert time.monotonic() - t0 < HOLD
            await busy
            assert await c.select("tester", 1, index="primary", timeout=1) is not None

    arun(main())


def test_a_per_call_timeout_bounds_the_wait_for_a_connection(arun):
    """A server that refuses: the engine retries within ``connect_timeout`` (5 s),
    but a call's own ``timeout`` ends its wait sooner, on the plain path and on the
    one that waits for the schema (a space by name before connecting); without
    one, the call waits out the connect and gets its error."""

    async def main():
        from surge import services

        c = st.Connection("127.0.0.1", services.free_port(), connect_timeout=5)
        for call in (lambda: c.ping(timeout=SHORT), lambda: c.select("tester", timeout=SHORT)):
            t0 = time.monotonic()
            with pytest.raises(RequestTimeoutError, match="not connected"):
                await call()
            assert time.monotonic() - t0 < 2.0
        c2 = st.Connection("127.0.0.1", services.free_port(), connect_timeout=0.5)
        with pytest.raises(ConnectionError):
            await c2.ping()
        await c.close()
        await c2.close()

    arun(main())
