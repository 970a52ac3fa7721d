"""Programs ported from asyncpg beside asyncpg on the same server, for the
behaviours a side-by-side audit found different: a transaction begun by hand
with ``execute("BEGIN")``, nested transactions that repeat their options, a
cursor outside a transaction, a cancelled query, ``fetchval(column=name)``."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import asyncpg
import pytest
import surge.postgres as pg

from tests.postgres.peers import on_connection, same


@on_connection
async def _manual_begin(mod: Any, c: Any) -> list:
    out: list = [c.is_in_transaction()]
    await c.execute("CREATE TEMP TABLE audit_mb (x int)")
    await c.execute("BEGIN")
    out.append(c.is_in_transaction())
    await c.execute("INSERT INTO audit_mb VALUES (1)")
    # transaction() inside it is refused: its COMMIT would end the one begun here.
    try:
        async with c.transaction():
            out.append("entered")
    except mod.InterfaceError as e:
        out.append(str(e))
    out.append(c.is_in_transaction())
    # A cursor runs in it, as in any transaction.
    out.append([r[0] async for r in c.cursor("SELECT generate_series(1, 3)", prefetch=2)])
    await c.execute("ROLLBACK")
    out.append(c.is_in_transaction())
    out.append(await c.fetchval("SELECT count(*) FROM audit_mb"))
    # A failed transaction is still one until ROLLBACK.
    await c.execute("BEGIN")
    with pytest.raises(mod.DivisionByZeroError):
        await c.execute("SELECT 1/0")
    out.append(c.is_in_transaction())
    await c.execute("ROLLBACK")
    out.append(c.is_in_transaction())
    return out


def test_transaction_begun_by_hand_as_asyncpg(dsn: str, arun: Callable) -> None:
    got = arun(same(dsn, _manual_begin))
    assert got[1] is True and got[-1] is False and got[-3] == 0


@on_connection
async def _nested_options(mod: Any, c: Any) -> list:
    out: list = []
    cases: list[tuple[dict, dict]] = [
        ({"isolation": "serializable"}, {"isolation": "serializable"}),
        ({}, {"isolation": "read_committed"}),  # the server's default, read back
        ({}, {"isolation": "repeatable_read"}),
        ({"isolation": "repeatable_read"}, {"isolation": "serializable"}),
        ({"readonly": True}, {"readonly": True}),
        ({}, {"readonly": True, "deferrable": True}),
    ]
    for outer, inner in cases:
        try:
            async with c.transaction(**outer):
                async with c.transaction(**inner):
                    out.append(await c.fetchval("SHOW transaction_isolation"))
                out.append(c.is_in_transaction())
        except mod.InterfaceError as e:
            out.append(str(e))
        out.append(c.is_in_transaction())
    try:
        c.transaction(isolation="snapshot")
    except ValueError:
        out.append("ValueError")
    return out


def test_nested_transaction_options_as_asyncpg(dsn: str, arun: Callable) -> None:
    got = arun(same(dsn, _nested_options))
    assert got[0] == "serializable" and "ValueError" in got


@on_connection
async def _cursor_outside(mod: Any, c: Any) -> list:
    out: list = []
    with pytest.raises(mod.NoActiveSQLTransactionError) as e:
        async for _ in c.cursor("SELECT 1"):
            pass
    out.append(str(e.value))
    with pytest.raises(mod.NoActiveSQLTransactionError) as e:
        await c.cursor("SELECT 1")
    out.append(str(e.value))
    out.append(await c.fetchval("SELECT 2"))
    return out


def test_cursor_outside_a_transaction_as_asyncpg(dsn: str, arun: Callable) -> None:
    arun(same(dsn, _cursor_outside))


@on_connection
async def _cancelled_query(mod: Any, c: Any) -> list:
    loop = asyncio.get_running_loop()
    out: list = []
    for cancel in ("task", "wait_for"):
        if cancel == "task":
            t = asyncio.ensure_future(c.fetchval("SELECT pg_sleep(30)"))
            await asyncio.sleep(0.3)
            t.cancel()
            with pytest.raises(asyncio.CancelledError):
                await t
        else:
            with pytest.raises(TimeoutError):
                await asyncio.wait_for(c.execute("SELECT pg_sleep(30)"), 0.3)
        start = loop.time()
        # The server stopped the query: the next one does not wait 30 s for it.
        out.append(await c.fetchval("SELECT 8", timeout=10))
        out.append(loop.time() - start < 10)
    active = await c.fetchval(
        "SELECT count(*) FROM pg_stat_activity WHERE query LIKE 'SELECT pg_sleep(30)%'"
    )
    out.append(active)
    return out


def test_cancelled_query_is_cancelled_on_the_server_as_asyncpg(dsn: str, arun: Callable) -> None:
    got = arun(same(dsn, _cancelled_query))
    assert got == [8, True, 8, True, 0]


@on_connection
async def _fetchval_by_name(mod: Any, c: Any) -> list:
    st = await c.prepare("SELECT 1 AS a, $1::text AS b")
    out = [
        await c.fetchval("SELECT 1 AS a, 2 AS b", column="b"),
        await c.fetchval("SELECT 1 AS a WHERE false", column="a"),
        await st.fetchval("x", column="b"),
    ]
    with pytest.raises(KeyError):
        await c.fetchval("SELECT 1 AS a", column="nope")
    return out


def test_fetchval_column_by_name_as_asyncpg(dsn: str, arun: Callable) -> None:
    assert arun(same(dsn, _fetchval_by_name)) == [2, None, "x"]


def test_the_new_errors_keep_surge_classes() -> None:
    # What surge raised before stays catchable the way it was.
    assert issubclass(pg.errors.CursorOutsideTransactionError, pg.InterfaceError)
    assert issubclass(pg.transaction.IsolationLevelError, pg.InterfaceError)
    assert issubclass(pg.errors.CursorOutsideTransactionError, pg.NoActiveSQLTransactionError)
    assert asyncpg.NoActiveSQLTransactionError.__name__ == "NoActiveSQLTransactionError"


async def _close_waits_for_holders(mod: Any, dsn: str) -> list:
    pool = await mod.create_pool(dsn, min_size=1, max_size=2)
    c = await pool.acquire()
    closing = asyncio.ensure_future(pool.close())
    await asyncio.sleep(0.3)
    # A graceful shutdown: the holder finishes its work on the connection.
    out: list = [closing.done(), pool.is_closing(), await c.fetchval("SELECT 1")]
    for use in (pool.acquire, lambda: pool.fetchval("SELECT 1")):
        with pytest.raises(mod.InterfaceError):
            await use()
    await pool.release(c)
    await asyncio.wait_for(closing, 10)
    out.append(closing.done())
    # A close bounded by wait_for that runs out terminates the pool.
    pool = await mod.create_pool(dsn, min_size=1, max_size=1)
    c = await pool.acquire()
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(pool.close(), 0.3)
    out.append(pool.is_closing())
    with pytest.raises(mod.InterfaceError):
        await c.fetchval("SELECT 1")
    return out


def test_pool_close_waits_for_held_connections_as_asyncpg(dsn: str, arun: Callable) -> None:
    assert arun(same(dsn, _close_waits_for_holders)) == [False, True, 1, True, True]


async def _shortcuts_in_flight(mod: Any, dsn: str) -> list:
    """Shortcut queries running when the pool's connections are expired, and
    when the pool is closed: they finish (surge's failed with ClosedError)."""
    pool = await mod.create_pool(dsn, min_size=2, max_size=2)
    out: list = []
    # (as many as the connections: asyncpg's close() cancels queries still
    # waiting for a connection, where surge's shortcuts do not wait)
    for end in (pool.expire_connections, pool.close):
        running = [
            asyncio.ensure_future(pool.fetchval("SELECT $1::int FROM pg_sleep(0.3)", i))
            for i in range(2)
        ]
        await asyncio.sleep(0.1)
        await end()
        out.append(await asyncio.gather(*running, return_exceptions=True))
        if end == pool.expire_connections:  # new connections serve the next ones
            out.append(await pool.fetchval("SELECT 5"))
    out.append(pool.is_closing())
    return out


def test_pool_lets_shortcut_queries_finish_as_asyncpg(dsn: str, arun: Callable) -> None:
    assert arun(same(dsn, _shortcuts_in_flight)) == [[0, 1], 5, [0, 1], True]


async def _release_foreign(mod: Any, dsn: str) -> list:
    pool = await mod.create_pool(dsn, min_size=1, max_size=1)
    other = await mod.create_pool(dsn, min_size=1, max_size=1)
    lone = await mod.connect(dsn)
    out: list = []
    held = await other.acquire()
    try:
        for c in (lone, held):
            with pytest.raises(mod.InterfaceError) as e:
                await pool.release(c)
            out.append(str(e.value).split(":")[0])
        # The pool did not take them: its one connection is still its own.
        async with pool.acquire() as mine:
            out.append(mine is not lone and pool.get_size())
        await pool.release(mine)  # twice: ignored, as asyncpg
    finally:
        await lone.close()
        await other.release(held)
        await other.close()
        await pool.close()
    return out


def test_pool_release_of_a_foreign_connection_as_asyncpg(dsn: str, arun: Callable) -> None:
    assert arun(same(dsn, _release_foreign)) == [
        "Pool.release() received invalid connection",
    ] * 2 + [1]


@on_connection
async def _ranges_from_sequences(mod: Any, c: Any) -> list:
    import datetime

    await c.execute(
        "CREATE TEMP TABLE audit_r (i int4range, d daterange, n numrange,"
        " m int4multirange, a int4range[])"
    )
    d1, d5 = datetime.date(2024, 1, 1), datetime.date(2024, 1, 5)
    rows = [
        ((1, 5), (d1, d5), (1.5, 2.5), [(1, 5), (7, 9)], [(1, 2), ()]),
        ((None, 5), (d1,), (), [], [(3,)]),
    ]
    await c.executemany("INSERT INTO audit_r VALUES ($1, $2, $3, $4, $5)", rows)
    await c.copy_records_to_table("audit_r", records=rows[:1])
    got = await c.fetch("SELECT i::text, d::text, n::text, m::text, a::text FROM audit_r")
    out: list = [tuple(r) for r in got]
    # A WHERE on a range written as asyncpg writes it finds the rows.
    out.append(await c.fetchval("SELECT count(*) FROM audit_r WHERE i = $1", (1, 5)))
    with pytest.raises(mod.DataError):
        await c.fetchval("SELECT $1::int4range", (1, 2, 3))
    return out


def test_ranges_from_sequences_as_asyncpg(dsn: str, arun: Callable) -> None:
    got = arun(same(dsn, _ranges_from_sequences))
    assert got[0][0] == "[1,6)" and got[-1] == 2


@on_connection
async def _listeners_added_twice(mod: Any, c: Any) -> list:
    heard: list = []

    async def on_notify(con: Any, pid: int, channel: str, payload: str) -> None:
        heard.append(payload)

    def on_log(con: Any, message: Any) -> None:
        heard.append(message.message)

    await c.add_listener("audit_ch", on_notify)
    await c.add_listener("audit_ch", on_notify)
    c.add_log_listener(on_log)
    c.add_log_listener(on_log)
    await c.execute("NOTIFY audit_ch, 'p1'")
    await c.execute("DO $$BEGIN RAISE NOTICE 'n1'; END$$")
    await asyncio.sleep(0.2)
    await c.remove_listener("audit_ch", on_notify)
    c.remove_log_listener(on_log)
    await c.execute("NOTIFY audit_ch, 'p2'")
    await c.execute("DO $$BEGIN RAISE NOTICE 'n2'; END$$")
    await asyncio.sleep(0.2)
    return sorted(heard)


def test_a_listener_added_twice_is_called_once_as_asyncpg(dsn: str, arun: Callable) -> None:
    assert arun(same(dsn, _listeners_added_twice)) == ["n1", "p1"]


@on_connection
async def _cursor_counts(mod: Any, c: Any) -> list:
    out: list = []
    async with c.transaction():
        cur = await c.cursor("SELECT generate_series(1, 3)")
        out.append(await cur.forward(10))
        for bad in (0, -1):
            for call in (cur.forward, cur.fetch):
                with pytest.raises(mod.InterfaceError):
                    await call(bad)
        out.append(await cur.fetch(2))
    return out


def test_cursor_counts_checked_at_the_end_too_as_asyncpg(dsn: str, arun: Callable) -> None:
    assert arun(same(dsn, _cursor_counts)) == [3, []]
