"""Seed-000 workload, side by side: surge vs asynctnt, tarantool-python and net.box.

One Tarantool (wal_mode='none', memtx, space `tester` with a HASH primary index),
N tuples (id, 1536-byte string): insert, select, update, delete, on ONE connection
per client, at 10 and 1000 coroutines (net.box: 200 fibers; tarantool-python:
synchronous, one request at a time, on a smaller N since it is ~10x slower - its
ops/s is a rate and comparable). Each configuration runs in its own process,
REPEATS times, interleaved (run 1 of every client, then run 2, ...); we report
medians of ops/s and client CPU seconds per 100k ops, and from one extra run
under `strace -c -f` the socket writes per 100k requests (net.box too: the
strace follows the tarantool client process and its threads).

Conditions: per client, the server's CPU seconds per 100k ops, how often the
server's core halted per op and the share of the machine's cores that stood
idle during its runs. At 10 coroutines surge's client is bound by round trips
(it polls while replies are due, so its CPU per op is its wall time per op),
asynctnt's by its own CPU (~10-12 us per request, the server working
meanwhile). Between batches the server sleeps (~0.4 times per surge request).
On a quiet machine its core then has nothing to run and halts: this VM (KVM,
Firecracker) halts an idle core at once (cpuidle haltpoll with
guest_halt_poll_ns=0), and waking a halted core goes through the hypervisor
(a blocking ping-pong between the two cores took 26-46 us here, 6 us with the
reader polling). Beside other load the core is busy, never halts (0.00 halts
per op), and the wake-up is a preemption. So, as we read the figures, surge's
rate at 10 coroutines moves with how idle the machine is, asynctnt's hardly:
the suite's client and
`benchmarks.tarantool.ab`'s, run alternately on one server beside other
builds (load 6-9), measured the same (185-208k ops/s and 4.9 us CPU per op
for surge, 74-97k for asynctnt, both in either harness), while the quiet
suite measured surge at 136-151k and asynctnt at 89-107k. Read a ratio at 10
coroutines with its halts and idle share.

Memory: for the async clients at 1000 coroutines, one process runs the whole
workload RSS_REPEATS times on one connection and reports its RSS after each
repetition and the spread (max - min) / min, over all and after the first
(warm-up) repetition.

Replica set (seed 000's topology): `benchmarks.tarantool.replicaset` measures a
Pool over a master and two replicas against one connection to the master, each
instance capped at 0.3 of a core by a cgroup quota where one is writable (three
servers share one core here; the cap stands for a machine each) (``--pool-n 0``
skips it).

Realtime (``--realtime``, root with ``chrt``): the server (all its threads) and
every client run under SCHED_FIFO 20. At 10 coroutines a client is bound by
round trips, and on a shared machine each round trip waits for both sides to be
scheduled (about 1 ms here under other engineers' builds: tarantool-python's own
round trip showed it), which hides what the drivers cost; FIFO takes that wait
out, for every client alike. The setup line says which was used.

    python -m benchmarks.tarantool [--quick] [--n 100000] [--repeats 3] [--rss-repeats 10]
        [--realtime]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from surge import services

from benchmarks import venv as bvenv
from benchmarks._lib import (
    CLIENT_CORE,
    SERVER_CORE,
    core_halts,
    cpu_seconds,
    machine_ticks,
    pin_pid,
    run_json,
)

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
RESULTS = ROOT / "bench-results"
SURGE_PY = ROOT / ".venv" / "bin" / "python"
BENCH_PY = ROOT / ".bench-venv" / "bin" / "python"
PHASES = ("insert", "select", "update", "delete")
#: Prefix of every client command (["chrt", "-f", "20"] with --realtime).
RT: list[str] = []
WRITE_CALLS = ("write", "writev", "sendto", "sendmsg")

SPACE_LUA = """
box.once('bench', function()
    local s = box.schema.space.create('tester')
    s:create_index('primary', {type = 'hash', parts = {1, 'unsigned'}})
end)
"""


def _configs(quick: bool) -> list[dict]:
    out = []
    for conc in (10, 1000):
        for loop in ("uvloop", "asyncio"):
            out.append({"driver": "surge", "loop": loop, "conc": conc})
            out.append({"driver": "asynctnt", "loop": loop, "conc": conc})
    out.append({"driver": "tarantool-python", "loop": "-", "conc": 1})
    out.append({"driver": "net.box", "loop": "-", "conc": 200})
    if quick:
        out = [c for c in out if c["loop"] != "asyncio"]
    return out


def _command(cfg: dict, n: int, port: int) -> list[str] | None:
    if cfg["driver"] == "net.box":
        return ["tarantool", str(HERE / "netbox.lua"), str(port), str(n), str(cfg["conc"])]
    py = SURGE_PY if cfg["driver"] == "surge" else BENCH_PY
    if not py.exists():
        return None
    client = str(HERE / "client.py")
    return [str(py), client, cfg["driver"], cfg["loop"], str(cfg["conc"]), str(n), str(port)]


#: Cores for the server and the clients: on 2 cores the two must not share one.
def _run(cmd: list[str], strace_out: str | None = None) -> dict:
    return run_json([*RT, *cmd], strace_out, WRITE_CALLS)


def _measured(cmd: list[str], server: int) -> dict:
    """One run of `cmd`, plus over it the server's CPU seconds, the times the
    server's core halted (``halts``) and the share of the machine's cores that
    stood idle (``idle``)."""
    srv0, halts0, (busy0, total0) = cpu_seconds(server), core_halts(SERVER_CORE), machine_ticks()
    out = _run(cmd)
    busy1, total1 = machine_ticks()
    out["server_cpu"] = cpu_seconds(server) - srv0
    out["halts"] = core_halts(SERVER_CORE) - halts0
    out["idle"] = 1 - (busy1 - busy0) / (total1 - total0) if total1 > total0 else 0.0
    return out


def _realtime(pid: int) -> None:
    """Every thread of server `pid` under SCHED_FIFO 20 (with --realtime)."""
    if RT:
        subprocess.run(["chrt", "-a", "-f", "-p", "20", str(pid)], check=True)


def _count_writes(path: str) -> int:
    total = 0
    for line in Path(path).read_text().splitlines():
        parts = line.split()
        if parts and parts[-1] in WRITE_CALLS and len(parts) >= 5:
            # columns: % time, seconds, usecs/call, calls, [errors], syscall
            total += int(parts[3])
    return total


def _label(cfg: dict) -> str:
    if cfg["driver"] in ("net.box", "tarantool-python"):
        return cfg["driver"]
    return f"{cfg['driver']}/{cfg['loop']}"


def main(argv: list[str] | None = None) -> dict:
    """Run the suite; write bench-results/tarantool.{json,md}; return the markdown."""
    ap = argparse.ArgumentParser(prog="python -m benchmarks.tarantool")
    ap.add_argument("--quick", action="store_true", help="N=10000, 1 repeat, uvloop only")
    ap.add_argument("--n", type=int, default=100_000, help="tuples per phase")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument(
        "--rss-repeats", type=int, default=10, help="workload repetitions for RSS (0: skip)"
    )
    ap.add_argument(
        "--pool-n",
        type=int,
        default=200_000,
        help="ops per run of the replica-set workload (0: skip)",
    )
    ap.add_argument(
        "--realtime", action="store_true", help="server and clients under chrt -f 20 (root)"
    )
    args = ap.parse_args(sys.argv[1:] if argv is None else argv)
    if args.realtime and (os.geteuid() != 0 or shutil.which("chrt") is None):
        ap.error("--realtime needs root and chrt")
    RT[:] = ["chrt", "-f", "20"] if args.realtime else []
    bvenv.ensure(groups=["asynctnt", "tarantool"])
    n = 10_000 if args.quick else args.n
    repeats = 1 if args.quick else args.repeats
    have_strace = shutil.which("strace") is not None

    results = []
    with services.tarantool(extra_lua=SPACE_LUA, wal_mode="none") as svc:
        pin_pid(svc.pid, SERVER_CORE)
        _realtime(svc.pid)
        # Runs are interleaved (run 1 of every client, then run 2, ...) so a burst
        # of background load hits every client alike and the ratios of one run hold.
        plan = []
        for cfg in _configs(args.quick):
            # tarantool-python is synchronous and ~10x slower: a fifth of N keeps the
            # suite short; its ops/s is a rate, so it compares all the same.
            cn = max(1000, n // 5) if cfg["driver"] == "tarantool-python" else n
            cmd = _command(cfg, cn, svc.port)
            if cmd is None:
                print(f"skip {_label(cfg)}: {BENCH_PY} missing", file=sys.stderr)
                continue
            plan.append((cfg, cn, cmd, []))
        for k in range(repeats):
            # The order flips every round, so no client always runs first (or last)
            # in a round while the machine's speed drifts.
            for _cfg, _cn, cmd, runs in plan if k % 2 == 0 else plan[::-1]:
                runs.append(_measured(cmd, svc.pid))
        for cfg, cn, cmd, runs in plan:
            row = {**cfg, "n": cn, "phases": {}}
            for ph in PHASES:
                ops = statistics.median(cn / r[ph]["secs"] for r in runs)
                cpu = statistics.median(r[ph]["cpu"] / cn * 100_000 for r in runs)
                row["phases"][ph] = {"ops": ops, "cpu_per_100k": cpu}
            # The whole run (connect and truncate too: a few requests in 4 N).
            row["server_cpu_per_100k"] = statistics.median(
                r["server_cpu"] / (4 * cn) * 100_000 for r in runs
            )
            row["halts_per_op"] = statistics.median(r["halts"] / (4 * cn) for r in runs)
            row["idle"] = statistics.median(r["idle"] for r in runs)
            if have_strace:
                with tempfile.NamedTemporaryFile(suffix=".strace") as f:
                    _run(cmd, f.name)
                    # +1 for the truncate eval; per 100k of the 4 phases' requests
                    row["writes_per_100k"] = _count_writes(f.name) / (4 * cn + 1) * 100_000
            results.append(row)
            print(
                _label(cfg),
                cfg["conc"],
                {p: round(v["ops"]) for p, v in row["phases"].items()},
                file=sys.stderr,
            )

        rss = _measure_rss(svc.port, n, args.rss_repeats) if args.rss_repeats > 1 else []

    md = _markdown(results, n, repeats) + _rss_markdown(rss, n)
    pool: dict | None = None
    if args.pool_n > 0:
        from benchmarks.tarantool import replicaset

        pool_n = 20_000 if args.quick else args.pool_n
        pool = replicaset.measure(pool_n, max(repeats, 3), conc=1000, read_percent=80)
        md += "\n" + replicaset.markdown(pool)
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "tarantool.json").write_text(
        json.dumps({"runs": results, "rss": rss, "pool": pool}, indent=2)
    )
    (RESULTS / "tarantool.md").write_text(md)
    print(md)
    setup = [
        f"Tarantool {_tarantool_version()}: wal_mode='none', memtx, HASH primary index; "
        f"{n} tuples (id, 1536-byte string); one connection per client; "
        f"medians of {repeats} runs; writes = strace -c write/writev/sendto/sendmsg; "
        f"server pinned to core {SERVER_CORE}, clients to core {CLIENT_CORE} (taskset)"
        + ("; server and clients under chrt -f 20 (SCHED_FIFO)" if RT else "")
    ]
    if pool is not None:
        from benchmarks.tarantool import replicaset

        setup.append(replicaset.setup_line(pool))
    return {"markdown": md, "setup_lines": setup, "results": results}


def _measure_rss(port: int, n: int, reps: int) -> list[dict]:
    """RSS after each of `reps` repetitions of the workload in one client process."""
    out = []
    for driver, loop in (("surge", "uvloop"), ("surge", "asyncio"), ("asynctnt", "uvloop")):
        cmd = _command({"driver": driver, "loop": loop, "conc": 1000}, n, port)
        if cmd is None:
            continue
        rss = _run([*cmd, str(reps)])["rss_kib"]
        warm = rss[1:]
        row = {
            "driver": driver,
            "loop": loop,
            "conc": 1000,
            "rss_kib": rss,
            "spread": (max(rss) - min(rss)) / min(rss),
            "spread_after_first": (max(warm) - min(warm)) / min(warm),
        }
        out.append(row)
        print(f"rss {driver}/{loop}: {rss}", file=sys.stderr)
    return out


def _rss_markdown(rows: list[dict], n: int) -> str:
    if not rows:
        return ""
    reps = len(rows[0]["rss_kib"])
    lines = [
        "",
        f"### Client RSS over {reps} repetitions of the whole workload "
        f"({n} tuples x 4 phases, 1000 coroutines, one process, one connection)",
        "",
        "| client | RSS MiB after each repetition | spread (max-min)/min | "
        "spread after the first |",
        "|---|---|---:|---:|",
    ]
    for r in rows:
        mib = " ".join(f"{k / 1024:.1f}" for k in r["rss_kib"])
        lines.append(
            f"| {r['driver']}/{r['loop']} | {mib} | {r['spread']:.1%} | "
            f"{r['spread_after_first']:.1%} |"
        )
    return "\n".join(lines) + "\n"


def _tarantool_version() -> str:
    out = subprocess.run(["tarantool", "--version"], capture_output=True, text=True).stdout
    m = re.search(r"Tarantool (\S+)", out)
    return m.group(1) if m else "?"


def _markdown(results: list[dict], n: int, repeats: int) -> str:
    peers = {(r["driver"], r["loop"], r["conc"]): r for r in results}
    netbox = next((r for r in results if r["driver"] == "net.box"), None)
    lines = [
        f"### Tarantool: {n} x 1.5 KB tuples, one connection (ops/s, median of {repeats})",
        "",
        "| client | coroutines | insert | select | update | delete | vs asynctnt "
        "(ins/sel/upd/del) | vs net.box (ins/sel/upd/del) | CPU s / 100k ops | "
        "server CPU s / 100k ops | server core halts / op | idle | writes / 100k req |",
        "|---|---:|---:|---:|---:|---:|---|---|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        ph = r["phases"]
        ops = " | ".join(f"{ph[p]['ops']:,.0f}" for p in PHASES)
        peer = peers.get(("asynctnt", r["loop"], r["conc"]))
        vs = (
            "/".join(f"{ph[p]['ops'] / peer['phases'][p]['ops']:.2f}" for p in PHASES)
            if peer and r["driver"] == "surge"
            else ""
        )
        vsn = (
            "/".join(f"{ph[p]['ops'] / netbox['phases'][p]['ops']:.2f}" for p in PHASES)
            if netbox and r["driver"] != "net.box"
            else ""
        )
        cpu = statistics.mean(ph[p]["cpu_per_100k"] for p in PHASES)
        w = r.get("writes_per_100k")
        ws = f"{w:,.0f}" if w is not None else "-"
        srv = f"{r['server_cpu_per_100k']:.2f} | {r['halts_per_op']:.2f} | {r['idle']:.0%}"
        lines.append(
            f"| {_label(r)} | {r['conc']} | {ops} | {vs} | {vsn} | {cpu:.2f} | {srv} | {ws} |"
        )
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
