"""Sentinel against real sentinels (`surge.services.redis_sentinel`: a master, a
replica, three sentinels): discovery as redis-py's Sentinel answers it, clients for
the master and a replica, failovers followed (SENTINEL FAILOVER, then the master
killed)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator

import pytest
import redis.asyncio.sentinel as rps
import surge.redis
from surge import services
from surge.errors import ConnectError, ConnectionLostError
from surge.redis import MasterNotFoundError, ReadOnlyError, Sentinel

from tests.loops import runner

pytestmark = pytest.mark.timeout(120)
NAME = services.SENTINEL_MASTER_NAME


@pytest.fixture(scope="module")
def group() -> Iterator[services.Service]:
    with services.redis_sentinel() as svc:
        yield svc


def _addrs(svc: services.Service) -> list[tuple[str, int]]:
    return [(h, p) for h, p in svc.extra["sentinels"]]


def test_discovery_matches_redis_py(group):
    async def main():
        ours = Sentinel(_addrs(group))
        theirs = rps.Sentinel(_addrs(group))
        try:
            master = await ours.discover_master(NAME)
            assert master == await theirs.discover_master(NAME)
            assert f"{master[0]}:{master[1]}" == group.extra["master"]
            assert sorted(await ours.discover_slaves(NAME)) == sorted(
                await theirs.discover_slaves(NAME)
            )
            with pytest.raises(MasterNotFoundError, match="nope"):
                await ours.discover_master("nope")
            assert await ours.discover_slaves("nope") == []
        finally:
            await ours.close()

    runner("uvloop", 30.0)(main())


def test_master_and_replica_clients(group):
    async def main():
        s = Sentinel(_addrs(group), decode_responses=True)
        m = s.master_for(NAME)
        r = s.slave_for(NAME)
        try:
            assert await m.set("k", "v") is True
            await m.execute_command("WAIT", 1, 2000)
            # Replication is asynchronous and WAIT gives up after 2 s (a replica
            # still in its first sync was seen in CI): read until it is there.
            deadline = time.monotonic() + 20
            while (got := await r.get("k")) is None and time.monotonic() < deadline:
                await asyncio.sleep(0.05)
            assert got == "v"
            assert f"{r.engine.endpoint.host}:{r.engine.endpoint.port}" != group.extra["master"]
            with pytest.raises(ReadOnlyError):
                await r.set("k", "w")
            # Sentinels that are down are passed over.
            dead = ("127.0.0.1", services.free_port())
            s2 = Sentinel([dead, *_addrs(group)])
            assert f"{':'.join(map(str, await s2.discover_master(NAME)))}" == group.extra["master"]
            await s2.close()
            # No sentinel answering: a clear error, not a hang.
            lost = Sentinel([dead], sentinel_timeout=0.5).master_for(NAME, connect_timeout=1.0)
            with pytest.raises(ConnectError, match="no master found"):
                await lost.get("k")
            await lost.close()
        finally:
            await m.close()
            await r.close()
            await s.close()

    runner("asyncio", 30.0)(main())


def test_failover_followed(group):
    """SENTINEL FAILOVER, then the new master killed: each time the master client
    reaches the master the sentinels name within seconds; a command may fail with
    ConnectionLostError when its connection goes (it is not sent again)."""

    async def follow(m: surge.redis.Redis, s: Sentinel, old: tuple[str, int]) -> float:
        t = time.monotonic()
        while True:
            assert time.monotonic() - t < 45, "the client did not follow the failover"
            try:
                await m.incr("n")
                now = await s.discover_master(NAME)
            except (ConnectionLostError, ConnectError, ReadOnlyError):
                now = old  # mid-failover: a command may fail, never twice
            if now != old and m.engine.endpoint.port == now[1]:
                return time.monotonic() - t
            await asyncio.sleep(0.05)

    async def main():
        s = Sentinel(_addrs(group))
        m = s.master_for(NAME)
        try:
            await m.delete("n")
            first = await s.discover_master(NAME)
            await s.sentinels[0].execute_command("SENTINEL", "FAILOVER", NAME)
            await follow(m, s, first)
            second = await s.discover_master(NAME)
            assert second != first
            victim = next(x for x in services.group_members(group) if x.port == second[1])
            victim.kill()
            await follow(m, s, second)
            third = await s.discover_master(NAME)
            assert third not in (second,) and m.engine.endpoint.port == third[1]
            assert int(await m.get("n")) >= 1
        finally:
            await m.close()
            await s.close()

    runner("uvloop", 100.0)(main())
