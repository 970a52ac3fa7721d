"""One client process of the replica-set workload: reads and writes mixed, print JSON.

    python benchmarks/tarantool/pool_client.py SETUP LOOP CONCURRENCY N READ_PERCENT URL...

SETUP is ``single`` (one Connection to the first URL: the master does everything)
or ``pool`` (a `Pool` over every URL: writes on the master, reads with
``mode="ro"`` on the replicas). Each of CONCURRENCY coroutines takes operations
i = k, k + CONCURRENCY, ... < N; an operation is a select of key i % KEYS when
i % 100 < READ_PERCENT, else a replace of it (1.5 KB tuples, like seed 000).
"""

from __future__ import annotations

import asyncio
import json
import sys
import time

#: Keys the workload reads and writes (prefilled by the suite).
KEYS = 10_000
PAYLOAD = "x" * 1536


async def run(setup: str, conc: int, n: int, read_percent: int, urls: list[str]) -> dict:
    import surge.tarantool as st

    if setup == "pool":
        db: st.Connection | st.Pool = st.Pool(urls, mode="ro")
        await db.connect()
        assert db.master is db.instances[0].conn, "the first URL must be the master"
        assert len({id(db.instance(False)) for _ in range(4)}) == len(urls) - 1
    else:
        db = st.connect(urls[0])
        await db.connect()
    select, replace = db.select, db.replace

    async def worker(start: int) -> None:
        for i in range(start, n, conc):
            if i % 100 < read_percent:
                await select("tester", i % KEYS)
            else:
                await replace("tester", (i % KEYS, PAYLOAD))

    t0, c0 = time.perf_counter(), time.process_time()
    await asyncio.gather(*(worker(k) for k in range(conc)))
    secs, cpu = time.perf_counter() - t0, time.process_time() - c0
    await db.close()
    return {"secs": secs, "cpu": cpu, "ops": n / secs}


def main() -> None:
    setup, loop, conc, n, read_percent = sys.argv[1], sys.argv[2], *map(int, sys.argv[3:6])
    from benchmarks.tarantool.client import run_on  # PYTHONPATH is the repo (run.py's _run)

    print(json.dumps(run_on(loop, run(setup, conc, n, read_percent, sys.argv[6:]))))


if __name__ == "__main__":
    main()
