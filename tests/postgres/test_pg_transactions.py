"""Transactions (commit, rollback, nested savepoints, options), how they pin a
shared connection, and the pool."""

from __future__ import annotations

import asyncio

import pytest
import surge.postgres as pg
from surge.errors import InterfaceError


async def _table(conn, name):
    await conn.execute(f"DROP TABLE IF EXISTS {name}; CREATE TABLE {name} (id int PRIMARY KEY)")


def test_commit_rollback_nested(arun, dsn):
    async def main():
        conn = await pg.connect(dsn)
        try:
            await _table(conn, f"tx_{arun.kind}")
            t = f"tx_{arun.kind}"
            async with conn.transaction():
                await conn.execute(f"INSERT INTO {t} VALUES (1)")
                assert conn.is_in_transaction()
            assert not conn.is_in_transaction()
            with pytest.raises(ZeroDivisionError):
                async with conn.transaction():
                    await conn.execute(f"INSERT INTO {t} VALUES (2)")
                    raise ZeroDivisionError
            async with conn.transaction():
                await conn.execute(f"INSERT INTO {t} VALUES (3)")
                with pytest.raises(pg.UniqueViolationError):
                    async with conn.transaction():  # a savepoint
                        await conn.execute(f"INSERT INTO {t} VALUES (4)")
                        await conn.execute(f"INSERT INTO {t} VALUES (1)")
                async with conn.transaction():
                    await conn.execute(f"INSERT INTO {t} VALUES (5)")
            ids = [r[0] for r in await conn.fetch(f"SELECT id FROM {t} ORDER BY id")]
            assert ids == [1, 3, 5]
            # start/commit/rollback by hand, with options.
            tx = conn.transaction(isolation="serializable", readonly=True)
            await tx.start()
            assert await conn.fetchval("SHOW transaction_isolation") == "serializable"
            with pytest.raises(pg.ReadOnlySqlTransactionError):
                await conn.execute(f"INSERT INTO {t} VALUES (9)")
            await tx.rollback()
            with pytest.raises(InterfaceError):
                await tx.commit()
            with pytest.raises(InterfaceError):
                conn.transaction(isolation="bogus")
            # A failed transaction is rolled back by the context manager.
            with pytest.raises(pg.DivisionByZeroError):
                async with conn.transaction():
                    await conn.fetchval("SELECT 1/0")
            assert await conn.fetchval("SELECT 1") == 1
            await conn.execute(f"DROP TABLE {t}")
        finally:
            await conn.close()

    arun(main())


def test_transaction_pins_the_connection(arun, dsn):
    async def main():
        conn = await pg.connect(dsn)
        t = f"pin_{arun.kind}"
        try:
            await _table(conn, t)
            inside = asyncio.Event()
            seen = []

            async def outsider():
                await inside.wait()
                # Sent while the transaction is open: it must not run inside it,
                # so it waits, and sees the row only once committed.
                seen.append(await conn.fetchval(f"SELECT count(*) FROM {t}"))

            async def owner():
                async with conn.transaction():
                    await conn.execute(f"INSERT INTO {t} VALUES (1)")
                    inside.set()
                    await asyncio.sleep(0.1)
                    # Tasks the owner starts run inside its transaction.
                    n = await asyncio.gather(
                        *(conn.fetchval(f"SELECT count(*) FROM {t}") for _ in range(3))
                    )
                    assert n == [1, 1, 1]
                    assert not seen
                    raise_ = False
                    if raise_:
                        raise AssertionError

            await asyncio.gather(owner(), outsider())
            assert seen == [1]
            # Two transactions on one connection run one after the other.
            order = []

            async def tx(i):
                async with conn.transaction():
                    order.append(("begin", i))
                    await asyncio.sleep(0.02)
                    await conn.execute(f"INSERT INTO {t} VALUES ($1)", 10 + i)
                    order.append(("end", i))

            await asyncio.gather(tx(1), tx(2))
            assert order in (
                [("begin", 1), ("end", 1), ("begin", 2), ("end", 2)],
                [("begin", 2), ("end", 2), ("begin", 1), ("end", 1)],
            )
            await conn.execute(f"DROP TABLE {t}")
        finally:
            await conn.close()

    arun(main())


def test_transaction_fails_when_connection_drops(arun, dsn):
    async def main():
        conn = await pg.connect(dsn)
        admin = await pg.connect(dsn)
        try:
            with pytest.raises(ConnectionError):
                async with conn.transaction():
                    await conn.fetchval("SELECT 1")
                    await admin.fetchval("SELECT pg_terminate_backend($1)", conn.get_server_pid())
                    await asyncio.sleep(0.1)
                    await conn.fetchval("SELECT 2")  # not on a new connection outside it
            assert not conn.is_in_transaction()
            assert await conn.fetchval("SELECT 3") == 3
        finally:
            await conn.close()
            await admin.close()

    arun(main())


def test_pool(arun, dsn):
    async def main():
        async with pg.create_pool(dsn, min_size=2, max_size=3) as pool:
            assert pool.get_size() == 2
            got = await asyncio.gather(*(pool.fetchval("SELECT $1::int", i) for i in range(300)))
            assert got == list(range(300))
            assert await pool.execute("SELECT 1") == "SELECT 1"
            assert (await pool.fetchrow("SELECT 1 AS a"))["a"] == 1
            assert len(await pool.fetch("SELECT generate_series(1, 3)")) == 3
            await pool.execute("CREATE TABLE IF NOT EXISTS _pool_cp (a int, b text)")
            try:
                got = await asyncio.gather(
                    *(
                        pool.copy_records_to_table("_pool_cp", records=[(i, "x")] * 3)
                        for i in range(4)
                    )
                )
                assert got == ["COPY 3"] * 4
                assert await pool.fetchval("SELECT sum(a) FROM _pool_cp") == 3 * (0 + 1 + 2 + 3)
            finally:
                await pool.execute("DROP TABLE _pool_cp")
            await pool.execute("CREATE TEMP TABLE IF NOT EXISTS x (a int)")
            async with pool.acquire() as c1:
                async with c1.transaction():
                    await c1.fetchval("SELECT 1")
                c2 = await pool.acquire()
                c3 = await pool.acquire()
                assert len({id(c1), id(c2), id(c3)}) == 3 and pool.get_size() == 3
                # All held: the next acquirer waits for a release.
                waiter = asyncio.ensure_future(pool.acquire())
                await asyncio.sleep(0.05)
                assert not waiter.done()
                # A held connection left in a transaction is rolled back on release.
                await c2.execute("BEGIN")
                await pool.release(c2)
                c4 = await asyncio.wait_for(waiter, 2)
                assert c4 is c2
                assert await c4.fetchval("SELECT 1") == 1
                # Session state is reset on release.
                await c4.execute("SET application_name = 'dirty'")
                await pool.release(c4)
                assert await c4.fetchval("SHOW application_name") == "surge"
                await pool.release(c3)
            assert pool.get_idle_size() == 3
        with pytest.raises(ConnectionError):
            await pool.fetchval("SELECT 1")
        with pytest.raises(InterfaceError):
            pg.create_pool(dsn, min_size=5, max_size=2)

    arun(main())


def test_cursor(arun, dsn):
    async def main():
        conn = await pg.connect(dsn)
        try:
            q = "SELECT g FROM generate_series(1, $1::int) g"
            with pytest.raises(InterfaceError, match="transaction"):
                await conn.cursor(q, 10)
            async with conn.transaction():
                got = [r[0] async for r in conn.cursor(q, 120, prefetch=50)]
                assert got == list(range(1, 121))
                cur = await conn.cursor(q, 10)
                assert [r[0] for r in await cur.fetch(3)] == [1, 2, 3]
                assert (await cur.fetchrow())[0] == 4
                assert await cur.forward(4) == 4
                assert [r[0] for r in await cur.fetch(100)] == [9, 10]
                assert cur.exhausted and await cur.fetch(5) == []
                await cur.close()
                # Other queries interleave with a cursor's round trips.
                cur = await conn.cursor(q, 5)
                assert await conn.fetchval("SELECT 42") == 42
                assert len(await cur.fetch(10)) == 5
                await cur.close()
            assert await conn.fetchval("SELECT count(*) FROM pg_prepared_statements") <= 2
        finally:
            await conn.close()

    arun(main())


def test_cancelled_inside_a_transaction_releases_it(arun, dsn):
    async def main():
        conn = await pg.connect(dsn)
        try:
            await conn.execute("CREATE TEMP TABLE cx (a int)")

            async def body():
                async with conn.transaction():
                    await conn.execute("INSERT INTO cx VALUES (1)")
                    await conn.fetchval("SELECT pg_sleep(0.3)")

            task = asyncio.ensure_future(body())
            await asyncio.sleep(0.1)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            # The transaction was rolled back and released: others are not stuck.
            assert not conn.is_in_transaction()
            assert await asyncio.wait_for(conn.fetchval("SELECT 5"), 3) == 5
            assert await conn.fetchval("SELECT count(*) FROM cx") == 0
        finally:
            await conn.close()

    arun(main())


def test_serializable_retry_loop_written_for_asyncpg(arun, dsn):
    """The retry loop asyncpg users write (`except SerializationError:`) works: two
    connections read-modify-write one row in serializable transactions; the loser
    gets SerializationError (SQLSTATE 40001), retries, and no update is lost."""

    async def main():
        a, b = await pg.connect(dsn), await pg.connect(dsn)
        await a.execute(
            "DROP TABLE IF EXISTS t_serial; CREATE TABLE t_serial (id int PRIMARY KEY, n int);"
            " INSERT INTO t_serial VALUES (1, 0)"
        )
        retries = 0

        async def bump(conn):
            nonlocal retries
            while True:
                try:
                    async with conn.transaction(isolation="serializable"):
                        n = await conn.fetchval("SELECT n FROM t_serial WHERE id = 1")
                        await asyncio.sleep(0.05)  # both have read before either writes
                        await conn.execute("UPDATE t_serial SET n = $1 WHERE id = 1", n + 1)
                    return
                except pg.SerializationError:
                    retries += 1

        try:
            await asyncio.wait_for(asyncio.gather(bump(a), bump(b), bump(a), bump(b)), 10)
            assert await a.fetchval("SELECT n FROM t_serial WHERE id = 1") == 4
            assert retries >= 1
        finally:
            await a.close()
            await b.close()

    arun(main())
