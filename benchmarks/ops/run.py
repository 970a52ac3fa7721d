"""Operations benchmark: the access log's cost on a served request.

Workloads (one worker; server pinned to core 1, ``wrk -t1 -c100`` to core 0):

* ``access_log``       surge's own App, hello: ``--access-log FILE`` (gunicorn's
                       default format) against no access log
* ``access_log_json``  the same with ``--access-log-format json``
* ``access_log_asgi``  a raw ASGI hello: access log on against off
* ``metrics``          per-request cost of metrics: a handler counting with
                       prometheus_client (a labelled counter and a histogram, in
                       its multiprocess mode, as ``surge serve --workers N`` runs
                       it) against surge's native counters (``app.add_metrics``);
                       the first column is prometheus_client's

And in-process, without sockets (``cpu``): the CPU time per request of the
native fast path fed 100 pipelined requests per read and 1 per read, with the
access log off, in gunicorn's format and in JSON (to /dev/null), and with a
handler counting the prometheus_client way (multiprocess mode) against none;
interleaved rounds, medians. These are steadier than wrk on a shared machine.

Each workload's servers are started first and checked; the runs are then
interleaved round by round (on, off, on, off...; the idle side paused with
SIGSTOP), and each figure is the median over ``--runs`` rounds. The ratio is
the median with the log on over the median with it off (target: >= 0.9).

    python -m benchmarks.ops.run [--quick] [--runs N] [--seconds S] [--workloads a,b]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.http.run import pause
from benchmarks.interfaces.run import RESULTS, SURGE, Server, start, stop, wrk

APPS = "benchmarks.ops.apps"


def workloads(log_dir: Path) -> dict[str, tuple[Server, Server]]:
    """Workload -> (with the feature, without)."""
    prom_dir = log_dir / "prometheus"
    prom_dir.mkdir(exist_ok=True)
    serve = [str(SURGE), "serve"]
    on = ["--access-log", str(log_dir / "access.log")]
    json_on = [*on[:1], str(log_dir / "access.jsonl"), "--access-log-format", "json"]
    return {
        "access_log": (
            Server("surge, access log on", [*serve, f"{APPS}:hello", *on]),
            Server("surge, access log off", [*serve, f"{APPS}:hello"]),
        ),
        "access_log_json": (
            Server("surge, JSON access log on", [*serve, f"{APPS}:hello", *json_on]),
            Server("surge, access log off", [*serve, f"{APPS}:hello"]),
        ),
        "access_log_asgi": (
            Server(
                "surge ASGI, access log on",
                [*serve, f"{APPS}:raw_asgi", "--interface", "asgi", *on],
            ),
            Server(
                "surge ASGI, access log off", [*serve, f"{APPS}:raw_asgi", "--interface", "asgi"]
            ),
        ),
        "metrics": (
            Server(
                "prometheus_client counting",
                [
                    "env",
                    f"PROMETHEUS_MULTIPROC_DIR={prom_dir}",
                    *serve,
                    f"{APPS}:prometheus_client_metrics",
                ],
            ),
            Server("surge native counters", [*serve, f"{APPS}:native_metrics"]),
        ),
    }


def measure(pair: tuple[Server, Server], runs: int, seconds: int, log_dir: Path) -> dict:
    for srv in pair:
        why = start(srv, log_dir)
        if why is not None:
            for s in pair:
                stop(s)
            return {"error": f"{srv.name}: {why}"}
        wrk(srv.url, 1)  # warm-up, not counted
        pause(srv, True)
    try:
        for _ in range(runs):
            for srv in pair:  # alternated: on, off, on, off...
                pause(srv, False)
                rps, errors = wrk(srv.url, seconds)
                pause(srv, True)
                srv.runs.append(rps)
                srv.errors += errors
    finally:
        for srv in pair:
            stop(srv)
    on, off = pair
    med_on, med_off = statistics.median(on.runs), statistics.median(off.runs)
    return {
        "on": {"name": on.name, "runs": on.runs, "median": med_on, "errors": on.errors},
        "off": {"name": off.name, "runs": off.runs, "median": med_off, "errors": off.errors},
        "ratio": med_on / med_off if med_off else 0.0,
    }


def _per_request_us(router: object, log: object, per_read: int, reads: int) -> float:
    from surge._core import HttpConnection

    batch = b"GET / HTTP/1.1\r\nHost: example.com\r\nUser-Agent: wrk/4.2\r\n\r\n" * per_read
    sink: list[bytes] = []
    conn = HttpConnection(router, sink.append, ("127.0.0.1", 40000), access_log=log)
    t0 = time.perf_counter()
    for _ in range(reads):
        if conn.feed(batch) is not None:
            raise RuntimeError("the hello request left the fast path")
        sink.clear()
    return (time.perf_counter() - t0) / (per_read * reads) * 1e6


def cpu_costs(rounds: int, log_dir: Path) -> dict[str, dict[str, float]]:
    """Median microseconds per request of each variant (see the module docstring)."""
    os.environ.setdefault("PROMETHEUS_MULTIPROC_DIR", str(log_dir / "prometheus"))
    from surge._core import AccessLog

    from benchmarks.ops import apps

    sink = os.open(os.devnull, os.O_WRONLY)
    router = apps.hello.freeze().router
    variants = {
        "log off": (router, None),
        "log, gunicorn format": (router, AccessLog(sink)),
        "log, json": (router, AccessLog(sink, None, True)),
        "prometheus_client counting": (apps.prometheus_client_metrics.freeze().router, None),
    }
    out: dict[str, dict[str, float]] = {}
    for per_read, reads in ((100, 200), (1, 20000)):
        runs: dict[str, list[float]] = {name: [] for name in variants}
        for _ in range(rounds):
            for name, (r, log) in variants.items():
                runs[name].append(_per_request_us(r, log, per_read, reads))
        out[f"{per_read} per read"] = {k: statistics.median(v) for k, v in runs.items()}
    os.close(sink)
    return out


def markdown(results: dict, runs: int, seconds: int) -> str:
    lines = [
        f"#### Access log and metrics cost (req/s, median of {runs} interleaved {seconds} s runs)",
        "",
        "| workload | with | without | with/without |",
        "|---|---:|---:|---:|",
    ]
    cpu = results.pop("cpu", None)
    for name, r in results.items():
        if "error" in r:
            lines.append(f"| {name} | - | - | {r['error']} |")
            continue
        lines.append(
            f"| {name} | {r['on']['median']:,.0f} | {r['off']['median']:,.0f} | {r['ratio']:.2f}x |"
        )
    if cpu:
        variants = list(next(iter(cpu.values())))
        lines += [
            "",
            "#### CPU per request on the native fast path, in-process (us, median)",
            "",
            "| requests per read | " + " | ".join(variants) + " |",
            "|---|" + "---:|" * len(variants),
        ]
        for mode, figures in cpu.items():
            lines.append(f"| {mode} | " + " | ".join(f"{figures[v]:.2f}" for v in variants) + " |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(prog="benchmarks.ops.run")
    p.add_argument("--quick", action="store_true", help="3 rounds of 3 s")
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--seconds", type=int, default=5)
    p.add_argument("--workloads", default="", help="comma-separated subset")
    args = p.parse_args(argv)
    runs, seconds = (3, 3) if args.quick else (max(args.runs, 3), args.seconds)
    results: dict[str, dict] = {}
    with tempfile.TemporaryDirectory(prefix="surge-bench-ops-") as tmp:
        log_dir = Path(tmp)
        chosen = workloads(log_dir)
        wanted = [w for w in args.workloads.split(",") if w] or [*chosen, "cpu"]
        for name in wanted:
            if name == "cpu":
                results[name] = cpu_costs(5 if args.quick else 11, log_dir)
            else:
                results[name] = measure(chosen[name], runs, seconds, log_dir)
            print(f"{name}: {json.dumps(results[name])}", file=sys.stderr)
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "ops.json").write_text(json.dumps(results, indent=2))
    return {
        "markdown": markdown(results, runs, seconds),
        "setup_lines": [
            "ops: one worker pinned to core 1, wrk -t1 -c100 pinned to core 0, plain HTTP "
            "keep-alive, 13-byte hello; access log to a file on local disk"
        ],
    }


if __name__ == "__main__":
    print(main(sys.argv[1:])["markdown"])
