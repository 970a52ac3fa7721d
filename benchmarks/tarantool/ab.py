"""A/B harness for the Tarantool client's flush and read policies.

Runs the seed-000 workload (one Tarantool as the suite starts it: wal_mode
'none', HASH primary index, N tuples of 1.5 KB, insert/select/update/delete on
one connection) for several *sides* alternately, ROUNDS times (the order
rotates every round, so drift and bursts of load hit every side alike), client
and server pinned to different cores, and reports per side the medians of:

- ops/s over the four phases (4 N / their wall time), and per phase;
- client and server CPU microseconds per op (user + system from /proc: what a
  side costs, whatever the machine's load);
- client and server read/write syscalls per op and voluntary context switches
  per op (how often a side went to sleep waiting for the other);
- halts of the server's core per op (how often it went idle: on this VM an
  idle core halts at once, and waking it costs a trip through the hypervisor;
  ``--awake`` keeps the core busy with a SCHED_IDLE loop, to measure that cost).

A side is ``LABEL=DRIVER[@PYTHONPATH][,NAME=VALUE...]``: DRIVER is ``surge`` or
``asynctnt``; ``@PYTHONPATH`` runs surge from another tree (a copy of
``python/surge`` with the extension built from the code before a change);
NAME=VALUE sets a knob of `surge.engine` (JSON values) before connecting.

    nice -n -20 .venv/bin/python -m benchmarks.tarantool.ab --conc 10 --loop uvloop \\
        --side asynctnt=asynctnt --side base=surge@/tmp/base --side new=surge
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

from surge import services

from benchmarks._lib import CLIENT_CORE, SERVER_CORE, pin_pid, pinned
from benchmarks.tarantool import run as suite
from benchmarks.tarantool.client import PHASES

ROOT = Path(__file__).resolve().parents[2]
PY = ROOT / ".venv" / "bin" / "python"


def parse_side(spec: str) -> tuple[str, str, str | None, list[str]]:
    """`LABEL=DRIVER[@PATH][,K=V...]` -> (label, driver, path or None, [K=V...])."""
    label, rest = spec.split("=", 1)
    driver, *knobs = rest.split(",")
    path = None
    if "@" in driver:
        driver, path = driver.split("@", 1)
    return label, driver, path, knobs


def _run(side: tuple, loop: str, conc: int, n: int, port: int, server: int) -> dict:
    _label, driver, path, knobs = side
    cmd = [*suite.RT, str(PY), "-m", "benchmarks.tarantool.ab_client", driver, loop]
    cmd += [str(conc), str(n), str(port), str(server), *knobs]
    # The other tree first: its `surge` shadows the one the venv installs.
    env = {**os.environ, "PYTHONPATH": f"{path}:{ROOT}" if path else str(ROOT)}
    p = subprocess.run(
        pinned(cmd, CLIENT_CORE), capture_output=True, text=True, env=env, timeout=900, cwd=ROOT
    )
    if p.returncode != 0:
        raise RuntimeError(f"{side[0]} failed: {p.stderr[-2000:]}")
    return json.loads(p.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def _summary(run: dict, n: int) -> dict:
    tot = {k: sum(run[p][k] for p in PHASES) for k in run[PHASES[0]]}
    ops = 4 * n
    out = {
        "ops/s": ops / tot["secs"],
        "cli us/op": tot["cpu"] / ops * 1e6,
        "srv us/op": tot["server_cpu"] / ops * 1e6,
        "cli wr/op": tot["writes"] / ops,
        "cli rd/op": tot["reads"] / ops,
        "srv rd/op": tot["server_reads"] / ops,
        "srv wr/op": tot["server_writes"] / ops,
        "cli slp/op": tot["sleeps"] / ops,
        "srv slp/op": tot["server_sleeps"] / ops,
        "srv hlt/op": tot["server_core_halts"] / ops,
    }
    for p in PHASES:
        out[p] = n / run[p]["secs"]
    return out


@contextlib.contextmanager
def _awake(core: str, on: bool):
    """With `on`, a busy loop under SCHED_IDLE on `core` while the block runs: it
    gets the core only when nothing else wants it, so the core never halts, and
    the server's wake-ups cost what they cost on a busy machine (the effect of
    idle=poll or of the guest's halt polling). On a quiet machine, a run with and
    one without tell what waking a halted core costs a side."""
    if not on:
        yield
        return
    spin = subprocess.Popen(
        pinned(["chrt", "-i", "0", sys.executable, "-c", "while True: pass"], core)
    )
    try:
        yield
    finally:
        spin.kill()
        spin.wait()


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.tarantool.ab")
    ap.add_argument("--side", action="append", required=True, help="LABEL=DRIVER[@PATH][,K=V]")
    ap.add_argument("--conc", type=int, default=10)
    ap.add_argument("--loop", default="uvloop", choices=("uvloop", "asyncio"))
    ap.add_argument("--n", type=int, default=50_000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument(
        "--realtime", action="store_true", help="server and clients under chrt -f 20 (root)"
    )
    ap.add_argument(
        "--same-core", action="store_true", help="the server on the client's core (a 1-core box)"
    )
    ap.add_argument(
        "--awake",
        action="store_true",
        help="a SCHED_IDLE busy loop keeps the server's core from halting (as idle=poll would)",
    )
    args = ap.parse_args(sys.argv[1:] if argv is None else argv)
    suite.RT[:] = ["chrt", "-f", "20"] if args.realtime else []
    sides = [parse_side(s) for s in args.side]
    results: dict[str, list[dict]] = {s[0]: [] for s in sides}
    load0 = Path("/proc/loadavg").read_text().split()[:3]
    with (
        services.tarantool(extra_lua=suite.SPACE_LUA, wal_mode="none") as svc,
        _awake(SERVER_CORE, args.awake),
    ):
        pin_pid(svc.pid, CLIENT_CORE if args.same_core else SERVER_CORE)
        suite._realtime(svc.pid)
        for r in range(args.rounds):
            order = sides[r % len(sides) :] + sides[: r % len(sides)]
            for side in order:
                run = _run(side, args.loop, args.conc, args.n, svc.port, svc.pid)
                s = _summary(run, args.n)
                results[side[0]].append(s)
                print(
                    f"round {r + 1} {side[0]:>10}: {s['ops/s']:9,.0f} ops/s"
                    f"  cli {s['cli us/op']:5.2f}  srv {s['srv us/op']:5.2f} us/op"
                    f"  {run.get('source', '')}",
                    file=sys.stderr,
                    flush=True,
                )
    load1 = Path("/proc/loadavg").read_text().split()[:3]
    print(
        f"\n{args.conc} coroutines, {args.loop}, N={args.n}, {args.rounds} rounds"
        f"{', SCHED_FIFO' if args.realtime else ''}"
        f"{', server on the client core' if args.same_core else ''}"
        f"{', server core kept awake' if args.awake else ''};"
        f" load {' '.join(load0)} -> {' '.join(load1)}; medians"
    )
    keys = list(next(iter(results.values()))[0])
    first = sides[0][0]
    print(f"{'':>10} " + " ".join(f"{k:>10}" for k in keys) + "   ratio ops/s vs " + first)
    for label, runs in results.items():
        med = {k: statistics.median(r[k] for r in runs) for k in keys}
        # The ratio of each round's pair, then the median: a pair shares its drift.
        ratios = [a["ops/s"] / b["ops/s"] for a, b in zip(runs, results[first], strict=True)]
        cells = " ".join(f"{med[k]:10,.0f}" if med[k] >= 100 else f"{med[k]:10.3f}" for k in keys)
        print(f"{label:>10} {cells}   {statistics.median(ratios):.3f}")


if __name__ == "__main__":
    main()
