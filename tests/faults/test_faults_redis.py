"""The Redis client through a faulty path (`FaultProxy` in front of a real
redis-server): silent paths, resets on accept, cuts at every point of the
handshake and mid-stream, server restarts under load, a half-closed stream, and
a slow (BLPOP) but live server that must not be declared dead."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest
import scenarios
import surge.redis
from proxy import FaultProxy
from surge import services

pytestmark = pytest.mark.timeout(60)

#: Makes every reply long enough that mid-stream cuts land inside replies.
PAD = "x" * 100
#: A database other than 0 and a client name: the handshake sends SELECT and
#: CLIENT SETNAME, so the cut sweep has a handshake to cut through.
DB = 5


def _open(port: int, *, liveness: tuple[float, float] | None = (10.0, 5.0), **kw: Any) -> Any:
    interval, timeout = liveness or (None, 5.0)
    return surge.redis.connect(
        f"redis://127.0.0.1:{port}/{DB}",
        client_name="faults",
        liveness_interval=interval,
        liveness_timeout=timeout,
        **kw,
    )


async def _call(r: Any, v: int) -> Any:
    # SET then GET of the caller's own key: a reply matched to the wrong command
    # shows as somebody else's value.
    await r.set(f"faults:{v}", f"{v}:{PAD}")
    return await r.get(f"faults:{v}")


async def _slow(r: Any, seconds: float) -> Any:
    # BLPOP on a key nobody pushes to: the server holds the shared connection.
    return await r.execute_command("BLPOP", f"faults:empty:{id(r)}", seconds)


@pytest.fixture
def target(redis_svc: services.Service) -> scenarios.Target:
    return scenarios.Target(
        upstream=(redis_svc.host, redis_svc.port),
        open=_open,
        call=_call,
        expected=lambda v: f"{v}:{PAD}".encode(),
        slow=_slow,
        close=lambda r: r.close(),
    )


@pytest.fixture
def proxy(target: scenarios.Target, make_proxy: Callable[..., FaultProxy]) -> FaultProxy:
    return make_proxy(*target.upstream)


def test_blackhole_request_timeout(arun, target, proxy):
    arun(scenarios.blackhole_with_timeout(target, proxy))


def test_blackhole_found_dead(arun, target, proxy):
    arun(scenarios.blackhole_found_dead(target, proxy))


def test_reset_on_accept(arun, target, proxy):
    arun(scenarios.reset_on_accept(target, proxy))


# The handshake: SELECT 5 (23 bytes) and CLIENT SETNAME faults (41) go up in one
# write, "+OK\r\n+OK\r\n" (10 bytes) comes down; then SET/GET pairs of ~150 bytes
# up and ~115 down each. The cuts hit every boundary of the handshake, then
# mid-stream; the last is past all the sweep's traffic.
DOWN_CUTS = [0, 1, 4, 5, 6, 9, 10, 11, 60, 115, 200, 1000, 3000, 100_000]
UP_CUTS = [0, 1, 22, 23, 24, 63, 64, 65, 100, 200, 1000, 3000, 100_000]


@pytest.mark.parametrize(("direction", "cuts"), [("down", DOWN_CUTS), ("up", UP_CUTS)])
def test_cut_sweep(arun, target, make_proxy, direction, cuts):
    arun(scenarios.cut_sweep(target, make_proxy, cuts, direction))


def test_restart_loop(arun, target, proxy):
    arun(scenarios.restart_loop(target, proxy))


def test_half_close(arun, target, proxy):
    arun(scenarios.half_close(target, proxy))


def test_slow_blpop_is_not_dead(arun, target, proxy):
    arun(scenarios.slow_but_alive(target, proxy, probe=True))


def test_real_server_restart(arun):
    """A real redis-server stopped and started again on the same port: the command
    in flight fails with a connection error, then the same client works."""
    servers = [services.start_redis()]

    async def main() -> None:
        svc = servers[0]
        r = surge.redis.connect(svc.url, liveness_interval=0.3, liveness_timeout=0.3)
        try:
            assert await r.set("k", "1") is True
            pending = asyncio.ensure_future(r.execute_command("BLPOP", "faults:never", 5))
            await asyncio.sleep(0.1)
            await asyncio.to_thread(svc.stop)
            with pytest.raises(scenarios.CONNECTION_ERRORS):
                await asyncio.wait_for(pending, 5)
            servers.append(await asyncio.to_thread(services.start_redis, port=svc.port))
            # A fresh server (the key is gone); the client reconnects by itself.
            assert await asyncio.wait_for(r.get("k"), 10) is None
            assert await r.set("k", "2") is True
            assert await r.get("k") == b"2"
        finally:
            await r.close()

    try:
        arun(main())
    finally:
        for svc in servers:
            svc.stop()
