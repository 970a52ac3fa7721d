"""PostgreSQL reads and writes, side by side: surge.postgres vs asyncpg and psycopg 3 (async).

One PostgreSQL (``surge.services.postgres``: initdb defaults, so shared_buffers
128MB; fsync off, which these read-only queries never touch). The workloads of
the asyncpg article's benchmark (MagicStack/pgbench, seed 002), with the sizes
of DESIGN.md: ``pg_type`` (the catalog, a dozen columns, a few hundred rows),
``generate_series`` (1000 one-int rows), ``bytea`` (100 rows of 1 KB) and
``int_array`` (100 rows of int[100]); and ``composite_range`` (100 rows of a
composite type, an int4range, a tstzrange and an int8range[]: user-defined and
range codecs); ``select1`` (``SELECT 1``: the driver's own cost per query); and
two writes, at 10 connections only: ``executemany`` (an INSERT of 10k rows of
int4, text, float8 into an unlogged table) and ``copy`` (a binary COPY of 100k
such rows).

Two shapes, each a client process per driver:

- 10 connections: a pool of 10 and 10 coroutines querying back to back (every
  driver the same: a connection per query in flight).
- 1000 coroutines: surge on ONE connection (its queries pipelined) against
  asyncpg and psycopg on a pool of 10 (they need a connection per query in
  flight), and asyncpg on one connection behind a lock (what one connection
  costs a driver that cannot share it).

Each workload runs SECONDS per process after a warm-up; runs are interleaved
(run 1 of every client, then run 2, ...) and we report medians of queries/s and
rows/s, client CPU seconds per 10k queries, and from one extra run under
``strace -c -f`` the socket writes per 1k queries. The server is pinned to one
core, the clients to the other.

    python -m benchmarks.postgres [--quick] [--seconds 3] [--repeats 3] [--loops uvloop,asyncio]
                                  [--sslmode require]

``--sslmode MODE`` (other than disable): the server runs with ssl=on (a CA and
certificate made for the run) and every client process runs each workload twice,
in plaintext (sslmode=disable) and with that sslmode, alternated workload by
workload (the order flips every round), so each TLS figure has a plaintext one
measured seconds apart; the table adds a ``WORKLOAD+tls`` row per client and the
median of the per-round TLS/plaintext ratios. The results go to
``bench-results/postgres-MODE.*``. Without it, no TLS on the server (every
driver's default ``prefer`` then goes on in plaintext). ``make bench`` compares
TLS with plaintext in a suite of its own, ``benchmarks.postgres_tls`` (surge's
clients and the read workloads; asyncpg as a reference).
"""

from __future__ import annotations

import argparse
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

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
RESULTS = ROOT / "bench-results"
SURGE_PY = ROOT / ".venv" / "bin" / "python"
BENCH_PY = ROOT / ".bench-venv" / "bin" / "python"
WORKLOADS = (
    "select1",
    "pg_type",
    "generate_series",
    "bytea",
    "int_array",
    "composite_range",
    "executemany",
    "copy",
)
#: Write workloads run at 10 connections only: 1000 coroutines each holding 10k
#: or 100k rows in flight would measure memory, not the driver.
WRITE_WORKLOADS = ("executemany", "copy")
WRITE_CALLS = ("write", "writev", "sendto", "sendmsg")
#: Seconds per workload in the extra run under strace.
STRACE_SECS = 1.0
#: Pool size of the pooled clients.
POOL = 10
#: What client.py adds to a workload's name for its TLS run (see --sslmode).
TLS_SUFFIX = "+tls"

#: The write tables go without autovacuum: a run puts up to ~1M rows in one and
#: truncates it after, and the launcher (every autovacuum_naptime, 60 s) analyzed and
#: vacuumed _bench_em about once a minute, in the middle of whichever client was
#: writing then (3 + 3 times in 4 minutes): ANALYZE 78 ms + VACUUM 25 ms of server CPU
#: for 800k rows, ~5 % of that client's server CPU per call in a 2 s run, as large
#: as the gaps measured. Nothing reads these tables.
SETUP_SQL = """
SET client_min_messages = warning;
DROP TABLE IF EXISTS _bench_bytes, _bench_arrays;
CREATE TABLE _bench_bytes(b bytea);
INSERT INTO _bench_bytes(b) SELECT repeat('a', 1024)::bytea FROM generate_series(1, 100);
CREATE TABLE _bench_arrays(a int[]);
INSERT INTO _bench_arrays(a)
    SELECT (SELECT array_agg(i) FROM generate_series(1, 100) AS s(i)) FROM generate_series(1, 100);
DROP TABLE IF EXISTS _bench_comp;
DROP TYPE IF EXISTS _bench_pair;
CREATE TYPE _bench_pair AS (id int, name text, score float8, tags text[]);
CREATE TABLE _bench_comp(p _bench_pair, r int4range, t tstzrange, rs int8range[]);
INSERT INTO _bench_comp
    SELECT ROW(i, 'name ' || i, i * 1.5, ARRAY['a', 'b'])::_bench_pair, int4range(i, i + 10),
           tstzrange('2024-01-01'::timestamptz + i * interval '1 hour', '2024-02-01'),
           ARRAY[int8range(i, i + 1), int8range(i + 5, NULL)]
    FROM generate_series(1, 100) AS s(i);
DROP TABLE IF EXISTS _bench_em, _bench_copy;
CREATE UNLOGGED TABLE _bench_em(a int, b text, c float8) WITH (autovacuum_enabled = off);
CREATE UNLOGGED TABLE _bench_copy(a int, b text, c float8) WITH (autovacuum_enabled = off);
VACUUM ANALYZE _bench_bytes, _bench_arrays, _bench_comp;
"""
SETTINGS = ("server_version", "shared_buffers", "fsync", "synchronous_commit", "max_connections")

#: Cores for the server and the clients: on 2 cores the two must not share one.
SERVER_CORE, CLIENT_CORE = "1", "0"


def _configs(loops: list[str]) -> list[dict]:
    """Every client: driver, event loop, coroutines, connections."""
    out = []
    for loop in loops:
        for driver in ("surge", "asyncpg", "psycopg"):
            out.append(
                {"shape": "10 conns", "driver": driver, "loop": loop, "conc": 10, "conns": POOL}
            )
    for loop in loops:
        out.append(
            {"shape": "1000 coros", "driver": "surge", "loop": loop, "conc": 1000, "conns": 1}
        )
        for driver in ("asyncpg", "psycopg"):
            cfg = {
                "shape": "1000 coros",
                "driver": driver,
                "loop": loop,
                "conc": 1000,
                "conns": POOL,
            }
            out.append(cfg)
    out.append(
        {
            "shape": "1000 coros",
            "driver": "asyncpg-1conn",
            "loop": loops[0],
            "conc": 1000,
            "conns": 1,
        }
    )
    return out


def _label(cfg: dict) -> str:
    return f"{cfg['driver']}/{cfg['loop']}"


def _missing(cfg: dict) -> str | None:
    """Why this client cannot run, or None."""
    if cfg["driver"] == "surge":
        if not SURGE_PY.exists():
            return f"{SURGE_PY} missing (make build)"
        p = subprocess.run(
            [str(SURGE_PY), "-c", "from surge.postgres import connect, create_pool"],
            capture_output=True,
            text=True,
        )
        if p.returncode != 0:
            last = (p.stderr.strip().splitlines() or ["?"])[-1]
            return f"surge.postgres does not import in .venv ({last})"
        return None
    group = "asyncpg" if cfg["driver"].startswith("asyncpg") else "psycopg"
    if not BENCH_PY.exists() or not bvenv.have(group):
        return f"{group} is not installed in .bench-venv"
    return None


def _for_shape(cfg: dict, workloads: list[str]) -> list[str]:
    """The workloads a client of this shape runs (writes: at 10 connections only)."""
    if cfg["shape"] == "10 conns":
        return list(workloads)
    return [w for w in workloads if w not in WRITE_WORKLOADS]


def _keys(cfg: dict, workloads: list[str], tls: bool) -> list[str]:
    """The names of a client's results: each workload, and WORKLOAD+tls beside it
    when plaintext and TLS are compared."""
    out = []
    for w in _for_shape(cfg, workloads):
        out += [w, w + TLS_SUFFIX] if tls else [w]
    return out


def _base(key: str) -> str:
    """The workload a result key names (WORKLOAD+tls -> WORKLOAD)."""
    return key.removesuffix(TLS_SUFFIX)


def _command(cfg: dict, secs: float, port: int, workloads: list[str]) -> list[str]:
    workloads = _for_shape(cfg, workloads)
    py = SURGE_PY if cfg["driver"] == "surge" else BENCH_PY
    return [
        str(py),
        str(HERE / "client.py"),
        cfg["driver"],
        cfg["loop"],
        str(cfg["conc"]),
        str(cfg["conns"]),
        str(secs),
        str(port),
        ",".join(workloads),
    ]


def _can_pin() -> bool:
    return shutil.which("taskset") is not None and (os.cpu_count() or 1) > 1


def _pin_tree(pid: int, core: str) -> None:
    """Pin the postmaster and the processes it has started (backends forked later inherit)."""
    if not _can_pin():
        return
    pids = [pid]
    p = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True)
    pids += [int(x) for x in p.stdout.split()]
    for q in pids:
        subprocess.run(["taskset", "-a", "-p", "-c", core, str(q)], capture_output=True)


def _run(
    cmd: list[str], server_pid: int, strace_out: str | None = None, env_extra: dict | None = None
) -> dict:
    # generous (strace, 1000 coroutines draining) but bounded: a stuck client fails its
    # configuration instead of holding the whole suite
    secs, nworkloads = float(cmd[-3]), len(cmd[-1].split(","))
    if env_extra and "," in env_extra.get("PG_BENCH_SSLMODES", ""):
        nworkloads *= 2
    timeout = 300 + 10 * secs * nworkloads
    if _can_pin():
        cmd = ["taskset", "-c", CLIENT_CORE, *cmd]
    if strace_out:
        calls = ",".join(WRITE_CALLS)
        cmd = ["strace", "-c", "-f", "-e", f"trace={calls}", "-o", strace_out, *cmd]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PG_BENCH_SERVER_PID": str(server_pid)}
    env.update(env_extra or {})
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout, cwd=ROOT)
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd[:6])} failed: {p.stderr[-2000:]}")
    return json.loads(p.stdout.strip().splitlines()[-1])


def _count_writes(path: str) -> int:
    total = 0
    for line in Path(path).read_text().splitlines():
        parts = line.split()
        if parts and parts[-1] in WRITE_CALLS and len(parts) >= 5:
            # columns: % time, seconds, usecs/call, calls, [errors], syscall
            total += int(parts[3])
    return total


def _psql(port: int, sql: str) -> str:
    psql = shutil.which("psql") or str(Path(services._postgres_bindir()) / "psql")
    cmd = [psql, "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1"]
    cmd += ["-h", "127.0.0.1", "-p", str(port), "-U", "postgres", "-d", "postgres", "-f", "-"]
    # from stdin, statement by statement (VACUUM cannot run in -c's one transaction)
    p = subprocess.run(cmd, input=sql, capture_output=True, text=True, timeout=60)
    if p.returncode != 0:
        raise RuntimeError(f"psql failed: {p.stderr}")
    return p.stdout


def _server_settings(port: int) -> dict[str, str]:
    out = {}
    for name in SETTINGS:
        out[name] = _psql(port, f"SHOW {name}").strip()
    return out


def _make_tls(d: Path) -> services.PostgresTls:
    """A CA and a server certificate for this run (trustme, in surge's venv)."""
    import trustme

    ca = trustme.CA()
    cert = ca.issue_cert("localhost", "127.0.0.1")
    cert.cert_chain_pems[0].write_to_path(str(d / "server.crt"))
    cert.private_key_pem.write_to_path(str(d / "server.key"))
    return services.PostgresTls(str(d / "server.crt"), str(d / "server.key"))


def add_run_args(ap: argparse.ArgumentParser, seconds: float, seconds_help: str) -> None:
    """The arguments every PostgreSQL suite takes (this one and postgres_tls)."""
    ap.add_argument("--quick", action="store_true", help="1 s per workload, 1 run, uvloop only")
    ap.add_argument("--seconds", type=float, default=seconds, help=seconds_help)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--loops", default=None, help="event loops (default uvloop,asyncio)")


def run_settings(
    ap: argparse.ArgumentParser, args: argparse.Namespace, known: tuple[str, ...] = WORKLOADS
) -> tuple[float, int, list[str], list[str]]:
    """Seconds per workload, rounds, event loops and workloads from `add_run_args`'s
    arguments and ``--workloads`` (a workload not in ``known`` is a usage error)."""
    secs = 1.0 if args.quick else args.seconds
    repeats = 1 if args.quick else args.repeats
    loops = (args.loops or ("uvloop" if args.quick else "uvloop,asyncio")).split(",")
    workloads = [w for w in args.workloads.split(",") if w]
    unknown = sorted(set(workloads) - set(known))
    if unknown:
        ap.error(f"unknown workloads {unknown}")
    return secs, repeats, loops, workloads


def run_rounds(
    plan: list[tuple[dict, list[dict]]],
    repeats: int,
    secs: float,
    svc: services.Service,
    workloads: list[str],
    env: dict[str, str],
) -> None:
    """Run every client of ``plan`` once per round, appending each run's figures to
    its list; a failed run is reported and left out. Interleaved: a burst of
    background load hits every client alike; the order flips every round, so no
    client always runs first in a round."""
    for i in range(repeats):
        for cfg, runs in plan if i % 2 == 0 else plan[::-1]:
            cmd = _command(cfg, secs, svc.port, workloads)
            try:
                runs.append(_run(cmd, svc.pid, None, {**env, "PG_BENCH_ROUND": str(i)}))
            except (RuntimeError, ValueError, subprocess.TimeoutExpired) as e:
                print(f"{_label(cfg)} ({cfg['shape']}) run {i + 1} failed: {e}", file=sys.stderr)


def main(argv: list[str] | None = None) -> dict:
    """Run the suite; write bench-results/postgres.{json,md,png}; return the markdown."""
    ap = argparse.ArgumentParser(prog="python -m benchmarks.postgres")
    add_run_args(ap, 3.0, "seconds per workload and run")
    ap.add_argument(
        "--workloads", default=",".join(WORKLOADS), help=f"subset of {','.join(WORKLOADS)}"
    )
    ap.add_argument("--drivers", default=None, help="subset of surge,asyncpg,psycopg,asyncpg-1conn")
    ap.add_argument("--no-strace", action="store_true")
    ap.add_argument("--sslmode", default=None, help="TLS for every client: require, ...")
    args = ap.parse_args(sys.argv[1:] if argv is None else argv)
    secs, repeats, loops, workloads = run_settings(ap, args)
    strace_secs = STRACE_SECS / 2 if args.quick else STRACE_SECS
    have_strace = shutil.which("strace") is not None and not args.no_strace
    bvenv.ensure(groups=["asyncpg", "psycopg"])

    configs = _configs(loops)
    if args.drivers:
        keep = set(args.drivers.split(","))
        configs = [c for c in configs if c["driver"] in keep]
    missing: dict[str, str] = {}
    plan = []
    for cfg in configs:
        if not _for_shape(cfg, workloads):
            continue  # only writes asked for: no 1000-coroutine clients
        why = _missing(cfg)
        if why:
            missing.setdefault(cfg["driver"], why)  # the driver is missing altogether
            print(f"skip {_label(cfg)} ({cfg['shape']}): {why}", file=sys.stderr)
            continue
        plan.append((cfg, []))

    results = []
    tls_dir = None
    server_kw: dict = {}
    tls = bool(args.sslmode and args.sslmode != "disable")
    # both modes in each client process (see the module's docstring)
    modes = {"PG_BENCH_SSLMODES": f"disable,{args.sslmode}"} if tls else {}
    if tls:
        tls_dir = tempfile.TemporaryDirectory(prefix="surge-bench-tls-")
        server_kw["tls"] = _make_tls(Path(tls_dir.name))
    with services.postgres(**server_kw) as svc:
        _pin_tree(svc.pid, SERVER_CORE)
        _psql(svc.port, SETUP_SQL)
        settings = _server_settings(svc.port)
        run_rounds(plan, repeats, secs, svc, workloads, modes)
        for cfg, runs in plan:
            if not runs:
                missing[f"{_label(cfg)}, {cfg['shape']}"] = "every run failed (see the log)"
                continue
            row = {**cfg, "runs": len(runs), "workloads": {}}
            for w in _keys(cfg, workloads, tls):
                qps = [r[w]["queries"] / r[w]["secs"] for r in runs]
                cpu = [r[w]["cpu"] / r[w]["queries"] * 10_000 for r in runs]
                srv = [
                    r[w]["server_cpu"] / r[w]["queries"] * 10_000
                    for r in runs
                    if r[w].get("server_cpu") is not None
                ]
                row["workloads"][w] = {
                    "qps": statistics.median(qps),
                    "rows_per_s": statistics.median(qps) * runs[0][w]["rows_per_query"],
                    "rows_per_query": runs[0][w]["rows_per_query"],
                    "cpu_per_10k": statistics.median(cpu),
                    "server_cpu_per_10k": statistics.median(srv) if srv else None,
                    "other_cores": max(r[w]["other_cores"] for r in runs),
                    "qps_runs": qps,
                }
                if w.endswith(TLS_SUFFIX):
                    # paired: each round's TLS run over the plaintext one next to it
                    plain = [r[_base(w)]["queries"] / r[_base(w)]["secs"] for r in runs]
                    ratios = [t / p for t, p in zip(qps, plain, strict=True)]
                    row["workloads"][w]["tls_ratio"] = statistics.median(ratios)
            row["rss_kib"] = max(r.get("_rss_kib", 0) for r in runs)
            builds = [r["_surge_build"] for r in runs if "_surge_build" in r]
            if builds:
                row["surge_build"] = builds[-1]
                row["surge_builds_seen"] = len({(b["path"], b["mtime"]) for b in builds})
            if have_strace:
                for w in _keys(cfg, workloads, tls):
                    # one mode per traced run; its results are under the plain name
                    mode = args.sslmode if w.endswith(TLS_SUFFIX) else "disable"
                    env = {"PG_BENCH_SSLMODES": mode} if tls else {}
                    cmd = _command(cfg, strace_secs, svc.port, [_base(w)])
                    with tempfile.NamedTemporaryFile(suffix=".strace") as f:
                        try:
                            out = _run(cmd, svc.pid, f.name, env)
                        except (RuntimeError, ValueError, subprocess.TimeoutExpired) as e:
                            print(f"{_label(cfg)}: no write count: {e}", file=sys.stderr)
                            continue
                        # warm-up and first query included: every query the process made
                        o = out[_base(w)]
                        n = o["queries"] + o.get("warmup_queries", 0) + 1
                        row["workloads"][w]["writes_per_1k"] = _count_writes(f.name) / n * 1000
            results.append(row)
            print(
                _label(cfg),
                cfg["shape"],
                {w: round(v["qps"]) for w, v in row["workloads"].items()},
                file=sys.stderr,
            )

    if tls_dir is not None:
        tls_dir.cleanup()
    md = _markdown(results, workloads, secs, repeats, missing, tls)
    RESULTS.mkdir(exist_ok=True)
    stem = f"postgres-{args.sslmode}" if tls else "postgres"
    data = {
        "server": settings,
        "seconds": secs,
        "repeats": repeats,
        "versions": bvenv.versions(),
        "missing": missing,
        "results": results,
    }
    (RESULTS / f"{stem}.json").write_text(json.dumps(data, indent=2))
    (RESULTS / f"{stem}.md").write_text(md)
    _chart(results, workloads, RESULTS / f"{stem}.png")
    print(md)
    vers = data["versions"]
    setup = [
        f"PostgreSQL {settings.get('server_version', '?')} on loopback (initdb defaults: "
        f"shared_buffers {settings.get('shared_buffers', '?')}, max_connections "
        f"{settings.get('max_connections', '?')}; fsync {settings.get('fsync', '?')}, "
        "irrelevant to these reads); workloads of MagicStack/pgbench: pg_type, "
        "generate_series(1, 1000), 100 x 1 KB bytea, 100 x int[100]; composite_range: 100 "
        "rows of (a 4-field composite, int4range, tstzrange, int8range[2]); "
        f"asyncpg {vers.get('asyncpg', '?')}, psycopg {vers.get('psycopg', '?')} "
        f"(binary wheel, AsyncConnectionPool {vers.get('psycopg-pool', '?')}, autocommit, "
        "binary results, the composite registered); select1: SELECT 1; executemany: "
        "INSERT of 10k (int4, text, float8) rows into an unlogged table; copy: binary "
        "COPY of 100k such rows (copy_records_to_table; psycopg's COPY FORMAT BINARY); "
        "writes at 10 connections only; asyncpg's pool resets a connection on release "
        "(one more round trip per query, its default)",
        f"10 connections: a pool of {POOL}, 10 coroutines; 1000 coroutines: surge on ONE "
        f"connection, asyncpg/psycopg on a pool of {POOL}, asyncpg on one connection behind "
        f"a lock; {secs:g} s per workload after a 0.3 s warm-up; medians of {repeats} runs; "
        "writes = strace -c write/writev/sendto/sendmsg per 1k queries; "
        f"server pinned to core {SERVER_CORE}, clients to core {CLIENT_CORE} (taskset)",
    ]
    return {"markdown": md, "setup_lines": setup, "results": results}


def _ratio(rows: list[dict], r: dict, w: str, driver: str) -> str:
    """surge's queries/s over a peer's on the same shape (and loop), as text."""
    if r["driver"] != "surge":
        return ""
    same_loop = driver != "asyncpg-1conn"  # measured on the first loop only
    for p in rows:
        if p["driver"] == driver and (p["loop"] == r["loop"] or not same_loop):
            if w not in p["workloads"]:
                return "-"
            return f"{r['workloads'][w]['qps'] / p['workloads'][w]['qps']:.2f}"
    return "-"


def _markdown(
    results: list[dict],
    workloads: list[str],
    secs: float,
    repeats: int,
    missing: dict,
    tls: bool = False,
) -> str:
    lines = []
    for shape in ("10 conns", "1000 coros"):
        rows = [r for r in results if r["shape"] == shape]
        if not rows:
            continue
        title = (
            "10 coroutines on a pool of 10 connections"
            if shape == "10 conns"
            else "1000 coroutines: surge on one connection, peers on a pool of 10 / one conn"
        )
        lines += [
            f"### PostgreSQL: {title} (median of {repeats} x {secs:g} s)",
            "",
            "| workload | client | conns | queries/s | rows/s | vs asyncpg | vs psycopg | "
            "vs asyncpg 1 conn | client CPU s / 10k q | server CPU s / 10k q | "
            "writes / 1k q |" + (" TLS / plain |" if tls else ""),
            "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|" + ("---:|" if tls else ""),
        ]
        for w in [k for b in workloads for k in ([b, b + TLS_SUFFIX] if tls else [b])]:
            for r in rows:
                v = r["workloads"].get(w)
                if v is None:
                    continue

                wr, sc = v.get("writes_per_1k"), v.get("server_cpu_per_10k")
                cells = [
                    w,
                    _label(r),
                    r["conns"],
                    f"{v['qps']:,.0f}",
                    f"{v['rows_per_s']:,.0f}",
                    _ratio(rows, r, w, "asyncpg"),
                    _ratio(rows, r, w, "psycopg"),
                    _ratio(rows, r, w, "asyncpg-1conn") if shape != "10 conns" else "",
                    f"{v['cpu_per_10k']:.2f}",
                    f"{sc:.2f}" if sc is not None else "-",
                    f"{wr:,.0f}" if wr is not None else "-",
                ]
                if tls:
                    tr = v.get("tls_ratio")
                    cells.append(f"{tr:.2f}" if tr is not None else "")
                lines.append("| " + " | ".join(map(str, cells)) + " |")
        lines.append("")
    others = [v["other_cores"] for r in results for v in r["workloads"].values()]
    if others:
        lines.append(
            f"Other load on the machine while measuring (CPU neither the client nor the "
            f"server used, in cores): median {statistics.median(others):.2f}, worst "
            f"{max(others):.2f}{' - a noisy run' if max(others) > 0.25 else ''}."
        )
        lines.append("")
    builds = [r for r in results if "surge_build" in r]
    if any(r["surge_build"]["debug"] for r in builds):
        lines += ["**surge ran a DEBUG build of surge._core: its figures mean nothing.**", ""]
    seen = {(r["surge_build"]["path"], r["surge_build"]["mtime"]) for r in builds}
    if len(seen) > 1 or any(r.get("surge_builds_seen", 1) > 1 for r in builds):
        lines += ["**surge._core was rebuilt during the suite: runs mixed two builds.**", ""]
    for what, why in missing.items():
        lines.append(f"- **{what}: not measured** — {why}")
    if not lines:
        lines.append("(no client could run)")
    return "\n".join(lines).rstrip() + "\n"


def _chart(results: list[dict], workloads: list[str], path: Path) -> None:
    """Bar chart of queries/s per workload, one panel per shape (skipped without matplotlib)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    shapes = [s for s in ("10 conns", "1000 coros") if any(r["shape"] == s for r in results)]
    if not shapes:
        return
    fig, axes = plt.subplots(1, len(shapes), figsize=(6 * len(shapes), 4), squeeze=False)
    for ax, shape in zip(axes[0], shapes, strict=True):
        rows = [r for r in results if r["shape"] == shape]
        width = 0.8 / len(rows)
        names = [w for w in workloads if w in rows[0]["workloads"]]
        for k, r in enumerate(rows):
            xs = [i + k * width for i in range(len(names))]
            ax.bar(xs, [r["workloads"][w]["qps"] for w in names], width, label=_label(r))
        ax.set_xticks([i + 0.4 - width / 2 for i in range(len(names))], names)
        ax.set_ylabel("queries/s")
        ax.set_title(f"PostgreSQL, {shape}")
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


if __name__ == "__main__":
    main()
