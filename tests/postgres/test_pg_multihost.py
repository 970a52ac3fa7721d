"""Several hosts against a real primary and a streaming hot standby (made with
pg_basebackup -R by `surge.services`): host lists in every spelling, tried in
order, ``target_session_attrs`` as libpq, and a pool that follows a real failover
(the primary crash-stopped, the standby promoted with ``pg_ctl promote``).

The failover test runs last in this module, once: it ends the pair."""

from __future__ import annotations

import asyncio
import os
import subprocess
import time
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import asyncpg
import pytest
import surge.postgres as pg
from surge import services
from surge.errors import ConnectError, ConnectionLostError, InterfaceError

from tests.loops import runner
from tests.postgres.peers import same

pytestmark = pytest.mark.timeout(90)

#: A port nothing listens on (bound once, then closed): refused at once.
DEAD_PORT = services.free_port()


@pytest.fixture(scope="module")
def pair() -> Iterator[tuple[services.Service, services.Service]]:
    """A primary and its hot standby, streaming."""
    with services.postgres_pair() as (primary, standby):
        yield primary, standby


async def _where(conn: pg.Connection) -> tuple[int, bool]:
    port = await conn.fetchval("SELECT inet_server_port()")
    return port, await conn.fetchval("SELECT pg_is_in_recovery()")


@pytest.mark.parametrize(
    ("attrs", "order", "want"),
    [
        ("any", "sp", "s"),
        ("any", "ps", "p"),
        ("primary", "sp", "p"),
        ("read-write", "sp", "p"),
        ("standby", "ps", "s"),
        ("read-only", "ps", "s"),
        ("prefer-standby", "ps", "s"),
        ("prefer-standby", "p", "p"),
    ],
)
def test_target_session_attrs(arun, pair, attrs, order, want):
    primary, standby = pair
    by = {"p": primary, "s": standby}
    # An unreachable host first: skipped, as libpq does.
    hosts = [("127.0.0.1", DEAD_PORT)] + [(by[c].host, by[c].port) for c in order]
    expect = (by[want].port, want == "s")

    async def main():
        spellings = [
            {"host": [h for h, _ in hosts], "port": [p for _, p in hosts]},
            {
                "dsn": "postgresql://postgres@"
                + ",".join(f"{h}:{p}" for h, p in hosts)
                + "/postgres"
            },
            {
                "dsn": "host="
                + ",".join(h for h, _ in hosts)
                + " port="
                + ",".join(str(p) for _, p in hosts)
                + " user=postgres dbname=postgres"
            },
        ]
        for kw in spellings:
            conn = await pg.connect(**kw, user="postgres", target_session_attrs=attrs)
            try:
                assert await _where(conn) == expect
                assert conn.get_server_address() == f"127.0.0.1:{by[want].port}"
            finally:
                await conn.close()
        q = f"?target_session_attrs={attrs}"
        conn = await pg.connect(spellings[1]["dsn"] + q)
        assert await _where(conn) == expect
        await conn.close()

    arun(main())


def test_target_session_attrs_as_libpq(pair, tmp_path):
    """Each target_session_attrs over host lists in several orders (an unreachable
    host first): surge reaches the server libpq (psql) reaches, or fails with it."""
    primary, standby = pair
    by = {"p": primary, "s": standby}
    psql = services._postgres_bindir() / "psql"

    async def main() -> list[str]:
        differ = []
        for attrs in ("any", "read-write", "read-only", "primary", "standby", "prefer-standby"):
            for order in ("ps", "sp", "p", "s"):
                ports = [DEAD_PORT] + [by[c].port for c in order]
                conninfo = (
                    "host="
                    + ",".join(["127.0.0.1"] * len(ports))
                    + " port="
                    + ",".join(map(str, ports))
                    + f" user=postgres dbname=postgres target_session_attrs={attrs}"
                )
                r = subprocess.run(
                    [str(psql), conninfo, "-Atc", "SELECT inet_server_port()"],
                    capture_output=True,
                    text=True,
                    env={"PATH": os.environ.get("PATH", ""), "HOME": str(tmp_path)},
                    timeout=30,
                )
                want = int(r.stdout) if r.returncode == 0 else None
                try:
                    conn = await pg.connect(conninfo)
                except ConnectError:
                    got = None
                else:
                    got = await conn.fetchval("SELECT inet_server_port()")
                    await conn.close()
                if got != want:
                    differ.append(f"{attrs} {order}: libpq {want}, surge {got}")
        return differ

    assert runner("asyncio", 60)(main()) == []


def test_no_server_of_the_kind(arun, pair):
    primary, standby = pair

    async def main():
        with pytest.raises(ConnectError, match="is a standby; target_session_attrs wants primary"):
            await pg.connect(
                host=standby.host,
                port=standby.port,
                user="postgres",
                target_session_attrs="primary",
            )
        with pytest.raises(ConnectError, match="wants standby") as e:
            await pg.connect(
                host=["127.0.0.1", primary.host],
                port=[DEAD_PORT, primary.port],
                user="postgres",
                target_session_attrs="standby",
            )
        # Every host tried is named, with its reason.
        assert f"127.0.0.1:{DEAD_PORT}" in str(e.value)
        # libpq's rule: one port for all hosts, or one per host.
        with pytest.raises(InterfaceError, match="3 ports for 2 hosts"):
            await pg.connect("postgresql://a:1,b:2/db?port=1,2,3")
        with pytest.raises(InterfaceError, match="target_session_attrs must be one of"):
            await pg.connect(primary.url, target_session_attrs="master")

    arun(main())


def test_default_read_only_is_read_only(arun, pair):
    primary, _ = pair

    async def main():
        # read-only takes a primary whose sessions default to read-only (as libpq).
        conn = await pg.connect(
            primary.url,
            target_session_attrs="read-only",
            server_settings={"default_transaction_read_only": "on"},
        )
        assert await _where(conn) == (primary.port, False)
        await conn.close()
        with pytest.raises(ConnectError, match="read-only; target_session_attrs wants read-write"):
            await pg.connect(
                primary.url,
                target_session_attrs="read-write",
                server_settings={"default_transaction_read_only": "on"},
            )

    arun(main())


async def _pool_hosts(mod: Any, dsn: str) -> list:
    """A pool over a host list: where each connection is, and its hooks' calls."""
    seen: dict[str, list] = {"init": [], "setup": []}

    async def init(c: Any) -> None:
        seen["init"].append(await c.fetchval("SELECT inet_server_port()"))

    async def setup(c: Any) -> None:
        seen["setup"].append(await c.fetchval("SELECT pg_is_in_recovery()"))

    pool = await mod.create_pool(dsn, min_size=3, max_size=3, init=init, setup=setup)
    try:
        held = [await pool.acquire() for _ in range(3)]
        where = [await _where(c) for c in held]
        for c in held:
            await pool.release(c)
        hooks = {k: list(v) for k, v in seen.items()}
        # (a shortcut runs setup in asyncpg, not in surge: docs/migration/asyncpg.md)
        return [where, await pool.fetchval("SELECT inet_server_port()"), hooks]
    finally:
        await pool.close()


@pytest.mark.parametrize(
    ("attrs", "want"),
    [("primary", "p"), ("read-write", "p"), ("standby", "s"), ("prefer-standby", "s")],
)
def test_pool_over_a_host_list_as_asyncpg(arun, pair, attrs, want):
    """create_pool with a multi-host DSN and target_session_attrs: every connection
    of both drivers' pools is on the same server, init and setup run as often."""
    primary, standby = pair
    by = {"p": primary, "s": standby}
    hosts = f"127.0.0.1:{DEAD_PORT},{standby.host}:{standby.port},{primary.host}:{primary.port}"
    dsn = f"postgresql://postgres@{hosts}/postgres?target_session_attrs={attrs}"

    async def main() -> None:
        got = await same(dsn, _pool_hosts)
        port = by[want].port
        assert got[0] == [(port, want == "s")] * 3 and got[1] == port
        assert got[2] == {"init": [port] * 3, "setup": [want == "s"] * 3}

    arun(main())


def test_pool_follows_failover(pair):
    """Last: the primary is crash-stopped, the standby promoted."""
    primary, standby = pair

    inits: dict[str, list[int]] = {"surge": [], "asyncpg": []}

    def init_of(who: str) -> Callable[[Any], Awaitable[None]]:
        async def init(c: Any) -> None:
            inits[who].append(await c.fetchval("SELECT inet_server_port()"))
            await c.execute("CREATE TEMP TABLE failover_init AS SELECT 1 AS x")

        return init

    async def main():
        pool = await pg.create_pool(
            host=[primary.host, standby.host],
            port=[primary.port, standby.port],
            user="postgres",
            target_session_attrs="primary",
            min_size=3,
            max_size=3,
            init=init_of("surge"),
        )
        # asyncpg's pool beside it, from the same host list
        apool = await asyncpg.create_pool(
            f"postgresql://postgres@{primary.host}:{primary.port},{standby.host}:{standby.port}"
            "/postgres?target_session_attrs=primary",
            min_size=3,
            max_size=3,
            init=init_of("asyncpg"),
        )
        patient = await pg.connect(
            host=[primary.host, standby.host],
            port=[primary.port, standby.port],
            user="postgres",
            target_session_attrs="read-write",
            retry_connect=True,
            connect_timeout=20,
        )
        try:
            assert await pool.fetchval("SELECT inet_server_port()") == primary.port
            assert await patient.fetchval("SELECT inet_server_port()") == primary.port
            await pool.execute("CREATE TABLE failover (n int)")
            # The standby has replayed the table before the crash (replication is
            # asynchronous: on a loaded machine it lagged by a second).
            sc = await pg.connect(standby.url)
            while await sc.fetchval("SELECT to_regclass('failover')") is None:
                await asyncio.sleep(0.05)
            await sc.close()
            # Queries in flight on the primary when it dies.
            sleepers = [
                asyncio.ensure_future(pool.fetchval("SELECT pg_sleep(60)")) for _ in range(3)
            ]
            await asyncio.sleep(0.3)
            t0 = time.monotonic()
            await asyncio.to_thread(services.stop_postgres_now, primary)
            for s in sleepers:
                with pytest.raises(ConnectionLostError) as lost:
                    await asyncio.wait_for(s, 10)
            failed_in = time.monotonic() - t0
            assert failed_in < 10
            # Before the promotion: no primary anywhere, and the error says why ...
            with pytest.raises(ConnectError, match="is a standby"):
                await pool.fetchval("SELECT 1")
            # ... or, with retry_connect, the query waits (within the connect timeout).
            waiting = asyncio.ensure_future(patient.fetchval("SELECT inet_server_port()"))
            await asyncio.sleep(0.5)
            assert not waiting.done()
            await asyncio.to_thread(services.promote_postgres, standby)
            promoted = time.monotonic()
            assert await asyncio.wait_for(waiting, 10) == standby.port
            waited = time.monotonic() - promoted
            while True:
                try:
                    port = await pool.fetchval("SELECT inet_server_port()")
                    break
                except ConnectError:
                    assert time.monotonic() - promoted < 10, "no new primary within 10 s"
                    await asyncio.sleep(0.1)
            took = time.monotonic() - promoted
            assert port == standby.port
            # Every connection of the pool reaches the new primary, and it takes writes
            # (the table came over by streaming replication).
            ports = await asyncio.gather(
                *(pool.fetchval("SELECT inet_server_port()") for _ in range(30))
            )
            assert set(ports) == {standby.port}
            assert await pool.execute("INSERT INTO failover VALUES (1)") == "INSERT 0 1"
            # init ran again on the new primary (its temp table is there) ...
            async with pool.acquire() as c:
                assert await c.fetchval("SELECT x FROM failover_init") == 1
            # ... as asyncpg's pool, which follows the failover the same way
            while True:
                try:
                    async with apool.acquire() as c:
                        aport = await c.fetchval("SELECT inet_server_port()")
                        assert await c.fetchval("SELECT x FROM failover_init") == 1
                    break
                except (asyncpg.PostgresError, asyncpg.InterfaceError, OSError):
                    assert time.monotonic() - promoted < 20, "asyncpg: no new primary"
                    await asyncio.sleep(0.1)
            assert aport == standby.port
            assert inits["surge"][:3] == inits["asyncpg"][:3] == [primary.port] * 3
            assert standby.port in inits["surge"] and standby.port in inits["asyncpg"]
            print(
                f"in-flight queries failed {failed_in:.2f} s after the crash stop began"
                f" ({lost.value}); new primary reached {took:.2f} s after pg_ctl promote"
                f" (a waiting query: {waited:.2f} s)"
            )
        finally:
            await pool.close()
            await patient.close()
            apool.terminate()

    runner("uvloop", 60)(main())
