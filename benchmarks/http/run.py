"""HTTP hello-world benchmark: surge side by side with its peers, in one run.

Every server runs one worker pinned to core 1 (``taskset -c 1``); wrk runs pinned
to core 0 (``taskset -c 0 wrk -t1 -c100 -dNs --latency``). Measurements:

* ``plain``     GET /         one request per write
* ``pipelined`` GET /         24 requests per write (``pipeline.lua``)
* ``json``      GET /json     one request per write
* ``async``     GET /user/7   an ``async`` handler with a path parameter

The servers are all started first (each checked for correct responses on the
three routes, its idle RSS/CPU measured, then warmed up), and the runs are
interleaved: run 1 of every measurement on every server, then run 2, ... so a
burst of background load (compiles on this shared machine) hits every server
alike and the surge/peer ratios of one run stay comparable. The servers not
being measured are paused (SIGSTOP) so they take no CPU from the one that is. Each figure is the
median over ``--runs``. A run with socket errors or HTTP errors is flagged.

Then the memory phase restarts the memory server (surge) alone: idle RSS and CPU
after start, RSS after one pass over every workload of the long phase (each at
least 1 s of wrk, so ~1M requests with pipelining), and RSS after ``--long-requests``
requests (all routes, pipelined), plus the worker's CPU use under load.

    python -m benchmarks.http.run [--quick] [--runs N] [--servers surge,nginx,...]

Results: ``bench-results/http.json`` (raw per-run numbers and the setup),
``bench-results/http.md`` and ``bench-results/http.png``; wrk and server logs
under ``bench-results/raw/http/``.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import hashlib
import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from benchmarks import venv as bvenv
from benchmarks._lib import cpu_seconds, machine_busy
from benchmarks._lib import free_port as _free_port
from benchmarks.http.procfs import _children_cpu_s, _comm, _proc_tree, _rss_kb
from benchmarks.http.report import MEASUREMENTS, markdown, ratio, summarize, targets

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
APPS = HERE / "apps"
RESULTS = ROOT / "bench-results"
RAW = RESULTS / "raw" / "http"
SURGE_BIN = ROOT / ".venv" / "bin" / "surge"

SERVER_CORE = "1"
CLIENT_CORE = "0"
NICE = 0  # --nice: niceness of the servers and wrk (negative = ahead of other load)


def _pin(core: str) -> list[str]:
    """Command prefix: pinned to ``core``, at the --nice niceness."""
    prefix = ["nice", "-n", str(NICE)] if NICE else []
    return [*prefix, "taskset", "-c", core]


EXPECTED: dict[str, Callable[[bytes], bool]] = {
    "/": lambda b: b == b"Hello, world!",
    "/json": lambda b: json.loads(b) == {"message": "Hello, world!"},
    "/user/7": lambda b: b == b"user 7",
}

# --------------------------------------------------------------------------- servers


@dataclass
class Launch:
    argv: list[str]
    cwd: Path = ROOT
    env: dict[str, str] = field(default_factory=dict)
    cleanup: Callable[[], None] | None = None


class SetupError(Exception):
    """A server cannot be launched on this machine (not installed, build failed...)."""


def _bench_py() -> str:
    return str(bvenv.python())


def _need(group: str) -> None:
    if not bvenv.have(group):
        raise SetupError(f"{group} is not installed in {bvenv.VENV.name} (see the venv warnings)")


def launch_surge(port: int, tmp: Path) -> Launch:
    if not SURGE_BIN.exists():
        raise SetupError(f"{SURGE_BIN} missing: run `make build`")
    argv = [str(SURGE_BIN), "serve", "benchmarks.http.apps.surge_app:app"]
    argv += ["--host", "127.0.0.1", "--port", str(port), "--workers", "1"]
    # the console script's sys.path[0] is .venv/bin: make the repo importable
    return Launch(argv, env={"PYTHONPATH": str(ROOT)})


def launch_socketify(port: int, tmp: Path) -> Launch:
    _need("socketify")
    return Launch([_bench_py(), str(APPS / "socketify_app.py"), str(port)], cwd=APPS)


def launch_granian(port: int, tmp: Path) -> Launch:
    _need("granian")
    argv = [_bench_py(), "-m", "granian", "--interface", "asgi", "--loop", "uvloop"]
    argv += ["--workers", "1", "--runtime-threads", "1", "--no-ws", "--log-level", "warning"]
    argv += ["--host", "127.0.0.1", "--port", str(port), "asgi_app:app"]
    return Launch(argv, cwd=APPS)


def launch_uvicorn(port: int, tmp: Path) -> Launch:
    _need("uvicorn")
    argv = [_bench_py(), "-m", "uvicorn", "asgi_app:app", "--app-dir", str(APPS)]
    argv += ["--loop", "uvloop", "--http", "httptools", "--workers", "1"]
    argv += ["--no-access-log", "--log-level", "warning", "--host", "127.0.0.1"]
    argv += ["--port", str(port)]
    return Launch(argv, cwd=APPS)


def launch_aiohttp(port: int, tmp: Path) -> Launch:
    _need("aiohttp")
    return Launch([_bench_py(), str(APPS / "aiohttp_app.py"), str(port)], cwd=APPS)


def launch_tornado(port: int, tmp: Path) -> Launch:
    _need("tornado")
    return Launch([_bench_py(), str(APPS / "tornado_app.py"), str(port)], cwd=APPS)


NGINX_CONF = """\
# generated by benchmarks/http/run.py; needs no root (temp prefix, pid, logs)
worker_processes 1;
pid {tmp}/nginx.pid;
error_log {tmp}/error.log warn;
events {{ worker_connections 4096; }}
http {{
    access_log off;
    keepalive_requests 1000000000;  # the default (1000) would close wrk's connections
    client_body_temp_path {tmp}/client_body;
    proxy_temp_path {tmp}/proxy;
    fastcgi_temp_path {tmp}/fastcgi;
    uwsgi_temp_path {tmp}/uwsgi;
    scgi_temp_path {tmp}/scgi;
    server {{
        listen 127.0.0.1:{port};
        location = / {{ default_type text/plain; return 200 "Hello, world!"; }}
        location = /json {{
            default_type application/json;
            return 200 '{{"message":"Hello, world!"}}';
        }}
        location ~ ^/user/(\\d+)$ {{ default_type text/plain; return 200 "user $1"; }}
    }}
}}
"""


def launch_nginx(port: int, tmp: Path) -> Launch:
    nginx = shutil.which("nginx") or "/usr/sbin/nginx"
    if not os.path.exists(nginx):
        raise SetupError("nginx not found (apt-get install -y nginx-light)")
    d = tmp / "nginx"
    d.mkdir(parents=True, exist_ok=True)
    conf = d / "nginx.conf"
    conf.write_text(NGINX_CONF.format(tmp=d, port=port))
    argv = [nginx, "-p", str(d), "-e", str(d / "error.log"), "-c", str(conf)]
    return Launch([*argv, "-g", "daemon off;"], cwd=d)


def launch_fasthttp(port: int, tmp: Path) -> Launch:
    go = shutil.which("go") or "/usr/local/go/bin/go"
    if not os.path.exists(go):
        raise SetupError("go not found")
    exe = tmp / "fasthttp-bench"
    if not exe.exists():
        proc = subprocess.run(
            [go, "build", "-o", str(exe), "."],
            cwd=HERE / "fasthttp",
            capture_output=True,
            text=True,
        )
        if proc.returncode != 0:
            raise SetupError(f"go build failed: {proc.stderr.strip()[-500:]}")
    return Launch([str(exe), "-addr", f"127.0.0.1:{port}"], env={"GOMAXPROCS": "1"})


SERVERS: dict[str, Callable[[int, Path], Launch]] = {
    "surge": launch_surge,
    "socketify": launch_socketify,
    "granian": launch_granian,
    "uvicorn": launch_uvicorn,
    "aiohttp": launch_aiohttp,
    "tornado": launch_tornado,
    "nginx": launch_nginx,
    "fasthttp": launch_fasthttp,
}

DESCRIPTIONS = {
    "surge": "surge serve --workers 1",
    "socketify": "socketify App API, 1 process",
    "granian": "granian --interface asgi --loop uvloop --workers 1 --runtime-threads 1",
    "uvicorn": "uvicorn --loop uvloop --http httptools --workers 1",
    "aiohttp": "aiohttp.web on uvloop, 1 process",
    "tornado": "tornado on uvloop, 1 process",
    "nginx": "nginx worker_processes 1, return 200, access_log off",
    "fasthttp": "Go fasthttp v1.58.0, GOMAXPROCS=1",
}

# --------------------------------------------------------------------------- server process


@dataclass
class Server:
    name: str
    port: int = 0
    proc: subprocess.Popen | None = None
    status: str = "ok"  # ok | error
    error: str = ""
    checks: dict[str, str] = field(default_factory=dict)
    idle: dict = field(default_factory=dict)
    log: Path | None = None
    cleanup: Callable[[], None] | None = None

    def pids(self) -> list[int]:
        return _proc_tree(self.proc.pid) if self.proc else []

    def worker_pid(self) -> int:
        """The process doing the work: the busiest (most CPU) of the tree, else the root."""
        pids = self.pids()
        return max(pids, key=cpu_seconds) if pids else 0

    def rss_kb(self) -> int:
        return sum(_rss_kb(p) for p in self.pids())

    def cpu_s(self) -> float:
        return sum(cpu_seconds(p) for p in self.pids())


def _get(port: int, path: str, timeout: float = 2.0) -> tuple[int, bytes, str]:
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}")
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, r.read(), r.headers.get("content-type", "")
    except urllib.error.HTTPError as e:
        return e.code, e.read(), e.headers.get("content-type", "")


def _log(msg: str) -> None:
    print(f"[http] {msg}", file=sys.stderr, flush=True)


def start_server(name: str, tmp: Path, ready_timeout: float) -> Server:
    srv = Server(name, port=_free_port())
    try:
        launch = SERVERS[name](srv.port, tmp)
    except SetupError as e:
        srv.status, srv.error = "error", str(e)
        _log(f"{name}: not started: {e}")
        return srv
    srv.cleanup = launch.cleanup
    srv.log = RAW / f"server-{name}.log"
    env = {**os.environ, **launch.env, "PYTHONUNBUFFERED": "1"}
    with open(srv.log, "wb") as log:
        srv.proc = subprocess.Popen(
            [*_pin(SERVER_CORE), *launch.argv],
            cwd=launch.cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group: stopped as a whole
        )
    deadline = time.monotonic() + ready_timeout
    while True:
        if srv.proc.poll() is not None:
            srv.status = "error"
            srv.error = f"exited with code {srv.proc.returncode}: {_tail(srv.log)}"
            break
        try:
            code, _, _ = _get(srv.port, "/", timeout=1.0)
            if code == 200:
                break
        except (OSError, urllib.error.URLError):
            pass
        if time.monotonic() > deadline:
            srv.status = "error"
            srv.error = f"not answering after {ready_timeout:.0f}s: {_tail(srv.log)}"
            break
        time.sleep(0.1)
    if srv.status != "ok":
        _log(f"{name}: {srv.error}")
        stop_server(srv)
        return srv
    for path, ok in EXPECTED.items():
        try:
            code, body, ctype = _get(srv.port, path)
            good = code == 200 and ok(body)
            srv.checks[path] = "ok" if good else f"HTTP {code} {body[:60]!r} ({ctype})"
        except Exception as e:  # a broken route must not stop the run
            srv.checks[path] = f"error: {e}"
    bad = {p: c for p, c in srv.checks.items() if c != "ok"}
    _log(f"{name}: up on port {srv.port}" + (f"; BAD responses: {bad}" if bad else ""))
    return srv


def _tail(path: Path | None, n: int = 400) -> str:
    if not path or not path.exists():
        return ""
    return path.read_bytes()[-n:].decode(errors="replace").strip().replace("\n", " | ")


def pause(srv: Server, paused: bool) -> None:
    """SIGSTOP/SIGCONT the server's process group: the servers not being measured must
    not take CPU on the shared server core (some poll when idle, e.g. socketify)."""
    if srv.proc and srv.proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(srv.proc.pid, signal.SIGSTOP if paused else signal.SIGCONT)
        if not paused:
            time.sleep(0.2)


def stop_server(srv: Server) -> None:
    if srv.proc and srv.proc.poll() is None:
        pause(srv, False)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(srv.proc.pid, signal.SIGTERM)
        try:
            srv.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(srv.proc.pid, signal.SIGKILL)
            srv.proc.wait(timeout=10)
    # children that left the group (none expected) are not chased
    if srv.cleanup:
        srv.cleanup()
        srv.cleanup = None


def measure_idle(srv: Server, window: float) -> dict:
    """RSS and CPU use of an idle server, over ``window`` seconds."""
    time.sleep(0.5)
    pids = srv.pids()
    cpu0, t0 = {p: cpu_seconds(p) for p in pids}, time.monotonic()
    time.sleep(window)
    elapsed = time.monotonic() - t0
    procs = []
    for p in pids:
        procs.append(
            {
                "pid": p,
                "comm": _comm(p),
                "rss_kb": _rss_kb(p),
                "cpu_pct": round(100 * (cpu_seconds(p) - cpu0[p]) / elapsed, 2),
            }
        )
    return {
        "rss_kb": sum(x["rss_kb"] for x in procs),
        "cpu_pct": round(sum(x["cpu_pct"] for x in procs), 2),
        "window_s": window,
        "processes": procs,
    }


# --------------------------------------------------------------------------- wrk


@dataclass
class WrkConfig:
    threads: int = 1
    connections: int = 100
    depth: int = 24

    def argv(self, duration: int, script: Path, url: str) -> list[str]:
        base = ["wrk", f"-t{self.threads}", f"-c{self.connections}", f"-d{duration}s"]
        return [*_pin(CLIENT_CORE), *base, "--latency", "-s", str(script), url]


def run_wrk(
    cfg: WrkConfig,
    srv: Server,
    path: str,
    depth: int,
    duration: int,
    raw_name: str | None = None,
    count_responses: bool = False,
) -> dict:
    """One wrk run; returns wrk's summary (see report.lua) plus rps, or {"error": ...}."""
    script = HERE / ("pipeline.lua" if depth > 1 else "report.lua")
    env = {**os.environ, "WRK_PIPELINE": str(depth)}
    if count_responses:
        env["WRK_COUNT_RESPONSES"] = "1"
    argv = cfg.argv(duration, script, f"http://127.0.0.1:{srv.port}{path}")
    srv_cpu0, wrk_cpu0, busy0 = srv.cpu_s(), _children_cpu_s(), machine_busy()
    t0 = time.monotonic()
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=duration + 60)
    except subprocess.TimeoutExpired:
        return {"error": "wrk timed out"}
    elapsed = time.monotonic() - t0
    # CPU use during the run, in % of one core: a server well below 100% while wrk is
    # near 100% means the client, not the server, was the bottleneck
    srv_cpu = round(100 * (srv.cpu_s() - srv_cpu0) / elapsed, 1)
    wrk_cpu = round(100 * (_children_cpu_s() - wrk_cpu0) / elapsed, 1)
    # everything else on the machine (other users' compiles...), in % of one core
    other_cpu = round(max(0.0, 100 * (machine_busy() - busy0) / elapsed - srv_cpu - wrk_cpu), 1)
    if raw_name:
        (RAW / f"{raw_name}.txt").write_text(" ".join(argv) + "\n" + proc.stdout + proc.stderr)
    for line in proc.stdout.splitlines():
        if line.startswith("WRKJSON "):
            res = json.loads(line[8:])
            res["rps"] = res["requests"] / (res["duration_us"] / 1e6)
            # closed loop: mean round trip of one write (a batch when pipelining), by
            # Little's law; wrk's own percentiles are wrong when pipelining (pipeline.lua)
            res["rtt_ms"] = 1000 * cfg.connections * depth / res["rps"] if res["rps"] else None
            res["errors"] = sum(res[k] for k in ("connect", "read", "write", "status", "timeout"))
            res["server_cpu_pct"], res["wrk_cpu_pct"] = srv_cpu, wrk_cpu
            res["other_cpu_pct"] = other_cpu
            return res
    out = (proc.stderr or proc.stdout)[-300:]
    return {"error": f"no wrk summary (rc {proc.returncode}): {out}"}


def drive(
    cfg: WrkConfig, srv: Server, target: int, plan: list[tuple[str, int]], rates: dict
) -> tuple[int, list[dict]]:
    """Send at least ``target`` requests, cycling through ``plan`` (path, depth).

    Returns the count and the wrk results.

    ``rates`` maps (path, depth) -> expected req/s (None: the default key's rate), used to
    size each wrk run (1..30 s, whole seconds: wrk's unit); it is updated from each run.
    """
    done, i, runs = 0, 0, []
    while done < target:
        item = plan[i % len(plan)]
        i += 1
        remaining = target - done
        rate = rates.get(item) or rates.get(("/", item[1])) or rates.get(("/", 1)) or 50_000.0
        duration = max(1, min(30, int(remaining / rate * 1.05) + 1))
        res = run_wrk(cfg, srv, item[0], item[1], duration)
        if "error" in res:
            _log(f"memory phase: {res['error']}")
            break
        if res["requests"] == 0:
            break
        done += res["requests"]
        runs.append(res)
        rates[item] = max(res["rps"], 1.0)
    return done, runs


# --------------------------------------------------------------------------- environment


def ensure_tools() -> None:
    missing = [t for t in ("wrk", "nginx", "taskset") if not shutil.which(t)]
    if "nginx" in missing and os.path.exists("/usr/sbin/nginx"):
        missing.remove("nginx")
    if not missing:
        return
    pkgs = {"wrk": "wrk", "nginx": "nginx-light", "taskset": "util-linux"}
    need = sorted({pkgs[t] for t in missing})
    _log(f"installing {' '.join(need)} with apt-get")
    sudo = [] if os.geteuid() == 0 else ["sudo"]
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    cmd = [*sudo, "apt-get", "install", "-y", "-q", *need]
    if subprocess.run(cmd, env=env, check=False).returncode != 0:
        subprocess.run([*sudo, "apt-get", "update", "-q"], env=env, check=False)
        subprocess.run(cmd, env=env, check=False)


def _first_line(argv: list[str]) -> str:
    try:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=30)
        return ((p.stdout or "") + (p.stderr or "")).strip().splitlines()[0]
    except (OSError, IndexError, subprocess.TimeoutExpired):
        return "?"


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "?"


def surge_build() -> str:
    """Which cargo profile built the installed surge/_core*.so: "release", "debug", "?".

    ``make dev`` installs a debug build: measuring it says nothing about surge.
    """

    def digest(p: Path) -> str:
        return hashlib.sha256(p.read_bytes()).hexdigest()

    venv = SURGE_BIN.parent.parent
    installed = sorted(venv.glob("lib/python*/site-packages/surge/_core*.so"))
    wheel = bool(installed)  # a wheel install; `maturin develop` leaves it in python/surge
    if not installed:
        installed = sorted((ROOT / "python" / "surge").glob("_core*.so"))
    if not installed:
        return "?"
    want = digest(installed[0])
    target = Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target"))
    for profile in ("release", "debug"):
        for lib in (target / profile).glob("lib*.so"):
            with contextlib.suppress(OSError):
                if lib.stat().st_size == installed[0].stat().st_size and digest(lib) == want:
                    return profile
    return "wheel" if wheel else "?"


def setup_info(cfg: WrkConfig, args: argparse.Namespace) -> dict:
    surge_version = "?"
    if SURGE_BIN.exists():
        py = SURGE_BIN.parent / "python"
        code = "import importlib.metadata as m; print(m.version('surge'))"
        surge_version = _first_line([str(py), "-c", code])
    git = _first_line(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"])
    fasthttp = "?"
    for line in (HERE / "fasthttp" / "go.mod").read_text().splitlines():
        if "valyala/fasthttp" in line:
            fasthttp = line.split()[-1]
    return {
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "nproc": os.cpu_count(),
        "cpu_model": cpu_model(),
        "kernel": platform.release(),
        "loadavg_at_start": _first_line(["cat", "/proc/loadavg"]),
        "server_core": SERVER_CORE,
        "client_core": CLIENT_CORE,
        "wrk_argv": cfg.argv(args.duration, Path("report.lua|pipeline.lua"), "URL"),
        "connections": cfg.connections,
        "wrk_threads": cfg.threads,
        "pipeline_depth": cfg.depth,
        "duration_s": args.duration,
        "warmup_s": args.warmup,
        "runs": args.runs,
        "long_requests": args.long_requests,
        "mode": "quick" if args.quick else "full",
        "nice": args.nice,
        "surge_build": surge_build(),
        "surge_bin": str(SURGE_BIN),
        "versions": {
            "surge": f"{surge_version} (git {git}, {surge_build()} build)",
            "python (peers)": _first_line([_bench_py(), "--version"]),
            "python (surge)": _first_line([str(SURGE_BIN.parent / "python"), "--version"]),
            **bvenv.versions(),
            "wrk": _first_line(["wrk", "-v"]).split(" Copyright")[0].removeprefix("wrk "),
            "nginx": _first_line(["nginx", "-v"]).removeprefix("nginx version: "),
            "go": _first_line(["go", "version"]),
            "fasthttp": fasthttp,
        },
        "servers": {n: DESCRIPTIONS[n] for n in args.servers},
    }


def chart(results_path: Path, png: Path) -> str | None:
    if not bvenv.have("matplotlib"):
        return "matplotlib not installed in the bench venv"
    proc = subprocess.run(
        [_bench_py(), str(HERE / "chart.py"), str(results_path), str(png)],
        capture_output=True,
        text=True,
    )
    if proc.returncode != 0:
        return proc.stderr.strip()[-500:]
    return None


# --------------------------------------------------------------------------- phases


def memory_phase(name: str, cfg: WrkConfig, args, tmp: Path, measured: dict) -> dict:
    """Fresh start of ``name``: idle RSS/CPU, RSS after ~100k and after --long-requests.

    ``measured`` is the server's summary from the main phase (to size the wrk runs).
    """
    _log(f"memory phase: {name}, {args.short_requests:,} then {args.long_requests:,} requests")
    srv = start_server(name, tmp, args.ready_timeout)
    if srv.status != "ok":
        return {"server": name, "error": srv.error}
    depth = cfg.depth
    rates = {
        (MEASUREMENTS[k][1], MEASUREMENTS[k][2] or depth): measured.get(k, {}).get("rps")
        for k in MEASUREMENTS
    }
    try:
        idle = measure_idle(srv, args.idle_window)
        plan = [("/", depth), ("/json", depth), ("/user/7", depth), ("/", 1)]
        # The short phase runs every workload of the long one (at least 1 s each, wrk's
        # unit), so both RSS figures hold the same working set (e.g. the tasks of 100
        # connections x 24 pipelined async requests) and their difference is growth
        # over time, not the difference between a light and a heavy workload.
        short_done = 0
        for item in plan:
            n, _ = drive(cfg, srv, max(1, args.short_requests // len(plan)), [item], rates)
            short_done += n
        time.sleep(0.5)
        worker = srv.worker_pid()
        rss_short = _rss_kb(worker)
        more, runs = drive(cfg, srv, max(0, args.long_requests - short_done), plan, rates)
        long_done = short_done + more
        secs = sum(r["duration_us"] for r in runs) / 1e6
        load_cpu = load_wrk = None
        if secs > 0:
            load_cpu = sum(r["server_cpu_pct"] * r["duration_us"] / 1e6 for r in runs) / secs
            load_wrk = sum(r["wrk_cpu_pct"] * r["duration_us"] / 1e6 for r in runs) / secs
        time.sleep(0.5)
        rss_long = _rss_kb(worker)
        idle_after = measure_idle(srv, args.idle_window)
        return {
            "server": name,
            "worker_pid": worker,
            "worker_comm": _comm(worker),
            "idle": idle,
            "short_done": short_done,
            "long_done": long_done,
            "rss_short_kb": rss_short,
            "rss_long_kb": rss_long,
            "growth_pct": (100 * (rss_long - rss_short) / rss_short) if rss_short else None,
            "load_cpu_pct": load_cpu,
            "load_wrk_cpu_pct": load_wrk,
            "load_seconds": secs,
            "idle_after": idle_after,
            "long_plan": [{"path": p, "depth": d} for p, d in plan],
        }
    finally:
        stop_server(srv)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(
        prog="python -m benchmarks.http.run",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument("--quick", action="store_true", help="1 run of 3 s each, 1M long requests")
    ap.add_argument("--runs", type=int, help="runs per measurement (default 3; quick 1)")
    ap.add_argument("--duration", type=int, help="seconds per wrk run (default 10; quick 3)")
    ap.add_argument("--warmup", type=int, default=2, help="warm-up seconds per server")
    ap.add_argument("--connections", type=int, default=100)
    ap.add_argument("--depth", type=int, default=24, help="pipelining depth")
    ap.add_argument(
        "--long-requests", type=int, help="memory phase: requests (default 10M; quick 1M)"
    )
    ap.add_argument("--short-requests", type=int, default=100_000)
    ap.add_argument(
        "--memory-server", default="surge", help="server for the memory phase ('' to skip)"
    )
    ap.add_argument("--servers", default=",".join(SERVERS), help="comma-separated subset")
    ap.add_argument("--ready-timeout", type=float, default=30.0)
    ap.add_argument("--idle-window", type=float, default=2.0)
    ap.add_argument("--no-chart", action="store_true")
    ap.add_argument(
        "--surge-bin",
        default=str(SURGE_BIN),
        help="the `surge` command to benchmark (default .venv/bin/surge), e.g. from a venv "
        "holding a release wheel while .venv has a debug build",
    )
    ap.add_argument(
        "--nice",
        type=int,
        default=0,
        help="run the servers and wrk at this niceness (e.g. -10, needs root): on a shared "
        "machine they then take the CPU ahead of other users' work (compiles)",
    )
    args = ap.parse_args(argv)
    args.runs = args.runs or (1 if args.quick else 3)
    args.duration = args.duration or (3 if args.quick else 10)
    if args.long_requests is None:
        args.long_requests = 1_000_000 if args.quick else 10_000_000
    args.servers = [s.strip() for s in args.servers.split(",") if s.strip()]
    unknown = [s for s in args.servers if s not in SERVERS]
    if unknown:
        ap.error(f"unknown servers {unknown}; known: {', '.join(SERVERS)}")
    return args


def main(argv: list[str] | None = None) -> dict:
    global SERVER_CORE, CLIENT_CORE, NICE, SURGE_BIN
    args = parse_args(argv)
    NICE = args.nice
    SURGE_BIN = Path(args.surge_bin).absolute()
    if (os.cpu_count() or 1) < 2:
        _log("WARNING: fewer than 2 cores: server and wrk share core 0")
        SERVER_CORE = CLIENT_CORE = "0"
    RAW.mkdir(parents=True, exist_ok=True)
    ensure_tools()
    bvenv.ensure()
    cfg = WrkConfig(connections=args.connections, depth=args.depth)
    setup = setup_info(cfg, args)
    raw: dict[str, dict[str, list[dict]]] = {}
    servers: dict[str, Server] = {}
    count_checks: dict[str, dict] = {}
    memory = None
    with tempfile.TemporaryDirectory(prefix="surge-bench-http-") as tmpname:
        tmp = Path(tmpname)
        try:
            for name in args.servers:
                srv = servers[name] = start_server(name, tmp, args.ready_timeout)
                if srv.status != "ok":
                    continue
                srv.idle = measure_idle(srv, args.idle_window)
                run_wrk(cfg, srv, "/", 1, args.warmup)  # warm-up
                # once per server: check that wrk's pipelined request count is the
                # number of responses received (a response() callback counts them)
                chk = run_wrk(cfg, srv, "/", cfg.depth, 1, count_responses=True)
                if "error" not in chk:
                    chk["honest"] = chk["counted"] == chk["requests"]
                    if not chk["honest"]:
                        _log(f"{name}: wrk counted {chk['requests']} but saw {chk['counted']}")
                count_checks[name] = chk
                pause(srv, True)
            live = [s for s in servers.values() if s.status == "ok"]
            for run in range(1, args.runs + 1):
                for key, (_, path, depth) in MEASUREMENTS.items():
                    depth = depth or cfg.depth
                    for srv in live:
                        if srv.checks.get(path) != "ok":
                            continue
                        if srv.proc.poll() is not None:
                            res = {"error": f"server died (code {srv.proc.returncode})"}
                        else:
                            pause(srv, False)
                            res = run_wrk(
                                cfg,
                                srv,
                                path,
                                depth,
                                args.duration,
                                raw_name=f"{srv.name}-{key}-run{run}",
                            )
                            pause(srv, True)
                        raw.setdefault(srv.name, {}).setdefault(key, []).append(res)
                        shown = f"{res['rps']:,.0f} req/s" if "rps" in res else res["error"]
                        flag = " (errors!)" if res.get("errors") else ""
                        _log(f"run {run}/{args.runs} {key:9s} {srv.name:10s} {shown}{flag}")
        finally:
            for srv in servers.values():
                stop_server(srv)
        summary = summarize(raw, servers)
        if args.memory_server and args.long_requests > 0:
            if args.memory_server not in SERVERS:
                memory = {"server": args.memory_server, "error": "unknown server"}
            else:
                measured = summary.get(args.memory_server, {})
                memory = memory_phase(args.memory_server, cfg, args, tmp, measured)

    md = markdown(setup, summary, servers, memory)
    results = {
        "suite": "http",
        "setup": setup,
        "summary": summary,
        "ratios": {
            peer: {k: ratio(summary, k, peer) for k in MEASUREMENTS}
            for peer in summary
            if peer != "surge"
        },
        "raw": raw,
        "servers": {
            n: {
                "status": s.status,
                "error": s.error,
                "checks": s.checks,
                "idle": s.idle,
                "description": DESCRIPTIONS[n],
            }
            for n, s in servers.items()
        },
        "pipeline_count_check": count_checks,
        "targets": targets(summary, memory),
        "memory": memory,
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "http.json").write_text(json.dumps(results, indent=1, default=str))
    (RESULTS / "http.md").write_text(md)
    err = None if args.no_chart else chart(RESULTS / "http.json", RESULTS / "http.png")
    if err:
        _log(f"chart not made: {err}")
    setup_lines = [
        f"HTTP: each server 1 worker pinned to core {SERVER_CORE}; "
        f"`taskset -c {CLIENT_CORE} wrk -t{cfg.threads} -c{cfg.connections} "
        f"-d{args.duration}s --latency`, pipelined = {cfg.depth} requests per write "
        "(benchmarks/http/pipeline.lua); "
        f"{args.runs} run(s), median; warm-up {args.warmup} s"
        + (f"; servers and wrk at nice {args.nice}." if args.nice else "."),
        "HTTP versions: "
        + ", ".join(f"{k} {v}" for k, v in setup["versions"].items() if k != "matplotlib"),
    ]
    results["markdown"] = md
    results["setup_lines"] = setup_lines
    return results


if __name__ == "__main__":
    res = main(sys.argv[1:])
    print(res["markdown"])
