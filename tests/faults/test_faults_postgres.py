"""The PostgreSQL driver through a faulty path (`FaultProxy` in front of a real
PostgreSQL): silent paths, resets on accept, cuts at every point of the startup
exchange and mid-stream, server restarts under load, a half-closed stream, and a
slow (pg_sleep) but live server that must not be declared dead."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

import pytest
import scenarios
import surge.postgres as pg
from proxy import FaultProxy
from surge import services
from surge.errors import RequestTimeoutError
from surge.postgres.dsn import parse

pytestmark = pytest.mark.timeout(60)

#: Pads each row so that mid-stream cuts land inside rows.
PAD = 100


def _dsn(port: int) -> str:
    return f"postgresql://postgres@127.0.0.1:{port}/postgres"


def _open(
    port: int,
    *,
    liveness: tuple[float, float] | None = (10.0, 5.0),
    request_timeout: float | None = None,
    connect_timeout: float = 5.0,
) -> pg.Connection:
    # The lazy form (as `surge.postgres.connect` builds it, without connecting).
    interval, timeout = liveness or (None, 5.0)
    return pg.Connection(
        parse(_dsn(port)),
        connect_timeout=connect_timeout,
        command_timeout=request_timeout,
        liveness_interval=interval,
        liveness_timeout=timeout,
    )


async def _call(conn: pg.Connection, v: int) -> Any:
    row = await conn.fetchrow("SELECT $1::int AS i, repeat('y', $2) AS s", v, PAD)
    return None if row is None else (row["i"], row["s"])


async def _slow(conn: pg.Connection, seconds: float) -> Any:
    return await conn.execute(f"SELECT pg_sleep({seconds})")


@pytest.fixture
def target(pg_svc: services.Service) -> scenarios.Target:
    return scenarios.Target(
        upstream=(pg_svc.host, pg_svc.port),
        open=_open,
        call=_call,
        expected=lambda v: (v, "y" * PAD),
        slow=_slow,
        close=lambda c: c.close(),
    )


@pytest.fixture
def proxy(target: scenarios.Target, make_proxy: Callable[..., FaultProxy]) -> FaultProxy:
    return make_proxy(*target.upstream)


def test_blackhole_command_timeout(arun, target, proxy):
    arun(scenarios.blackhole_with_timeout(target, proxy))


def test_blackhole_per_call_timeout(arun, target, proxy):
    """asyncpg's per-call ``timeout=`` on a silent path (no command_timeout set)."""

    async def main() -> None:
        conn = _open(proxy.port, liveness=None)
        try:
            assert await conn.fetchval("SELECT 1") == 1
            proxy.blackhole()
            t0 = time.monotonic()
            with pytest.raises(RequestTimeoutError):
                await asyncio.wait_for(conn.fetchval("SELECT 2", timeout=0.5), 10)
            assert 0.45 <= time.monotonic() - t0 < 1.5
        finally:
            await asyncio.wait_for(conn.close(), 5)

    arun(main())


def test_blackhole_found_dead(arun, target, proxy):
    arun(scenarios.blackhole_found_dead(target, proxy))


def test_reset_on_accept(arun, target, proxy):
    arun(scenarios.reset_on_accept(target, proxy))


def test_reset_on_accept_connect(arun, proxy):
    """``await surge.postgres.connect`` itself: ConnectError at once, not a timeout."""

    async def main() -> None:
        proxy.reset_on_accept()
        for timeout in (None, 5.0):
            t0 = time.monotonic()
            with pytest.raises(scenarios.CONNECTION_ERRORS) as err:
                await asyncio.wait_for(
                    pg.connect(_dsn(proxy.port), connect_timeout=1.0, command_timeout=timeout), 6
                )
            scenarios.check_connection_error(err.value)
            assert time.monotonic() - t0 < 2.0

    arun(main())


# The startup exchange: the StartupMessage (99 bytes) goes up; AuthenticationOk,
# ParameterStatus messages, BackendKeyData and ReadyForQuery come down (415 bytes).
# Then each query is Parse/Bind/Execute/Sync up (~140 bytes, ~60 once prepared) and
# ~135 bytes of rows and statuses down. The cuts hit the handshake, both sides of
# its end, the first query, and later on mid-stream.
DOWN_CUTS = [0, 1, 8, 9, 10, 100, 250, 400, 414, 415, 416, 500, 623, 700, 2000, 5000, 100_000]
UP_CUTS = [0, 1, 4, 8, 50, 98, 99, 100, 150, 240, 300, 1000, 100_000]


@pytest.mark.parametrize(("direction", "cuts"), [("down", DOWN_CUTS), ("up", UP_CUTS)])
def test_cut_sweep(arun, target, make_proxy, direction, cuts):
    arun(scenarios.cut_sweep(target, make_proxy, cuts, direction))


def test_restart_loop(arun, target, proxy):
    arun(scenarios.restart_loop(target, proxy))


def test_half_close(arun, target, proxy):
    arun(scenarios.half_close(target, proxy))


def test_slow_query_is_not_dead(arun, target, proxy):
    arun(scenarios.slow_but_alive(target, proxy, probe=True))
