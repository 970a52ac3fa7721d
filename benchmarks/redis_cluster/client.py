"""One benchmark client process for the cluster and TLS suite: SET then GET N keys
from C coroutines (the workload of `benchmarks.redis.client`), print JSON.

    python benchmarks/redis_cluster/client.py DRIVER LOOP CONCURRENCY N HOST PORT SIZE [CA_FILE]

DRIVER: surge-cluster (surge.redis.RedisCluster), redis-py-cluster (redis-py's
asyncio RedisCluster, a pool of up to C connections per node), surge (one server,
plaintext) or surge-tls (one server over TLS, trusting CA_FILE).
"""

from __future__ import annotations

import asyncio
import json
import sys

from benchmarks.redis.client import run_async


async def client_main(driver: str, conc: int, n: int, host: str, port: int, size: int, ca: str):
    if driver == "redis-py-cluster":
        from redis.asyncio.cluster import RedisCluster as PeerCluster

        # Its pool limit must cover every coroutine, or calls fail (MaxConnectionsError).
        r = PeerCluster(host=host, port=port, max_connections=conc + 16)
    else:
        import surge.redis

        if driver == "surge-cluster":
            r = surge.redis.RedisCluster(host=host, port=port)
        elif driver == "surge-tls":
            r = surge.redis.Redis(host, port, ssl=True, ssl_ca_certs=ca)
        else:
            r = surge.redis.Redis(host, port)
    await r.flushdb()
    res = await run_async(r, conc, n, b"x" * size)
    await r.aclose()
    return res


def main() -> None:
    driver, loop, conc, n, host, port, size = sys.argv[1:8]
    ca = sys.argv[8] if len(sys.argv) > 8 else ""
    coro = client_main(driver, int(conc), int(n), host, int(port), int(size), ca)
    if loop == "uvloop":
        import uvloop

        res = uvloop.run(coro)
    else:
        res = asyncio.run(coro)
    print(json.dumps(res))


if __name__ == "__main__":
    main()
