"""The http suite's tables: medians per server and measurement, ratios to the
peers, the targets' verdicts, the memory phase."""

from __future__ import annotations

import statistics
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from benchmarks.http.run import Server

# key -> (column title, path, pipeline depth or None for the --depth option)
MEASUREMENTS: dict[str, tuple[str, str, int | None]] = {
    "plain": ("plain `/`", "/", 1),
    "pipelined": ("pipelined `/`", "/", None),
    "json": ("`/json`", "/json", 1),
    "async": ("async `/user/7`", "/user/7", 1),
}


def _fmt_rps(x: float | None) -> str:
    return "—" if x is None else f"{x:,.0f}"


def _cell(entry: dict | None) -> str:
    """A table cell for one server x measurement."""
    if not entry:
        return "—"
    if entry.get("status") != "ok":
        return entry.get("status", "error")
    s = _fmt_rps(entry["rps"])
    if entry.get("flagged"):
        s += " ⚠"
    return s


def _median_ms(runs: list[dict], key: str) -> float | None:
    vals = [r[key] for r in runs if r[key] > 0]  # wrk 4.1 reports 0 when it lost the tail
    return statistics.median(vals) / 1000 if vals else None


def summarize(raw: dict[str, dict[str, list[dict]]], servers: dict[str, Server]) -> dict:
    """Medians per server x measurement."""
    out: dict[str, dict[str, dict]] = {}
    for name, srv in servers.items():
        out[name] = {}
        for key in MEASUREMENTS:
            path = MEASUREMENTS[key][1]
            if srv.status != "ok":
                out[name][key] = {"status": "error", "error": srv.error}
                continue
            if srv.checks.get(path, "ok") != "ok":
                out[name][key] = {"status": "bad response", "error": srv.checks[path]}
                continue
            runs = [r for r in raw.get(name, {}).get(key, []) if "error" not in r]
            if not runs:
                errs = [r["error"] for r in raw.get(name, {}).get(key, []) if "error" in r]
                out[name][key] = {"status": "error", "error": "; ".join(errs)[:300]}
                continue
            errors = sum(r["errors"] for r in runs)
            out[name][key] = {
                "status": "ok",
                "rps": statistics.median(r["rps"] for r in runs),
                "p50_ms": _median_ms(runs, "lat_p50_us"),
                "p99_ms": _median_ms(runs, "lat_p99_us"),
                "rtt_ms": statistics.median(r["rtt_ms"] or 0 for r in runs),
                "depth": runs[0]["pipeline"],
                "server_cpu_pct": statistics.median(r["server_cpu_pct"] for r in runs),
                "wrk_cpu_pct": statistics.median(r["wrk_cpu_pct"] for r in runs),
                "other_cpu_pct": statistics.median(r["other_cpu_pct"] for r in runs),
                "errors": errors,
                "non2xx": sum(r["status"] for r in runs),
                "socket_errors": errors - sum(r["status"] for r in runs),
                "flagged": errors > 0 or any(r["requests"] == 0 for r in runs),
                "runs": len(runs),
            }
    return out


def ratio(summary: dict, key: str, peer: str) -> str:
    s, p = summary.get("surge", {}).get(key), summary.get(peer, {}).get(key)
    if not s or not p or s.get("status") != "ok" or p.get("status") != "ok" or not p["rps"]:
        return "n/a"
    return f"{s['rps'] / p['rps']:.2f}x"


def markdown(setup: dict, summary: dict, servers: dict[str, Server], memory: dict | None) -> str:
    depth = setup["pipeline_depth"]
    lines = [
        f"**HTTP hello world: 1 worker, wrk -t{setup['wrk_threads']} "
        f"-c{setup['connections']} -d{setup['duration_s']}s, pipelined depth {depth}**",
        "",
        f"Requests/s, median of {setup['runs']} run(s); `surge/x` = surge's figure divided "
        "by that server's, same run. ⚠ = socket or HTTP errors in a run.",
        "",
    ]
    others = [
        e["other_cpu_pct"]
        for per in summary.values()
        for e in per.values()
        if e.get("status") == "ok"
    ]
    if "surge" in summary and setup.get("surge_build") == "debug":
        lines += [
            "⚠ surge's native module is a **debug** build (`make dev`): its figures say "
            "nothing; `make bench` builds the release one.",
            "",
        ]
    if others and statistics.median(others) > 25:
        lines += [
            f"⚠ Disturbed run: other processes used a median {statistics.median(others):.0f}% "
            "of a core during the measurements (see the CPU table): the figures, even the "
            "ratios, are indicative only.",
            "",
        ]
    cols = list(MEASUREMENTS)
    titles = [MEASUREMENTS[k][0] for k in cols]
    head = "| server | " + " | ".join(f"{t} | surge/x" for t in titles) + " |"
    lines += [head, "|---" + "|---:|---:" * len(cols) + "|"]
    for name in summary:
        cells = []
        for key in cols:
            cells.append(_cell(summary[name][key]))
            cells.append("—" if name == "surge" else ratio(summary, key, name))
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    lines += [
        "",
        "Latency in ms, median over runs: wrk's p50 / p99 (coordinated-omission corrected) "
        f"for one request per write; for pipelining, the mean round trip of a batch of {depth} "
        "(connections x depth / req/s; wrk's percentiles are wrong there). "
        "Idle RSS (whole process tree) and CPU after start:",
        "",
        "| server | " + " | ".join(titles) + " | idle RSS MB | idle CPU % |",
        "|---" + "|---:" * (len(cols) + 2) + "|",
    ]

    def ms(x: float | None) -> str:
        return "n/a" if x is None else f"{x:.2f}"

    for name in summary:
        cells = []
        for key in cols:
            e = summary[name][key]
            if e.get("status") != "ok":
                cells.append("—")
            elif e["depth"] > 1:
                cells.append(f"{ms(e['rtt_ms'])} per batch")
            else:
                cells.append(f"{ms(e['p50_ms'])} / {ms(e['p99_ms'])}")
        idle = servers[name].idle
        cells.append(f"{idle['rss_kb'] / 1024:.1f}" if idle else "—")
        cells.append(f"{idle['cpu_pct']:.1f}" if idle else "—")
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    lines += [
        "",
        "CPU use during the runs, % of one core, server / wrk / everything else on the "
        "machine (median over runs). A server well under 100% with wrk near 100% was "
        "limited by the client; a large third figure means other load disturbed the run.",
        "",
        "| server | " + " | ".join(titles) + " |",
        "|---" + "|---:" * len(cols) + "|",
    ]
    for name in summary:
        cells = []
        for key in cols:
            e = summary[name][key]
            ok = e.get("status") == "ok"
            cells.append(
                f"{e['server_cpu_pct']:.0f} / {e['wrk_cpu_pct']:.0f} / {e['other_cpu_pct']:.0f}"
                if ok
                else "—"
            )
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    problems = []
    for name, srv in servers.items():
        if srv.status != "ok":
            problems.append(f"- {name}: error: {srv.error[:300]}")
        for path, c in srv.checks.items():
            if c != "ok":
                problems.append(f"- {name} `{path}`: {c}")
        for key in cols:
            e = summary[name][key]
            if e.get("flagged"):
                problems.append(
                    f"- {name} {key}: {e['non2xx']} HTTP errors, "
                    f"{e['socket_errors']} socket errors over {e['runs']} run(s)"
                )
            elif e.get("status") == "error" and srv.status == "ok":
                problems.append(f"- {name} {key}: {e.get('error', '')[:200]}")
    if problems:
        lines += ["", "Problems:", "", *problems]
    if memory:
        lines += ["", *memory_markdown(memory)]
    checks = targets(summary, memory)
    if checks:
        lines += ["", "surge's targets (issue 2), this run:", ""]
        lines += ["| target | measured | met |", "|---|---:|:---:|"]
        for t in checks:
            met = {True: "yes", False: "**no**", None: "n/a"}[t["met"]]
            lines.append(f"| {t['target']} | {t['measured']} | {met} |")
    return "\n".join(lines) + "\n"


def targets(summary: dict, memory: dict | None) -> list[dict]:
    """surge's performance targets (issue 2), checked against this run's figures."""
    if summary.get("surge", {}).get("plain", {}).get("status") != "ok":
        return []
    out = []

    def rps(server: str, key: str) -> float | None:
        e = summary.get(server, {}).get(key, {})
        return e.get("rps") if e.get("status") == "ok" else None

    def vs(key: str, peer: str, want: float) -> None:
        s, p = rps("surge", key), rps(peer, key)
        r = s / p if s and p else None
        out.append(
            {
                "target": f"{key} >= {want}x {peer}",
                "measured": "n/a" if r is None else f"{r:.2f}x",
                "value": r,
                "met": None if r is None else r >= want,
            }
        )

    vs("pipelined", "fasthttp", 1.0)
    vs("pipelined", "socketify", 4.0)
    vs("plain", "nginx", 1.0)
    vs("plain", "socketify", 1.3)
    a, p = rps("surge", "async"), rps("surge", "plain")
    r = a / p if a and p else None
    out.append(
        {
            "target": "async route >= 0.5x the sync one (`/user/7` / `/`)",
            "measured": "n/a" if r is None else f"{r:.2f}x",
            "value": r,
            "met": None if r is None else r >= 0.5,
        }
    )
    if memory and not memory.get("error"):
        idle = memory["idle"]
        out.append(
            {
                "target": "idle worker: no CPU, <= 40 MB RSS",
                "measured": f"{idle['cpu_pct']:.1f}% CPU, {idle['rss_kb'] / 1024:.1f} MB",
                "value": idle["rss_kb"] / 1024,
                "met": idle["cpu_pct"] < 1.0 and idle["rss_kb"] <= 40 * 1024,
            }
        )
        g = memory.get("growth_pct")
        out.append(
            {
                "target": f"RSS after {memory['long_done']:,} req within 10% of after "
                f"{memory['short_done']:,}",
                "measured": "n/a" if g is None else f"{g:+.1f}%",
                "value": g,
                "met": None if g is None else abs(g) <= 10,
            }
        )
    return out


def memory_markdown(mem: dict) -> list[str]:
    name = mem["server"]
    if mem.get("error"):
        return [f"Memory ({name}): not measured: {mem['error']}"]

    def mb(kb: int) -> str:
        return f"{kb / 1024:.1f}"

    growth = mem.get("growth_pct")

    def pct(x: float | None) -> str:
        return "n/a" if x is None else f"{x:.0f}"

    return [
        f"Memory and CPU of the {name} worker (pid {mem['worker_pid']}, "
        f"`{mem['worker_comm']}`), fresh start:",
        "",
        "| idle RSS MB | idle CPU % | RSS MB after "
        f"{mem['short_done']:,} req | RSS MB after {mem['long_done']:,} req | growth "
        "| CPU % under load (wrk's) | idle CPU % after load |",
        "|---:|---:|---:|---:|---:|---:|---:|",
        f"| {mb(mem['idle']['rss_kb'])} | {mem['idle']['cpu_pct']:.1f} "
        f"| {mb(mem['rss_short_kb'])} | {mb(mem['rss_long_kb'])} "
        f"| {'n/a' if growth is None else f'{growth:+.1f}%'} "
        f"| {pct(mem['load_cpu_pct'])} ({pct(mem['load_wrk_cpu_pct'])}) "
        f"| {mem['idle_after']['cpu_pct']:.1f} |",
    ]
