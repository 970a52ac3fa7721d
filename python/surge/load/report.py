"""A run's result: merged histograms, percentiles, errors by kind, the generator's
own CPU use and warnings; the terminal table, the progress line and the JSON."""

from __future__ import annotations

import base64
import datetime as dt
import os
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from hdrh.histogram import HdrHistogram

from surge.load.recorder import ERROR_KINDS, decode_histogram, new_histogram
from surge.load.target import LoadConfig, describe

#: Percentiles every report shows.
PERCENTILES = (50.0, 90.0, 95.0, 99.0, 99.9)
#: A worker using more than this share of a core may be what limits the load.
CPU_WARN = 0.90
#: An open-model run whose achieved rate is below this share of the target is flagged.
RATE_WARN = 0.95
#: A scheduler running later than this (p99, ms) could not keep its schedule.
LAG_WARN_MS = 10.0


def latency_summary(h: HdrHistogram) -> dict[str, float | None]:
    """p50..p99.9, max and mean in milliseconds (None without samples)."""
    if not h.get_total_count():
        return {**{_pname(p): None for p in PERCENTILES}, "max": None, "mean": None}
    out: dict[str, float | None] = {
        _pname(p): round(h.get_value_at_percentile(p) / 1000, 3) for p in PERCENTILES
    }
    out["max"] = round(h.get_max_value() / 1000, 3)
    out["mean"] = round(h.get_mean_value() / 1000, 3)
    return out


def _pname(p: float) -> str:
    return f"p{p:g}"


@dataclass
class Result:
    """The merged outcome of one run (``to_dict()`` is the ``--json`` form)."""

    config: dict[str, Any]
    started: str
    duration: float
    sent: int
    replies: int
    errors: dict[str, int]
    status: dict[str, int]
    latency: dict[str, float | None]
    ops: dict[str, dict[str, Any]]
    series: list[dict[str, Any]]
    generator: dict[str, Any]
    warnings: list[str] = field(default_factory=list)
    histogram: HdrHistogram | None = field(default=None, repr=False)
    #: Why connection attempts failed ("tls_handshake: <reason>": attempts).
    error_reasons: dict[str, int] = field(default_factory=dict)
    #: Stopped by Ctrl-C: ``duration`` is the seconds measured before it.
    interrupted: bool = False

    @property
    def target_rate(self) -> float | None:
        """The requested rate (open model), else None."""
        return self.config.get("rate")

    @property
    def achieved_rate(self) -> float:
        """Replies per second over the run (errors with no reply not counted)."""
        return self.replies / self.duration if self.duration else 0.0

    @property
    def error_count(self) -> int:
        """Requests that ended in an error of any kind (4xx/5xx included)."""
        return sum(self.errors.values())

    def percentile(self, p: float) -> float:
        """Latency at percentile ``p`` in milliseconds (0 without samples)."""
        if self.histogram is None or not self.histogram.get_total_count():
            return 0.0
        return self.histogram.get_value_at_percentile(p) / 1000

    def to_dict(self) -> dict[str, Any]:
        """Plain data for JSON (the merged histogram HdrHistogram-encoded, base64)."""
        return {
            "config": self.config,
            "started": self.started,
            "duration_s": round(self.duration, 3),
            "interrupted": self.interrupted,
            "sent": self.sent,
            "replies": self.replies,
            "achieved_rate": round(self.achieved_rate, 2),
            "target_rate": self.target_rate,
            "latency_ms": self.latency,
            "errors": self.errors,
            "error_reasons": self.error_reasons,
            "status": self.status,
            "ops": self.ops,
            "series": self.series,
            "generator": self.generator,
            "warnings": self.warnings,
            "hdr_histogram": _b64(self.histogram),
        }


def _b64(h: HdrHistogram | None) -> str | None:
    if h is None or not h.get_total_count():
        return None
    data = h.encode()
    return data.decode("ascii") if isinstance(data, bytes) else base64.b64encode(data).decode()


def build_result(
    config: LoadConfig,
    ops: list[str],
    finals: list[dict[str, Any]],
    series: list[dict[str, Any]],
    started: float,
) -> Result:
    """Merge the workers' finals into one `Result` and judge the generator."""
    total = new_histogram()
    lag = new_histogram()
    errors: Counter[str] = Counter()
    status: Counter[str] = Counter()
    per_op: dict[str, dict[str, Any]] = {}
    duration = max((f["wall"] for f in finals), default=config.duration)
    # Rates are per second of the scheduled duration (the drain is not load time);
    # of the seconds measured when the run was interrupted.
    interrupted = any(f.get("interrupted") for f in finals)
    span = config.duration
    if interrupted:
        span = max(f.get("duration", config.duration) for f in finals) or config.duration
    for op in ops:
        h = new_histogram()
        e: Counter[str] = Counter()
        s: Counter[str] = Counter()
        for f in finals:
            o = f["ops"][op]
            if o["hist"]:
                h.decode_and_add(o["hist"])
            e.update(o["errors"])
            s.update(o["status"])
        total.add(h)
        errors.update(e)
        status.update(s)
        n = h.get_total_count()
        per_op[op] = {
            "replies": n,
            "rate": round(n / span, 2),
            "latency_ms": latency_summary(h),
            "errors": _ordered(e),
            "status": dict(sorted(s.items())),
        }
    reasons: Counter[str] = Counter()
    for f in finals:
        if f["lag"]:
            lag.add(decode_histogram(f["lag"]))
        reasons.update(f.get("reasons", {}))
    cpu = [f["cpu"] / f["wall"] if f["wall"] else 0.0 for f in finals]
    result = Result(
        config=describe(config),
        started=dt.datetime.fromtimestamp(started, dt.UTC).isoformat(timespec="seconds"),
        duration=span,
        sent=sum(f["sent"] for f in finals)
        if config.open_model
        else total.get_total_count() + sum(errors.values()),
        replies=total.get_total_count(),
        errors=_ordered(errors),
        status=dict(sorted(status.items())),
        latency=latency_summary(total),
        ops=per_op,
        series=series,
        generator={
            "procs": len(finals),
            "cpu_percent": [round(c * 100, 1) for c in cpu],
            "cpu_seconds": round(sum(f["cpu"] for f in finals), 3),
            "wall_seconds": round(duration, 3),
            "schedule_lag_ms": latency_summary(lag) if lag.get_total_count() else None,
            "cores": os.cpu_count(),
        },
        histogram=total,
        error_reasons=dict(reasons.most_common()),
        interrupted=interrupted,
    )
    result.warnings = judge(result, cpu)
    if interrupted:
        result.warnings.insert(
            0,
            f"interrupted after {span:.1f} s of {config.duration:g} s: the figures cover"
            f" those {span:.1f} s (requests in flight then count as 'interrupted')",
        )
    return result


def _ordered(c: Counter[str]) -> dict[str, int]:
    known = [k for k in ERROR_KINDS if c.get(k)]
    return {k: c[k] for k in known + sorted(k for k in c if k not in ERROR_KINDS and c[k])}


def judge(result: Result, cpu: list[float]) -> list[str]:
    """Warnings that the numbers may describe the generator rather than the server."""
    out = []
    busy = [i for i, c in enumerate(cpu) if c >= CPU_WARN]
    if busy:
        worst = max(cpu) * 100
        out.append(
            f"generator busy: worker(s) {', '.join(map(str, busy))} used up to {worst:.0f}% "
            "of a core; the generator may be the bottleneck (add --procs, or lower the rate)"
        )
    target = result.target_rate
    if target and result.achieved_rate < RATE_WARN * target:
        if busy:
            who = "the generator (see its CPU use)"
        elif result.error_count:
            who = f"the target ({result.error_count} errors)"
        else:
            who = "the target"
        out.append(
            f"achieved {result.achieved_rate:.0f} req/s, below {RATE_WARN:.0%} of the "
            f"target {target:g}: limited by {who}"
        )
    lag = result.generator.get("schedule_lag_ms")
    if lag and lag.get("p99") and lag["p99"] > LAG_WARN_MS:
        out.append(
            f"generator fell behind its schedule: lag p99 {lag['p99']:.1f} ms; "
            "latencies include that lag"
        )
    if result.generator["procs"] > (os.cpu_count() or 1):
        out.append(f"{result.generator['procs']} worker processes on {os.cpu_count()} cores")
    return out


# --------------------------------------------------------------------------- rendering


def _fmt(v: float | None) -> str:
    if v is None:
        return "-"
    if v >= 100:
        return f"{v:.0f}"
    if v >= 10:
        return f"{v:.1f}"
    return f"{v:.2f}"


def render_table(r: Result) -> str:
    """The readable terminal report of one run."""
    c = r.config
    if c["model"] == "open":
        model = f"open model, target {c['rate']:g} req/s"
    else:
        model = f"closed model, {c['connections'] or 'default'} connections x {c['pipeline']}"
    lines = [
        f"surge load {c['target']}  ({model}, {c['duration']:g} s, {c['procs']} proc(s))",
    ]
    rate = f"achieved {r.achieved_rate:.1f} req/s"
    if r.target_rate:
        rate += f" (target {r.target_rate:g}, {100 * r.achieved_rate / r.target_rate:.1f}%)"
    lines.append(f"  {r.sent} sent, {r.replies} replies, {r.error_count} errors; {rate}")
    timed = "each request's due time" if c["model"] == "open" else "its send time"
    lines.append(f"  latency in ms, timed from {timed}:")
    cols = ["op", "replies", "req/s", "p50", "p90", "p95", "p99", "p99.9", "max"]
    rows = [cols]
    items = list(r.ops.items())
    if len(items) > 1:
        items.append(
            ("all", {"replies": r.replies, "rate": r.achieved_rate, "latency_ms": r.latency})
        )
    for name, o in items:
        lat = o["latency_ms"]
        rows.append(
            [name, str(o["replies"]), f"{o['rate']:.1f}"]
            + [_fmt(lat[k]) for k in ("p50", "p90", "p95", "p99", "p99.9", "max")]
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(cols))]
    for row in rows:
        cells = [row[0].ljust(widths[0])] + [
            v.rjust(w) for v, w in zip(row[1:], widths[1:], strict=True)
        ]
        lines.append("    " + "  ".join(cells))
    if r.status:
        lines.append("  status: " + ", ".join(f"{k} {v}" for k, v in r.status.items()))
    if r.errors:
        lines.append("  errors: " + ", ".join(f"{k} {v}" for k, v in r.errors.items()))
    else:
        lines.append("  errors: none")
    for why, n in r.error_reasons.items():
        lines.append(f"    {n} connection attempt(s) failed: {why}")
    g = r.generator
    per = ", ".join(f"{p:.0f}%" for p in g["cpu_percent"])
    gen = f"  generator: {g['procs']} proc(s), CPU per proc {per} of a core"
    if g["schedule_lag_ms"]:
        lag = g["schedule_lag_ms"]
        gen += f", schedule lag p50 {_fmt(lag['p50'])} / p99 {_fmt(lag['p99'])} ms"
    lines.append(gen)
    for w in r.warnings:
        lines.append(f"  WARNING: {w}")
    return "\n".join(lines) + "\n"


def render_progress(point: dict[str, Any], config: LoadConfig) -> str:
    """One live progress line for a finished second."""
    t = point["t"] + point.get("dt", 1)
    rate = point["n"] / point.get("dt", 1)
    s = f"[{t:>4}s/{config.duration:g}s] {rate:8.0f} req/s"
    if config.rate:
        s += f" (target {config.rate:g})"
    s += f"  p50 {_fmt(point.get('p50_ms'))} ms  p99 {_fmt(point.get('p99_ms'))} ms"
    s += f"  errors {point['errors']}"
    return s


def render_sweep(results: list[Result]) -> str:
    """A table of a rate sweep: percentiles and errors per target rate."""
    head = ["target", "achieved", "p50", "p90", "p95", "p99", "p99.9", "max", "errors"]
    rows = [head]
    for r in results:
        lat = r.latency
        rows.append(
            [f"{r.target_rate or 0:g}", f"{r.achieved_rate:.0f}"]
            + [_fmt(lat[k]) for k in ("p50", "p90", "p95", "p99", "p99.9", "max")]
            + [str(r.error_count)]
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(head))]
    out = ["latency (ms) against rate (req/s):"]
    for row in rows:
        out.append("  " + "  ".join(v.rjust(w) for v, w in zip(row, widths, strict=True)))
    return "\n".join(out) + "\n"
