"""Files benchmark: static files and uploads, surge beside nginx, granian and Starlette.

Workloads (one worker each; the server pinned to core 1, wrk to core 0):

* ``static50k``  GET of one 50 KB file, keep-alive, ``wrk -t1 -c100``: surge
  (``App.static``; files up to 64 KiB are read and sent with their head in one
  write), surge with every file through sendfile (``inline_max=0``), nginx
  (``sendfile on``, access log off, one worker), granian's static route
  (``--static-path-route/--static-path-mount``), Starlette's StaticFiles on uvicorn
* ``upload10m``  POST of a 10 MB multipart/form-data body (one file part), parsed
  into a spooled file, ``wrk -t1 -c4``: surge (``stream=True`` route,
  ``await request.form()``) and Starlette's ``request.form()`` on uvicorn
  (httptools, uvloop); MB/s of request bodies, and the server's peak RSS over its
  idle RSS during the runs (the spool threshold is 1 MiB on both sides)

All servers of a workload are started first; then the runs are interleaved round
by round (every server once per round, the order reversed every other round),
the servers not being measured are paused (SIGSTOP), and each figure is the
median over ``--runs`` rounds. Ratios are surge's figure over the peer's.

    python -m benchmarks.files.run [--quick] [--runs N] [--seconds S] [--workloads a,b]
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from benchmarks import venv as bvenv
from benchmarks._lib import free_port as _free_port

# SIGSTOP/SIGCONT of a server's process group (only `.proc` is used).
from benchmarks.http.run import pause

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
RESULTS = ROOT / "bench-results"
VENV_BIN = ROOT / ".venv" / "bin"
SERVER_CORE, CLIENT_CORE = "1", "0"
REPORT_LUA = ROOT / "benchmarks" / "http" / "report.lua"
FILE_SIZE = 50 * 1024
UPLOAD_SIZE = 10 * 1024 * 1024
BOUNDARY = "surgebenchboundary"

NGINX_CONF = """\
worker_processes 1;
pid {tmp}/nginx.pid;
error_log {tmp}/error.log warn;
events {{ worker_connections 4096; }}
http {{
    access_log off;
    sendfile on;
    tcp_nopush on;
    keepalive_requests 1000000000;
    client_body_temp_path {tmp}/client_body;
    proxy_temp_path {tmp}/proxy;
    fastcgi_temp_path {tmp}/fastcgi;
    uwsgi_temp_path {tmp}/uwsgi;
    scgi_temp_path {tmp}/scgi;
    types {{ application/octet-stream bin; }}
    server {{
        listen 127.0.0.1:{port};
        location = / {{ return 200 "ok"; }}
        location /static/ {{ alias {dir}/; }}
    }}
}}
"""


@dataclass
class Server:
    name: str
    argv: list[str]
    env: dict[str, str] = field(default_factory=dict)
    port: int = 0
    proc: subprocess.Popen | None = None
    log: Path | None = None
    runs: list[float] = field(default_factory=list)
    errors: int = 0
    idle_rss_kb: int = 0
    peak_rss_kb: list[int] = field(default_factory=list)


def _log(msg: str) -> None:
    print(f"[files] {msg}", file=sys.stderr, flush=True)


def _pids(root: int) -> list[int]:
    """The process group `root` leads (the server and its workers)."""
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            with contextlib.suppress(OSError):
                if os.getpgid(int(entry)) == root:
                    out.append(int(entry))
    return out


def _status_kb(pid: int, key: str) -> int:
    with contextlib.suppress(OSError):
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(key + ":"):
                return int(line.split()[1])
    return 0


def _reset_peaks(srv: Server) -> None:
    for pid in _pids(srv.proc.pid):  # type: ignore[union-attr]
        with contextlib.suppress(OSError):
            Path(f"/proc/{pid}/clear_refs").write_text("5")


def _rss(srv: Server, key: str) -> int:
    """The largest `key` (VmRSS or VmHWM) of the server's processes: its worker."""
    return max((_status_kb(p, key) for p in _pids(srv.proc.pid)), default=0)  # type: ignore[union-attr]


def start(srv: Server, tmp: Path) -> bool:
    srv.port = srv.port or _free_port()
    srv.argv = [a.replace("{port}", str(srv.port)) for a in srv.argv]
    srv.log = tmp / f"{srv.name}.log"
    env = {**os.environ, **srv.env, "PYTHONUNBUFFERED": "1"}
    with open(srv.log, "wb") as log:
        srv.proc = subprocess.Popen(
            ["taskset", "-c", SERVER_CORE, *srv.argv],
            cwd=ROOT,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        if srv.proc.poll() is not None:
            break
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{srv.port}/", timeout=1) as r:
                if r.status == 200:
                    time.sleep(0.3)
                    srv.idle_rss_kb = _rss(srv, "VmRSS")
                    return True
        except OSError:
            time.sleep(0.1)
    _log(f"{srv.name}: not started: {srv.log.read_text(errors='replace')[-400:]}")
    stop(srv)
    return False


def stop(srv: Server) -> None:
    if srv.proc and srv.proc.poll() is None:
        pause(srv, False)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(srv.proc.pid, signal.SIGTERM)
        try:
            srv.proc.wait(10)
        except subprocess.TimeoutExpired:
            os.killpg(srv.proc.pid, signal.SIGKILL)
            srv.proc.wait()


def run_wrk(
    srv: Server, path: str, seconds: int, connections: int, script: Path, env: dict
) -> dict:
    argv = [
        *("taskset", "-c", CLIENT_CORE, "wrk", "-t1", f"-c{connections}", f"-d{seconds}s"),
        *("--latency", "-s", str(script), f"http://127.0.0.1:{srv.port}{path}"),
    ]
    proc = subprocess.run(
        argv, capture_output=True, text=True, env={**os.environ, **env}, timeout=seconds + 120
    )
    for line in proc.stdout.splitlines():
        if line.startswith("WRKJSON "):
            res = json.loads(line[8:])
            res["rps"] = res["requests"] / (res["duration_us"] / 1e6)
            res["errors"] = sum(res[k] for k in ("connect", "read", "write", "status", "timeout"))
            return res
    return {"error": (proc.stderr or proc.stdout)[-300:]}


def check_static(srv: Server, expected: bytes) -> str:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{srv.port}/static/f50k.bin", timeout=5) as r:
            body = r.read()
    except OSError as e:
        return f"error: {e}"
    return "ok" if body == expected else f"wrong body ({len(body)} bytes)"


def rounds(servers: list[Server], runs: int, measure) -> None:
    """`runs` rounds, every server once per round, the order reversed every other round."""
    for i in range(runs):
        order = servers if i % 2 == 0 else list(reversed(servers))
        for srv in order:
            for other in servers:
                pause(other, other is not srv)
            res = measure(srv)
            if "error" in res:
                _log(f"{srv.name}: {res['error']}")
                continue
            srv.runs.append(res["value"])
            srv.errors += res["errors"]
            _log(f"round {i + 1}: {srv.name} {res['value']:,.1f}")
    for srv in servers:
        pause(srv, False)


def _median(xs: list[float]) -> float | None:
    return statistics.median(xs) if xs else None


def static_servers(directory: Path, tmp: Path) -> list[Server]:
    env = {"BENCH_FILES_DIR": str(directory)}
    py = str(VENV_BIN / "python")
    servers = [
        Server("surge", [py, "-m", "surge", "serve", "benchmarks.files.apps:surge_app",
                         "--port", "{port}"], {**env, "BENCH_APP": "surge"}),
        Server("surge (sendfile)", [py, "-m", "surge", "serve",
                                    "benchmarks.files.apps:surge_sendfile_app", "--port", "{port}"],
               {**env, "BENCH_APP": "surge-sendfile"}),
    ]  # fmt: skip
    nginx = shutil.which("nginx") or "/usr/sbin/nginx"
    if os.path.exists(nginx):
        d = tmp / "nginx"
        d.mkdir(exist_ok=True)
        port = _free_port()
        (d / "nginx.conf").write_text(NGINX_CONF.format(tmp=d, port=port, dir=directory))
        conf = [nginx, "-p", str(d), "-e", str(d / "error.log"), "-c", str(d / "nginx.conf")]
        servers.append(Server("nginx", [*conf, "-g", "daemon off;"], port=port))
    else:
        _log("nginx not installed (scripts/install-system-deps.sh installs nginx-light)")
    granian = bvenv.VENV / "bin" / "granian"
    if granian.exists():
        servers.append(
            Server(
                "granian",
                [str(granian), "--interface", "asgi", "--host", "127.0.0.1", "--port", "{port}",
                 "--workers", "1", "--loop", "uvloop", "--static-path-route", "/static",
                 "--static-path-mount", str(directory), "benchmarks.files.apps:asgi_hello"],
                env,
            )
        )  # fmt: skip
    else:
        _log("granian not in .bench-venv: skipped")
    servers.append(Server("starlette+uvicorn", _uvicorn(), {**env, "BENCH_APP": "starlette"}))
    return servers


def _uvicorn() -> list[str]:
    # Starlette and python-multipart are test dependencies of .venv (not of the bench venv).
    return [str(VENV_BIN / "uvicorn"), "benchmarks.files.apps:starlette_app", "--port", "{port}",
            "--loop", "uvloop", "--http", "httptools", "--log-level", "warning",
            "--no-access-log"]  # fmt: skip


def bench_static(args, tmp: Path) -> dict:
    directory = tmp / "static"
    directory.mkdir(mode=0o755)
    data = random.Random(50).randbytes(FILE_SIZE)
    (directory / "f50k.bin").write_bytes(data)
    servers = [s for s in static_servers(directory, tmp) if start(s, tmp)]
    bad = {s.name: c for s in servers if (c := check_static(s, data)) != "ok"}
    if bad:
        _log(f"wrong answers, left out: {bad}")
    servers = [s for s in servers if s.name not in bad]

    def measure(srv: Server) -> dict:
        res = run_wrk(srv, "/static/f50k.bin", args.seconds, 100, REPORT_LUA, {})
        return res if "error" in res else {"value": res["rps"], "errors": res["errors"]}

    try:
        rounds(servers, args.runs, measure)
    finally:
        for s in servers:
            stop(s)
    return {s.name: {"rps": _median(s.runs), "runs": s.runs, "errors": s.errors} for s in servers}


def bench_upload(args, tmp: Path) -> dict:
    payload = random.Random(10).randbytes(UPLOAD_SIZE)
    body = (
        (
            f'--{BOUNDARY}\r\nContent-Disposition: form-data; name="f"; filename="ten.bin"\r\n'
            "Content-Type: application/octet-stream\r\n\r\n"
        ).encode()
        + payload
        + f"\r\n--{BOUNDARY}--\r\n".encode()
    )
    body_path = tmp / "upload.body"
    body_path.write_bytes(body)
    env = {"BENCH_FILES_DIR": str(tmp)}
    py = str(VENV_BIN / "python")
    servers = [
        Server("surge", [py, "-m", "surge", "serve", "benchmarks.files.apps:surge_app",
                         "--port", "{port}"], {**env, "BENCH_APP": "surge"}),
        Server("starlette+uvicorn", _uvicorn(), {**env, "BENCH_APP": "starlette"}),
    ]  # fmt: skip
    servers = [s for s in servers if start(s, tmp)]
    wrk_env = {
        "UPLOAD_BODY": str(body_path),
        "UPLOAD_TYPE": f"multipart/form-data; boundary={BOUNDARY}",
    }

    def measure(srv: Server) -> dict:
        _reset_peaks(srv)
        res = run_wrk(srv, "/upload", args.seconds, 4, HERE / "upload.lua", wrk_env)
        if "error" in res:
            return res
        srv.peak_rss_kb.append(_rss(srv, "VmHWM"))
        return {"value": res["rps"] * len(body) / 1e6, "errors": res["errors"]}

    try:
        rounds(servers, args.runs, measure)
    finally:
        for s in servers:
            stop(s)
    return {
        s.name: {
            "mb_s": _median(s.runs),
            "runs": s.runs,
            "errors": s.errors,
            "idle_rss_mb": s.idle_rss_kb / 1024,
            "peak_rss_growth_mb": (max(s.peak_rss_kb) - s.idle_rss_kb) / 1024
            if s.peak_rss_kb
            else None,
        }
        for s in servers
    }


def markdown(results: dict, args) -> str:
    lines = []
    static = results.get("static50k")
    if static:
        ours = static.get("surge", {}).get("rps")
        lines += [
            f"#### Static 50 KB file, keep-alive (wrk -t1 -c100, {args.runs} interleaved rounds)",
            "",
            "| server | req/s (median) | surge/x | errors |",
            "|---|---|---|---|",
        ]
        for name, r in static.items():
            ratio = f"{ours / r['rps']:.2f}x" if ours and r["rps"] and name != "surge" else "—"
            rps = f"{r['rps']:,.0f}" if r["rps"] else "n/a"
            lines.append(f"| {name} | {rps} | {ratio} | {r['errors']} |")
        lines.append("")
    upload = results.get("upload10m")
    if upload:
        ours = upload.get("surge", {}).get("mb_s")
        lines += [
            f"#### 10 MB multipart upload (wrk -t1 -c4, {args.runs} interleaved rounds)",
            "",
            "| server | MB/s of bodies (median) | surge/x | idle RSS MB | peak RSS growth MB |",
            "|---|---|---|---|---|",
        ]
        for name, r in upload.items():
            ratio = f"{ours / r['mb_s']:.2f}x" if ours and r["mb_s"] and name != "surge" else "—"
            mb = f"{r['mb_s']:,.1f}" if r["mb_s"] else "n/a"
            growth = r["peak_rss_growth_mb"]
            lines.append(
                f"| {name} | {mb} | {ratio} | {r['idle_rss_mb']:.1f} | "
                f"{'n/a' if growth is None else f'{growth:.1f}'} |"
            )
    return "\n".join(lines)


WORKLOADS = {"static50k": bench_static, "upload10m": bench_upload}


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="1 round of 2 s")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--seconds", type=int, default=8)
    ap.add_argument("--workloads", default=",".join(WORKLOADS))
    args = ap.parse_args(argv)
    if args.quick:
        args.runs, args.seconds = 1, 2
    if not shutil.which("wrk"):
        raise SystemExit("wrk not found (scripts/install-system-deps.sh)")
    results: dict = {}
    with tempfile.TemporaryDirectory(prefix="surge-bench-files-") as d:
        os.chmod(d, 0o755)  # nginx's worker runs as another user and must read the file
        for name in args.workloads.split(","):
            sub = Path(d) / name
            sub.mkdir(mode=0o755)
            results[name] = WORKLOADS[name](args, sub)
    RESULTS.mkdir(exist_ok=True)
    stamp = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    (RESULTS / "files.json").write_text(json.dumps({"date": stamp, **results}, indent=2))
    md = markdown(results, args)
    print(md)
    return {
        "markdown": md,
        "setup_lines": [
            "files: one worker per server on core 1, wrk on core 0; static: one 50 KB file, "
            "-c100 keep-alive; upload: a 10 MB one-file multipart body, -c4; the machine "
            "is shared, figures are noisy",
        ],
    }


if __name__ == "__main__":
    main()
