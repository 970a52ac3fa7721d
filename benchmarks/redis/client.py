"""One benchmark client process: SET then GET N keys from C coroutines, print JSON.

Runs under surge's venv (driver "surge") or the bench venv (redis-py), so it
imports only the driver it is asked for.

    python benchmarks/redis/client.py DRIVER LOOP CONCURRENCY N PORT VALUE_SIZE

DRIVER: surge, redis-py (its pool: a connection per concurrent command),
redis-py-1conn (a pool of one connection), coredis (its multiplexing client:
``Redis(..., max_connections=1)`` pipelines many coroutines' commands on one
connection too), or surge+blpop (surge with BLOCKERS more coroutines blocked in
BLPOP on a list nobody pushes to, for the whole run: the blocking commands go on
connections of their own, so the GET/SET rate should not move).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time

from benchmarks._lib import cpu_seconds

PHASES = ("set", "get")
#: Coroutines blocked in BLPOP beside the GET/SET workload (driver surge+blpop).
BLOCKERS = 100
#: The redis-server's pid, when the suite passes it: each phase then reports the
#: server's CPU seconds too (from /proc), a figure other processes' load barely moves.
SERVER_PID = os.environ.get("SURGE_BENCH_SERVER_PID")


def server_cpu() -> float:
    """CPU seconds the redis-server has used; 0 when unknown."""
    return cpu_seconds(int(SERVER_PID)) if SERVER_PID else 0.0


async def run_async(r, conc: int, n: int, value: bytes) -> dict:
    out = {}
    keys = [f"key:{i}" for i in range(n)]
    for phase in PHASES:

        async def worker(start: int, phase: str = phase) -> None:
            if phase == "set":
                for i in range(start, n, conc):
                    await r.set(keys[i], value)
            else:
                for i in range(start, n, conc):
                    if await r.get(keys[i]) != value:
                        raise AssertionError(f"wrong value for {keys[i]}")

        t0, c0, s0 = time.perf_counter(), time.process_time(), server_cpu()
        await asyncio.gather(*(worker(k) for k in range(conc)))
        out[phase] = {
            "secs": time.perf_counter() - t0,
            "cpu": time.process_time() - c0,
            "server_cpu": server_cpu() - s0,
        }
    return out


async def surge_main(conc: int, n: int, port: int, value: bytes, blockers: int = 0) -> dict:
    import surge.redis

    r = surge.redis.connect(
        f"redis://127.0.0.1:{port}/0", max_blocking_connections=max(blockers, 1)
    )
    await r.flushdb()
    stop = asyncio.Event()

    async def blocked() -> None:
        while not stop.is_set():
            await r.blpop(["bench:never"], 1)

    sides = [asyncio.ensure_future(blocked()) for _ in range(blockers)]
    while r.blocking_pool.in_use < blockers:
        await asyncio.sleep(0.01)
    res = await run_async(r, conc, n, value)
    stop.set()
    for t in sides:
        t.cancel()
    await asyncio.gather(*sides, return_exceptions=True)
    res["connections"] = 1 + blockers
    res["writes_counted"] = r.engine.stats["writes"]
    await r.close()
    return res


async def coredis_main(conc: int, n: int, port: int, value: bytes) -> dict:
    import coredis

    # coredis multiplexes: with max_connections=1 every coroutine's command shares
    # one connection, as surge's do (its default pool would open more).
    r = coredis.Redis(host="127.0.0.1", port=port)
    async with r:
        await r.flushdb()
        res = await run_async(r, conc, n, value)
    res["connections"] = 1
    return res


async def redispy_main(conc: int, n: int, port: int, value: bytes, one: bool = False) -> dict:
    import redis.asyncio

    if one:
        # One connection, as surge: coroutines take turns (redis-py cannot interleave them).
        pool = redis.asyncio.BlockingConnectionPool(
            host="127.0.0.1", port=port, max_connections=1, timeout=None
        )
        r = redis.asyncio.Redis(connection_pool=pool)
    else:
        # redis-py's own way: a pool that opens a connection per concurrent command.
        r = redis.asyncio.Redis(host="127.0.0.1", port=port, max_connections=conc)
    await r.flushdb()
    res = await run_async(r, conc, n, value)
    res["connections"] = len(r.connection_pool._available_connections) + len(
        r.connection_pool._in_use_connections
    )
    await r.aclose()
    return res


def main() -> None:
    driver, loop, conc, n, port, size = sys.argv[1:7]
    args = (int(conc), int(n), int(port), b"x" * int(size))
    if driver == "surge":
        coro = surge_main(*args)
    elif driver == "surge+blpop":
        coro = surge_main(*args, blockers=BLOCKERS)
    elif driver == "coredis":
        coro = coredis_main(*args)
    else:
        coro = redispy_main(*args, one=driver == "redis-py-1conn")
    if loop == "uvloop":
        import uvloop

        res = uvloop.run(coro)
    else:
        res = asyncio.run(coro)
    print(json.dumps(res))


if __name__ == "__main__":
    main()
