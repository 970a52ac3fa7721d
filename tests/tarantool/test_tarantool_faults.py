"""Expected faults stay quiet: a connection cut at any byte of the handshake or
after it, a schema reload cut short, a pool instance that is down. Each either
works or raises a surge connection error, and nothing reaches the loop's
exception handler ("Future exception was never retrieved") or the log as a
traceback; a pool logs one line per state change, not one per health check.

Futures are reported as never retrieved only when they are finalised, so each
test runs ``gc.collect()`` inside its loop (exception handler still installed)
before it asserts.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging

import pytest
import surge.tarantool as st
from fake_iproto import FakeTarantool
from surge import services
from surge.errors import ConnectError, ConnectionLostError

pytestmark = pytest.mark.timeout(120)

#: Requests made at once on each connection, per round.
FANOUT = 20


class CuttingProxy:
    """Forwards to the server; after ``budget`` reply bytes on a connection, drops
    it (both sides). ``budget=None`` never cuts; ``seen`` counts reply bytes;
    ``refuse`` resets new connections on accept; `cut` drops the open ones."""

    def __init__(self, host: str, port: int, budget: int | None = None) -> None:
        self.target = (host, port)
        self.budget = budget
        self.seen = 0
        self.refuse = False
        self.server: asyncio.Server | None = None
        self.port = 0
        self._tasks: set[asyncio.Task] = set()
        self._flows: set[asyncio.StreamWriter] = set()

    async def start(self) -> CuttingProxy:
        self.server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        self.port = self.server.sockets[0].getsockname()[1]
        return self

    async def _handle(self, cr: asyncio.StreamReader, cw: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        if self.refuse:
            cw.transport.abort()
            self._tasks.discard(task)
            return
        try:
            sr, sw = await asyncio.open_connection(*self.target)
            self._flows |= {cw, sw}
            left = [self.budget]

            async def pump(r: asyncio.StreamReader, w: asyncio.StreamWriter, replies: bool) -> None:
                with contextlib.suppress(OSError):
                    while data := await r.read(65536):
                        if replies:
                            if left[0] is not None and len(data) >= left[0]:
                                w.write(data[: left[0]])
                                self.seen += left[0]
                                break
                            if left[0] is not None:
                                left[0] -= len(data)
                            self.seen += len(data)
                        w.write(data)
                        await w.drain()
                for t in (cw, sw):
                    t.transport.abort()
                    self._flows.discard(t)

            await asyncio.gather(pump(cr, sw, False), pump(sr, cw, True))
        except (OSError, asyncio.CancelledError):
            # The proxy's own ending is not what these tests look at: keep it out of
            # the loop's exception handler.
            cw.transport.abort()
        finally:
            self._tasks.discard(task)

    def cut(self) -> None:
        """Drop every open connection (both sides)."""
        for w in list(self._flows):
            w.transport.abort()
        self._flows.clear()

    async def stop(self) -> None:
        if self.server is not None:
            self.server.close()
        self.cut()
        for t in list(self._tasks):
            t.cancel()
        if self._tasks:
            await asyncio.wait(list(self._tasks), timeout=2)


def _url(port: int) -> str:
    return f"tarantool://{services.TARANTOOL_USER}:{services.TARANTOOL_PASSWORD}@127.0.0.1:{port}"


def _catch_loop_errors() -> list[dict]:
    """Route the running loop's exception-handler calls into a list."""
    calls: list[dict] = []
    asyncio.get_running_loop().set_exception_handler(lambda _loop, ctx: calls.append(ctx))
    return calls


async def _assert_quiet(calls: list[dict], caplog: pytest.LogCaptureFixture) -> None:
    """No exception-handler call and no traceback in the log, once every future
    that will ever be finalised has been."""
    await asyncio.sleep(0.05)  # let the last connection_lost callbacks run
    gc.collect()
    await asyncio.sleep(0)
    assert calls == [], [
        f"{c.get('message')}: {c.get('exception')!r}" for c in calls
    ]  # e.g. "Future exception was never retrieved"
    for r in caplog.records:
        text = r.getMessage()
        assert "never retrieved" not in text, text
        assert r.exc_info is None and "Traceback" not in text, (r.name, text)


def test_cut_at_any_byte_is_an_answer_or_a_connection_error(tnt, arun, caplog):
    caplog.set_level(logging.DEBUG)

    async def main():
        calls = _catch_loop_errors()
        # Bytes the server sends for the handshake: greeting (128), IPROTO_ID's
        # reply, auth's, then _vspace and _vindex (most of it).
        probe = await CuttingProxy(tnt.host, tnt.port, None).start()
        async with st.connect(_url(probe.port)):
            handshake = probe.seen
        await probe.stop()
        assert handshake > 1000
        cuts = [0, 1, 64, 127, 128, 129, 150, 200, 300, 500, 1000, 3000]
        cuts += [handshake - 1, handshake, handshake + 1, handshake + 40, handshake + 400]
        cuts += [handshake * 4]
        outcome = {}
        for budget in cuts:
            proxy = await CuttingProxy(tnt.host, tnt.port, budget).start()
            # A short connect bound ends the reconnects to a path that cuts every
            # connection sooner; the path that cuts none gets a generous one, as
            # its handshake took more than 0.2 s at load 12 (all its calls failed).
            uncut = budget >= handshake * 4
            conn = st.connect(_url(proxy.port), connect_timeout=10.0 if uncut else 0.2)
            ok = failed = 0
            try:
                for _ in range(2):
                    got = await asyncio.gather(
                        *(
                            conn.eval("return ...", (i,))
                            if i % 3
                            else conn.select("tester", 10_000_000 + i)
                            for i in range(FANOUT)
                        ),
                        conn.ping(),
                        return_exceptions=True,
                    )
                    for i, r in enumerate(got):
                        if isinstance(r, BaseException):
                            assert isinstance(r, ConnectError | ConnectionLostError), repr(r)
                            failed += 1
                        elif i == FANOUT:
                            assert r == [] and r.body is None  # the ping's own reply
                            ok += 1
                        else:
                            # Its own answer, never a neighbour's.
                            assert r == ([i] if i % 3 else []), (i, r)
                            ok += 1
            finally:
                await conn.close()
                await proxy.stop()
            outcome[budget] = (ok, failed)
        for budget in cuts:
            if budget < handshake:  # no connection gets through its handshake
                assert outcome[budget] == (0, 2 * (FANOUT + 1)), (budget, outcome[budget])
        assert outcome[handshake * 4] == (2 * (FANOUT + 1), 0)
        await _assert_quiet(calls, caplog)
        assert not [r for r in caplog.records if r.levelno >= logging.WARNING]

    arun(main(), timeout=90)


def test_schema_reload_cut_short_is_quiet(tnt, arun, caplog, proxy_cls):
    caplog.set_level(logging.DEBUG)

    async def main():
        calls = _catch_loop_errors()
        proxy = await proxy_cls(tnt.host, tnt.port).start()
        try:
            async with st.connect(tnt.url) as admin, st.connect(_url(proxy.port)) as conn:
                for i in range(3):
                    name = f"reload_cut_{arun.kind}_{i}"
                    await admin.eval(f"box.schema.space.create('{name}', {{if_not_exists = true}})")
                    # Its reply carries the new schema version: a reload starts,
                    # which nobody awaits, and the connection drops under it.
                    await conn.ping()
                    reload = conn._reload
                    assert reload is not None and not reload.done()
                    proxy.cut()
                    for _ in range(200):
                        if reload.done():
                            break
                        await asyncio.sleep(0.01)
                    # Failed, and left for the driver to read (its error is not read here).
                    assert reload.done() and not reload.cancelled()
                    del reload
                    # The next request reconnects, which loads the new schema.
                    assert (await conn.ping()).body is None
                    assert name in conn.schema.by_name
                    await admin.eval(f"box.space['{name}']:drop()")
        finally:
            await proxy.stop()
        del conn, admin  # their last reload task is finalised with them
        await _assert_quiet(calls, caplog)
        assert not [r for r in caplog.records if r.levelno >= logging.WARNING]

    arun(main(), timeout=60)


def test_pool_logs_one_line_per_state_change(tnt, arun, caplog):
    caplog.set_level(logging.DEBUG)
    port = services.free_port()
    where = f"127.0.0.1:{port}"

    def lines(what: str) -> list[logging.LogRecord]:
        return [
            r
            for r in caplog.records
            if r.name == "surge.tarantool" and f"{where} is {what}" in r.getMessage()
        ]

    async def wait_for(cond, seconds: float = 15.0) -> None:
        for _ in range(int(seconds / 0.02)):
            if cond():
                return
            await asyncio.sleep(0.02)
        raise AssertionError("condition not met in time")

    async def main():
        calls = _catch_loop_errors()
        # The live instance must not time out a check on a loaded machine (its own
        # "down" line would be one more than the test counts): a generous bound.
        async with st.Pool(
            [tnt.url, _url(port)], mode="any", health_interval=0.05, health_timeout=10.0
        ) as pool:
            live, dead = pool.instances
            await asyncio.sleep(0.6)  # a dozen health checks of a port nobody listens on
            assert live.healthy and not dead.healthy
            [down] = lines("down")
            assert down.levelno == logging.WARNING
            # (a refused connect: `ConnectRefusedError`, a `ConnectError`)
            assert "ConnectRefusedError" in down.getMessage(), down.getMessage()
            assert services.TARANTOOL_PASSWORD not in down.getMessage()
            await _assert_quiet(calls, caplog)

            svc = await asyncio.to_thread(services.start_tarantool, port=port)
            try:
                await wait_for(lambda: dead.healthy)
                await asyncio.sleep(0.3)  # more checks, all fine: no more lines
                [up] = lines("up")
                assert up.levelno == logging.INFO
                assert await pool.eval("return 1") == [1]
            finally:
                await asyncio.to_thread(svc.stop)
            await wait_for(lambda: not dead.healthy)
            await asyncio.sleep(0.3)
            assert len(lines("down")) == 2 and len(lines("up")) == 1
            assert live.healthy
        await _assert_quiet(calls, caplog)
        assert not [
            r for r in caplog.records if "is down" in r.getMessage() and where not in r.getMessage()
        ]

    arun(main(), timeout=60)


def test_watched_connection_logs_its_outage_once(arun, caplog):
    # Tarantool 2.6 has no watchers: the scripted 2.10 server stands in (see
    # test_tarantool_v210.py).
    caplog.set_level(logging.DEBUG)

    async def main():
        calls = _catch_loop_errors()
        srv = await FakeTarantool().start()
        proxy = await CuttingProxy("127.0.0.1", srv.port).start()
        try:
            async with st.connect(f"127.0.0.1:{proxy.port}", connect_timeout=0.1) as c:
                seen: list = []
                await c.watch("cfg", lambda k, v: seen.append(v))
                for _ in range(200):
                    if seen:
                        break
                    await asyncio.sleep(0.01)
                # Down for 0.8 s: the background reconnect fails several times over.
                proxy.refuse = True
                proxy.cut()
                await asyncio.sleep(0.8)
                assert not c.is_connected
                proxy.refuse = False
                for _ in range(300):
                    if len(seen) == 2:
                        break
                    await asyncio.sleep(0.01)
                assert seen == [None, None]  # registered again: the value once more
        finally:
            await proxy.stop()
            await srv.stop()
        await _assert_quiet(calls, caplog)
        mine = [r for r in caplog.records if r.name == "surge.tarantool"]
        assert [r.levelno for r in mine] == [logging.WARNING, logging.INFO], [
            r.getMessage() for r in mine
        ]
        assert "reconnecting for its watchers" in mine[0].getMessage()

    arun(main(), timeout=30)
