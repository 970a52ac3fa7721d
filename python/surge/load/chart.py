"""PNG charts: latency percentiles against rate (a sweep), and per-operation rate
over time (one run). matplotlib is imported only here, when a chart is asked for."""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from surge.load.report import Result


def _plt() -> Any:
    try:
        import matplotlib
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise RuntimeError("charts need matplotlib: pip install 'surge[load]'") from exc
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


#: Most labelled ticks on a latency axis.
MAX_TICKS = 12


def log_ticks(lo: float, hi: float) -> list[float]:
    """Labelled values for a log axis from `lo` to `hi`: the finest of 1-per-decade,
    1-2-5 and 1..9 that fits in `MAX_TICKS`; evenly spaced values when the range
    is too narrow for those (0.3 to 1.8 ms would get nothing above "1")."""
    from matplotlib.ticker import MaxNLocator

    if not (lo > 0 and hi > lo):
        return []
    first, last = math.floor(math.log10(lo)), math.ceil(math.log10(hi))
    best: list[float] = []
    for subs in ((1,), (1, 2, 5), (1, 1.5, 2, 3, 4, 5, 6, 7, 8, 9)):
        ticks = [
            round(s * 10.0**e, 12)
            for e in range(first, last + 1)
            for s in subs
            if lo <= s * 10.0**e <= hi
        ]
        if len(ticks) > MAX_TICKS:
            break
        best = ticks
    # Three labels at least, and no end of the range further from a label than
    # the labels are from each other.
    gap = max((b / a for a, b in itertools.pairwise(best)), default=10.0)
    if len(best) >= 3 and best[0] <= lo * gap and best[-1] >= hi / gap:
        return best
    even = MaxNLocator(nbins=6).tick_values(lo, hi)
    return [round(float(v), 12) for v in even if lo <= v <= hi and v > 0]


def _log_ms(ax: Any) -> None:
    """A log scale labelled in plain milliseconds (0.5, 1, 2, 5, 10), every label
    chosen from the plotted range so that no stretch of the axis is left bare."""
    from matplotlib.ticker import FixedLocator, FuncFormatter, LogLocator, NullFormatter

    ax.set_yscale("log")
    ax.autoscale_view()
    lo, hi = ax.get_ylim()
    ax.yaxis.set_major_locator(FixedLocator(log_ticks(lo, hi)))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.yaxis.set_minor_locator(LogLocator(subs=(2, 3, 4, 5, 6, 7, 8, 9)))
    ax.yaxis.set_minor_formatter(NullFormatter())
    ax.set_ylim(lo, hi)


def percentiles_vs_rate(
    series: dict[str, Sequence[Result]],
    path: str | Path,
    *,
    title: str = "latency against request rate",
    limit_ms: float | None = None,
) -> Path:
    """One line per (name, percentile): p50/p95/p99 against the target rate, as a PNG."""
    plt = _plt()
    fig = percentiles_figure(series, title=title, limit_ms=limit_ms)
    out = Path(path)
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out


def percentiles_figure(
    series: dict[str, Sequence[Result]],
    *,
    title: str = "latency against request rate",
    limit_ms: float | None = None,
) -> Any:
    """The matplotlib figure `percentiles_vs_rate` saves (close it with pyplot.close)."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(9, 5.5))
    styles = {"p50": ":", "p95": "--", "p99": "-"}
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for i, (name, results) in enumerate(series.items()):
        rates = [r.target_rate or r.achieved_rate for r in results]
        for p, style in styles.items():
            vals = [r.latency[p] for r in results]
            ax.plot(
                rates,
                vals,
                style,
                marker="o",
                markersize=3,
                color=colors[i % len(colors)],
                label=f"{name} {p}",
            )
    if limit_ms is not None:
        ax.axhline(limit_ms, color="grey", linewidth=0.8)
        ax.annotate(f"{limit_ms:g} ms", (0.01, limit_ms), xycoords=("axes fraction", "data"))
    ax.set_xlabel("target rate (req/s)")
    ax.set_ylabel("latency (ms), timed from the due time")
    _log_ms(ax)
    ax.set_title(title)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7, ncol=max(1, len(series)))
    fig.tight_layout()
    return fig


def rate_over_time(result: Result, path: str | Path, *, title: str | None = None) -> Path:
    """Replies per second of each operation over the run, and p50/p99 per second."""
    plt = _plt()
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(9, 6.5), sharex=True)
    pts = result.series
    t = [p["t"] + p.get("dt", 1) for p in pts]
    for op in result.ops:
        top.plot(t, [p["ops"].get(op, 0) / p.get("dt", 1) for p in pts], label=op)
    if len(result.ops) > 1:
        top.plot(t, [p["n"] / p.get("dt", 1) for p in pts], color="black", lw=1, label="all")
    if result.target_rate:
        top.axhline(result.target_rate, color="grey", ls="--", lw=0.8, label="target")
    errs = [p["errors"] / p.get("dt", 1) for p in pts]
    if any(errs):
        top.plot(t, errs, color="red", lw=1, label="errors")
    top.set_ylabel("per second")
    top.legend(fontsize=8)
    top.grid(True, alpha=0.3)
    top.set_title(title or f"surge load {result.config['target']}")
    bottom.plot(t, [p.get("p50_ms") for p in pts], label="p50")
    bottom.plot(t, [p.get("p99_ms") for p in pts], label="p99")
    _log_ms(bottom)
    bottom.set_ylabel("latency (ms)")
    bottom.set_xlabel("time (s)")
    bottom.legend(fontsize=8)
    bottom.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    out = Path(path)
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out
