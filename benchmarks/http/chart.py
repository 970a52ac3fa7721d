"""PNG chart of bench-results/http.json; runs in the bench venv (matplotlib).

.bench-venv/bin/python benchmarks/http/chart.py bench-results/http.json bench-results/http.png
"""

import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

TITLES = {
    "plain": "plain GET /",
    "pipelined": "pipelined GET /",
    "json": "GET /json",
    "async": "async GET /user/7",
}


def main(src: str, dst: str) -> None:
    with open(src) as f:
        res = json.load(f)
    summary = res["summary"]
    setup = res["setup"]
    servers = list(summary)
    fig, axes = plt.subplots(1, len(TITLES), figsize=(4.2 * len(TITLES), 0.5 * len(servers) + 2))
    for ax, (key, title) in zip(axes, TITLES.items(), strict=True):
        vals, labels, colors = [], [], []
        for name in servers:
            e = summary[name].get(key, {})
            ok = e.get("status") == "ok"
            vals.append(e["rps"] / 1000 if ok else 0)
            label = name
            if name == "surge" and setup.get("surge_build") == "debug":
                label += " (DEBUG build)"
            labels.append(label if ok else f"{label} ({e.get('status', 'n/a')})")
            colors.append("tab:red" if name == "surge" else "tab:gray")
            if ok and e.get("flagged"):
                labels[-1] += " ⚠"
        y = range(len(servers))
        ax.barh(y, vals, color=colors)
        ax.set_yticks(list(y), labels)
        ax.invert_yaxis()
        top = max(vals or [1]) or 1
        for i, v in enumerate(vals):
            if v:
                ax.text(v + top * 0.01, i, f"{v:,.0f}k", va="center", fontsize=8)
        ax.set_xlim(0, top * 1.25)
        depth = f" (depth {setup['pipeline_depth']})" if key == "pipelined" else ""
        ax.set_title(title + depth, fontsize=10)
        ax.set_xlabel("thousand requests/s")
    fig.suptitle(
        f"HTTP hello world, 1 worker, wrk -t{setup['wrk_threads']} -c{setup['connections']} "
        f"-d{setup['duration_s']}s, median of {setup['runs']} — {setup['cpu_model']}, "
        f"{setup['date'][:10]}",
        fontsize=10,
    )
    fig.tight_layout()
    fig.savefig(dst, dpi=110)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
