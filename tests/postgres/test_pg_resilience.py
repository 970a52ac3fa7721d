"""Many coroutines on one connection, errors that leave it usable, timeouts and
cancellation that keep the stream in sync, and a server that goes away."""

from __future__ import annotations

import asyncio
import socket

import pytest
import surge.postgres as pg
from surge.errors import ConnectError, ConnectionLostError, RequestTimeoutError


def test_thousand_coroutines_one_connection(arun, dsn):
    async def main():
        conn = await pg.connect(dsn)
        try:
            got = await asyncio.gather(
                *(
                    conn.fetchrow("SELECT $1::int AS i, repeat('x', $1) AS s", i)
                    for i in range(1000)
                )
            )
            assert [(r["i"], len(r["s"])) for r in got] == [(i, i) for i in range(1000)]
            # Pipelined: far fewer writes than requests.
            assert conn.engine.stats["writes"] < 100
        finally:
            await conn.close()

    arun(main())


def test_errors_leave_the_connection_usable(arun, dsn):
    async def main():
        conn = await pg.connect(dsn)
        try:
            await conn.execute("CREATE TEMP TABLE u (id int PRIMARY KEY)")
            await conn.execute("INSERT INTO u VALUES (1)")
            with pytest.raises(pg.PostgresSyntaxError) as ei:
                await conn.fetch("SELEC 1")
            assert ei.value.sqlstate == "42601" and ei.value.position == "1"
            assert isinstance(ei.value, pg.SyntaxOrAccessError)
            with pytest.raises(pg.UniqueViolationError) as ei:
                await conn.execute("INSERT INTO u VALUES ($1)", 1)
            e = ei.value
            assert e.constraint_name == "u_pkey" and "already exists" in (e.detail or "")
            assert isinstance(e, pg.IntegrityConstraintViolationError)
            with pytest.raises(pg.UndefinedTableError):
                await conn.fetch("SELECT * FROM missing_table")
            with pytest.raises(pg.DivisionByZeroError):
                await conn.fetchval("SELECT 1 / $1::int", 0)
            # Errors amid a pipelined batch fail only their own query.
            qs = ["SELECT 1", "SELEC 2", "SELECT 3", "SELECT 1/0", "SELECT 5"]
            got = await asyncio.gather(*(conn.fetchval(q) for q in qs), return_exceptions=True)
            assert got[0] == 1 and got[2] == 3 and got[4] == 5
            assert isinstance(got[1], pg.PostgresSyntaxError)
            assert isinstance(got[3], pg.DivisionByZeroError)
            assert await conn.fetchval("SELECT count(*) FROM u") == 1
        finally:
            await conn.close()

    arun(main())


def test_timeout_and_cancel_keep_the_stream_in_sync(arun, dsn):
    async def main():
        conn = await pg.connect(dsn)
        try:
            with pytest.raises(RequestTimeoutError):
                await conn.fetchval("SELECT pg_sleep(0.3)", timeout=0.05)
            assert await conn.fetchval("SELECT 'after timeout'") == "after timeout"
            task = asyncio.ensure_future(conn.fetchval("SELECT pg_sleep(0.2), 1"))
            await asyncio.sleep(0.05)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            results = await asyncio.gather(*(conn.fetchval("SELECT $1::int", i) for i in range(50)))
            assert results == list(range(50))
        finally:
            await conn.close()
        conn = await pg.connect(dsn, command_timeout=0.05)
        try:
            with pytest.raises(RequestTimeoutError):
                await conn.fetchval("SELECT pg_sleep(0.3)")
            # The server is still busy with it (queries queue behind it).
            await asyncio.sleep(0.35)
            assert await conn.fetchval("SELECT 2") == 2
        finally:
            await conn.close()

    arun(main())


def test_timeout_cancels_a_lone_query(arun, dsn):
    async def main():
        conn = await pg.connect(dsn)
        try:
            loop = asyncio.get_running_loop()
            await conn.fetchval("SELECT 1")
            t0 = loop.time()
            with pytest.raises(RequestTimeoutError):
                await conn.fetchval("SELECT pg_sleep(10)", timeout=0.1)
            # Cancelled on the server: the next query does not wait 10 s.
            assert await conn.fetchval("SELECT 'next'") == "next"
            assert loop.time() - t0 < 3
            with pytest.raises(RequestTimeoutError):
                await conn.execute("SELECT pg_sleep(10)", timeout=0.1)
            assert await conn.fetchval("SELECT 2") == 2
            # With a neighbour in flight nothing is cancelled: the neighbour
            # gets its answer, whatever runs when.
            got = await asyncio.gather(
                conn.fetchval("SELECT pg_sleep(0.3)", timeout=0.05),
                conn.fetchval("SELECT 7"),
                return_exceptions=True,
            )
            assert isinstance(got[0], RequestTimeoutError) and got[1] == 7
            assert loop.time() - t0 < 5
        finally:
            await conn.close()

    arun(main())


def test_backend_killed_mid_flight(arun, dsn):
    async def main():
        conn = await pg.connect(dsn)
        admin = await pg.connect(dsn)
        try:
            pid = conn.get_server_pid()
            assert await conn.fetchval("SELECT $1::int + 1", 1) == 2  # now in the cache
            slow = asyncio.ensure_future(conn.fetchval("SELECT pg_sleep(5)"))
            await asyncio.sleep(0.1)
            await admin.fetchval("SELECT pg_terminate_backend($1)", pid)
            with pytest.raises(ConnectionLostError):
                await asyncio.wait_for(slow, 3)
            # The next query reconnects (a new backend, a new session).
            assert await conn.fetchval("SELECT 1") == 1
            assert conn.get_server_pid() != pid
            # The cached statement died with the old session: prepared again.
            assert await conn.fetchval("SELECT $1::int + 1", 2) == 3
            assert conn.engine.stats["connects"] == 2
        finally:
            await conn.close()
            await admin.close()

    arun(main())


def test_dead_server_fails_at_once(arun):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()

    async def main():
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        with pytest.raises(ConnectError):
            await pg.connect(f"postgresql://postgres@127.0.0.1:{port}/postgres")
        assert loop.time() - t0 < 1.0
        assert issubclass(ConnectError, ConnectionError)

    arun(main())


def test_closed_connection(arun, dsn):
    async def main():
        conn = await pg.connect(dsn)
        await conn.close()
        with pytest.raises(ConnectionError):
            await conn.fetchval("SELECT 1")

    arun(main())


def test_garbage_from_server_drops_the_connection(arun):
    async def serve(reader, writer):
        await reader.read(1024)
        writer.write(b"?garbage")
        await writer.drain()
        await asyncio.sleep(1)
        writer.close()

    async def main():
        server = await asyncio.start_server(serve, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        try:
            with pytest.raises((ConnectError, ConnectionError)) as ei:
                await pg.connect(f"postgresql://x@127.0.0.1:{port}/x", connect_timeout=2)
            assert "unknown message tag" in str(ei.value) or "lost" in str(ei.value)
        finally:
            server.close()

    arun(main())
