"""Programs ported from asyncpg that hook into a connection's life, beside
asyncpg on the same server: termination listeners, query loggers, a
connection class of their own, a pool's connect arguments changed live."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

import asyncpg
import pytest
import surge.postgres as pg


async def _termination(mod: Any, dsn: str) -> list:
    out: list = []
    c = await mod.connect(dsn)
    heard: list = []

    def sync_cb(conn: Any) -> None:
        heard.append(("sync", conn is c))

    async def async_cb(conn: Any) -> None:
        heard.append(("async", conn is c))

    c.add_termination_listener(sync_cb)
    c.add_termination_listener(async_cb)
    c.add_termination_listener(lambda conn: heard.append("removed"))
    c.remove_termination_listener(heard.append)  # never added: ignored
    await c.close()
    await asyncio.sleep(0.05)
    out.append(sorted(heard, key=str))
    heard.clear()
    t = await mod.connect(dsn)
    t.add_termination_listener(sync_cb)
    t.add_termination_listener(lambda conn: heard.append("terminated"))
    t.remove_termination_listener(sync_cb)
    t.terminate()
    await asyncio.sleep(0.05)
    out.append(heard[:])
    heard.clear()
    # The server ends the session (pg_terminate_backend): the listener hears it.
    k = await mod.connect(dsn)
    k.add_termination_listener(lambda conn: heard.append("killed"))
    admin = await mod.connect(dsn)
    await admin.execute("SELECT pg_terminate_backend($1)", k.get_server_pid())
    for _ in range(100):
        if heard:
            break
        await asyncio.sleep(0.02)
    out.append(heard[:])
    await admin.close()
    await k.close()
    return out


def test_termination_listeners_as_asyncpg(dsn: str, arun: Callable) -> None:
    async def go() -> None:
        theirs = await _termination(asyncpg, dsn)
        assert await _termination(pg, dsn) == theirs
        assert theirs[2] == ["killed"]

    arun(go())


async def _query_log(mod: Any, dsn: str) -> list:
    c = await mod.connect(dsn)
    log: list = []
    c.add_query_logger(log.append)
    await c.execute("SELECT 1")
    await c.execute("SELECT $1::int", 1)
    await c.fetch("SELECT $1::int", 2, timeout=3)
    await c.fetchrow("SELECT 3")
    await c.fetchval("SELECT 4")
    await c.executemany("SELECT $1::int", [(1,), (2,)])
    with pytest.raises(mod.UndefinedColumnError):
        await c.fetch("SELECT nope")
    st = await c.prepare("SELECT 5")
    await st.fetch()  # a prepared statement's runs are not logged (asyncpg's rule)
    await asyncio.sleep(0)  # asyncpg calls loggers soon after, not inline
    with c.query_logger(log.append):  # the same one again: still logged once
        await c.execute("SELECT 6")
        await asyncio.sleep(0)
    c.remove_query_logger(log.append)
    await c.execute("SELECT 7")  # no logger any more
    await asyncio.sleep(0)
    out = [
        (
            q.query,
            list(q.args),
            q.timeout,
            type(q.exception).__name__,
            q.elapsed >= 0,
            q.conn_addr[1] == int(dsn.rsplit(":", 1)[1].split("/")[0]),
        )
        for q in log
    ]
    out.append(list(type(log[0])._fields))
    await c.close()
    return out


def test_query_loggers_as_asyncpg(dsn: str, arun: Callable) -> None:
    async def go() -> None:
        theirs = await _query_log(asyncpg, dsn)
        assert await _query_log(pg, dsn) == theirs

    arun(go())


async def _connection_class(mod: Any, dsn: str) -> list:
    class AppConnection(mod.Connection):  # type: ignore[misc, name-defined]
        async def user_count(self) -> int:
            return int(await self.fetchval("SELECT 42"))

    c = await mod.connect(dsn, connection_class=AppConnection)
    out: list = [type(c).__name__, await c.user_count()]
    await c.close()
    pool = await mod.create_pool(dsn, min_size=1, max_size=1, connection_class=AppConnection)
    async with pool.acquire() as pc:
        out.append(await pc.user_count())
    await pool.close()
    with pytest.raises(mod.InterfaceError) as e:
        await mod.connect(dsn, connection_class=object)
    out.append(str(e.value).replace("surge.postgres", "asyncpg"))
    return out


def test_connection_class_as_asyncpg(dsn: str, arun: Callable) -> None:
    async def go() -> None:
        assert await _connection_class(pg, dsn) == await _connection_class(asyncpg, dsn)

    arun(go())


async def _set_connect_args(mod: Any, dsn: str) -> list:
    pool = await mod.create_pool(dsn, min_size=1, max_size=1)
    out: list = [await pool.fetchval("SHOW application_name")]
    pool.set_connect_args(dsn, server_settings={"application_name": "porting-new"})
    out.append(await pool.fetchval("SHOW application_name"))  # the open one stays
    await pool.expire_connections()
    out.append(await pool.fetchval("SHOW application_name"))
    await pool.close()
    # (surge names itself "surge" by default, asyncpg leaves the name empty)
    return [out[1] == out[0], out[2]]


def test_pool_set_connect_args_as_asyncpg(dsn: str, arun: Callable) -> None:
    async def go() -> None:
        theirs = await _set_connect_args(asyncpg, dsn)
        assert await _set_connect_args(pg, dsn) == theirs
        assert theirs[-1] == "porting-new"

    arun(go())


async def _init_size(mod: Any, dsn: str) -> list:
    name = f"porting-init-{mod.__name__}"
    pool = await mod.create_pool(
        dsn, min_size=1, init_size=3, max_size=4, server_settings={"application_name": name}
    )
    out: list = [pool.get_init_size(), pool.get_min_size(), pool.get_size()]
    count = "SELECT count(*) FROM pg_stat_activity WHERE application_name = $1"
    out.append(await pool.fetchval(count, name))
    await pool.close()
    pool = await mod.create_pool(dsn, min_size=2, max_size=3)
    out += [pool.get_init_size(), pool.get_size()]
    await pool.close()
    for sizes in ({"init_size": 5}, {"init_size": 1, "min_size": 2}, {"init_size": -1}):
        with pytest.raises(ValueError) as e:
            await mod.create_pool(dsn, **{"min_size": 0, "max_size": 3, **sizes})
        out.append(str(e.value))
    return out


def test_pool_init_size_as_asyncpg(dsn: str, arun: Callable) -> None:
    """asyncpg 0.32's ``init_size``: the connections opened at start (``min_size``
    unless given), checked against ``min_size`` and ``max_size``."""

    async def go() -> None:
        theirs = await _init_size(asyncpg, dsn)
        assert await _init_size(pg, dsn) == theirs
        assert theirs[:4] == [3, 1, 3, 3]

    arun(go())


async def _passfile(mod: Any, svc: Any, password: str, tmp: Path) -> list:
    dsn = f"postgresql://surge_scram@{svc.host}:{svc.port}/postgres"
    out: list = []
    for i, secret in enumerate((password, "wrong")):
        f = tmp / f"{mod.__name__}-{i}.pgpass"
        f.write_text(f"*:*:*:surge_scram:{secret}\n")
        f.chmod(0o600)
        try:
            c = await mod.connect(dsn, passfile=str(f))
            out.append(await c.fetchval("SELECT current_user"))
            await c.close()
        except mod.InvalidPasswordError as e:
            out.append(type(e).__name__)
    return out


def test_connect_passfile_keyword_as_asyncpg(
    pg_svc: Any, pg_password: str, tmp_path: Path, arun: Callable
) -> None:
    """``passfile=`` as a keyword of `connect` (surge took it only in the DSN:
    the keyword raised TypeError)."""

    async def go() -> None:
        theirs = await _passfile(asyncpg, pg_svc, pg_password, tmp_path)
        assert await _passfile(pg, pg_svc, pg_password, tmp_path) == theirs
        assert theirs == ["surge_scram", "InvalidPasswordError"]

    arun(go())


async def _keywords(mod: Any, dsn: str) -> list:
    """asyncpg's parameter names, passed by keyword."""
    pool = await mod.create_pool(dsn, min_size=1, max_size=1)
    c = await pool.acquire()
    await pool.release(connection=c, timeout=5)
    out: list = [pool.get_idle_size()]
    await pool.close()
    conn = await mod.connect(dsn)
    async with conn.transaction():
        cur = await conn.cursor("SELECT generate_series(1, 6) AS n")
        out.append([r["n"] for r in await cur.fetch(2, timeout=5)])
        out.append((await cur.fetchrow(timeout=5))["n"])
        out.append(await cur.forward(2, timeout=5))
        out.append([r["n"] for r in await cur.fetch(5, timeout=5)])
    await conn.close()
    return out


def test_pool_release_and_cursor_keywords_as_asyncpg(dsn: str, arun: Callable) -> None:
    """``Pool.release(connection=)`` and ``timeout=`` on a cursor's ``fetch``,
    ``fetchrow`` and ``forward`` (both raised TypeError)."""

    async def go() -> None:
        theirs = await _keywords(asyncpg, dsn)
        assert await _keywords(pg, dsn) == theirs
        assert theirs == [1, [1, 2], 3, 2, [6]]

    arun(go())


async def _log_messages(mod: Any, dsn: str) -> list:
    c = await mod.connect(dsn)
    seen: list = []
    later: list = []

    def on_message(conn: Any, m: Any) -> None:
        mro = [t.__name__ for t in type(m).__mro__][:3]
        fields = sorted(m.as_dict().items())
        seen.append([conn is c, mro, isinstance(m, BaseException), str(m), m.sqlstate, fields])

    async def on_message_async(conn: Any, m: Any) -> None:
        later.append(m.message)

    c.add_log_listener(on_message)
    c.add_log_listener(on_message_async)
    await c.execute("SET client_min_messages = 'debug1'")
    await c.execute(
        "DO $$ BEGIN RAISE NOTICE 'n %', 1 USING DETAIL = 'd', HINT = 'h';"
        " RAISE WARNING 'w'; RAISE WARNING 'dep' USING ERRCODE = '01P01';"
        " RAISE NOTICE 'odd' USING ERRCODE = '22012'; RAISE INFO 'i'; RAISE DEBUG 'dbg';"
        " END $$"
    )
    await asyncio.sleep(0.05)
    c.remove_log_listener(on_message)
    await c.execute("DO $$ BEGIN RAISE NOTICE 'after'; END $$")
    await asyncio.sleep(0.05)
    await c.close()
    return [seen, later]


def test_log_listener_messages_as_asyncpg(dsn: str, arun: Callable) -> None:
    """NOTICE/WARNING/INFO/DEBUG messages reach log listeners as asyncpg's: a
    ``PostgresLogMessage`` (not an exception) or the warning class of their
    SQLSTATE, ``str()`` as ``"Class: message"``; async listeners too; a removed
    listener hears nothing more. (Before: a plain notice came as
    ``UnknownPostgresError``, a fatal error's class, and ``str()`` differed.)"""

    async def go() -> None:
        theirs = await _log_messages(asyncpg, dsn)
        assert await _log_messages(pg, dsn) == theirs
        assert theirs[0][0][1:4] == [
            ["PostgresLogMessage", "PostgresMessage", "object"],
            False,
            "PostgresLogMessage: n 1",
        ]
        assert theirs[1][-1] == "after"

    arun(go())
