"""The ``surge load`` command: table, JSON, charts, sweeps, errors."""

from __future__ import annotations

import json

import pytest
from surge import cli

pytestmark = pytest.mark.timeout(30)

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
