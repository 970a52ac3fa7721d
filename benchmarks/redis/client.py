"""One benchmark client process: SET then GET N keys from C coroutines, print JSON.

Runs under surge's venv (driver "surge") or the bench venv (redis-py), so it
imports only the driver it is asked for.

    python benchmarks/redis/client.py DRIVER LOOP CONCURRENCY N PORT VALUE_SIZE

DRIVER: surge, redis-py (its pool: a connection per concurrent command) or
redis-py-1conn (a pool of one connection).
"""

from __future__ import annotations

import asyncio
import json
import sys
import time

PHASES = ("set", "get")


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

        t0, c0 = time.perf_counter(), time.process_time()
        await asyncio.gather(*(worker(k) for k in range(conc)))
        out[phase] = {"secs": time.perf_counter() - t0, "cpu": time.process_time() - c0}
    return out


async def surge_main(conc: int, n: int, port: int, value: bytes) -> dict:
    import surge.redis

    r = surge.redis.connect(f"redis://127.0.0.1:{port}/0")
    await r.flushdb()
    res = await run_async(r, conc, n, value)
    res["connections"] = 1
    res["writes_counted"] = r.engine.stats["writes"]
    await r.close()
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
