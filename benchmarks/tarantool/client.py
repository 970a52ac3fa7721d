"""One benchmark client process: insert/select/update/delete N tuples, print JSON.

Runs under surge's venv (driver "surge") or the bench venv (asynctnt,
tarantool-python), so it imports only the driver it is asked for.

    python benchmarks/tarantool/client.py DRIVER LOOP CONCURRENCY N PORT [REPEATS]

With REPEATS > 1 (async drivers) the whole workload runs REPEATS times in this
one process and the output adds "rss_kib": the resident set size after each
repetition, to show whether client memory stays flat.
"""

from __future__ import annotations

import asyncio
import json
import string
import sys
import time
from typing import Any

DATA = [string.printable[i] * 1536 for i in range(len(string.printable))]
PHASES = ("insert", "select", "update", "delete")


def rss_kib() -> int:
    """This process's resident set size (VmRSS), in KiB."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def op(conn, phase: str, i: int):
    """One request of `phase` for tuple `i`."""
    if phase == "insert":
        return conn.insert("tester", (i, DATA[i % len(DATA)]))
    if phase == "select":
        return conn.select("tester", [i])
    if phase == "update":
        return conn.update("tester", [i], [("=", 1, "x" * 1536)])
    return conn.delete("tester", [i])


async def run_async(conn, conc: int, n: int) -> dict:
    out = {}
    for phase in PHASES:

        async def worker(start: int, phase: str = phase) -> None:
            for i in range(start, n, conc):
                await op(conn, phase, i)

        t0, c0 = time.perf_counter(), time.process_time()
        await asyncio.gather(*(worker(k) for k in range(conc)))
        out[phase] = {"secs": time.perf_counter() - t0, "cpu": time.process_time() - c0}
    return out


async def repeat_async(conn, conc: int, n: int, repeats: int) -> dict:
    """The workload `repeats` times; the first result, plus RSS after each run."""
    res, rss = {}, []
    for _ in range(repeats):
        out = await run_async(conn, conc, n)
        res = res or out
        rss.append(rss_kib())
    if repeats > 1:
        res["rss_kib"] = rss
    return res


async def surge_main(conc: int, n: int, port: int, repeats: int = 1) -> dict:
    import surge.tarantool

    conn = surge.tarantool.connect(f"127.0.0.1:{port}")
    await conn.eval("box.space.tester:truncate()")
    res = await repeat_async(conn, conc, n, repeats)
    await conn.close()
    return res


async def asynctnt_main(
    conc: int, n: int, port: int, repeats: int = 1, workload: Any = None
) -> dict:
    """The workload (`repeat_async`'s, or ``await workload(conn)``) over asynctnt."""
    import asynctnt

    conn = asynctnt.Connection(host="127.0.0.1", port=port)
    await conn.connect()
    await conn.eval("box.space.tester:truncate()")
    res = await (workload or (lambda c: repeat_async(c, conc, n, repeats)))(conn)
    await conn.disconnect()
    return res


def tarantool_python_main(n: int, port: int) -> dict:
    import tarantool

    conn = tarantool.connect("127.0.0.1", port)
    conn.eval("box.space.tester:truncate()")
    space = conn.space("tester")
    out = {}
    for phase in PHASES:
        t0, c0 = time.perf_counter(), time.process_time()
        for i in range(n):
            if phase == "insert":
                space.insert((i, DATA[i % len(DATA)]))
            elif phase == "select":
                space.select(i)
            elif phase == "update":
                space.update(i, [("=", 1, "x" * 1536)])
            else:
                space.delete(i)
        out[phase] = {"secs": time.perf_counter() - t0, "cpu": time.process_time() - c0}
    conn.close()
    return out


def main() -> None:
    driver, loop, conc, n, port = sys.argv[1], sys.argv[2], *map(int, sys.argv[3:6])
    repeats = int(sys.argv[6]) if len(sys.argv) > 6 else 1
    if driver == "tarantool-python":
        res = tarantool_python_main(n, port)
    else:
        res = run_on(
            loop, (surge_main if driver == "surge" else asynctnt_main)(conc, n, port, repeats)
        )
    print(json.dumps(res))


def run_on(loop: str, coro: Any) -> Any:
    """Run `coro` on a new loop: "uvloop" or plain asyncio."""
    if loop == "uvloop":
        import uvloop

        return uvloop.run(coro)
    return asyncio.run(coro)


if __name__ == "__main__":
    main()
