"""Seed 001 reproduced: latency percentiles at fixed request rates, surge vs its peers.

Two handlers, one worker per server:

* ``/sleep50`` awaits 50 ms (the seed's benchmark);
* ``/fanout`` awaits three 25 ms calls to a downstream HTTP service, one after
  another, made with each framework's own client (surge.http.Client, aiohttp's
  ClientSession, tornado's AsyncHTTPClient; uvicorn's raw ASGI app uses aiohttp's).

Each server runs pinned to core 1 (``taskset -c 1``); the generator (``surge.load``,
open model, latency timed from each request's due time) and the downstream service
(surge, ``/sleep25``) run on core 0. Rates go up from 500 req/s, every server at
one rate before any goes to the next, until a server's p99 exceeds 1.5x the
handler's own time (or its achieved rate falls below 95 % of the target); then,
for each server, two rates bisect the gap between the highest rate held and the next one tried;
the table gives the highest rate each server holds with p99 <= 1.2x the handler's
own time (60 ms for ``/sleep50``). The servers not being measured are paused
(SIGSTOP). With ``oha`` installed (``cargo install oha``), surge's percentiles are
checked against ``oha -q RATE --latency-correction`` on the same server and rate.

    python -m benchmarks.http_latency.run [--quick] [--servers surge,aiohttp] [--handlers sleep50]

Results: ``bench-results/http_latency.json``, ``bench-results/http_latency-<handler>.png``.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks import venv as bvenv
from benchmarks._lib import free_port as _free_port

HERE = Path(__file__).resolve().parent
APPS = HERE / "apps"
ROOT = HERE.parent.parent
RESULTS = ROOT / "bench-results"
RAW = RESULTS / "raw" / "http_latency"
SURGE_BIN = ROOT / ".venv" / "bin" / "surge"

SERVER_CORE = 1
CLIENT_CORE = 0

#: handler -> (path, the handler's own time in ms, p99 limit in ms for "holds the rate")
HANDLERS = {"sleep50": ("/sleep50", 50.0, 60.0), "fanout": ("/fanout", 75.0, 100.0)}
RATES = [500, 1000, 1500, 2000, 2500, 3000, 4000, 5000, 6000, 8000, 10000, 12000, 15000, 20000]
RATES += [25000, 30000, 35000, 40000]
#: Rates tried between the highest held rate and the next one of the sweep, halving
#: the gap each time, so a held-rate ratio is not set by where the sweep's steps fall.
REFINE_STEPS = 2
#: Seconds of each rate's load run before it is measured (connections opened, server
#: warm): without it the first second's connection burst sets every server's p99.
WARMUP = 2.0
#: The sweep stops once p99 exceeds this many times the handler's own time.
STOP_FACTOR = 1.5
#: A rate fails when more than this share of its requests end in an error.
MAX_ERROR_SHARE = 0.01
SERVERS = ["surge", "aiohttp", "uvicorn", "tornado"]
#: The rates of this run (set by main).
RATES_USED: list[int] = list(RATES)
DESCRIPTIONS = {
    "surge": "surge serve --workers 1 (uvloop); surge.http.Client for downstream calls",
    "aiohttp": "aiohttp.web on uvloop; aiohttp.ClientSession(limit=1000)",
    "uvicorn": "uvicorn --loop uvloop --http httptools, raw ASGI; aiohttp.ClientSession",
    "tornado": "tornado on uvloop; AsyncHTTPClient(max_clients=1000)",
}


def _log(msg: str) -> None:
    print(f"[http_latency] {msg}", file=sys.stderr, flush=True)


def _pin(core: int) -> list[str]:
    if shutil.which("taskset") and (os.cpu_count() or 1) > core:
        return ["taskset", "-c", str(core)]
    return []


@dataclass
class Proc:
    name: str
    port: int
    proc: subprocess.Popen | None = None
    error: str = ""
    log: Path | None = None
    results: dict[str, list[Any]] = field(default_factory=dict)

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def pause(self, paused: bool) -> None:
        if self.proc and self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGSTOP if paused else signal.SIGCONT)
            if not paused:
                time.sleep(0.2)

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGCONT)
                os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()


def _argv(name: str, port: int) -> tuple[list[str], Path]:
    bench_py = str(bvenv.python())
    if name in ("surge", "downstream"):
        app = "benchmarks.http_latency.apps.surge_app:app"
        return [str(SURGE_BIN), "serve", app, "--port", str(port), "--workers", "1"], ROOT
    if name == "aiohttp":
        return [bench_py, str(APPS / "aiohttp_app.py"), str(port)], APPS
    if name == "tornado":
        return [bench_py, str(APPS / "tornado_app.py"), str(port)], APPS
    if name == "uvicorn":
        argv = [bench_py, "-m", "uvicorn", "asgi_app:app", "--app-dir", str(APPS)]
        argv += ["--loop", "uvloop", "--http", "httptools", "--workers", "1"]
        argv += ["--no-access-log", "--log-level", "warning", "--port", str(port)]
        return argv, APPS
    raise ValueError(name)


def _need(name: str) -> str:
    if name in ("surge", "downstream"):
        return "" if SURGE_BIN.exists() else f"{SURGE_BIN} missing: run `make build`"
    group = {"uvicorn": "uvicorn", "aiohttp": "aiohttp", "tornado": "tornado"}[name]
    return "" if bvenv.have(group) else f"{group} not installed in {bvenv.VENV.name}"


def start(name: str, core: int, downstream: str, probe: str) -> Proc:
    p = Proc(name, _free_port())
    p.error = _need(name)
    if p.error:
        _log(f"{name}: not started: {p.error}")
        return p
    argv, cwd = _argv(name, p.port)
    RAW.mkdir(parents=True, exist_ok=True)
    p.log = RAW / f"server-{name}.log"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "SEED001_DOWNSTREAM": downstream}
    env["PYTHONUNBUFFERED"] = "1"
    with open(p.log, "wb") as log:
        p.proc = subprocess.Popen(
            [*_pin(core), *argv],
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    deadline = time.monotonic() + 30
    while True:
        if p.proc.poll() is not None:
            p.error = f"exited with {p.proc.returncode}: {p.log.read_text()[-300:]}"
            break
        try:
            with urllib.request.urlopen(p.url(probe), timeout=2) as r:
                if r.status == 200:
                    break
        except (OSError, urllib.error.URLError):
            pass
        if time.monotonic() > deadline:
            p.error = "not answering after 30 s"
            break
        time.sleep(0.1)
    if p.error:
        _log(f"{name}: {p.error}")
        p.stop()
    else:
        _log(f"{name}: up on port {p.port}")
    return p


# --------------------------------------------------------------------------- measuring


def sweep(
    servers: list[Proc], handler: str, rates: list[int], duration: float, refine: int
) -> None:
    """Every server at one rate, then every server at the next: into ``p.results[handler]``.

    Rates go up from the lowest; a server leaves the sweep once its p99 passes the
    stop line. Then `refine` rounds of bisection, each server between the highest
    rate it held (p99 within the handler's limit) and the next rate it was tried at.
    Interleaving the servers rate by rate means a change in the machine's speed
    during the run (a shared VM's is) hits them alike, not one server's whole sweep.
    """
    _, own, limit = HANDLERS[handler]
    live = [p for p in servers if not p.error]
    for p in live:
        p.results[handler] = []
    for rate in rates:
        for p in list(live):
            r = _measure(p, handler, rate, duration)
            p.results[handler].append(r)
            p99 = r.latency["p99"]
            if (
                p99 is None
                or p99 > STOP_FACTOR * own
                or r.achieved_rate < 0.95 * rate
                or r.error_count > MAX_ERROR_SHARE * r.sent
            ):
                live.remove(p)
        if not live:
            break
    for _ in range(refine):
        for p in servers:
            out = p.results.get(handler)
            if not out:
                continue
            out.sort(key=lambda r: r.target_rate)
            best, _ = held(out, limit)
            above = [int(r.target_rate) for r in out if r.target_rate > (best or 0)]
            if not above:
                continue  # held at every rate tried
            low = best or 0
            mid = int(round((low + above[0]) / 2, -2))
            if low < mid < above[0]:
                out.append(_measure(p, handler, mid, duration))
    for p in servers:
        if p.results.get(handler):
            p.results[handler].sort(key=lambda r: r.target_rate)


def _measure(p: Proc, handler: str, rate: int, duration: float) -> Any:
    import surge.load

    path, own, _ = HANDLERS[handler]
    p.pause(False)
    # Room for every request the rate keeps in flight at twice the handler's time.
    conns = max(1000, int(rate * own / 1000 * 2))
    try:
        r = surge.load.run(
            p.url(path), rate=rate, duration=duration, warmup=WARMUP, timeout=5, connections=conns
        )
    finally:
        p.pause(True)
    lat = r.latency
    _log(
        f"{p.name} {handler} {rate}/s: achieved {r.achieved_rate:.0f}, "
        f"p50 {lat['p50']} p95 {lat['p95']} p99 {lat['p99']} ms, errors {r.errors or 0}"
        + (f" [{'; '.join(r.warnings)}]" if r.warnings else "")
    )
    return r


def held(results: list[Any], limit: float) -> tuple[int | None, float | None]:
    """The highest rate (with none failing below it) with p99 <= limit and few errors."""
    best, p99 = None, None
    for r in results:
        lat = r.latency["p99"]
        if (
            lat is None
            or lat > limit
            or r.error_count > MAX_ERROR_SHARE * r.sent
            or r.achieved_rate < 0.95 * (r.target_rate or 0)
        ):
            break
        best, p99 = int(r.target_rate), lat
    return best, p99


def oha_check(url: str, rate: int, duration: float) -> dict[str, Any] | None:
    """oha's percentiles and surge.load's at the same rate on the same server."""
    import surge.load

    oha = shutil.which("oha") or str(Path.home() / ".cargo" / "bin" / "oha")
    if not os.path.exists(oha):
        return None
    conns = max(50, int(rate * 0.1))  # enough connections for rate x ~60 ms in flight
    argv = [*_pin(CLIENT_CORE), oha, "-z", f"{duration:g}s", "-q", str(rate)]
    argv += ["--latency-correction", "-c", str(conns), "--no-tui", "--output-format", "json"]
    proc = subprocess.run([*argv, url], capture_output=True, text=True, timeout=duration + 60)
    if proc.returncode != 0:
        # older oha: -j for JSON
        argv = [a for a in argv if a not in ("--output-format", "json")] + ["-j"]
        proc = subprocess.run([*argv, url], capture_output=True, text=True, timeout=duration + 60)
    try:
        data = json.loads(proc.stdout)
    except ValueError:
        _log(f"oha failed: {proc.stderr[-300:]}")
        return None
    pct = data.get("latencyPercentiles", {})
    summary = data.get("summary", {})
    oha_ms = {k: round(pct[src] * 1000, 3) for k, src in _OHA_KEYS.items() if src in pct}
    r = surge.load.run(url, rate=rate, duration=duration, timeout=5)
    ours = {k: r.latency[k] for k in _OHA_KEYS}
    return {
        "url": url,
        "rate": rate,
        "oha_connections": conns,
        "oha_ms": oha_ms,
        "oha_rps": round(summary.get("requestsPerSec", 0), 1),
        "surge_ms": ours,
        "surge_rps": round(r.achieved_rate, 1),
        "diff_percent": {
            k: round(100 * (ours[k] - oha_ms[k]) / oha_ms[k], 1)
            for k in ours
            if oha_ms.get(k) and ours[k] is not None
        },
    }


_OHA_KEYS = {"p50": "p50", "p90": "p90", "p95": "p95", "p99": "p99", "p99.9": "p99.9"}


# --------------------------------------------------------------------------- report


def _brief(r: Any) -> dict[str, Any]:
    d = r.to_dict()
    d.pop("series")  # per-second points: in the run's own JSON, not the summary
    return d


def _md(servers: list[Proc], handlers: list[str], checks: list[dict]) -> str:
    lines = []
    for h in handlers:
        path, own, limit = HANDLERS[h]
        lines.append(
            f"**`{path}`** (handler {own:g} ms): highest rate held with p99 <= {limit:g} ms"
        )
        lines.append("")
        lines.append("| server | held (req/s) | p99 there (ms) | per rate: p50 / p95 / p99 ms |")
        lines.append("|---|---:|---:|---|")
        base = None
        for p in servers:
            res = p.results.get(h)
            if p.error or not res:
                lines.append(f"| {p.name} | - | - | {p.error or 'not run'} |")
                continue
            rate, p99 = held(res, limit)
            # Held at the highest rate tried: it may hold more.
            at_top = (
                rate is not None and rate == int(res[-1].target_rate) and rate == max(RATES_USED)
            )
            if p.name == "surge":
                base = rate
            steps = ", ".join(
                f"{int(r.target_rate)}: {r.latency['p50']:.0f}/{r.latency['p95']:.0f}/"
                f"{r.latency['p99']:.0f}" + ("!" if r.warnings else "")
                for r in res
                if r.latency["p99"] is not None
            )
            errs = sum(r.error_count for r in res)
            steps += f" ({errs} errors)" if errs else ""
            shown = f">= {rate}" if at_top else (rate or f"< {int(res[0].target_rate)}")
            lines.append(f"| {p.name} | {shown} | {p99 or '-'} | {steps} |")
        ratios = []
        for p in servers:
            res = p.results.get(h)
            if p.name != "surge" and res and base:
                other, _ = held(res, limit)
                if other:
                    ratios.append(f"{p.name} {base / other:.1f}x")
        if ratios:
            lines.append("")
            lines.append(f"surge/peer held-rate ratio: {', '.join(ratios)}")
        lines.append("")
    if ">= " in "\n".join(lines):
        lines.append("`>= N`: held at the highest rate tried; ratios involving it are bounds.")
        lines.append("")
    if any(r.warnings for p in servers for rs in p.results.values() for r in rs):
        lines.append("`!`: the generator flagged itself (busy or behind schedule) at that rate.")
        lines.append("")
    for c in checks:
        lines.append(
            f"oha cross-check at {c['rate']} req/s on surge `{c['url'].split('/', 3)[-1]}`: "
            + ", ".join(
                f"{k} {c['surge_ms'][k]} vs {c['oha_ms'].get(k)} ms "
                f"({c['diff_percent'].get(k, '?')}%)"
                for k in ("p50", "p90", "p99")
            )
            + " (surge load vs oha --latency-correction)"
        )
    return "\n".join(lines).rstrip() + "\n"


def _surge_build() -> str:
    """release / debug / ? for the surge being measured (see benchmarks.http.run)."""
    try:
        from benchmarks.http import run as http_run
    except ImportError:
        return "?"
    http_run.SURGE_BIN = SURGE_BIN
    return http_run.surge_build()


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Runs the suite; returns the markdown and setup lines for benchmarks.run."""
    global SURGE_BIN
    ap = argparse.ArgumentParser(prog="python -m benchmarks.http_latency.run", description=__doc__)
    ap.add_argument("--quick", action="store_true", help="3 s per rate, fewer rates")
    ap.add_argument("--servers", default=",".join(SERVERS))
    ap.add_argument("--handlers", default=",".join(HANDLERS))
    ap.add_argument("--duration", type=float, help="seconds per rate (default 10, quick 3)")
    ap.add_argument("--rates", help="comma-separated rates (default 500,1000,...)")
    ap.add_argument("--no-oha", action="store_true", help="skip the oha cross-check")
    ap.add_argument(
        "--refine",
        type=int,
        help=f"bisections between the highest rate held and the next (default {REFINE_STEPS}, "
        "quick 1)",
    )
    ap.add_argument(
        "--surge-bin",
        default=str(SURGE_BIN),
        help="the `surge` command to serve with (e.g. from a venv holding a release wheel)",
    )
    args = ap.parse_args(argv)
    duration = args.duration or (3.0 if args.quick else 10.0)
    refine = args.refine if args.refine is not None else (1 if args.quick else REFINE_STEPS)
    rates = [int(x) for x in args.rates.split(",")] if args.rates else RATES
    if args.quick and not args.rates:
        rates = [500, 1000, 2000, 3000, 4000, 6000]
    names = [s.strip() for s in args.servers.split(",") if s.strip()]
    RATES_USED[:] = rates
    SURGE_BIN = Path(args.surge_bin)
    handlers = [h.strip() for h in args.handlers.split(",") if h.strip()]

    with contextlib.suppress(AttributeError, OSError):
        os.sched_setaffinity(0, {CLIENT_CORE})  # the generator's core
    down = start("downstream", CLIENT_CORE, "", "/sleep25")
    downstream = f"http://127.0.0.1:{down.port}"
    servers = [start(n, SERVER_CORE, downstream, "/sleep50") for n in names]
    checks: list[dict] = []
    try:
        for p in servers:
            p.pause(True)
        for h in handlers:
            sweep(servers, h, rates, duration, refine)
        surge_p = next((p for p in servers if p.name == "surge" and not p.error), None)
        if surge_p is not None and not args.no_oha and "sleep50" in handlers:
            surge_p.pause(False)
            for rate in [1000] if args.quick else [1000, 2000]:
                c = oha_check(surge_p.url("/sleep50"), rate, duration)
                if c is None:
                    _log("oha not installed (cargo install oha): no cross-check")
                    break
                _log(f"oha cross-check: {c}")
                checks.append(c)
            surge_p.pause(True)
    finally:
        for p in [*servers, down]:
            p.stop()

    RESULTS.mkdir(parents=True, exist_ok=True)
    from surge.load import chart

    charts = []
    for h in handlers:
        series = {p.name: p.results[h] for p in servers if p.results.get(h)}
        if series:
            path, own, limit = HANDLERS[h]
            png = RESULTS / f"http_latency-{h}.png"
            chart.percentiles_vs_rate(
                series,
                png,
                title=f"seed 001: GET {path} ({own:g} ms handler), 1 worker, open model",
                limit_ms=limit,
            )
            charts.append(png.name)
    data = {
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "duration_per_rate_s": duration,
        "rates": rates,
        "servers": {
            p.name: {
                "description": DESCRIPTIONS.get(p.name, ""),
                "error": p.error,
                "results": {
                    h: [r.to_dict() | {"series": None} for r in rs] for h, rs in p.results.items()
                },
            }
            for p in servers
        },
        "oha_checks": checks,
        "charts": charts,
    }
    (RESULTS / "http_latency.json").write_text(json.dumps(data, indent=1))
    md = _md(servers, handlers, checks)
    (RESULTS / "http_latency.md").write_text(md)
    print(md)
    build = _surge_build()
    setup = [
        f"seed 001 (surge's native module: {build} build): one worker per server on core "
        f"{SERVER_CORE}; generator (surge load, open "
        f"model, 1 process) and the downstream surge service on core {CLIENT_CORE}; "
        f"{duration:g} s per rate after a {WARMUP:g} s warm-up at that rate, rates {rates[0]}.. "
        f"until p99 > {STOP_FACTOR}x the handler, then {refine} bisection(s) between the "
        "highest rate held and the next",
        *(f"{n}: {DESCRIPTIONS[n]}" for n in names if n in DESCRIPTIONS),
    ]
    return {"markdown": md, "setup_lines": setup, "charts": charts}


if __name__ == "__main__":
    main()
