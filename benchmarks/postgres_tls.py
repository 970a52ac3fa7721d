"""PostgreSQL over TLS against plaintext: what TLS costs surge.postgres per workload.

The read workloads of the postgres suite (``benchmarks.postgres``: select1,
pg_type, generate_series, bytea, int_array, composite_range) on one PostgreSQL
with ``ssl=on`` (a CA and a certificate made for the run), through surge's
clients on uvloop and asyncio, in both shapes: a pool of 10 connections with 10
coroutines, and 1000 coroutines pipelined on ONE connection. asyncpg (pool of 10,
uvloop) runs the same as a reference for the ratio, when the bench venv has it.

Every client process runs each workload twice, in plaintext (``sslmode=disable``)
and over TLS (``sslmode=require``), one after the other, the order flipping every
round, so each TLS figure has a plaintext one measured seconds apart; TLS/plain
is the median of these per-round ratios (the machine's speed drifts by tens of
percent over minutes, a ratio of medians would mix rounds). CPU per query, of the
client process and of the server (postmaster and backends, from /proc), is the
load-insensitive figure: where TLS costs, and on which side. The TLS stack and
what was negotiated come from one extra connection per client (``pg_stat_ssl``
of its backend).

    python -m benchmarks.postgres_tls [--quick] [--seconds 2] [--repeats 3]
                                      [--loops uvloop,asyncio] [--no-peers]

Results: ``bench-results/postgres_tls.{json,md}``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path

from surge import services

from benchmarks import venv as bvenv
from benchmarks.postgres import run as pgrun

#: The read workloads (the postgres suite's writes are not compared over TLS).
WORKLOADS = ("select1", "pg_type", "generate_series", "bytea", "int_array", "composite_range")
SSLMODE = "require"
TLS = pgrun.TLS_SUFFIX
#: The figure issue 12 asks of TLS: queries/s at least this share of plaintext's.
TARGET = 0.8


def configs(loops: list[str], peers: bool) -> list[dict]:
    """The clients: surge in both shapes on every loop; asyncpg's pool on the first."""
    out = []
    for shape, conc, conns in (("10 conns", 10, pgrun.POOL), ("1000 coros", 1000, 1)):
        for loop in loops:
            out.append(
                {"shape": shape, "driver": "surge", "loop": loop, "conc": conc, "conns": conns}
            )
    if peers:
        out.append(
            {
                "shape": "10 conns",
                "driver": "asyncpg",
                "loop": loops[0],
                "conc": 10,
                "conns": pgrun.POOL,
            }
        )
    return out


def _median_per_query(runs: list[dict], key: str, what: str) -> float | None:
    """Median over the runs of `what` (CPU seconds) per query, in microseconds."""
    vals = [r[key][what] / r[key]["queries"] * 1e6 for r in runs if r[key].get(what) is not None]
    return statistics.median(vals) if vals else None


def summarize(cfg: dict, runs: list[dict], workloads: list[str]) -> dict:
    """One client's row per workload from its runs (client.py's JSON, each with
    WORKLOAD and WORKLOAD+tls measured in the same process)."""
    row: dict = {**cfg, "runs": len(runs), "workloads": {}}
    for w in workloads:
        plain = [r[w]["queries"] / r[w]["secs"] for r in runs]
        tls = [r[w + TLS]["queries"] / r[w + TLS]["secs"] for r in runs]
        row["workloads"][w] = {
            "plain_qps": statistics.median(plain),
            "tls_qps": statistics.median(tls),
            # paired: each round's TLS run over the plaintext one beside it
            "ratio": statistics.median(t / p for t, p in zip(tls, plain, strict=True)),
            "ratios": [t / p for t, p in zip(tls, plain, strict=True)],
            "client_us": _median_per_query(runs, w, "cpu"),
            "client_tls_us": _median_per_query(runs, w + TLS, "cpu"),
            "server_us": _median_per_query(runs, w, "server_cpu"),
            "server_tls_us": _median_per_query(runs, w + TLS, "server_cpu"),
            "other_cores": max(max(r[w]["other_cores"], r[w + TLS]["other_cores"]) for r in runs),
        }
    tls_seen = [r["_tls"] for r in runs if "_tls" in r]
    if tls_seen:
        row["tls"] = tls_seen[-1]
    return row


def _us(v: float | None) -> str:
    return f"{v:.0f}" if v is not None else "-"


def tls_label(row: dict) -> str:
    """The client's TLS stack and what the server negotiated, as one table cell."""
    t = row.get("tls")
    if not t:
        return "-"
    return f"{t['stack']}, {t['version']} {t['cipher']}"


def markdown(rows: list[dict], workloads: list[str], secs: float, repeats: int) -> str:
    """The suite's table: one line per workload and client, TLS against plaintext."""
    lines = [
        f"### PostgreSQL over TLS (sslmode={SSLMODE}) vs plaintext "
        f"(median of {repeats} x {secs:g} s, TLS/plain: median of per-round ratios)",
        "",
        "| workload | client | conns | plain q/s | TLS q/s | TLS / plain | "
        "client us/q plain | client us/q TLS | server us/q plain | server us/q TLS |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for w in workloads:
        for r in rows:
            v = r["workloads"].get(w)
            if v is None:
                continue
            flag = "" if v["ratio"] >= TARGET else " *"
            cells = [
                w,
                f"{r['driver']}/{r['loop']}",
                r["conns"],
                f"{v['plain_qps']:,.0f}",
                f"{v['tls_qps']:,.0f}",
                f"{v['ratio']:.2f}{flag}",
                _us(v["client_us"]),
                _us(v["client_tls_us"]),
                _us(v["server_us"]),
                _us(v["server_tls_us"]),
            ]
            lines.append("| " + " | ".join(map(str, cells)) + " |")
    lines.append("")
    lines.append(
        f"`*`: under {TARGET} of plaintext. us/q: CPU microseconds per query (user + "
        "system, from /proc) of the client process and of the server (postmaster and "
        "backends)."
    )
    stacks = {f"{r['driver']}: {tls_label(r)}" for r in rows if r.get("tls")}
    if stacks:
        lines.append("TLS negotiated: " + "; ".join(sorted(stacks)) + ".")
    others = [v["other_cores"] for r in rows for v in r["workloads"].values()]
    if others:
        worst = max(others)
        lines.append(
            f"Other load on the machine while measuring (cores neither the client nor the "
            f"server used): median {statistics.median(others):.2f}, worst {worst:.2f}"
            f"{' - a noisy run' if worst > 0.25 else ''}."
        )
    return "\n".join(lines).rstrip() + "\n"


def main(argv: list[str] | None = None) -> dict:
    """Run the suite; write bench-results/postgres_tls.{json,md}; return the markdown."""
    ap = argparse.ArgumentParser(prog="python -m benchmarks.postgres_tls")
    pgrun.add_run_args(ap, 2.0, "seconds per workload and mode")
    ap.add_argument("--workloads", default=",".join(WORKLOADS), help="subset of the reads")
    ap.add_argument("--no-peers", action="store_true", help="surge only (no asyncpg reference)")
    args = ap.parse_args(sys.argv[1:] if argv is None else argv)
    secs, repeats, loops, workloads = pgrun.run_settings(ap, args, WORKLOADS)
    peers = not args.no_peers
    if peers:
        bvenv.ensure(groups=["asyncpg"])

    missing: dict[str, str] = {}
    plan: list[tuple[dict, list[dict]]] = []
    for cfg in configs(loops, peers):
        why = pgrun._missing(cfg)
        if why:
            missing.setdefault(cfg["driver"], why)
            print(f"skip {cfg['driver']}/{cfg['loop']} ({cfg['shape']}): {why}", file=sys.stderr)
            continue
        plan.append((cfg, []))

    with tempfile.TemporaryDirectory(prefix="surge-bench-tls-") as d:
        tls = pgrun._make_tls(Path(d))
        with services.postgres(tls=tls) as svc:
            pgrun._pin_tree(svc.pid, pgrun.SERVER_CORE)
            pgrun._psql(svc.port, pgrun.SETUP_SQL)
            settings = pgrun._server_settings(svc.port)
            settings["ssl_ciphers"] = pgrun._psql(svc.port, "SHOW ssl_ciphers").strip()
            settings["ssl_prefer_server_ciphers"] = pgrun._psql(
                svc.port, "SHOW ssl_prefer_server_ciphers"
            ).strip()
            settings["ssl_library"] = pgrun._psql(svc.port, "SHOW ssl_library").strip()
            env = {"PG_BENCH_SSLMODES": f"disable,{SSLMODE}"}
            pgrun.run_rounds(plan, repeats, secs, svc, workloads, env)

    rows = []
    for cfg, runs in plan:
        if not runs:
            missing[f"{cfg['driver']}/{cfg['loop']}, {cfg['shape']}"] = "every run failed"
            continue
        row = summarize(cfg, runs, workloads)
        rows.append(row)
        print(
            f"{cfg['driver']}/{cfg['loop']}",
            cfg["shape"],
            {w: round(v["ratio"], 2) for w, v in row["workloads"].items()},
            file=sys.stderr,
        )
    md = markdown(rows, workloads, secs, repeats)
    for what, why in missing.items():
        md += f"- **{what}: not measured** — {why}\n"
    pgrun.RESULTS.mkdir(exist_ok=True)
    data = {
        "server": settings,
        "seconds": secs,
        "repeats": repeats,
        "versions": bvenv.versions(),
        "missing": missing,
        "results": rows,
    }
    (pgrun.RESULTS / "postgres_tls.json").write_text(json.dumps(data, indent=2))
    (pgrun.RESULTS / "postgres_tls.md").write_text(md)
    print(md)
    setup = [
        f"PostgreSQL {settings.get('server_version', '?')} on loopback with ssl=on "
        f"({settings.get('ssl_library', '?')}, ssl_ciphers {settings.get('ssl_ciphers', '?')}, "
        f"ssl_prefer_server_ciphers {settings.get('ssl_prefer_server_ciphers', '?')}; "
        "a CA and a certificate made for the run); the postgres suite's read workloads, "
        f"each in plaintext and over TLS (sslmode={SSLMODE}) in the same client process, "
        "alternated, the order flipping every round",
        f"10 connections: a pool of {pgrun.POOL}, 10 coroutines; 1000 coroutines: surge on "
        f"ONE connection; asyncpg (pool of {pgrun.POOL}) as a reference; {secs:g} s per "
        f"workload and mode after a 0.3 s warm-up; medians of {repeats} rounds; server "
        f"pinned to core {pgrun.SERVER_CORE}, clients to core {pgrun.CLIENT_CORE} (taskset)",
    ]
    return {"markdown": md, "setup_lines": setup, "results": rows}


if __name__ == "__main__":
    main()
