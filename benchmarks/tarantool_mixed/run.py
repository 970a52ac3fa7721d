"""Seed 000 reproduced: mixed insert/select/update/delete on Tarantool from several
processes, watched second by second.

The seed ran 22 Python processes against one Tarantool core and charted each
operation's rate per second (sent from Tarantool to graphite). Here: Tarantool
(``wal_mode`` none, as ``surge.services`` starts it) pinned to core 1; ``surge load``
with ``--procs`` worker processes, each with ONE pipelined connection shared by
``--pipeline`` requests in flight (the seed's coroutines), 1.5 KB tuples:

* ``mixed``   insert=25,select=25,update=25,delete=25, closed model
* ``select``  select only, closed model (the seed's second chart)
* ``rated``   the mix at a fixed rate (open model), for honest latency percentiles

Tarantool's own counters (``box.stat()``) are read before and after each run, so
the generator's counts are checked against what the server says it did. As in the
seed, the per-second rates go to Graphite while the run goes: a real carbon-cache
(Debian's graphite-carbon, started by ``surge.services``) receives them from
``surge.load.run(graphite=...)``, and after each run they are read back from its
whisper files and compared with the generator's own per-second counts.

    python -m benchmarks.tarantool_mixed.run [--quick] [--procs 2] [--pipeline 200] [--rate 20000]

Results: ``bench-results/tarantool_mixed.json``, ``bench-results/tarantool_mixed-<run>.png``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime as dt
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks._lib import cpu_seconds, machine_ticks

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
RESULTS = ROOT / "bench-results"
TARANTOOL_CORE = 1
OPS = ("insert", "select", "update", "delete")


def _log(msg: str) -> None:
    print(f"[tarantool_mixed] {msg}", file=sys.stderr, flush=True)


def box_stat(url: str) -> dict[str, int]:
    """Tarantool's own request totals by operation."""
    from surge.tarantool import connect

    async def get() -> dict[str, int]:
        conn = connect(url, fetch_schema=False)
        try:
            (stat,) = await conn.eval("return box.stat()")
        finally:
            await conn.close()
        return {op: int(stat[op.upper()]["total"]) for op in OPS}

    return asyncio.run(get())


def run_one(name: str, url: str, pid: int, graphite: Any, **kw: Any) -> dict[str, Any]:
    import surge.load
    from surge.load import chart

    before = box_stat(url)
    cpu0, t0, m0 = cpu_seconds(pid), time.monotonic(), machine_ticks()
    since = int(time.time()) - 2
    prefix = f"tarantool_mixed.{name}"
    r = surge.load.run(
        url, progress=True, graphite=f"{graphite.address}", graphite_prefix=prefix, **kw
    )
    cpu = (cpu_seconds(pid) - cpu0) / (time.monotonic() - t0)
    m1 = machine_ticks()
    machine = (m1[0] - m0[0]) / max(1, m1[1] - m0[1])
    after = box_stat(url)
    server = {op: after[op] - before[op] for op in OPS}
    print(surge.load.render_table(r), file=sys.stderr)
    png = RESULTS / f"tarantool_mixed-{name}.png"
    how = f"{kw['rate']:g} ops/s" if kw.get("rate") else f"{kw['pipeline']} in flight each"
    title = f"seed 000 {name}: {kw['mix']}, {kw['procs']} procs x 1 connection, {how}"
    chart.rate_over_time(r, png, title=title)
    ours = {op: r.ops[op]["replies"] for op in r.ops}
    in_graphite = graphite_series(graphite, prefix, list(r.ops), len(r.series), since)
    return {
        "name": name,
        "settings": kw,
        "result": r.to_dict(),
        "tarantool_cpu_percent": round(cpu * 100, 1),
        # All cores, everything on the machine: near 100 % means the figures are
        # bounded by the machine (and whatever else runs on it), not by either side.
        "machine_busy_percent": round(machine * 100, 1),
        "server_counts": server,
        "generator_counts": ours,
        "counts_match": counts_match(server, ours, kw["procs"]),
        "graphite_match": all(
            in_graphite[op] == [p["ops"][op] / p.get("dt", 1) for p in r.series] for op in r.ops
        ),
        "chart": png.name,
        "table": r,
    }


def graphite_series(
    graphite: Any, prefix: str, ops: list[str], seconds: int, since: int
) -> dict[str, list[float]]:
    """Each operation's per-second rates as Graphite stored them (whisper files),
    waiting up to 15 s for carbon to write them."""
    import whisper

    out: dict[str, list[float]] = {}
    deadline = time.monotonic() + 15
    for op in ops:
        path = Path(graphite.extra["whisper_dir"], *prefix.split("."), op, "rate.wsp")
        values: list[float] = []
        while time.monotonic() < deadline:
            if path.exists():
                _, raw = whisper.fetch(str(path), since, int(time.time()) + 1)
                values = [v for v in raw if v is not None]
                if len(values) >= seconds:
                    break
            time.sleep(0.2)
        out[op] = values
    return out


def counts_match(server: dict[str, int], ours: dict[str, int], procs: int) -> bool:
    """Does Tarantool count what the generator counted? Besides the measured requests it
    saw each process's setup: 1000 prefill inserts, and 4 selects of _vspace/_vindex
    (the schema, fetched on connect and once more after the space is ensured); and
    its cleanup: one delete per key it ever used (the 1000 prefilled and the inserted)."""
    extra = {
        "insert": 1000 * procs,
        "select": 4 * procs,
        "update": 0,
        "delete": 1000 * procs + ours.get("insert", 0),
    }
    return all(server[op] - ours.get(op, 0) == extra[op] for op in OPS)


def _md(runs: list[dict[str, Any]]) -> str:
    lines = [
        "| run | model | ops/s (all) | insert | select | update | delete | p50 ms | p99 ms "
        "| p99.9 ms | errors | Tarantool CPU | generator CPU / proc | machine busy |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|",
    ]
    for run in runs:
        r = run["table"]
        s = run["settings"]
        model = f"{s['rate']:g}/s" if s.get("rate") else f"{s['procs']}x1 conn x{s['pipeline']}"
        per = [f"{r.ops[op]['rate']:.0f}" if op in r.ops else "-" for op in OPS]
        gen = ", ".join(f"{c:.0f}%" for c in r.generator["cpu_percent"])
        lines.append(
            f"| {run['name']} | {model} | {r.achieved_rate:.0f} | {' | '.join(per)} | "
            f"{r.latency['p50']} | {r.latency['p99']} | {r.latency['p99.9']} | "
            f"{r.error_count} | {run['tarantool_cpu_percent']:.0f}% | {gen} | "
            f"{run['machine_busy_percent']:.0f}% |"
        )
    lines.append("")
    ok = all(run["counts_match"] for run in runs)
    in_graphite = all(run["graphite_match"] for run in runs)
    lines.append(
        "Tarantool's own `box.stat()` totals "
        + (
            "match the generator's counts exactly in every run (besides each process's setup)."
            if ok
            else "DIFFER from the generator's counts: see tarantool_mixed.json."
        )
        + " The per-second rates read back from Graphite's whisper files "
        + (
            "equal the generator's own counts, second by second."
            if in_graphite
            else "DIFFER from the generator's counts: see tarantool_mixed.json."
        )
    )
    warn = [f"{run['name']}: {w}" for run in runs for w in run["table"].warnings]
    if warn:
        lines.append("")
        lines += [f"- generator warning, {w}" for w in warn]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Runs the suite; returns the markdown and setup lines for benchmarks.run."""
    ap = argparse.ArgumentParser(
        prog="python -m benchmarks.tarantool_mixed.run", description=__doc__
    )
    ap.add_argument("--quick", action="store_true", help="5 s runs")
    ap.add_argument("--duration", type=float, help="seconds per run (default 20, quick 5)")
    ap.add_argument("--procs", type=int, default=2, help="generator processes (default 2)")
    ap.add_argument("--pipeline", type=int, default=200, help="requests in flight per process")
    ap.add_argument("--rate", type=float, default=20000, help="the rated run's ops/s")
    args = ap.parse_args(argv)
    duration = args.duration or (5.0 if args.quick else 20.0)
    from surge import services

    RESULTS.mkdir(parents=True, exist_ok=True)
    runs = []
    with services.tarantool() as tnt, services.graphite() as graphite:
        with contextlib.suppress(AttributeError, OSError):
            os.sched_setaffinity(tnt.pid, {TARANTOOL_CORE})
        from surge.load.tarantool import CREATE_SPACE
        from surge.tarantool import connect

        async def create_space() -> None:
            conn = connect(tnt.url, fetch_schema=False)
            await conn.eval(CREATE_SPACE, ("tester",))
            await conn.close()

        asyncio.run(create_space())  # DDL before the first measured run, not inside it
        common = {"duration": duration, "procs": args.procs, "connections": 1, "timeout": 10}
        mix = "insert=25,select=25,update=25,delete=25"
        at = (tnt.url, tnt.pid, graphite)
        runs.append(run_one("mixed", *at, mix=mix, pipeline=args.pipeline, **common))
        runs.append(run_one("select", *at, mix="select=1", pipeline=args.pipeline, **common))
        runs.append(run_one("rated", *at, mix=mix, rate=args.rate, **common))
    md = _md(runs)
    data = {
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "runs": [{k: v for k, v in run.items() if k != "table"} for run in runs],
    }
    (RESULTS / "tarantool_mixed.json").write_text(json.dumps(data, indent=1))
    (RESULTS / "tarantool_mixed.md").write_text(md)
    print(md)
    setup = [
        f"seed 000: Tarantool (wal_mode none) pinned to core {TARANTOOL_CORE}; surge load with "
        f"{args.procs} processes x 1 connection, {args.pipeline} requests in flight each "
        f"(closed runs) or {args.rate:g} ops/s in all (rated run); 1.5 KB tuples; {duration:g} s "
        "per run; charts bench-results/tarantool_mixed-*.png; per-second rates pushed to a local "
        "Graphite (carbon-cache) and read back",
    ]
    return {"markdown": md, "setup_lines": setup}


if __name__ == "__main__":
    main()
