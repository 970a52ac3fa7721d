"""The load generator measured against independent tools, side by side.

* accuracy: ``surge load``, vegeta (Go, exact percentiles) and oha (Rust/tokio,
  ``--latency-correction``), all open model with the same cap of
  ``OPEN_CONNECTIONS`` keep-alive connections, at 500 and 5000 req/s on a 0.2 ms
  route (``/sleep/200``: a thread sleeps 200 us) and a 10 ms route of one surge
  worker (``--routes`` adds ``/``, ~0.05 ms, where the generators' own costs
  are most of what they report); p50/p90/p99
  of each and their ratios, plus surge's own schedule lag. How each times a
  request: surge from its due time (its schedule lag included, reported apart);
  oha from when its scheduler task released it (a tokio timer: released in
  bursts at millisecond ticks, the wait for a free connection included); vegeta
  from when a worker goroutine picked it up. With tcpdump (``wire.py``), each
  tool's runs are also captured on lo and the request-to-response time of the
  packets (the server's whole share, the least any client can measure) is
  reported beside it: what a tool reports above the wire is its own cost;
* round trip: closed model, ONE connection (one request at a time: no schedule,
  so nothing but the client's own cost between the two), ``surge load -c 1``
  against ``wrk -t1 -c1 --latency`` on the fast route: p50/p90/p99;
* capacity: one ``surge load`` process (closed model, 50 connections) against
  ``wrk -t1 -c50`` on the same nginx (one worker): requests per second, and
  each generator's CPU per request; the same over HTTPS (nginx with OpenSSL, a
  self-signed certificate made for the run: ``surge load --insecure``, rustls;
  wrk, OpenSSL), where the generators' own TLS costs differ.

Sides alternate round by round (surge, peer, surge, peer, ...), medians are
compared; the generator is pinned to core 0 and the server to core 1 with
``taskset``. On a shared machine other processes preempt whichever side runs and
their pauses swamp sub-millisecond figures, so when it may (root, ``chrt``) the
suite runs the server and BOTH generators under ``chrt -f 20`` (SCHED_FIFO;
``--no-realtime`` turns it off); the setup line says which. vegeta is installed
with ``go install`` when missing; a tool that cannot be had is skipped with a
message saying why; oha likewise with ``cargo install oha --locked``.

    python -m benchmarks.loadgen.run [--quick] [--rounds 3] [--duration 5]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from benchmarks.loadgen import wire

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
RESULTS = ROOT / "bench-results"
CLIENT_CORE, SERVER_CORE = "0", "1"
#: Prefix of every client and server command (["chrt", "-f", "20"] in realtime mode).
RT: list[str] = []
VEGETA = "github.com/tsenart/vegeta/v12@latest"
#: Connections every open-model generator may use (surge -c, oha -c, vegeta
#: -max-connections): enough for 5000 req/s on the 10 ms route (~50 in flight).
OPEN_CONNECTIONS = 100

NGINX_CONF = """\
worker_processes 1;
pid {d}/nginx.pid;
error_log {d}/error.log warn;
events {{ worker_connections 4096; }}
http {{
    access_log off;
    keepalive_requests 1000000000;
    client_body_temp_path {d}/cb; proxy_temp_path {d}/px; fastcgi_temp_path {d}/fc;
    uwsgi_temp_path {d}/uw; scgi_temp_path {d}/sc;
    server {{
        listen 127.0.0.1:{port};
        location = / {{ default_type text/plain; return 200 "Hello, world!"; }}
    }}
    server {{
        listen 127.0.0.1:{tls_port} ssl;
        ssl_certificate {d}/cert.pem;
        ssl_certificate_key {d}/key.pem;
        location = / {{ default_type text/plain; return 200 "Hello, world!"; }}
    }}
}}
"""


def _log(msg: str) -> None:
    print(f"[loadgen] {msg}", file=sys.stderr, flush=True)


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait(port: int, proc: subprocess.Popen) -> None:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError("server did not listen")


@contextmanager
def _server(argv: list[str], port: int, cwd: Path) -> Iterator[None]:
    proc = subprocess.Popen(
        [*RT, "taskset", "-c", SERVER_CORE, *argv],
        cwd=cwd,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        _wait(port, proc)
        yield
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def find_vegeta() -> str | None:
    """vegeta on PATH or in GOPATH/bin, else `go install`ed there; None if it cannot be had."""
    gobin = Path(os.environ.get("GOPATH", Path.home() / "go")) / "bin" / "vegeta"
    found = shutil.which("vegeta") or (str(gobin) if gobin.exists() else None)
    if found:
        return found
    go = shutil.which("go") or "/usr/local/go/bin/go"
    if not os.path.exists(go):
        return None
    _log(f"installing vegeta: go install {VEGETA}")
    r = subprocess.run([go, "install", VEGETA], capture_output=True, text=True, timeout=600)
    if r.returncode != 0:
        _log(f"vegeta could not be installed: {r.stderr.strip()[-300:]}")
        return None
    return str(gobin) if gobin.exists() else None


def find_oha() -> str | None:
    """oha on PATH or in ~/.cargo/bin, else `cargo install`ed there; None if it cannot be had."""
    cargo_bin = Path(os.environ.get("CARGO_HOME", Path.home() / ".cargo")) / "bin"
    found = shutil.which("oha") or (
        str(cargo_bin / "oha") if (cargo_bin / "oha").exists() else None
    )
    if found:
        return found
    cargo = shutil.which("cargo") or str(cargo_bin / "cargo")
    if not os.path.exists(cargo):
        return None
    _log("installing oha: cargo install oha --locked (a few minutes)")
    r = subprocess.run(
        ["nice", "-n", "10", cargo, "install", "oha", "--locked"],
        capture_output=True,
        text=True,
        timeout=1800,
    )
    if r.returncode != 0:
        _log(f"oha could not be installed: {r.stderr.strip()[-300:]}")
        return None
    return str(cargo_bin / "oha") if (cargo_bin / "oha").exists() else None


def surge_rate(url: str, rate: float, duration: float) -> dict[str, Any]:
    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        argv = [sys.executable, "-m", "surge", "load", url, "--rate", f"{rate:g}"]
        argv += ["-c", str(OPEN_CONNECTIONS), "-d", f"{duration:g}", "--warmup", "1"]
        argv += ["-q", "--json", out.name]
        subprocess.run([*RT, "taskset", "-c", CLIENT_CORE, *argv], check=True, capture_output=True)
        data = json.loads(Path(out.name).read_text())
    lat, lag = data["latency_ms"], data["generator"]["schedule_lag_ms"] or {}
    return {
        "p50": lat["p50"],
        "p90": lat["p90"],
        "p99": lat["p99"],
        "lag_p50": lag.get("p50"),
        "lag_p99": lag.get("p99"),
        "errors": sum(data["errors"].values()),
    }


def vegeta_rate(vegeta: str, url: str, rate: float, duration: float) -> dict[str, Any]:
    target = f"GET {url}\n"
    attack = [vegeta, "attack", f"-rate={rate:g}", f"-duration={duration:g}s", "-keepalive=true"]
    attack.append(f"-max-connections={OPEN_CONNECTIONS}")
    with tempfile.NamedTemporaryFile(suffix=".bin") as out:
        # The same 1 s warm-up as surge's --warmup, not recorded.
        warm = [vegeta, "attack", f"-rate={rate:g}", "-duration=1s"]
        subprocess.run(
            [*RT, "taskset", "-c", CLIENT_CORE, *warm],
            input=target.encode(),
            check=True,
            capture_output=True,
        )
        res = subprocess.run(
            [*RT, "taskset", "-c", CLIENT_CORE, *attack],
            input=target.encode(),
            check=True,
            capture_output=True,
        )
        Path(out.name).write_bytes(res.stdout)
        rep = subprocess.run(
            [vegeta, "report", "-type=json", out.name], check=True, capture_output=True, text=True
        )
    data = json.loads(rep.stdout)
    lat = data["latencies"]
    return {
        "p50": lat["50th"] / 1e6,
        "p90": lat["90th"] / 1e6,
        "p99": lat["99th"] / 1e6,
        "errors": data["requests"] - round(data["success"] * data["requests"]),
    }


def oha_rate(oha: str, url: str, rate: float, duration: float) -> dict[str, Any]:
    """oha's open model: `-q` requests per second over `-c` connections, each
    request timed from when oha's schedule released it (`--latency-correction`:
    a request that waits for a free connection counts its wait, as surge's do)."""
    # One tokio worker thread on the one pinned core (oha sizes its runtime by
    # the physical cores, not the affinity mask).
    env = {**os.environ, "TOKIO_WORKER_THREADS": "1"}
    base = [oha, "--no-tui", "-q", f"{rate:g}", "-c", str(OPEN_CONNECTIONS)]
    base += ["--latency-correction", "-w", "--output-format", "json"]
    pin = [*RT, "taskset", "-c", CLIENT_CORE]
    # The same 1 s warm-up as surge's --warmup, not recorded.
    subprocess.run([*pin, *base, "-z", "1s", url], env=env, check=True, capture_output=True)
    res = subprocess.run(
        [*pin, *base, "-z", f"{duration:g}s", url],
        env=env,
        check=True,
        capture_output=True,
        text=True,
    )
    data = json.loads(res.stdout)
    lat = data["latencyPercentiles"]
    total = sum(data.get("statusCodeDistribution", {}).values())
    errors = sum(data.get("errorDistribution", {}).values())
    ok = sum(n for code, n in data.get("statusCodeDistribution", {}).items() if code < "400")
    return {
        "p50": lat["p50"] * 1e3,
        "p90": lat["p90"] * 1e3,
        "p99": lat["p99"] * 1e3,
        "errors": errors + total - ok,
    }


def surge_capacity(url: str, duration: float) -> tuple[float, float]:
    """(requests per second, generator CPU microseconds per request)."""
    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        argv = [sys.executable, "-m", "surge", "load", url, "-c", "50", "-d", f"{duration:g}"]
        argv += ["--warmup", "1", "-q", "--json", out.name]
        argv += ["--insecure"] if url.startswith("https:") else []  # self-signed
        subprocess.run([*RT, "taskset", "-c", CLIENT_CORE, *argv], check=True, capture_output=True)
        data = json.loads(Path(out.name).read_text())
    rate = float(data["achieved_rate"])
    # The loop's CPU covers the 1 s warm-up too, which runs at the same rate
    # (closed model): requests made = rate x (duration + 1).
    cpu = float(data["generator"]["cpu_seconds"])
    return rate, cpu / (rate * (duration + 1)) * 1e6


def wrk_capacity(url: str, duration: float) -> tuple[float, float]:
    """(requests per second, wrk's CPU microseconds per request, from perf stat's
    task-clock when perf is there, else NaN)."""
    argv = ["wrk", "-t1", "-c50", f"-d{duration:g}s", url]
    with tempfile.NamedTemporaryFile(suffix=".perf") as stat:
        perf = ["perf", "stat", "-x,", "-e", "task-clock", "-o", stat.name]
        use_perf = shutil.which("perf") is not None
        out = subprocess.run(
            [*RT, "taskset", "-c", CLIENT_CORE, *(perf if use_perf else []), *argv],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        m = re.search(r"Requests/sec:\s+([\d.]+)", out)
        if not m:
            raise RuntimeError(f"no Requests/sec in wrk's output:\n{out}")
        rate = float(m.group(1))
        cpu_ms = float("nan")
        if use_perf:
            for line in Path(stat.name).read_text().splitlines():
                f = line.split(",")
                if len(f) > 2 and f[2].startswith("task-clock") and f[0]:
                    cpu_ms = float(f[0])
    return rate, cpu_ms * 1e3 / (rate * duration)


_WRK_UNITS = {"us": 1e-3, "ms": 1.0, "s": 1e3}


def wrk_latency(url: str, duration: float) -> dict[str, float]:
    argv = ["wrk", "-t1", "-c1", f"-d{duration:g}s", "--latency", url]
    out = subprocess.run(
        [*RT, "taskset", "-c", CLIENT_CORE, *argv], check=True, capture_output=True, text=True
    ).stdout
    got = {}
    for p in ("50", "90", "99"):
        m = re.search(rf"^\s+{p}%\s+([\d.]+)(us|ms|s)\s*$", out, re.M)
        if not m:
            raise RuntimeError(f"no {p}% in wrk's output:\n{out}")
        got[f"p{p}"] = float(m.group(1)) * _WRK_UNITS[m.group(2)]
    return got


def surge_latency(url: str, duration: float) -> dict[str, float]:
    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        argv = [sys.executable, "-m", "surge", "load", url, "-c", "1", "-d", f"{duration:g}"]
        argv += ["--warmup", "1", "-q", "--json", out.name]
        subprocess.run([*RT, "taskset", "-c", CLIENT_CORE, *argv], check=True, capture_output=True)
        lat = json.loads(Path(out.name).read_text())["latency_ms"]
    return {k: lat[k] for k in ("p50", "p90", "p99")}


def round_trip(rounds: int, duration: float) -> tuple[str, dict[str, Any]]:
    if not shutil.which("wrk"):
        return "round trip: skipped, wrk is not installed (make system-deps)\n", {}
    port = _port()
    argv = [sys.executable, "-m", "surge", "serve", "app:app", "--port", str(port)]
    sides: dict[str, list[dict[str, float]]] = {"surge": [], "wrk": []}
    with _server(argv, port, HERE):
        url = f"http://127.0.0.1:{port}/"
        for i in range(rounds):
            _log(f"round trip round {i + 1}/{rounds}")
            sides["surge"].append(surge_latency(url, duration))
            sides["wrk"].append(wrk_latency(url, duration))
    med = {side: {p: _med(rows, p) for p in ("p50", "p90", "p99")} for side, rows in sides.items()}
    ratio = " / ".join(
        f"{(med['surge'][p] or 0) / med['wrk'][p]:.2f}" if med["wrk"][p] else "-"
        for p in ("p50", "p90", "p99")
    )
    md = (
        "| closed model, 1 connection, route / | p50 ms | p90 ms | p99 ms |\n|---|---:|---:|---:|\n"
        + "".join(
            f"| {side} | {m['p50']} | {m['p90']} | {m['p99']} |\n"
            for side, m in (("surge load -c 1", med["surge"]), ("wrk -t1 -c1", med["wrk"]))
        )
        + f"\nsurge / wrk at p50 / p90 / p99: {ratio}\n"
    )
    return md, {"sides": sides, "median": med}


def _med(rows: list[dict[str, Any]], key: str) -> float | None:
    vals = [r[key] for r in rows if r.get(key) is not None]
    return round(statistics.median(vals), 3) if vals else None


#: Routes of the accuracy comparison, by path: what each takes on the server.
ROUTE_LABELS = {
    "/": "fast (~0.05 ms)",
    "/sleep/200": "0.2 ms sleep in a thread",
    "/slow/10": "10 ms",
}
#: The default routes: the issue's 0.2 ms route and the 10 ms one. ``/`` (the
#: server's own minimum, ~0.05 ms on the wire) mostly measures each generator's
#: own cost per request; ``--routes /,/sleep/200,/slow/10`` adds it.
ROUTES = ("/sleep/200", "/slow/10")


def accuracy(
    rounds: int, duration: float, rates: list[float], routes: tuple[str, ...] = ROUTES
) -> tuple[str, list[dict]]:
    peers: dict[str, Any] = {}
    vegeta, oha = find_vegeta(), find_oha()
    if vegeta is not None:
        peers["vegeta"] = lambda url, rate, d: vegeta_rate(vegeta, url, rate, d)
    if oha is not None:
        peers["oha"] = lambda url, rate, d: oha_rate(oha, url, rate, d)
    if not peers:
        return "accuracy: skipped, neither vegeta (go) nor oha (cargo) could be installed\n", []
    port = _port()
    argv = [sys.executable, "-m", "surge", "serve", "app:app", "--port", str(port)]
    out: list[dict[str, Any]] = []
    with _server(argv, port, HERE):
        for path in routes:
            label = ROUTE_LABELS.get(path, path)
            url = f"http://127.0.0.1:{port}{path}"
            for rate in rates:
                sides: dict[str, list[dict[str, Any]]] = {"surge": [], **{p: [] for p in peers}}
                for i in range(rounds):
                    _log(f"accuracy {label} {rate:g}/s round {i + 1}/{rounds}")
                    # surge, then each peer, in turn: every side sees the same drift.
                    measures = {"surge": surge_rate, **peers}
                    for name, measure in measures.items():
                        sides[name].append(_on_wire(measure, port, url, rate, duration))
                row: dict[str, Any] = {"route": label, "rate": rate}
                for side, rows in sides.items():
                    for k in (*PS, *(f"wire_{p}" for p in PS), "lag_p50", "lag_p99", "errors"):
                        row[f"{side}_{k}"] = _med(rows, k)
                row["rounds"] = sides
                out.append(row)
    names = list(peers)
    head = "| route | rate | surge p50 / p90 / p99 |"
    head += "".join(f" {n} p50 / p90 / p99 | surge / {n} |" for n in names)
    head += " surge lag p50 / p99 (us) |"
    lines = [head, "|---|---:|---|" + "---|---|" * len(names) + "---|"]

    def trio(r: dict[str, Any], side: str) -> str:
        return " / ".join(f"{r[f'{side}_{p}']:.3f}" for p in ("p50", "p90", "p99"))

    for r in out:
        cells = [r["route"], f"{r['rate']:g}", trio(r, "surge")]
        for n in names:
            cells.append(trio(r, n))
            cells.append(
                " / ".join(
                    f"{r[f'surge_{p}'] / r[f'{n}_{p}']:.2f}" if r[f"{n}_{p}"] else "-"
                    for p in ("p50", "p90", "p99")
                )
            )
        lag = "-"
        if r["surge_lag_p50"] is not None:
            lag = f"{r['surge_lag_p50'] * 1000:.0f} / {r['surge_lag_p99'] * 1000:.0f}"
        cells.append(lag)
        lines.append("| " + " | ".join(cells) + " |")
    if out and out[0].get("surge_wire_p50") is not None:
        lines += [
            "",
            "On the wire (tcpdump on lo during each tool's own runs: request packet to "
            "response packet, the server's whole share; ms, p50 / p90 / p99), and what "
            "each tool reported above it at p50:",
            "",
            "| route | rate |" + "".join(f" {n} wire | {n} own p50 |" for n in ["surge", *names]),
            "|---|---:|" + "---|---:|" * (1 + len(names)),
        ]
        for r in out:
            cells = [r["route"], f"{r['rate']:g}"]
            for n in ["surge", *names]:
                w = [r[f"{n}_wire_{p}"] for p in PS]
                cells.append(" / ".join("-" if v is None else f"{v:.3f}" for v in w))
                own = None if w[0] is None else (r[f"{n}_p50"] - w[0]) * 1000
                cells.append("-" if own is None else f"+{own:.0f} us")
            lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n", out


PS = ("p50", "p90", "p99")


def _on_wire(measure: Any, port: int, url: str, rate: float, duration: float) -> dict[str, Any]:
    """One tool's run; with tcpdump, also the wire latencies of that run."""
    if not wire.available():
        return measure(url, rate, duration)  # type: ignore[no-any-return]
    with tempfile.TemporaryDirectory(prefix="loadgen-wire-") as d:
        pcap = Path(d) / "run.pcap"
        with wire.capture(port, pcap, SERVER_CORE):
            got = measure(url, rate, duration)
        got.update(
            {f"wire_{k}": v for k, v in wire.percentiles(wire.latencies(pcap, port)).items()}
        )
    return got  # type: ignore[no-any-return]


def capacity(rounds: int, duration: float) -> tuple[str, dict[str, Any]]:
    nginx = shutil.which("nginx") or "/usr/sbin/nginx"
    if not os.path.exists(nginx) or not shutil.which("wrk"):
        return "capacity: skipped, nginx or wrk is not installed (make system-deps)\n", {}
    port, tls_port = _port(), _port()
    with tempfile.TemporaryDirectory(prefix="loadgen-nginx-") as d:
        subprocess.run(
            [
                *("openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2"),
                *("-subj", "/CN=127.0.0.1", "-keyout", f"{d}/key.pem", "-out", f"{d}/cert.pem"),
            ],
            check=True,
            capture_output=True,
        )
        conf = Path(d) / "nginx.conf"
        conf.write_text(NGINX_CONF.format(d=d, port=port, tls_port=tls_port))
        argv = [nginx, "-p", d, "-e", f"{d}/error.log", "-c", str(conf), "-g", "daemon off;"]
        urls = {"http": f"http://127.0.0.1:{port}/", "https": f"https://127.0.0.1:{tls_port}/"}
        sides = {s: {"surge": [], "wrk": []} for s in urls}
        cpu = {s: {"surge": [], "wrk": []} for s in urls}
        with _server(argv, port, Path(d)):
            for i in range(rounds):
                for scheme, url in urls.items():
                    _log(f"capacity {scheme} round {i + 1}/{rounds}")
                    for side, measure in (("surge", surge_capacity), ("wrk", wrk_capacity)):
                        rate, us = measure(url, duration)
                        sides[scheme][side].append(rate)
                        cpu[scheme][side].append(us)
    md = (
        "| scheme | generator (1 process, 50 connections, core 0) | req/s (median) | rounds "
        "| CPU us / request (median) |\n"
        "|---|---|---:|---|---:|\n"
    )
    data: dict[str, Any] = {}
    for scheme in urls:
        sd, cp = sides[scheme], cpu[scheme]
        s, w = statistics.median(sd["surge"]), statistics.median(sd["wrk"])
        cs, cw = statistics.median(cp["surge"]), statistics.median(cp["wrk"])
        for name, side, rate, us in (
            ("surge load -c 50", "surge", s, cs),
            ("wrk -t1 -c50", "wrk", w, cw),
        ):
            runs = ", ".join(f"{v:.0f}" for v in sd[side])
            md += f"| {scheme} | {name} | {rate:.0f} | {runs} | {us:.2f} |\n"
        data[scheme] = {
            "surge": sd["surge"],
            "wrk": sd["wrk"],
            "ratio": s / w,
            "cpu_us_per_request": cp,
            "cpu_ratio": cw / cs,
        }
    md += "\n" + "; ".join(
        f"{scheme}: surge / wrk **{v['ratio']:.2f}x** by rate, {v['cpu_ratio']:.2f}x by CPU "
        "per request"
        for scheme, v in data.items()
    )
    md += (
        " (nginx, 1 worker, core 1; surge's CPU from its own report, wrk's from perf stat; "
        "https: nginx's OpenSSL with a self-signed RSA-2048 certificate, surge load "
        "--insecure)\n"
    )
    # The plain figures stay at the top level, as before.
    return md, {**data["http"], "https": data["https"]}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Runs the suite; returns the markdown and setup lines for benchmarks.run."""
    ap = argparse.ArgumentParser(prog="python -m benchmarks.loadgen.run", description=__doc__)
    ap.add_argument("--quick", action="store_true", help="3 rounds of 3 s")
    ap.add_argument("--rounds", type=int, help="rounds per side (default 3)")
    ap.add_argument("--duration", type=float, help="seconds per round (default 10, quick 3)")
    ap.add_argument("--rates", default="500,5000", help="open-model rates (default 500,5000)")
    ap.add_argument(
        "--routes",
        default=",".join(ROUTES),
        help=f"accuracy routes (default {','.join(ROUTES)}; / is the fastest)",
    )
    ap.add_argument(
        "--only", default="accuracy,rtt,capacity", help="any of accuracy, rtt, capacity"
    )
    ap.add_argument("--no-realtime", action="store_true", help="no chrt -f for either side")
    args = ap.parse_args(argv)
    realtime = not args.no_realtime and os.geteuid() == 0 and shutil.which("chrt") is not None
    RT[:] = ["chrt", "-f", "20"] if realtime else []
    rounds = max(3, args.rounds or 3)
    duration = args.duration or (3.0 if args.quick else 10.0)
    rates = [float(r) for r in args.rates.split(",") if r.strip()]
    RESULTS.mkdir(parents=True, exist_ok=True)
    parts, data = ["### Load generator\n"], {}
    if "accuracy" in args.only:
        routes = tuple(r.strip() for r in args.routes.split(",") if r.strip())
        md, rows = accuracy(rounds, duration, rates, routes)
        parts += [
            "Latency (ms) from `surge load`, vegeta and oha, same server, alternating "
            f"({OPEN_CONNECTIONS} connections at most for each):\n",
            md,
        ]
        data["accuracy"] = rows
    if "rtt" in args.only:
        md, rtt = round_trip(rounds, duration)
        parts += ["Round trip, one request at a time (surge load vs wrk --latency):\n", md]
        data["round_trip"] = rtt
    if "capacity" in args.only:
        md, cap = capacity(rounds, duration)
        parts += ["Capacity against nginx:\n", md]
        data["capacity"] = cap
    md = "\n".join(parts)
    (RESULTS / "loadgen.json").write_text(json.dumps(data, indent=1))
    (RESULTS / "loadgen.md").write_text(md)
    print(md)
    setup = [
        f"load generator: client on core {CLIENT_CORE}, server on core {SERVER_CORE}; "
        f"{rounds} alternating rounds of {duration:g} s (+1 s warm-up) per side; accuracy on "
        f"one `surge serve` worker (routes {', '.join(args.routes.split(','))}) at "
        f"{', '.join(f'{r:g}' for r in rates)} req/s vs vegeta and oha (--latency-correction), "
        f"{OPEN_CONNECTIONS} connections at most each; round trip: -c 1 vs wrk -t1 -c1 "
        "--latency; capacity: closed model, 50 "
        "connections vs wrk -t1 -c50 on nginx (1 worker), over http and https; "
        + (
            "server and both generators under chrt -f 20 (SCHED_FIFO)"
            if realtime
            else "normal priority"
        ),
    ]
    return {"markdown": md, "setup_lines": setup}


if __name__ == "__main__":
    main()
