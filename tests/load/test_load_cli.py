"""The ``surge load`` command: table, JSON, charts, sweeps, errors."""

from __future__ import annotations

import json

import pytest
import surge.load
from surge import cli
from surge.load import chart

# A hang guard on the tests' own work: the session's server start and matplotlib's
# import (4 s at load 10 here, far more with the cores busy) are fixtures'
# set-up, outside it.
pytestmark = pytest.mark.timeout(30, func_only=True)


@pytest.fixture(scope="module", autouse=True)
def _matplotlib_imported() -> None:
    chart._plt()


PNG = b"\x89PNG\r\n\x1a\n"


def test_rate_run_with_json_and_chart(surge_server, tmp_path, capsys) -> None:
    out, png = tmp_path / "r.json", tmp_path / "r.png"
    args = ["load", surge_server.url("/"), "--rate", "100", "-d", "1", "-q"]
    assert cli.main([*args, "--json", str(out), "--chart", str(png)]) == 0
    text = capsys.readouterr().out
    assert "achieved" in text and "p99.9" in text and "2xx 100" in text
    data = json.loads(out.read_text())
    assert data["target_rate"] == 100
    assert data["replies"] == 100
    assert set(data["latency_ms"]) >= {"p50", "p90", "p95", "p99", "p99.9", "max"}
    assert data["hdr_histogram"]
    assert data["series"][0]["n"] == 100
    assert png.read_bytes().startswith(PNG)


def test_rate_sweep_chart(surge_server, tmp_path, capsys) -> None:
    out, png = tmp_path / "s.json", tmp_path / "s.png"
    args = ["load", surge_server.url("/"), "--rates", "50,100", "-d", "0.5", "-q"]
    assert cli.main([*args, "--json", str(out), "--chart", str(png)]) == 0
    assert "latency (ms) against rate" in capsys.readouterr().out
    data = json.loads(out.read_text())
    assert [d["target_rate"] for d in data] == [50, 100]
    assert png.read_bytes().startswith(PNG)


def test_sweep_chart_labels_its_whole_log_axis(surge_server) -> None:
    """Latencies from a fraction of a millisecond to several: the log axis has
    labels above 1 ms, up to the top of the plotted range."""
    import matplotlib.pyplot as plt

    fast = surge.load.sweep(surge_server.url("/"), [50, 100], duration=0.5)
    slow = surge.load.sweep(surge_server.url("/slow/3"), [50, 100], duration=0.5)
    fig = chart.percentiles_figure({"fast": fast, "slow": slow})
    try:
        fig.canvas.draw()
        ax = fig.axes[0]
        lo, hi = ax.get_ylim()
        labels = [
            float(t.get_text())
            for t in ax.get_yticklabels()
            if t.get_text() and lo <= t.get_position()[1] <= hi
        ]
    finally:
        plt.close(fig)
    top = max(r.latency["p99"] for r in slow)
    assert top > 3
    assert len(labels) >= 3, labels
    assert any(v > 1 for v in labels), labels
    assert max(labels) * 2.5 >= top, (labels, top)


def test_headers_and_progress_line(surge_server, capsys) -> None:
    args = ["load", surge_server.url("/"), "--rate", "50", "-d", "1", "-H", "X-A: b"]
    assert cli.main(args) == 0
    assert "req/s (target 50)" in capsys.readouterr().err


def test_clear_errors(capsys) -> None:
    args = ["load", "postgresql://u@127.0.0.1:1/db", "--mix", "select=1,upsertx=1", "-d", "1"]
    assert cli.main(args) == 2
    assert "unknown PostgreSQL operations" in capsys.readouterr().err
    assert cli.main(["load", "http://127.0.0.1:1/", "-H", "nocolon", "-d", "1"]) == 2
    assert "bad --header" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        cli.main(["load", "http://127.0.0.1:1/", "--rate", "-5"])
