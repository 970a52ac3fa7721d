"""Seed 000's topology, measured: a Pool over a master and two replicas against one
connection to the master alone, on the same replica set and the same workload.

The replica set comes from `surge.services.start_tarantool_replicaset` (wal_mode
'write': replication reads the WAL; memtx; full mesh). Workload: KEYS prefilled
1.5 KB tuples, N operations from CONC coroutines, READ_PERCENT % selects and the
rest replaces. "single": one `Connection` to the master serves all of it;
"pool": a `Pool(mode="ro")` sends the replaces to the master and spreads the
selects over the two replicas. Each setup is its own client process pinned to
CLIENT_CORE; all three servers share SERVER_CORE. Rounds alternate single, pool,
single, pool, ...; medians reported.

CPU per instance: on this 2-core machine the three servers can only share one
core, so without a cap a pool cannot beat one instance (the replicas take the
master's CPU: 0.87x measured). Seed 000's replica set has a machine per
instance; to measure that, each instance gets a CPU quota of its own (``--cpu``
cores, 0.3 by default: three of them fit in the one server core) in a cgroup
(v2 ``cpu.max`` or v1 ``cpu.cfs_quota_us``, plus the real-time budget for
``--realtime``), so one instance is the limit of the "single" setup and the
pool may use up to three times its CPU, as three servers would. ``--cpu 0``,
or no writable cpu cgroup (then the setup line says so), measures the shared
core as before.

    python -m benchmarks.tarantool.replicaset [--n 200000] [--rounds 3] [--cpu 0.3]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import statistics
import sys

from surge import services

from benchmarks._lib import can_limit_cpu, cpu_limit, pin_pid
from benchmarks.tarantool.pool_client import KEYS, PAYLOAD
from benchmarks.tarantool.run import CLIENT_CORE, HERE, SERVER_CORE, SURGE_PY, _realtime, _run

SCHEMA_LUA = """
box.schema.space.create('tester'):create_index('primary', {type = 'hash', parts = {1, 'unsigned'}})
"""
SETUPS = ("single", "pool")
#: Default CPU quota per instance, in cores (see the module docstring).
CPU_PER_INSTANCE = 0.3


async def _prefill(url: str) -> None:
    import surge.tarantool as st

    async with st.connect(url) as c:
        await asyncio.gather(*(c.replace("tester", (k, PAYLOAD)) for k in range(KEYS)))


def measure(
    n: int,
    rounds: int,
    conc: int,
    read_percent: int,
    loop: str = "uvloop",
    cpu: float = CPU_PER_INSTANCE,
) -> dict:
    """Run the rounds; return the raw runs and medians per setup. `cpu`: the quota
    of each instance in cores (0, or no cpu cgroup here: none)."""
    cpu = cpu if cpu > 0 and can_limit_cpu() else 0.0
    with services.tarantool_replicaset(schema_lua=SCHEMA_LUA) as rs, contextlib.ExitStack() as caps:
        for i, svc in enumerate(rs):
            pin_pid(svc.pid, SERVER_CORE)
            _realtime(svc.pid)
            if cpu:
                caps.enter_context(cpu_limit(svc.pid, cpu, f"tarantool-{i}"))
        urls = [s.url for s in rs]
        asyncio.run(_prefill(urls[0]))
        client = str(HERE / "pool_client.py")
        runs: dict[str, list[dict]] = {s: [] for s in SETUPS}
        for _ in range(rounds):
            for setup in SETUPS:
                cmd = [str(SURGE_PY), client, setup, loop, str(conc), str(n), str(read_percent)]
                res = _run([*cmd, *urls])
                runs[setup].append(res)
                print(f"pool workload {setup}: {res['ops']:,.0f} ops/s", file=sys.stderr)
    med = {
        s: {
            "ops": statistics.median(r["ops"] for r in runs[s]),
            "cpu_per_100k": statistics.median(r["cpu"] / n * 100_000 for r in runs[s]),
        }
        for s in SETUPS
    }
    return {
        "n": n,
        "rounds": rounds,
        "conc": conc,
        "read_percent": read_percent,
        "loop": loop,
        "cpu_per_instance": cpu,
        "runs": runs,
        "median": med,
    }


def markdown(res: dict) -> str:
    """The result as a markdown table."""
    med = res["median"]
    ratio = med["pool"]["ops"] / med["single"]["ops"]
    return "\n".join(
        [
            f"### Tarantool replica set: {res['read_percent']}% selects / "
            f"{100 - res['read_percent']}% replaces of 1.5 KB tuples, {res['conc']} coroutines, "
            f"{res['n']:,} ops (ops/s, median of {res['rounds']} alternating rounds)",
            "",
            (
                f"Each instance capped at {res['cpu_per_instance']:g} of a core (cgroup quota)."
                if res.get("cpu_per_instance")
                else "No CPU cap: the three instances share one core."
            ),
            "",
            "| setup | ops/s | client CPU s / 100k ops | vs one instance |",
            "|---|---:|---:|---:|",
            f"| one connection to the master | {med['single']['ops']:,.0f} | "
            f"{med['single']['cpu_per_100k']:.2f} | 1.00 |",
            f"| Pool: writes on the master, reads on 2 replicas | {med['pool']['ops']:,.0f} | "
            f"{med['pool']['cpu_per_100k']:.2f} | {ratio:.2f} |",
            "",
        ]
    )


def setup_line(res: dict) -> str:
    """One line describing the setup."""
    cpu = res.get("cpu_per_instance") or 0
    cap = (
        f"each capped at {cpu:g} of a core (cgroup quota: a core each, each that fast)"
        if cpu
        else "no CPU cap per instance (they share the core: replicas add no capacity)"
    )
    return (
        f"Tarantool replica set: master + 2 replicas (full mesh, wal_mode='write', memtx), "
        f"all three on core {SERVER_CORE}, {cap}, client on core {CLIENT_CORE}; "
        f"{KEYS} keys prefilled; {res['loop']}"
    )


def main(argv: list[str] | None = None) -> dict:
    """Run it alone; print the table and the JSON."""
    ap = argparse.ArgumentParser(prog="python -m benchmarks.tarantool.replicaset")
    ap.add_argument("--n", type=int, default=200_000, help="operations per run")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--conc", type=int, default=1000)
    ap.add_argument("--read-percent", type=int, default=80)
    ap.add_argument(
        "--cpu",
        type=float,
        default=CPU_PER_INSTANCE,
        help="CPU quota of each instance in cores (0: none, all share one core)",
    )
    args = ap.parse_args(sys.argv[1:] if argv is None else argv)
    res = measure(args.n, args.rounds, args.conc, args.read_percent, cpu=args.cpu)
    md = markdown(res)
    print(md)
    print(json.dumps(res["median"]))
    return {"markdown": md, "setup_lines": [setup_line(res)], "results": res}


if __name__ == "__main__":
    main()
