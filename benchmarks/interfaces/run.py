"""Interfaces benchmark: surge serving the apps people already have, beside the peers.

Workloads (one worker each; server pinned to core 1, ``wrk -t1 -c100`` to core 0):

* ``raw_asgi``  a raw ASGI hello: surge (``--interface asgi``), granian, uvicorn (httptools, uvloop)
* ``fastapi``   FastAPI hello (JSON): surge, granian, uvicorn
* ``flask``     Flask hello through WSGI: surge (``--interface wsgi``, 32 threads),
                granian (``--interface wsgi``), gunicorn (gthread, 8 threads)
* ``https``     JSON over HTTPS against the same server's plain HTTP: surge's own App
                (rustls, the default, and Python's ssl), uvicorn with a raw ASGI app

All servers of a workload are started first and checked; then the runs are
interleaved round by round (every server once per round), the others paused
(SIGSTOP), and each figure is the median over ``--runs`` rounds. Ratios are
surge's figure over the peer's from the same rounds.

    python -m benchmarks.interfaces.run [--quick] [--runs N] [--seconds S] [--workloads a,b]

Results: ``bench-results/interfaces.json`` and the markdown the suite returns.
WebSocket echo is not measured here yet (see the notes of issue 11).
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import os
import signal
import socket
import statistics
import subprocess
import tempfile
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from benchmarks import venv as bvenv

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "bench-results"
SURGE = ROOT / ".venv" / "bin" / "surge"
APPS = "benchmarks.interfaces.apps"
SERVER_CORE, CLIENT_CORE = "1", "0"


@dataclass
class Server:
    name: str
    argv: list[str]
    scheme: str = "http"
    group: str | None = None  # the bench venv group it needs
    port: int = 0
    proc: subprocess.Popen | None = None
    runs: list[float] = field(default_factory=list)
    errors: int = 0

    @property
    def url(self) -> str:
        return f"{self.scheme}://127.0.0.1:{self.port}/"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


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
    uvicorn = [_peer("uvicorn"), "--http", "httptools", "--loop", "uvloop"]
    uvicorn += ["--no-access-log", "--log-level", "warning"]
    cert, key = _certs()
    tls = ["--ssl-certfile", cert, "--ssl-keyfile", key]
    return {
        "raw_asgi": [
            Server("surge", [*s, f"{APPS}:raw_asgi", "--interface", "asgi"]),
            Server(
                "granian", [*granian, "--interface", "asgi", f"{APPS}:raw_asgi"], group="granian"
            ),
            Server("uvicorn", [*uvicorn, f"{APPS}:raw_asgi"], group="uvicorn"),
        ],
        "fastapi": [
            Server("surge", [*s, f"{APPS}:fastapi_app", "--interface", "asgi"]),
            Server(
                "granian", [*granian, "--interface", "asgi", f"{APPS}:fastapi_app"], group="fastapi"
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
        "https": [
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
        ],
    }


def _bind_args(srv: Server) -> list[str]:
    if srv.argv[0].endswith("gunicorn"):
        return ["-b", f"127.0.0.1:{srv.port}"]
    return ["--host", "127.0.0.1", "--port", str(srv.port)]


def start(srv: Server, log_dir: Path) -> str | None:
    """Starts the server; None once it answers 200, else why not."""
    if srv.group and not bvenv.have(srv.group):
        return f"{srv.group} is not installed in {bvenv.VENV.name}"
    srv.port = _free_port()
    log = open(log_dir / f"{srv.name.replace(' ', '_')}.log", "wb")  # noqa: SIM115
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
            if r.status == 200:
                return None
        time.sleep(0.2)
    return "did not answer within 30 s"


def pause(srv: Server, paused: bool) -> None:
    if srv.proc and srv.proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(srv.proc.pid, signal.SIGSTOP if paused else signal.SIGCONT)
        if not paused:
            time.sleep(0.2)


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


def measure(name: str, servers: list[Server], runs: int, seconds: int, log_dir: Path) -> dict:
    ready, missing = [], {}
    for srv in servers:
        why = start(srv, log_dir)
        if why is None:
            ready.append(srv)
            pause(srv, True)
        else:
            missing[srv.name] = why
            stop(srv)
    try:
        for _ in range(runs):
            for srv in ready:
                pause(srv, False)
                rps, errors = wrk(srv.url, seconds)
                pause(srv, True)
                srv.runs.append(rps)
                srv.errors += errors
    finally:
        for srv in servers:
            stop(srv)
    return {
        "servers": {
            s.name: {"runs": s.runs, "median": statistics.median(s.runs), "errors": s.errors}
            for s in ready
        },
        "missing": missing,
    }


def _markdown(results: dict, runs: int, seconds: int) -> str:
    lines = [
        f"**Interfaces: 1 worker, wrk -t1 -c100 -d{seconds}s, "
        f"median of {runs} interleaved rounds**",
        "",
    ]
    for name, res in results.items():
        servers = res["servers"]
        base = "surge plain" if name == "https" else "surge"
        lines += [f"`{name}`", "", "| server | req/s | surge/x |", "|---|---:|---:|"]
        ours = servers.get(base, {}).get("median")
        for sname, data in servers.items():
            mark = " ⚠" if data["errors"] else ""
            if name == "https":
                plain = "surge plain" if sname.startswith("surge") else "uvicorn plain"
                p = servers.get(plain, {}).get("median")
                ratio = f"{data['median'] / p:.2f}x of plain" if p else "—"
            else:
                ratio = "—" if sname == base or not ours else f"{ours / data['median']:.2f}x"
            lines.append(f"| {sname}{mark} | {data['median']:,.0f} | {ratio} |")
        for sname, why in res["missing"].items():
            lines.append(f"| {sname} | not run: {why} | |")
        lines.append("")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="2 rounds of 3 s")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--seconds", type=int, default=5)
    ap.add_argument("--workloads", default="raw_asgi,fastapi,flask,https")
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
            "granian 1 worker, 1 runtime thread"
        ],
    }


if __name__ == "__main__":
    main()
