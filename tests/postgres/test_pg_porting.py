"""Programs ported from asyncpg, run beside asyncpg on the same server: what the
pool calls back, what a logged exception says, the connection helpers a web
app's request cycle uses. Each test asks asyncpg first, then checks surge."""

from __future__ import annotations

import asyncio
import io
import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import asyncpg
import asyncpg.exceptions
import pytest
import surge.postgres as pg

from tests.postgres.peers import both, on_connection, same

_FAILING = [
    "INSERT INTO porting_err VALUES (1, 1)",  # unique: detail, constraint, table
    "INSERT INTO porting_err VALUES (NULL, 1)",  # not null: column_name
    "SELECT * FROM porting_nope",  # position
    "DO $$ BEGIN RAISE EXCEPTION 'boom' USING DETAIL = 'd', HINT = 'h'; END $$",  # context
]


@pytest.mark.parametrize("sql", _FAILING)
def test_server_error_text_and_fields_as_asyncpg(dsn: str, arun: Callable, sql: str) -> None:
    """str(e) carries DETAIL and HINT, as_dict() uses asyncpg's field names, and
    every field attribute (context, internal_query ...) exists."""

    async def go() -> None:
        async with both(dsn) as (s, a):
            await a.execute(
                "DROP TABLE IF EXISTS porting_err;"
                "CREATE TABLE porting_err (id int PRIMARY KEY, v int); "
                "INSERT INTO porting_err VALUES (1, 1)"
            )
            with pytest.raises(asyncpg.PostgresError) as ea:
                await a.execute(sql)
            with pytest.raises(pg.PostgresError) as es:
                await s.execute(sql)
            assert str(es.value) == str(ea.value)
            assert es.value.as_dict() == ea.value.as_dict()
            for name in ea.value.as_dict().keys() | {"context", "internal_query", "hint"}:
                assert getattr(es.value, name) == getattr(ea.value, name), name

    arun(go())


# -- create_pool's hooks ------------------------------------------------------------


async def _hook_story(mod: Any, dsn: str) -> list:
    """What an app does with asyncpg's pool hooks: codecs in ``init``, per-acquire
    ``setup``, a custom ``reset`` on top of the default query."""
    log: list = []

    async def init(c: Any) -> None:
        log.append("init")
        await c.set_type_codec("json", encoder=json.dumps, decoder=json.loads, schema="pg_catalog")

    async def setup(c: Any) -> None:
        log.append("setup")

    async def reset(c: Any) -> None:
        log.append(("reset", c.is_in_transaction()))
        await c.execute(c.get_reset_query())

    pool = await mod.create_pool(
        dsn, min_size=1, max_size=2, init=init, setup=setup, reset=reset, timeout=5
    )
    out: list = []
    async with pool.acquire() as c:
        out.append(await c.fetchval("SELECT $1::json", {"a": [1]}))
        await c.execute("SET search_path = nope")
        await c.transaction().start()  # left open: release rolls it back
    async with pool.acquire() as c:
        out.append(await c.fetchval("SHOW search_path"))
        out.append(c.is_in_transaction())
    out += [log, pool.get_size(), pool.get_min_size(), pool.get_max_size(), pool.is_closing()]
    await pool.close()
    out.append(pool.is_closing())
    return out


def test_pool_init_setup_reset_hooks_as_asyncpg(dsn: str, arun: Callable) -> None:
    arun(same(dsn, _hook_story))


async def _init_after_loss(mod: Any, dsn: str) -> list:
    """A pool whose connections lost their server sessions (terminated here; a
    failover or a restart alike): ``init``'s session state is there again."""
    inits: list = []

    async def init(c: Any) -> None:
        inits.append(c.get_server_pid())
        # session state that the release's reset (RESET ALL ...) keeps
        await c.execute("CREATE TEMP TABLE porting_init_t AS SELECT 7 AS x")

    app = "porting_init_loss"
    pool = await mod.create_pool(
        dsn, min_size=2, max_size=2, init=init, server_settings={"application_name": app}
    )
    killer = await mod.connect(dsn)
    out: list = []

    async def both_held() -> list:
        async with pool.acquire() as a, pool.acquire() as b:
            q = "SELECT x FROM porting_init_t"
            return [await a.fetchval(q), await b.fetchval(q)]

    try:
        out.append(await both_held())
        out.append(len(inits))
        kill = (
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
            " WHERE application_name = $1"
        )
        killed = await killer.fetchval(kill, app)
        out.append(killed)
        await asyncio.sleep(0.5)  # the drivers read the terminations
        out.append(await both_held())
        out.append(len(inits))
        out.append(len(set(inits)))  # init ran in four server sessions
        out.append(await pool.fetchval("SELECT x FROM porting_init_t"))
        # Again, then many shortcuts at once: init runs once per connection.
        await killer.fetchval(kill, app)
        await asyncio.sleep(0.5)
        got = await asyncio.gather(
            *(pool.fetchval("SELECT x FROM porting_init_t") for _ in range(20))
        )
        out += [set(got), len(inits)]
    finally:
        await killer.close()
        await pool.close()
    return out


def test_pool_init_runs_again_after_a_lost_session_as_asyncpg(dsn: str, arun: Callable) -> None:
    """Before: surge's pool connection reconnected by itself without running
    ``init``, so what it made in the session (a temp table here) was gone."""

    async def go() -> None:
        theirs = await _init_after_loss(asyncpg, dsn)
        ours = await _init_after_loss(pg, dsn)
        assert ours[:-1] == theirs[:-1] == [[7, 7], 2, 2, [7, 7], 4, 4, 7, {7}]
        # Once per connection used, not per caller: asyncpg's 20 shortcuts take
        # both connections; surge's share the first while its init runs.
        assert theirs[-1] == 6 and ours[-1] in (5, 6)

    arun(go())


async def _failing_hooks(mod: Any, dsn: str) -> list:
    out: list = []

    async def bad_init(c: Any) -> None:
        raise RuntimeError("init failed")

    with pytest.raises(RuntimeError, match="init failed"):
        await mod.create_pool(dsn, min_size=1, max_size=1, init=bad_init)
    calls = [0]

    async def setup(c: Any) -> None:
        calls[0] += 1
        if calls[0] == 1:
            raise RuntimeError("setup failed")

    pool = await mod.create_pool(dsn, min_size=1, max_size=1, setup=setup)
    with pytest.raises(RuntimeError, match="setup failed"):
        async with pool.acquire():
            pass
    async with pool.acquire() as c:  # the failed one was closed, a new one serves
        out.append(await c.fetchval("SELECT 1"))
    out.append(pool.get_size())
    await pool.close()
    return out


def test_pool_failing_init_and_setup_as_asyncpg(dsn: str, arun: Callable) -> None:
    arun(same(dsn, _failing_hooks))


async def _recycling(mod: Any, dsn: str) -> list:
    pool = await mod.create_pool(
        dsn, min_size=1, max_size=3, max_queries=3, max_inactive_connection_lifetime=0.2
    )
    held = [await pool.acquire() for _ in range(3)]
    out = [pool.get_size()]
    for c in held:
        await pool.release(c)
    await asyncio.sleep(0.6)
    out.append(pool.get_size())  # the unused ones above min_size are closed
    pids = set()
    for _ in range(3):
        async with pool.acquire() as c:
            pids.add(c.get_server_pid())
            await c.fetchval("SELECT 1")
            await c.fetchval("SELECT 2")
    out.append(len(pids) > 1)  # past max_queries a connection is replaced
    await pool.expire_connections()
    async with pool.acquire() as c:
        out.append(c.get_server_pid() not in pids)
    await pool.close()
    return out


def test_pool_max_queries_inactive_lifetime_expire_as_asyncpg(dsn: str, arun: Callable) -> None:
    arun(same(dsn, _recycling))


@on_connection
async def _connection_reset(mod: Any, c: Any) -> list:
    await c.transaction().start()
    await c.execute("SET search_path = nope")
    await c.reset()
    out = [c.is_in_transaction(), await c.fetchval("SHOW search_path"), c.get_reset_query()]
    return out


def test_connection_reset_as_asyncpg(dsn: str, arun: Callable) -> None:
    arun(same(dsn, _connection_reset))


# -- prepared statements ------------------------------------------------------------


@on_connection
async def _prepared_story(mod: Any, c: Any) -> list:
    await c.execute(
        "DROP TYPE IF EXISTS porting_mood CASCADE; CREATE TYPE porting_mood AS ENUM ('a');"
        "DROP TYPE IF EXISTS porting_pair CASCADE; CREATE TYPE porting_pair AS (x int)"
    )
    st = await c.prepare(
        "SELECT $1::int[] a, $2::porting_mood b, $3::porting_pair c, $4::int4range d,"
        " $5::porting_mood[] e, $6::text f, $7::int2vector g, $8::int4multirange h"
    )
    out: list = [
        [tuple(t)[1:] for t in st.get_parameters()],  # oids of user types differ per run
        [(a.name, tuple(a.type)[1:]) for a in st.get_attributes()],
        (await st.explain(*[None] * 8))[0]["Plan"]["Output"],
    ]
    series = await c.prepare("SELECT generate_series(1, $1::int) AS g")
    async with c.transaction():
        out.append([r["g"] async for r in series.cursor(5, prefetch=2)])
        cur = await series.cursor(5)
        out.append([tuple(r) for r in await cur.fetch(2)])
    out.append((await series.explain(3, analyze=True))[0]["Plan"]["Actual Rows"])
    return out


def test_prepared_statement_types_cursor_explain_as_asyncpg(dsn: str, arun: Callable) -> None:
    """get_parameters/get_attributes carry asyncpg's Type(oid, name, kind, schema);
    a prepared statement opens a cursor and explains itself."""
    arun(same(dsn, _prepared_story))


@on_connection
async def _hstore_story(mod: Any, c: Any) -> list:
    await c.execute("CREATE EXTENSION IF NOT EXISTS hstore")
    await c.set_builtin_type_codec("hstore", codec_name="pg_contrib.hstore")
    out = [
        await c.fetchval("SELECT 'a=>1, b=>NULL'::hstore"),
        await c.fetchval("SELECT $1::hstore", {"x": "y", "z": None}),
    ]
    return out


def test_set_builtin_type_codec_for_hstore_as_asyncpg(dsn: str, arun: Callable) -> None:
    """The call asyncpg apps make in their pool's ``init``: accepted, same values."""

    async def go() -> None:
        await same(dsn, _hstore_story)
        async with both(dsn) as (s, _):
            with pytest.raises(pg.UnsupportedClientFeatureError):
                await s.set_builtin_type_codec("int4", schema="pg_catalog", codec_name="text")

    arun(go())


@on_connection
async def _misused_transaction(mod: Any, c: Any) -> list:
    out = []
    tr = c.transaction()
    for step in (tr.commit, tr.start, tr.start, tr.rollback, tr.commit, tr.rollback):
        try:
            await step()
            out.append("ok")
        except mod.InterfaceError as e:
            out.append(str(e))
    return out


def test_misused_transaction_errors_as_asyncpg(dsn: str, arun: Callable) -> None:
    arun(same(dsn, _misused_transaction))


# -- COPY ---------------------------------------------------------------------------


@on_connection
async def _copy_story(mod: Any, c: Any) -> list:
    await c.execute("DROP TABLE IF EXISTS porting_cp; CREATE TABLE porting_cp (a int, b text)")
    out: list = [
        await c.copy_records_to_table(
            "porting_cp", records=[(1, "x"), (2, None)], columns=["a", "b"]
        ),
        await c.copy_records_to_table("porting_cp", records=[(50, "y")], where="a < 10"),
    ]
    buf = io.BytesIO()
    out.append(
        await c.copy_from_query(
            "SELECT a, b FROM porting_cp WHERE a >= $1 AND b IS DISTINCT FROM $2 ORDER BY a",
            1,
            "it's",
            output=buf,
            format="csv",
            header=True,
            null="NULL",
            force_quote=True,
        )
    )
    out.append(buf.getvalue())

    async def chunks() -> AsyncIterator[bytes]:
        yield b"3;q\n"
        yield b"4;r\n"

    out.append(
        await c.copy_to_table("porting_cp", source=chunks(), columns=["a", "b"], delimiter=";")
    )
    out.append([tuple(r) for r in await c.fetch("SELECT * FROM porting_cp ORDER BY a")])
    return out


def test_copy_options_and_query_arguments_as_asyncpg(dsn: str, arun: Callable) -> None:
    arun(same(dsn, _copy_story))


# -- connection helpers -------------------------------------------------------------


@on_connection
async def _lifecycle(mod: Any, c: Any) -> list:
    v = c.get_server_version()
    settings = c.get_settings()
    out: list = [tuple(v), v.major, settings.server_encoding, settings.client_encoding]
    c.terminate()
    out.append(c.is_closed())
    for _ in range(2):  # after terminate(), then after close(): refused, not reconnected
        try:
            await c.fetchval("SELECT 1")
            out.append("ran")
        except mod.InterfaceError:
            out.append("InterfaceError")
        await c.close()
    return out


def test_server_version_settings_and_closed_connections_as_asyncpg(
    dsn: str, arun: Callable
) -> None:
    arun(same(dsn, _lifecycle))


@on_connection
async def _fetchmany(mod: Any, c: Any) -> list:
    await c.execute("DROP TABLE IF EXISTS porting_fm; CREATE TABLE porting_fm (i int UNIQUE)")
    q = "INSERT INTO porting_fm VALUES ($1) RETURNING i * 10 AS t"
    out: list = [[tuple(r) for r in await c.fetchmany(q, [(1,), (2,), (3,)])]]
    try:
        await c.fetchmany(q, [(4,), (1,)])  # the duplicate fails all of them
    except mod.UniqueViolationError:
        out.append("unique")
    st = await c.prepare("SELECT $1::int + 1 AS n")
    out.append([tuple(r) for r in await st.fetchmany([(1,), (5,)])])
    out.append(await c.fetchval("SELECT array_agg(i ORDER BY i) FROM porting_fm"))
    return out


def test_fetchmany_as_asyncpg(dsn: str, arun: Callable) -> None:
    arun(same(dsn, _fetchmany))


def test_asyncpg_exceptions_module_ports() -> None:
    """``except asyncpg.exceptions.UniqueViolationError`` ports as
    ``surge.postgres.exceptions.UniqueViolationError``: every class is there."""
    names = [
        n
        for n in dir(asyncpg.exceptions)
        if n[0].isupper() and isinstance(getattr(asyncpg.exceptions, n), type)
    ]
    assert [n for n in names if not hasattr(pg.exceptions, n)] == []
    assert pg.exceptions.UniqueViolationError is pg.UniqueViolationError


@on_connection
async def _json_arrays(mod: Any, c: Any) -> list:
    await c.set_type_codec("jsonb", encoder=json.dumps, decoder=json.loads, schema="pg_catalog")
    await c.set_type_codec("json", encoder=json.dumps, decoder=json.loads, schema="pg_catalog")
    out = [
        await c.fetchval("SELECT ARRAY['{\"b\": 1}'::jsonb, NULL, '[2]']"),
        await c.fetchval(
            "SELECT ARRAY[ARRAY['1'::json, '{}'::json], ARRAY['\"s\"'::json, 'null']]"
        ),
        await c.fetchval("SELECT $1::jsonb[]", [{"a": 1}, "x", None]),
        await c.fetchval("SELECT '{}'::jsonb[]"),
    ]
    await c.reset_type_codec("jsonb", schema="pg_catalog")
    out.append(await c.fetchval("SELECT ARRAY['{\"b\": 1}'::jsonb]"))
    return out


def test_json_codec_runs_inside_arrays_as_asyncpg(dsn: str, arun: Callable) -> None:
    """A json/jsonb codec set with set_type_codec (json.dumps/json.loads, the
    usual pool ``init``) also encodes and decodes the elements of json[]/jsonb[]."""
    arun(same(dsn, _json_arrays))
