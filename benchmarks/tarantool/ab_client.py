"""One run of the A/B harness (`benchmarks.tarantool.ab`): the seed-000 workload on
one connection, with the costs that do not depend on the machine's load.

    python -m benchmarks.tarantool.ab_client DRIVER LOOP CONC N PORT SERVER_PID [NAME=VALUE ...]

NAME=VALUE sets an attribute of `surge.engine` before connecting (surge only):
a policy's knob tried without a rebuild. Prints one JSON line: per phase the
wall seconds, this process's CPU seconds, the server's CPU seconds (all its
threads, from /proc), and this process's and the server's read and write
syscalls (``syscr``/``syscw`` of /proc/PID/io: read/write/readv/writev, which
uvloop and Tarantool use; asyncio's send/recv are not counted there) and
voluntary context switches (the times a side went to sleep waiting), and the
times the server's core halted (went idle: on a VM, woken through the hypervisor).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from functools import partial

from benchmarks._lib import SERVER_CORE, core_halts
from benchmarks.tarantool.client import PHASES, asynctnt_main, op, run_on

TICK = os.sysconf("SC_CLK_TCK")


def _cpu(pid: int) -> float:
    """User + system CPU seconds of process `pid`, all threads."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def _io(pid: int) -> tuple[int, int]:
    """Read and write syscalls of process `pid` (all threads)."""
    out = {}
    with open(f"/proc/{pid}/io") as f:
        for line in f:
            k, v = line.split(":")
            out[k] = int(v)
    return out["syscr"], out["syscw"]


def _sleeps(pid: int) -> int:
    """Voluntary context switches of process `pid`, summed over its threads."""
    total = 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{tid}/status") as f:
            for line in f:
                if line.startswith("voluntary_ctxt_switches"):
                    total += int(line.split()[1])
    return total


def _snapshot(server: int) -> list[float]:
    me = os.getpid()
    return [
        time.perf_counter(),
        time.process_time(),
        _cpu(server),
        *_io(me),
        *_io(server),
        _sleeps(me),
        _sleeps(server),
        core_halts(SERVER_CORE),
    ]


KEYS = (
    "secs",
    "cpu",
    "server_cpu",
    "reads",
    "writes",
    "server_reads",
    "server_writes",
    "sleeps",
    "server_sleeps",
    "server_core_halts",
)


async def _workload(conn, conc: int, n: int, server: int) -> dict:
    out = {}
    for phase in PHASES:

        async def worker(start: int, phase: str = phase) -> None:
            for i in range(start, n, conc):
                await op(conn, phase, i)

        before = _snapshot(server)
        await asyncio.gather(*(worker(k) for k in range(conc)))
        after = _snapshot(server)
        out[phase] = {k: a - b for k, a, b in zip(KEYS, after, before, strict=True)}
    return out


def parse_knobs(pairs: list[str]) -> dict:
    """``NAME=VALUE`` arguments (VALUE in JSON) -> {NAME: value}."""
    knobs = {}
    for kv in pairs:
        k, v = kv.split("=", 1)
        knobs[k] = json.loads(v)
    return knobs


def set_knobs(knobs: dict) -> None:
    """Sets attributes of `surge.engine` (a policy's knob tried without a rebuild)."""
    import surge.engine

    for k, v in knobs.items():
        if not hasattr(surge.engine, k):
            raise SystemExit(f"surge.engine has no {k}")
        setattr(surge.engine, k, v)


async def _surge(conc: int, n: int, port: int, server: int, knobs: dict) -> dict:
    import surge.engine
    import surge.tarantool

    set_knobs(knobs)
    conn = surge.tarantool.connect(f"127.0.0.1:{port}")
    await conn.eval("box.space.tester:truncate()")
    res = await _workload(conn, conc, n, server)
    res["source"] = surge.engine.__file__
    await conn.close()
    return res


def main() -> None:
    driver, loop = sys.argv[1], sys.argv[2]
    conc, n, port, server = map(int, sys.argv[3:7])
    knobs = parse_knobs(sys.argv[7:])
    if driver == "surge":
        res = run_on(loop, _surge(conc, n, port, server, knobs))
    else:
        work = partial(_workload, conc=conc, n=n, server=server)
        res = run_on(loop, asynctnt_main(conc, n, port, workload=work))
    print(json.dumps(res))


if __name__ == "__main__":
    main()
