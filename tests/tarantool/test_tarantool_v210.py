"""Tarantool >= 2.10 features against the scripted IPROTO server in fake_iproto.py.

NOT a live server: Debian's Tarantool is 2.6, which has no IPROTO_ID, streams,
watchers or graceful shutdown (test_tarantool_connection.py checks that the API
refuses them there). The scripted server follows the protocol reference byte
for byte; what a real 2.10+ does beyond it (MVCC conflicts, txn timeouts) is
untested here.
"""

from __future__ import annotations

import asyncio
import contextvars

import pytest
import surge.tarantool as st
from fake_iproto import (
    BEGIN,
    CALL,
    COMMIT,
    INSERT,
    ROLLBACK,
    SPACE,
    UNWATCH,
    WATCH,
    FakeTarantool,
)
from surge.errors import ConnectionLostError, InterfaceError

pytestmark = pytest.mark.timeout(30)


async def _until(cond, timeout: float = 2.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not cond():
        assert asyncio.get_running_loop().time() < deadline, "condition not met in time"
        await asyncio.sleep(0.005)


def test_id_negotiation_bytes(arun):
    async def main():
        srv = await FakeTarantool().start()
        try:
            async with st.connect(f"127.0.0.1:{srv.port}") as c:
                assert c.protocol_version == 3 and c.features == {0, 1, 2, 3}
                # IPROTO_ID, sync 1: version 3, features [streams, transactions,
                # error_extension, watchers] - the reference's bytes.
                want = bytes.fromhex("ce0000000e82004901018254035594 00010203".replace(" ", ""))
                assert srv.raw[0] == (1, want)
                # The client watches box.shutdown for graceful shutdown.
                await _until(lambda: srv.of(WATCH))
                assert srv.of(WATCH)[0][4] == {0x57: "box.shutdown"}
                await c.ping()
        finally:
            await srv.stop()

    arun(main())


def test_feature_missing_from_id_reply(arun):
    async def main():
        srv = await FakeTarantool(features=(2,)).start()
        try:
            async with st.connect(f"127.0.0.1:{srv.port}") as c:
                with pytest.raises(st.FeatureNotSupportedError, match="not 0"):
                    await c.transaction().begin()
                with pytest.raises(st.FeatureNotSupportedError, match="watchers"):
                    await c.watch("k", print)
                assert not srv.of(WATCH) and not srv.of(BEGIN)
        finally:
            await srv.stop()

    arun(main())


def test_transaction_commit_rollback_and_streams(arun):
    async def main():
        srv = await FakeTarantool().start()
        try:
            async with st.connect(f"127.0.0.1:{srv.port}") as c:
                async with c.transaction(isolation="read-committed", timeout=2.5) as tx:
                    assert await tx.insert(SPACE, (1, "a")) == [(1, "a")]
                    # The task's own requests on the connection join the transaction...
                    await c.insert(SPACE, (2, "b"))

                    # ...other tasks' requests do not, and do not see it yet.
                    async def outsider():
                        return await c.select(SPACE, 1)

                    loop = asyncio.get_running_loop()
                    got = await loop.create_task(outsider(), context=contextvars.Context())
                    assert got == []
                    assert await tx.select(SPACE, 1) == [(1, "a")]
                assert await c.select(SPACE, 2) == [(2, "b")]
                sid = tx.stream_id
                begin = srv.of(BEGIN)[0]
                assert begin[3] == sid and begin[4] == {0x56: 2.5, 0x59: 1}
                assert [r[3] for r in srv.of(INSERT)] == [sid, sid]
                assert srv.of(COMMIT)[0][3] == sid and not srv.of(ROLLBACK)

                with pytest.raises(RuntimeError):
                    async with c.transaction() as tx2:
                        await tx2.insert(SPACE, (3, "c"))
                        raise RuntimeError("boom")
                assert srv.of(ROLLBACK)[0][3] == tx2.stream_id != sid
                assert await c.select(SPACE, 3) == []
                # After the block, the task's requests are plain again.
                await c.insert(SPACE, (4, "d"))
                assert srv.of(INSERT)[-1][3] == 0
                with pytest.raises(InterfaceError, match="not active"):
                    await tx2.insert(SPACE, (5, "e"))
        finally:
            await srv.stop()

    arun(main())


def test_stream_is_asynctnts_name_for_a_transaction(arun):
    """asynctnt's ``async with conn.stream() as s``: BEGIN, the requests made through
    ``s`` on its stream, COMMIT (and ``begin``/``commit`` called by hand)."""

    async def main():
        srv = await FakeTarantool().start()
        try:
            async with st.connect(f"127.0.0.1:{srv.port}") as c:
                async with c.stream() as s:
                    assert await s.insert(SPACE, (1, "a")) == [(1, "a")]
                assert srv.of(BEGIN)[0][3] == s.stream_id == srv.of(INSERT)[0][3] != 0
                assert srv.of(COMMIT)[0][3] == s.stream_id
                s2 = c.stream()
                await s2.begin()
                await s2.insert(SPACE, (2, "b"))
                await s2.commit()
                assert srv.of(COMMIT)[1][3] == s2.stream_id == srv.of(INSERT)[1][3] != s.stream_id
        finally:
            await srv.stop()

    arun(main())


def test_transaction_does_not_outlive_its_connection(arun):
    async def main():
        srv = await FakeTarantool().start()
        try:
            async with st.connect(f"127.0.0.1:{srv.port}") as c:
                with pytest.raises(ConnectionLostError):
                    async with c.transaction() as tx:
                        await tx.insert(SPACE, (1, "a"))
                        srv.sessions[0].writer.transport.abort()
                        await _until(lambda: not c.is_connected)
                        await c.ping()  # reconnects
                        # Must not run on the new connection outside any transaction.
                        await tx.insert(SPACE, (2, "b"))
                assert [r[0] for r in srv.of(INSERT)] == [1]
                assert srv.store == {}
        finally:
            await srv.stop()

    arun(main())


def test_watch_rearm_unregister_and_reconnect(arun):
    async def main():
        srv = await FakeTarantool().start()
        try:
            async with st.connect(f"127.0.0.1:{srv.port}") as c:
                seen: list = []
                w = await c.watch("cfg", lambda k, v: seen.append((k, v)))
                await _until(lambda: seen == [("cfg", None)])  # the value at registration
                srv.broadcast("cfg", {"a": 1})
                await _until(lambda: len(seen) == 2)
                srv.broadcast("cfg", 2)  # only delivered because the client re-armed
                await _until(lambda: len(seen) == 3)
                assert seen[1:] == [("cfg", {"a": 1}), ("cfg", 2)]
                cfg_watches = [r for r in srv.of(WATCH) if r[4][0x57] == "cfg"]
                assert len(cfg_watches) == 4  # register + one re-arm per event (3)

                # A second watcher of the key shares the registration and hears the last value.
                seen2: list = []

                async def async_cb(k, v):
                    seen2.append(v)

                w2 = await c.watch("cfg", async_cb)
                await _until(lambda: seen2 == [2])
                assert len([r for r in srv.of(WATCH) if r[4][0x57] == "cfg"]) == 4

                # The server drops us: the client reconnects by itself and re-registers.
                srv.sessions[0].writer.transport.abort()
                await _until(lambda: len(seen) == 4 and len(srv.sessions) == 2)
                assert seen[3] == ("cfg", 2) and seen2[-1] == 2
                srv.broadcast("cfg", 3)
                await _until(lambda: len(seen) == 5)

                w.unregister()
                w2.unregister()
                await _until(lambda: srv.of(UNWATCH))
                assert srv.of(UNWATCH)[0][4] == {0x57: "cfg"}
                srv.broadcast("cfg", 4)
                await c.ping()
                await asyncio.sleep(0.05)
                assert len(seen) == 5 and not w.active
        finally:
            await srv.stop()

    arun(main())


def test_graceful_shutdown_drains_then_reconnects(arun):
    async def main():
        srv = await FakeTarantool().start()
        try:
            async with st.connect(f"127.0.0.1:{srv.port}") as c:
                await _until(lambda: srv.of(WATCH))
                tx = c.transaction()
                await tx.begin()
                slow = asyncio.ensure_future(c.call("slow", (0.2, "done")))
                await _until(lambda: srv.of(CALL))
                shutdown = asyncio.ensure_future(srv.shutdown())
                await _until(lambda: not c.is_connected)  # the event arrived: draining
                # New requests wait for the next connection; the open transaction
                # still finishes on the old one.
                fresh = asyncio.ensure_future(c.call("echo", ("new",)))
                await tx.insert(SPACE, (1, "in tx"))
                await tx.commit()
                assert await slow == ["done"]
                assert await fresh == ["new"]
                await shutdown  # the client closed its old connection by itself
                calls = {r[4][0x22]: r[0] for r in srv.of(CALL)}
                assert calls == {"slow": 1, "echo": 2}
                assert [r[0] for r in srv.of(COMMIT)] == [1] and srv.store == {1: [1, "in tx"]}
                assert c.is_connected and (await c.ping()).body is None
        finally:
            await srv.stop()

    arun(main())
