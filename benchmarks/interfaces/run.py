"""Interfaces benchmark: surge serving the apps people already have, beside the peers.

Workloads (one worker each; server pinned to core 1, ``wrk -t1 -c100`` to core 0):

* ``raw_asgi``  a raw ASGI hello: surge (``--interface asgi``), granian, uvicorn (httptools, uvloop)
* ``fastapi``   FastAPI hello (JSON): surge, granian, uvicorn
* ``flask``     Flask hello through WSGI: surge (``--interface wsgi``, 32 threads),
                granian (``--interface wsgi``), gunicorn (gthread, 8 threads)
* ``https``     JSON over HTTPS against the same server's plain HTTP: surge's own App
                (rustls, the default, and Python's ssl), uvicorn with a raw ASGI app
* ``https_load`` the same HTTPS comparison (surge plain / rustls, uvicorn plain / TLS)
                measured by ``surge load`` (closed model, 100 connections, one process on
                core 0, rustls client) instead of wrk. Why a second table: wrk's own TLS
                cost (OpenSSL, ~12.9 us per request against ~9.1 us plain) holds one wrk
                core near 77k req/s over surge's TLS (wrk at 95-97 % of its core), so
                wrk's ``https`` ratio measures wrk once the server is fast; the client's
                CPU is reported with each figure (a ratio is fair only while the client
                stays below 100 % of its core in the TLS runs)
* ``websocket`` WebSocket echo, 1000 connections, 16-byte text messages, one in flight per
                connection; ``websocket_inflight``: 8 in flight per connection. Messages/s
                from ``wsload`` (Rust, tokio-tungstenite; built on first use, pinned to core 0).
                surge's own App (``@app.websocket``) and surge ASGI are skipped while this
                build has no WebSocket support; uvicorn (``--ws websockets``) and granian
                serve the same raw ASGI echo app

All servers of a workload are started first and checked; then the runs are
interleaved round by round (every server once per round, in an order that flips
every round), the others paused
(SIGSTOP), and each figure is the median over ``--runs`` rounds. Ratios are
surge's figure over the peer's from the same rounds.

    python -m benchmarks.interfaces.run [--quick] [--runs N] [--seconds S] [--workloads a,b]

Results: ``bench-results/interfaces.json`` and the markdown the suite returns.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import os
import signal
import statistics
import subprocess
import tempfile
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from benchmarks import venv as bvenv
from benchmarks._lib import cpu_seconds, machine_busy
from benchmarks._lib import free_port as _free_port

# SIGSTOP/SIGCONT of a server's process group (only `.proc` is used), CPU accounting.
from benchmarks.http.procfs import _children_cpu_s
from benchmarks.http.run import pause

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "bench-results"
SURGE = ROOT / ".venv" / "bin" / "surge"
APPS = "benchmarks.interfaces.apps"
SERVER_CORE, CLIENT_CORE = "1", "0"
WSLOAD_DIR = Path(__file__).resolve().parent / "wsload"
WSLOAD = WSLOAD_DIR / "target" / "release" / "wsload"
WS_CONNECTIONS, WS_SIZE = 1000, 16
NO_WS = "surge has no WebSocket support in this build"


@dataclass
class Server:
    name: str
    argv: list[str]
    scheme: str = "http"
    group: str | None = None  # the bench venv group it needs
    ws_inflight: int = 0  # > 0: a WebSocket echo server, loaded by wsload
    port: int = 0
    proc: subprocess.Popen | None = None
    runs: list[float] = field(default_factory=list)
    errors: int = 0
    latency: list[dict] = field(default_factory=list)

    cpu: list[dict] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"{self.scheme}://127.0.0.1:{self.port}/"

    @property
    def ws_url(self) -> str:
        return f"ws://127.0.0.1:{self.port}/ws"

    def cpu_s(self) -> float:
        """CPU time of the server's process group (master and workers)."""
        if not self.proc:
            return 0.0
        total = 0.0
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                with contextlib.suppress(OSError):
                    if os.getpgid(int(entry)) == self.proc.pid:
                        total += cpu_seconds(int(entry))
        return total


def _peer(name: str) -> str:
    return str(bvenv.VENV / "bin" / name)


def _certs() -> tuple[str, str]:
    """A self-signed certificate for 127.0.0.1, made for this run."""
    d = Path(tempfile.mkdtemp(prefix="surge-bench-tls-"))
    cert, key = d / "cert.pem", d / "key.pem"
    subprocess.run(
        [
            *("openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2"),
            *("-subj", "/CN=127.0.0.1", "-keyout", str(key), "-out", str(cert)),
        ],
        check=True,
        capture_output=True,
    )
    return str(cert), str(key)


def workloads() -> dict[str, list[Server]]:
    s = [str(SURGE), "serve"]
    granian = [_peer("granian"), "--workers", "1", "--runtime-threads", "1"]
    # granian's own task implementation for the HTTP workloads: its fastest for ASGI
    # apps on the bench venv's Python 3.11 (78.7k -> 72.0k instructions per raw ASGI
    # hello in its worker, callgrind; FastAPI apps work with it). granian falls
    # back to asyncio tasks by itself on Python >= 3.12.
    granian_http = [*granian, "--task-impl", "rust"]
    # As granian's own benchmarks run it (--no-ws, --log-level warning) and as the
    # clients speak: HTTP/1 only, uvloop named rather than auto-detected. Measured
    # against the bare flags (interleaved, loaded machine): within noise.
    granian_http += ["--loop", "uvloop", "--http", "1", "--no-ws", "--log-level", "warning"]
    uvicorn = [_peer("uvicorn"), "--http", "httptools", "--loop", "uvloop"]
    uvicorn += ["--no-access-log", "--log-level", "warning"]
    cert, key = _certs()
    tls = ["--ssl-certfile", cert, "--ssl-keyfile", key]
    https = [
        Server("surge plain", [*s, f"{APPS}:surge_json"]),
        Server("surge rustls", [*s, f"{APPS}:surge_json", *tls], scheme="https"),
        Server(
            "surge python-ssl",
            [*s, f"{APPS}:surge_json", *tls, "--ssl-backend", "python"],
            scheme="https",
        ),
        Server("uvicorn plain", [*uvicorn, f"{APPS}:json_asgi"], group="uvicorn"),
        Server(
            "uvicorn tls",
            [*uvicorn, f"{APPS}:json_asgi", *tls],
            scheme="https",
            group="uvicorn",
        ),
    ]
    return {
        "raw_asgi": [
            Server("surge", [*s, f"{APPS}:raw_asgi", "--interface", "asgi"]),
            Server(
                "granian",
                [*granian_http, "--interface", "asgi", f"{APPS}:raw_asgi"],
                group="granian",
            ),
            Server("uvicorn", [*uvicorn, f"{APPS}:raw_asgi"], group="uvicorn"),
        ],
        "fastapi": [
            Server("surge", [*s, f"{APPS}:fastapi_app", "--interface", "asgi"]),
            Server(
                "granian",
                [*granian_http, "--interface", "asgi", f"{APPS}:fastapi_app"],
                group="fastapi",
            ),
            Server("uvicorn", [*uvicorn, f"{APPS}:fastapi_app"], group="fastapi"),
        ],
        "flask": [
            Server("surge", [*s, f"{APPS}:flask_app", "--interface", "wsgi"]),
            Server(
                "granian", [*granian, "--interface", "wsgi", f"{APPS}:flask_app"], group="flask"
            ),
            Server(
                "gunicorn",
                [
                    _peer("gunicorn"),
                    "-k",
                    "gthread",
                    "--threads",
                    "8",
                    "-w",
                    "1",
                    f"{APPS}:flask_app",
                ],
                group="flask",
            ),
        ],
        "https": https,
        # The same servers but Python's ssl, as fresh objects (they keep their runs).
        "https_load": [
            Server(v.name, v.argv, v.scheme, v.group) for v in https if v.name != "surge python-ssl"
        ],
        "websocket": _ws_servers(s, granian, uvicorn, 1),
        "websocket_inflight": _ws_servers(s, granian, uvicorn, 8),
    }


def _ws_servers(s: list[str], granian: list[str], uvicorn: list[str], n: int) -> list[Server]:
    echo = f"{APPS}:ws_echo_asgi"
    return [
        Server("surge App", [*s, f"{APPS}:surge_ws"], ws_inflight=n),
        Server("surge asgi", [*s, echo, "--interface", "asgi"], ws_inflight=n),
        Server("granian", [*granian, "--interface", "asgi", echo], group="granian", ws_inflight=n),
        Server(
            "uvicorn websockets",
            [*uvicorn, "--ws", "websockets", echo],
            group="websockets",
            ws_inflight=n,
        ),
    ]


def _bind_args(srv: Server) -> list[str]:
    if srv.argv[0].endswith("gunicorn"):
        return ["-b", f"127.0.0.1:{srv.port}"]
    return ["--host", "127.0.0.1", "--port", str(srv.port)]


def _log_path(srv: Server, log_dir: Path) -> Path:
    return log_dir / f"{srv.name.replace(' ', '_')}.log"


def start(srv: Server, log_dir: Path) -> str | None:
    """Starts the server; None once it answers 200, else why not."""
    if srv.group and not bvenv.have(srv.group):
        return f"{srv.group} is not installed in {bvenv.VENV.name}"
    srv.port = _free_port()
    log = open(_log_path(srv, log_dir), "wb")  # noqa: SIM115
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    argv = ["taskset", "-c", SERVER_CORE, *srv.argv, *_bind_args(srv)]
    srv.proc = subprocess.Popen(
        argv, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True
    )
    import ssl

    ctx = ssl._create_unverified_context()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if srv.proc.poll() is not None:
            return f"exited with {srv.proc.returncode}"
        with (
            contextlib.suppress(OSError),
            urllib.request.urlopen(srv.url, timeout=2, context=ctx) as r,
        ):
            body = r.read()
            # every app of the suite answers "/" with a body holding this greeting
            if r.status == 200 and b"Hello, World!" in body:
                return None
            return f"wrong answer: {r.status} {body[:80]!r}"
        time.sleep(0.2)
    return "did not answer within 30 s"


def ensure_wsload() -> str | None:
    """Builds the Rust load client on first use; None when ready, else why not."""
    if WSLOAD.exists():
        return None
    r = subprocess.run(
        ["cargo", "build", "--release", "--target-dir", str(WSLOAD_DIR / "target")],
        cwd=WSLOAD_DIR,
        capture_output=True,
        text=True,
    )
    return None if r.returncode == 0 else f"wsload build failed: {r.stderr[-300:]}"


def wsload(url: str, seconds: float, connections: int, inflight: int) -> dict:
    """One wsload run: messages/s, errors and latency percentiles (or {"error": ...})."""
    argv = ["taskset", "-c", CLIENT_CORE, str(WSLOAD), "--url", url]
    argv += ["--connections", str(connections), "--seconds", str(seconds)]
    argv += ["--inflight", str(inflight), "--size", str(WS_SIZE)]
    try:
        r = subprocess.run(argv, capture_output=True, text=True, timeout=seconds + 90)
    except subprocess.TimeoutExpired:
        return {"error": "wsload timed out"}
    try:
        return json.loads(r.stdout)
    except json.JSONDecodeError:
        return {"error": f"wsload exited with {r.returncode}: {r.stderr[-200:]}"}


def check_ws(srv: Server) -> str | None:
    """None when the server echoes over WebSocket, else why not."""
    res = wsload(srv.ws_url, 0.5, 2, 1)
    if res.get("messages", 0) > 0:
        return None
    if srv.name.startswith("surge"):
        return NO_WS
    return f"no echo: {res}"


def stop(srv: Server) -> None:
    if srv.proc and srv.proc.poll() is None:
        pause(srv, False)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(srv.proc.pid, signal.SIGTERM)
        try:
            srv.proc.wait(10)
        except subprocess.TimeoutExpired:
            os.killpg(srv.proc.pid, signal.SIGKILL)
            srv.proc.wait(10)


def wrk(url: str, seconds: int) -> tuple[float, int]:
    """Requests/s and the count of socket/HTTP errors of one wrk run."""
    argv = ["taskset", "-c", CLIENT_CORE, "wrk", "-t1", "-c100", f"-d{seconds}s", url]
    out = subprocess.run(argv, capture_output=True, text=True, timeout=seconds + 60).stdout
    rps, errors = 0.0, 0
    for line in out.splitlines():
        parts = line.split()
        if line.startswith("Requests/sec:"):
            rps = float(parts[1])
        elif line.strip().startswith("Socket errors:"):
            errors += sum(int(p.strip(",")) for p in parts if p.strip(",").isdigit())
        elif line.strip().startswith("Non-2xx"):
            errors += int(parts[-1])
    return rps, errors


#: Workloads loaded by `surge load` rather than wrk (see the module doc).
SURGE_LOAD_WORKLOADS = {"https_load"}
SURGE_LOAD_CONNECTIONS = 100


def surge_load(url: str, seconds: float) -> tuple[float, int]:
    """Requests/s and the count of errors (non-2xx included) of one `surge load`
    run: closed model, 100 connections, one process on the client core; the
    benchmark's certificate is self-signed, hence --insecure."""
    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        argv = ["taskset", "-c", CLIENT_CORE, str(SURGE), "load", url, "-q", "--json", out.name]
        argv += ["-c", str(SURGE_LOAD_CONNECTIONS), "-d", str(seconds)]
        argv += ["--insecure"] if url.startswith("https:") else []
        r = subprocess.run(argv, capture_output=True, text=True, timeout=seconds + 60)
        try:
            data = json.loads(Path(out.name).read_text())
        except (OSError, json.JSONDecodeError):
            print(f"surge load failed ({r.returncode}): {r.stderr[-300:]}")
            return 0.0, 1
    return data["achieved_rate"], sum(data["errors"].values())


def measure(name: str, servers: list[Server], runs: int, seconds: int, log_dir: Path) -> dict:
    client = surge_load if name in SURGE_LOAD_WORKLOADS else wrk
    ready, missing = [], {}
    for srv in servers:
        why = start(srv, log_dir)
        if why is None and srv.ws_inflight:
            why = ensure_wsload() or check_ws(srv)
        elif why and NO_WS in _log_path(srv, log_dir).read_text(errors="replace"):
            why = NO_WS  # apps.surge_ws refuses to load without App.websocket
        if why is None:
            ready.append(srv)
            if not srv.ws_inflight:
                client(srv.url, 1)  # warm-up, not counted
            pause(srv, True)
        else:
            missing[srv.name] = why
            stop(srv)
    try:
        for k in range(runs):
            # The order flips every round: whichever server runs later in a
            # round measured 2-3% faster here (the machine warms up), so a fixed
            # order would lean every ratio one way.
            for srv in ready if k % 2 == 0 else ready[::-1]:
                pause(srv, False)
                cpu0, client0, busy0, t0 = (
                    srv.cpu_s(),
                    _children_cpu_s(),
                    machine_busy(),
                    time.monotonic(),
                )
                if srv.ws_inflight:
                    res = wsload(srv.ws_url, seconds, WS_CONNECTIONS, srv.ws_inflight)
                    rate = res.get("messages_per_sec", 0.0)
                    errors = res.get("errors", 1) + WS_CONNECTIONS - res.get("open", 0)
                    srv.latency.append(res.get("latency_ms", {}))
                else:
                    rate, errors = client(srv.url, seconds)
                elapsed = time.monotonic() - t0
                server_cpu = 100 * (srv.cpu_s() - cpu0) / elapsed
                client_cpu = 100 * (_children_cpu_s() - client0) / elapsed
                other = 100 * (machine_busy() - busy0) / elapsed - server_cpu - client_cpu
                srv.cpu.append(
                    {
                        "server": round(server_cpu),
                        "client": round(client_cpu),
                        "other": round(max(0, other)),
                        # Server CPU per request (or message): steadier than
                        # req/s on a shared machine, where the others' load
                        # takes the server's core away.
                        "us": round(1e4 * server_cpu / rate, 1) if rate else 0.0,
                    }
                )
                pause(srv, True)
                srv.runs.append(rate)
                srv.errors += errors
    finally:
        for srv in servers:
            stop(srv)
    return {
        "servers": {
            s.name: {
                "runs": s.runs,
                "median": statistics.median(s.runs),
                "errors": s.errors,
                "cpu": s.cpu,
                "cpu_median": {
                    k: statistics.median(c.get(k, 0.0) for c in s.cpu)
                    for k in ("server", "client", "other", "us")
                },
                **({"latency_ms": s.latency, "inflight": s.ws_inflight} if s.ws_inflight else {}),
            }
            for s in ready
        },
        "missing": missing,
    }


TITLES = {
    "raw_asgi": "raw ASGI hello",
    "fastapi": "FastAPI hello (JSON)",
    "flask": "Flask hello (WSGI)",
    "https": "HTTPS JSON (ratio: HTTPS over the same server's plain HTTP)",
    "https_load": (
        "HTTPS JSON measured by `surge load` (closed model, 100 connections, one process "
        "on core 0; wrk's own TLS cost keeps it near 100 % of its core in the `https` "
        "table's TLS runs): "
        "ratio HTTPS over the same server's plain HTTP; the client column is the "
        "generator's CPU, the ratio is fair only below 100 %"
    ),
    "websocket": f"WebSocket echo, {WS_CONNECTIONS} connections, {WS_SIZE} B text, 1 in flight",
    "websocket_inflight": (
        f"WebSocket echo, {WS_CONNECTIONS} connections, {WS_SIZE} B text, 8 in flight"
    ),
}


def _ratio(name: str, sname: str, servers: dict) -> str:
    med = servers[sname]["median"]
    if name in ("https", "https_load"):
        plain = ("surge" if sname.startswith("surge") else "uvicorn") + " plain"
        p = servers.get(plain, {}).get("median")
        return "—" if sname == plain or not p else f"{med / p:.2f}x"
    ours = [n for n in servers if n.startswith("surge")]
    if sname.startswith("surge") or not ours or not med:
        return "—"
    return " / ".join(f"{servers[n]['median'] / med:.2f}x" for n in ours)


def _markdown(results: dict, runs: int, seconds: int) -> str:
    lines = [
        f"**Interfaces: 1 worker, server on core 1, client on core 0, {seconds} s runs, "
        f"median of {runs} interleaved rounds**",
        "",
    ]
    for name, res in results.items():
        servers = res["servers"]
        ws = name.startswith("websocket")
        unit = "msg/s" if ws else "req/s"
        surges = [n for n in servers if n.startswith("surge")]
        col = (
            "HTTPS/plain"
            if name in ("https", "https_load")
            else "surge/x" + (f" ({' / '.join(surges)})" if len(surges) > 1 else "")
        )
        head = f"| server | {unit} | {col} | CPU % server/client/other | server CPU µs each |"
        if ws:
            head += " p50 / p99 ms |"
        lines += [f"`{name}`: {TITLES.get(name, name)}", "", head]
        lines.append("|---|---:|---:|---:|---:|" + ("---:|" if ws else ""))
        for sname, data in servers.items():
            mark = f" ⚠ {data['errors']} errors" if data["errors"] else ""
            c = data["cpu_median"]
            row = (
                f"| {sname}{mark} | {data['median']:,.0f} | {_ratio(name, sname, servers)} "
                f"| {c['server']:.0f} / {c['client']:.0f} / {c['other']:.0f} | {c['us']:.1f} |"
            )
            if ws:
                lat = [x for x in data["latency_ms"] if x]
                p50 = statistics.median(x["p50"] for x in lat) if lat else 0
                p99 = statistics.median(x["p99"] for x in lat) if lat else 0
                row += f" {p50:.1f} / {p99:.1f} |"
            lines.append(row)
        for sname, why in res["missing"].items():
            lines.append(f"| {sname} | not run: {why} | | | |" + (" |" if ws else ""))
        lines.append("")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="2 rounds of 3 s")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--seconds", type=int, default=5)
    ap.add_argument("--workloads", default=",".join(TITLES), help=", ".join(TITLES))
    args = ap.parse_args(argv)
    runs, seconds = (2, 3) if args.quick else (args.runs, args.seconds)
    bvenv.ensure()
    log_dir = RESULTS / "raw" / "interfaces"
    log_dir.mkdir(parents=True, exist_ok=True)
    chosen = [w.strip() for w in args.workloads.split(",") if w.strip()]
    all_workloads = workloads()
    results = {w: measure(w, all_workloads[w], runs, seconds, log_dir) for w in chosen}
    markdown = _markdown(results, runs, seconds)
    out = {
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "runs": runs,
        "seconds": seconds,
        "versions": bvenv.versions(),
        "results": results,
    }
    (RESULTS / "interfaces.json").write_text(json.dumps(out, indent=1))
    print(markdown)
    return {
        "markdown": markdown,
        "setup_lines": [
            "interfaces: one worker per server, server on core 1, wrk -t1 -c100 on core 0; "
            "gunicorn gthread with 8 threads, surge WSGI with 32; "
            "granian 1 worker, 1 runtime thread (HTTP ASGI: --task-impl rust --loop uvloop "
            "--http 1 --no-ws); "
            "uvicorn httptools + uvloop",
            f"interfaces WebSocket: wsload (Rust, tokio-tungstenite) on core 0, "
            f"{WS_CONNECTIONS} connections, {WS_SIZE}-byte text messages, 1 or 8 in flight "
            "per connection; uvicorn --ws websockets and granian serve a raw ASGI echo app",
            "interfaces HTTPS: self-signed RSA-2048 certificate made by openssl for the run; "
            "surge rustls (the default) and Python's ssl (--ssl-backend python); "
            f"https_load: surge load -c {SURGE_LOAD_CONNECTIONS} --insecure (closed model, "
            "one process, rustls client) on core 0 instead of wrk",
        ],
    }


if __name__ == "__main__":
    main()
