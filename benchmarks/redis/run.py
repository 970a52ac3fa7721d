"""Redis GET/SET, side by side: surge vs redis-py asyncio and coredis, redis-benchmark
as the native reference; and surge with 100 coroutines blocked in BLPOP beside it.

One redis-server (no persistence). Each client SETs then GETs N keys (1M for surge
and redis-benchmark, whose 100k-key phases last ~0.2 s; 100k for redis-py, fewer for
the slowest peers) with
VALUE_SIZE-byte values from C coroutines. surge puts every coroutine on ONE
connection (pipelined: one write per loop iteration); redis-py uses its own
connection pool (a connection per concurrent command, up to C). Each
configuration runs in its own process, REPEATS times, the configurations taking
turns round by round (surge, redis-py, coredis, ..., surge, redis-py, ...: the
machine's speed drifts, so every side sees the same drift); we report medians of ops/s
and client CPU seconds per 100k commands, and from one extra run under
`strace -c -f` the socket writes per 100k commands. redis-benchmark runs with
`-c 50 -P 16` (50 connections, 16 commands pipelined on each), the C client's
view of what the server can take, on the clients' terms: SET on an empty database,
GET with every key of its key space set (see `_redis_benchmark_round`). Beside
each phase, the server's CPU microseconds per command.

    python -m benchmarks.redis [--quick] [--n 1000000] [--peer-n 100000] [--repeats 3] [--conc 1000]
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from surge import services

from benchmarks import venv as bvenv
from benchmarks._lib import CLIENT_CORE, SERVER_CORE, cpu_seconds, pin_pid, pinned, run_json

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
RESULTS = ROOT / "bench-results"
SURGE_PY = ROOT / ".venv" / "bin" / "python"
BENCH_PY = ROOT / ".bench-venv" / "bin" / "python"
PHASES = ("set", "get")
WRITE_CALLS = ("write", "writev", "sendto", "sendmsg")
#: Keys per phase in the extra run under strace.
STRACE_N = 20_000


def _configs(quick: bool, conc: int) -> list[dict]:
    out = []
    for loop in ("uvloop", "asyncio"):
        out.append({"driver": "surge", "loop": loop, "conc": conc})
        out.append({"driver": "redis-py", "loop": loop, "conc": conc})
    out.append({"driver": "redis-py-1conn", "loop": "uvloop", "conc": conc})
    out.append({"driver": "coredis", "loop": "uvloop", "conc": conc})
    out.append({"driver": "surge+blpop", "loop": "uvloop", "conc": conc})
    if quick:
        out = [c for c in out if c["loop"] == "uvloop"]
    return out


def _command(cfg: dict, n: int, port: int, size: int) -> list[str] | None:
    py = SURGE_PY if cfg["driver"].startswith("surge") else BENCH_PY
    if not py.exists():
        return None
    client = str(HERE / "client.py")
    conc = str(cfg["conc"])
    return [str(py), client, cfg["driver"], cfg["loop"], conc, str(n), str(port), str(size)]


def _run(cmd: list[str], strace_out: str | None = None) -> dict:
    return run_json(cmd, strace_out, WRITE_CALLS)


def _count_writes(path: str) -> int:
    total = 0
    for line in Path(path).read_text().splitlines():
        parts = line.split()
        if parts and parts[-1] in WRITE_CALLS and len(parts) >= 5:
            total += int(parts[3])  # columns: % time, seconds, usecs/call, calls, [errors], name
    return total


def _redis_benchmark_cmd(port: int, n: int, size: int) -> list[str] | None:
    exe = shutil.which("redis-benchmark")
    if exe is None:
        return None
    cmd = [exe, "-p", str(port), "-n", str(n), "-c", "50", "-P", "16"]
    return [*cmd, "-d", str(size), "-r", str(n), "--csv"]


#: Sets every key redis-benchmark's GET can ask for (``key:%012d`` below ARGV[1],
#: the ``-r`` key space) that its SET phase left out, to a value of the same size.
FILL_KEYS = (
    "for i = 0, tonumber(ARGV[1]) - 1 do "
    "redis.call('SET', string.format('key:%012d', i), ARGV[2], 'NX') end"
)


def _cli(port: int, *args: str) -> None:
    subprocess.run(
        ["redis-cli", "-p", str(port), *args], check=True, capture_output=True, timeout=300
    )


def _redis_benchmark_round(
    cmd: list[str], port: int, n: int, size: int, server_pid: int
) -> dict[str, dict[str, float]]:
    """One run of redis-benchmark, on the same terms as the clients: an empty
    database for SET (the clients FLUSHDB first), and for GET every key of its key
    space present with a SIZE-byte value, as the clients' GETs find theirs (with
    ``-r N`` its random SETs cover ~63% of the keys, and a miss is a cheaper
    reply). Per phase: ops/s and the server's CPU seconds."""
    got = {}
    _cli(port, "FLUSHDB")
    for phase in PHASES:
        if phase == "get" and shutil.which("redis-cli"):
            _cli(port, "EVAL", FILL_KEYS, "0", str(n), "x" * size)
        s0 = cpu_seconds(server_pid)
        out = subprocess.run(
            pinned([*cmd, "-t", phase], CLIENT_CORE), capture_output=True, text=True, timeout=300
        ).stdout
        server = cpu_seconds(server_pid) - s0
        for row in csv.reader(io.StringIO(out)):
            if row and row[0].lower() == phase:
                got[phase] = {"ops": float(row[1]), "server_cpu": server}
    return got


def _ops(cfg: dict, run: dict, n: int) -> dict[str, int]:
    return {p: round(n / run[p]["secs"]) for p in PHASES}


def _label(r: dict) -> str:
    return r["driver"] if r["loop"] == "-" else f"{r['driver']}/{r['loop']}"


def main(argv: list[str] | None = None) -> dict:
    """Run the suite; write bench-results/redis.{json,md}; return the markdown."""
    ap = argparse.ArgumentParser(prog="python -m benchmarks.redis")
    ap.add_argument("--quick", action="store_true", help="N=20000, 1 repeat, uvloop only")
    # surge and redis-benchmark finish 100k keys in ~0.2 s, too short a phase to rise
    # above the VM's jitter; the peers take ~100x longer per key, so they get fewer keys
    # (ops/s is a rate all the same).
    ap.add_argument(
        "--n", type=int, default=1_000_000, help="keys per phase for surge and redis-benchmark"
    )
    ap.add_argument(
        "--peer-n",
        type=int,
        default=100_000,
        help="keys per phase for redis-py's pool (redis-py on one connection and coredis: a fifth)",
    )
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--conc", type=int, default=1000, help="coroutines per client")
    ap.add_argument("--size", type=int, default=64, help="value size in bytes")
    ap.add_argument("--no-strace", action="store_true")
    ap.add_argument("--out", default="redis", help="bench-results/OUT.{json,md}")
    ap.add_argument(
        "--drivers",
        default="",
        help="comma-separated labels to run (surge/uvloop,surge+blpop/uvloop,redis-benchmark); "
        "all by default",
    )
    args = ap.parse_args(sys.argv[1:] if argv is None else argv)
    n = 20_000 if args.quick else args.n
    peer_n = min(n, 20_000 if args.quick else args.peer_n)
    repeats = 1 if args.quick else args.repeats
    have_strace = shutil.which("strace") is not None and not args.no_strace
    bvenv.ensure(groups=["redis", "coredis"])

    results = []
    with services.redis() as svc:
        pin_pid(svc.pid, SERVER_CORE)
        # The clients read the server's CPU time per phase (benchmarks/redis/client.py).
        os.environ["SURGE_BENCH_SERVER_PID"] = str(svc.pid)
        configs = []
        only = {d for d in args.drivers.split(",") if d}
        for cfg in _configs(args.quick, args.conc):
            if only and _label(cfg) not in only:
                continue
            # One redis-py connection is one round trip per command, and coredis spends
            # ~150 us of CPU per command: a fifth of the peers' N keeps the suite short.
            if cfg["driver"].startswith("surge"):
                cn = n
            elif cfg["driver"] in ("redis-py-1conn", "coredis"):
                cn = max(1000, peer_n // 5)
            else:
                cn = peer_n
            cmd = _command(cfg, cn, svc.port, args.size)
            if cmd is None:
                print(f"skip {_label(cfg)}: interpreter missing", file=sys.stderr)
                continue
            configs.append((cfg, cn, cmd))
        rb_n = max(n, 100_000)
        rb_cmd = _redis_benchmark_cmd(svc.port, rb_n, args.size)
        if only and "redis-benchmark" not in only:
            rb_cmd = None
        runs: dict[int, list[dict]] = {i: [] for i in range(len(configs))}
        rb_runs: list[dict[str, dict[str, float]]] = []
        failed: set[int] = set()
        # Round by round, every configuration once per round (surge, peer, surge, peer).
        for rnd in range(repeats):
            for i, (cfg, _cn, cmd) in enumerate(configs):
                if i in failed:
                    continue
                try:
                    runs[i].append(_run(cmd))
                except RuntimeError as e:
                    print(f"skip {_label(cfg)}: {e}", file=sys.stderr)
                    failed.add(i)
                    continue
                print(
                    f"round {rnd + 1}: {_label(cfg)}", _ops(cfg, runs[i][-1], _cn), file=sys.stderr
                )
            if rb_cmd is not None:
                rb_runs.append(_redis_benchmark_round(rb_cmd, svc.port, rb_n, args.size, svc.pid))
                got = {p: round(v["ops"]) for p, v in rb_runs[-1].items()}
                print(f"round {rnd + 1}: redis-benchmark", got, file=sys.stderr)
        for i, (cfg, cn, cmd) in enumerate(configs):
            if i in failed or not runs[i]:
                continue
            row = {**cfg, "n": cn, "connections": runs[i][0].get("connections"), "phases": {}}
            for ph in PHASES:
                ops = statistics.median(cn / r[ph]["secs"] for r in runs[i])
                cpu = statistics.median(r[ph]["cpu"] / cn * 100_000 for r in runs[i])
                srv = statistics.median(r[ph].get("server_cpu", 0.0) / cn * 1e6 for r in runs[i])
                row["phases"][ph] = {"ops": ops, "cpu_per_100k": cpu, "server_us": srv}
            if have_strace:
                # strace slows every syscall: a smaller N keeps a chatty peer's run short,
                # and writes per 100k commands is a ratio all the same.
                sn = min(cn, STRACE_N)
                with tempfile.NamedTemporaryFile(suffix=".strace") as f:
                    try:
                        _run(_command(cfg, sn, svc.port, args.size) or cmd, f.name)
                    except RuntimeError as e:
                        print(f"{_label(cfg)}: no write count: {e}", file=sys.stderr)
                    else:
                        # +1 for the FLUSHDB; per 100k of the two phases' commands
                        writes = _count_writes(f.name) / (2 * sn + 1) * 100_000
                        row["writes_per_100k"] = writes
            results.append(row)
        if rb_cmd is not None and all(set(r) == set(PHASES) for r in rb_runs) and rb_runs:
            results.append(
                {
                    "driver": "redis-benchmark",
                    "loop": "-",
                    "conc": 50,
                    "n": rb_n,
                    "command": " ".join(["redis-benchmark", *rb_cmd[1:], "-t set|get"]),
                    "phases": {
                        p: {
                            "ops": statistics.median(r[p]["ops"] for r in rb_runs),
                            "cpu_per_100k": None,
                            "server_us": statistics.median(
                                r[p]["server_cpu"] / rb_n * 1e6 for r in rb_runs
                            ),
                        }
                        for p in PHASES
                    },
                }
            )

    md = _markdown(results, n, peer_n, repeats, args.size)
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"{args.out}.json").write_text(json.dumps(results, indent=2))
    (RESULTS / f"{args.out}.md").write_text(md)
    print(md)
    version = subprocess.run(
        ["redis-server", "--version"], capture_output=True, text=True
    ).stdout.split()
    setup = [
        f"Redis {version[2] if len(version) > 2 else '?'} (no persistence); SET then GET of "
        f"{n} keys (surge, redis-benchmark) or {peer_n} keys (redis-py's pool; redis-py on "
        f"one connection and coredis {max(1000, peer_n // 5)}) with {args.size}-byte values "
        f"from {args.conc} coroutines; surge on one "
        "connection, redis-py asyncio with its pool (a connection per concurrent command) "
        "and with a pool of one connection, coredis; surge+blpop: "
        "the same surge run with 100 more coroutines blocked in BLPOP (on 100 connections "
        "of the blocking pool); "
        "redis-benchmark -c 50 -P 16 (SET on an empty database, GET with its whole "
        "-r key space set, as the clients find theirs); "
        f"medians of {repeats} rounds, configurations alternating within each round; "
        "writes = strace -c write/writev/sendto/sendmsg; "
        f"server pinned to core {SERVER_CORE}, clients to core {CLIENT_CORE} (taskset)"
    ]
    return {"markdown": md, "setup_lines": setup, "results": results}


def _markdown(results: list[dict], n: int, peer_n: int, repeats: int, size: int) -> str:
    peers = {(r["driver"], r["loop"]): r for r in results}
    native = next((r for r in results if r["driver"] == "redis-benchmark"), None)
    lines = [
        f"### Redis: SET/GET of {n:,} keys x {size} B (peers: {peer_n:,} or fewer; "
        f"ops/s, median of {repeats})",
        "",
        "| client | coroutines | connections | SET | GET | vs peers (SET/GET) | "
        "vs redis-benchmark (SET/GET) | CPU s / 100k cmds | server CPU us / cmd (SET/GET) "
        "| writes / 100k cmds |",
        "|---|---:|---:|---:|---:|---|---|---:|---:|---:|",
    ]
    for r in results:
        ph = r["phases"]
        ops = " | ".join(f"{ph[p]['ops']:,.0f}" for p in PHASES)
        vs = " ; ".join(
            f"{name}: " + "/".join(f"{ph[p]['ops'] / peer['phases'][p]['ops']:.2f}" for p in PHASES)
            for name, peer in (
                ("pool", peers.get(("redis-py", r["loop"]))),
                ("1 conn", peers.get(("redis-py-1conn", r["loop"]))),
                ("coredis", peers.get(("coredis", r["loop"]))),
                ("surge without BLPOP", peers.get(("surge", r["loop"]))),
            )
            if peer
            and (
                (r["driver"] == "surge" and name != "surge without BLPOP")
                or (r["driver"] == "surge+blpop" and name == "surge without BLPOP")
            )
        )
        vsn = (
            "/".join(f"{ph[p]['ops'] / native['phases'][p]['ops']:.2f}" for p in PHASES)
            if native and r is not native
            else ""
        )
        cpus = [ph[p]["cpu_per_100k"] for p in PHASES if ph[p]["cpu_per_100k"] is not None]
        cpu = f"{statistics.mean(cpus):.2f}" if cpus else "-"
        w = r.get("writes_per_100k")
        ws = f"{w:,.0f}" if w is not None else "-"
        conns = r.get("connections") or "-"
        srv = "/".join(f"{ph[p].get('server_us') or 0:.2f}" for p in PHASES)
        cells = [_label(r), r["conc"], conns, ops, vs, vsn, cpu, srv, ws]
        lines.append("| " + " | ".join(map(str, cells)) + " |")
    if native:
        lines += ["", f"Native reference: `{native['command']}`."]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
