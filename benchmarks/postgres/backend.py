"""What the server's backends did per query while one benchmark client ran.

    python -m benchmarks.postgres.backend DRIVER LOOP CONCURRENCY CONNECTIONS WORKLOAD
                                          [--seconds 4] [--rounds 3] [--vs DRIVER:CONNECTIONS]

Starts the suite's server (pinned, with its tables), runs ``client.py`` as the
suite does (DRIVER surge, asyncpg, psycopg, asyncpg-1conn; for A/B runs
``surge@PATH`` runs surge from another tree, a copy of ``python/surge`` with the
extension built from the code before a change, and ``surge[@PATH],NAME=JSON,...``
sets knobs of `surge.engine` first) and, over the middle of each run,
reads the client's backends from /proc: CPU microseconds per query, voluntary
switches per query (the backend slept: it ran out of queries to read, or the
client's receive buffer was full), involuntary ones (another process took its
core) and the share of its core the backends got (CPU seconds / wall seconds);
from the server's sockets (``ss -ti``) the TCP segments per query each way and
how many of them carried no data (ACKs and window updates); and the client's
own CPU per query (user + system over the whole run). ``--vs`` alternates a
second client with the first, round by round, the order flipping each round
(repeat it for more). A "query" of a write workload is one executemany (10k
rows) or one COPY (100k rows).

Why: with one connection shared by 1000 coroutines, surge's throughput is one
backend's: 1 / (its CPU per query) while it holds its core. A ratio to a pool
of 10 then moves with two things that these figures tell apart: the CPU each
side's backends spend per query, and the share of the server's core they get
when other processes want it too (one busy backend gets one scheduler share,
ten get up to ten).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

from surge import services

from benchmarks._lib import CLK_TCK
from benchmarks.postgres import client
from benchmarks.postgres import run as suite

#: Seconds from the client's start until its backends are measured: startup,
#: connecting and the 0.3 s warm-up are over by then.
SETTLE = 1.5
#: Seconds of a run left unmeasured: the settling and the end (the client
#: draining and exiting), so ``--seconds`` must be more.
UNMEASURED = 2.0


def backends(postmaster: int) -> list[int]:
    """The postmaster's children that serve a client over TCP."""
    try:
        with open(f"/proc/{postmaster}/task/{postmaster}/children") as f:
            kids = [int(k) for k in f.read().split()]
    except OSError:
        return []
    out = []
    for k in kids:
        try:
            with open(f"/proc/{k}/cmdline", "rb") as f:
                if b"127.0.0.1(" in f.read():
                    out.append(k)
        except OSError:
            continue
    return out


def counters(pids: list[int]) -> tuple[float, int, int]:
    """CPU seconds, voluntary and involuntary switches of ``pids``, summed."""
    cpu, vol, inv = 0.0, 0, 0
    for p in pids:
        try:
            with open(f"/proc/{p}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            with open(f"/proc/{p}/status") as f:
                status = dict(line.split(":", 1) for line in f if "ctxt_switches" in line)
        except (OSError, ValueError):
            continue
        cpu += (int(fields[11]) + int(fields[12])) / CLK_TCK
        vol += int(status["voluntary_ctxt_switches"])
        inv += int(status["nonvoluntary_ctxt_switches"])
    return cpu, vol, inv


DRIVERS = ("surge", "asyncpg", "asyncpg-1conn", "psycopg")
#: ``ss -ti`` counters summed over the server's sockets: segments sent and
#: received, and those of them that carried data.
SEGMENT_FIELDS = ("segs_out", "segs_in", "data_segs_out", "data_segs_in")


def segments(port: int) -> dict[str, int]:
    """`SEGMENT_FIELDS` of the established sockets on the server's ``port``."""
    out = dict.fromkeys(SEGMENT_FIELDS, 0)
    p = subprocess.run(
        ["ss", "-tinH", "state", "established", f"( sport = :{port} )"],
        capture_output=True,
        text=True,
    )
    for tok in p.stdout.split():
        name, _, value = tok.partition(":")
        if name in out and value.isdigit():
            out[name] += int(value)
    return out


def measure(cfg: dict, workload: str, secs: float, svc: services.Service) -> dict:
    """One run of one client: its queries/s and its backends' figures per query."""
    side = dict(cfg)
    spec, _, knobs = side["driver"].partition(",")
    driver, _, tree = spec.partition("@")
    side["driver"] = driver
    cmd = suite._command(side, secs, svc.port, [workload])
    if suite._can_pin():
        cmd = ["taskset", "-c", suite.CLIENT_CORE, *cmd]
    path = os.pathsep.join(p for p in (tree, str(suite.ROOT)) if p)
    env = {**os.environ, "PYTHONPATH": path, "PG_BENCH_SERVER_PID": str(svc.pid)}
    env[client.KNOBS_ENV] = knobs
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    time.sleep(SETTLE)
    pids = backends(svc.pid)
    before, t0, segs0 = counters(pids), time.perf_counter(), segments(svc.port)
    time.sleep(secs - UNMEASURED)
    after, t1, segs1 = counters(pids), time.perf_counter(), segments(svc.port)
    out, err = p.communicate(timeout=120)
    if p.returncode != 0:
        raise RuntimeError(f"client failed: {err[-2000:]}")
    res = json.loads(out.strip().splitlines()[-1])[workload]
    qps = res["queries"] / res["secs"]
    wall = t1 - t0
    n = qps * wall  # queries in the measured window, at the run's rate
    cpu, vol, inv = (b - a for a, b in zip(before, after, strict=True))
    seg = {k: (segs1[k] - segs0[k]) / n for k in SEGMENT_FIELDS}
    if driver == "surge" and tree:
        build = json.loads(out.strip().splitlines()[-1]).get("_surge_build", {})
        if not str(build.get("path", "")).startswith(tree):
            raise RuntimeError(f"{cfg['driver']} ran {build.get('path')}, not the tree's")
    return {
        "qps": qps,
        "backends": len(pids),
        "cpu_us_per_query": cpu / n * 1e6,
        "client_us_per_query": res["cpu"] / res["queries"] * 1e6,
        "voluntary_per_query": vol / n,
        "involuntary_per_query": inv / n,
        "core_share": cpu / wall,
        # from the server's side: segments it sent (with data: replies), received
        # (with data: requests); the rest of each carried no data (ACKs, window updates)
        "segs_out_per_query": seg["segs_out"],
        "acks_out_per_query": seg["segs_out"] - seg["data_segs_out"],
        "segs_in_per_query": seg["segs_in"],
        "acks_in_per_query": seg["segs_in"] - seg["data_segs_in"],
    }


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.postgres.backend")
    ap.add_argument("driver", help="surge, surge@PATH, asyncpg, asyncpg-1conn or psycopg")
    ap.add_argument("loop", choices=("uvloop", "asyncio"))
    ap.add_argument("conc", type=int)
    ap.add_argument("conns", type=int)
    ap.add_argument("workload", choices=suite.WORKLOADS)
    ap.add_argument("--seconds", type=float, default=4.0)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--vs", action="append", default=[], help="another client, DRIVER:CONNECTIONS")
    args = ap.parse_args(argv)
    if args.seconds <= UNMEASURED + 0.5:
        ap.error(f"--seconds must be more than {UNMEASURED + 0.5:g}")
    if args.workload in suite.WRITE_WORKLOADS and args.conc != suite.POOL:
        ap.error(f"write workloads run at {suite.POOL} coroutines only (as in the suite)")
    cfgs = [{"driver": args.driver, "loop": args.loop, "conc": args.conc, "conns": args.conns}]
    for vs in args.vs:
        driver, conns = vs.rsplit(":", 1)
        cfgs.append({"driver": driver, "loop": args.loop, "conc": args.conc, "conns": int(conns)})
    for cfg in cfgs:
        if cfg["driver"].partition(",")[0].partition("@")[0] not in DRIVERS:
            ap.error(f"unknown driver {cfg['driver']!r}")
    for cfg in cfgs:
        cfg["shape"] = "10 conns" if cfg["conc"] == suite.POOL else "1000 coros"
    runs: list[list[dict]] = [[] for _ in cfgs]
    with services.postgres() as svc:
        suite._pin_tree(svc.pid, suite.SERVER_CORE)
        suite._psql(svc.port, suite.SETUP_SQL)
        for r in range(args.rounds):
            # the clients' order flips every round, as in the suite: the first
            # and the last of a round run on a table and a machine in other states
            pairs = list(zip(cfgs, runs, strict=True))
            for cfg, out in pairs[::-1] if r % 2 else pairs:
                out.append(measure(cfg, args.workload, args.seconds, svc))
                print(cfg["driver"], json.dumps(out[-1]), file=sys.stderr)
    for cfg, out in zip(cfgs, runs, strict=True):
        med = {k: statistics.median(r[k] for r in out) for k in out[0]}
        label = f"{cfg['driver']}/{cfg['loop']} x{cfg['conc']} on {cfg['conns']}"
        print(
            f"{label:32} {args.workload}: {med['qps']:.0f} q/s, backend "
            f"{med['cpu_us_per_query']:.1f} us CPU/query, switches/query voluntary "
            f"{med['voluntary_per_query']:.3f} involuntary {med['involuntary_per_query']:.3f}, "
            f"core share {med['core_share']:.2f}; server segments/query out "
            f"{med['segs_out_per_query']:.2f} (no data {med['acks_out_per_query']:.2f}) in "
            f"{med['segs_in_per_query']:.2f} (no data {med['acks_in_per_query']:.2f}); client "
            f"{med['client_us_per_query']:.1f} us CPU/query (medians of {len(out)})"
        )


if __name__ == "__main__":
    main()
