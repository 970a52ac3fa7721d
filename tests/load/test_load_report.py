"""Merging and judging without a network: the series stays bounded, histograms merge
exactly, and the generator warns when it may be the bottleneck."""

from __future__ import annotations

from surge.load import runner
from surge.load.recorder import Recorder
from surge.load.report import build_result, render_table
from surge.load.target import LoadConfig


def _final(rec: Recorder, *, cpu: float, wall: float) -> dict:
    rec.tick(0)
    out = rec.final()
    out.update(index=0, wall=wall, cpu=cpu, duration=wall)
    return out


def test_series_is_bounded(monkeypatch) -> None:
    monkeypatch.setattr(runner, "MAX_SERIES_POINTS", 100)
    agg = runner.Aggregator(["request"], workers=1)
    rec = Recorder(["request"])
    for second in range(1000):
        rec.ok("request", 1_000_000)  # 1 ms
        agg.add(0, rec.tick(second))
    assert len(agg.series) <= 100
    assert sum(p["n"] for p in agg.series) == 1000
    assert sum(p["dt"] for p in agg.series) == 1000
    assert [p["t"] for p in agg.series] == sorted(p["t"] for p in agg.series)


def test_ticks_from_several_workers_make_one_point() -> None:
    seen = []
    agg = runner.Aggregator(["a", "b"], workers=2, progress=seen.append)
    r0, r1 = Recorder(["a", "b"]), Recorder(["a", "b"])
    for _ in range(3):
        r0.ok("a", 2_000_000)
    r1.ok("b", 4_000_000)
    r1.error("b", "timeout")
    agg.add(0, r0.tick(0))
    assert seen == []  # waits for the other worker
    agg.add(1, r1.tick(0))
    assert len(seen) == 1
    point = seen[0]
    assert point["ops"] == {"a": 3, "b": 1}
    assert point["errors"] == 1
    assert abs(point["p50_ms"] - 2.0) < 0.01  # HDR: 3 significant digits
    assert abs(point["max_ms"] - 4.0) < 0.01


def test_histograms_merge_exactly_and_busy_generator_is_flagged() -> None:
    cfg = LoadConfig("http://127.0.0.1:1/", rate=1000, duration=1.0, procs=2)
    finals = []
    for i in range(2):
        rec = Recorder(["request"])
        for k in range(400):
            rec.scheduled(10_000)
            rec.http("request", 200 if k % 100 else 503, (k + 1) * 100_000)  # 0.1..40 ms
        finals.append(_final(rec, cpu=0.97 if i else 0.2, wall=1.0))
    r = build_result(cfg, ["request"], finals, [], 0.0)
    assert r.replies == 800
    assert r.errors == {"http_5xx": 8}
    assert r.status == {"2xx": 792, "5xx": 8}
    assert abs(r.latency["p50"] - 20.0) < 0.1
    assert abs(r.latency["max"] - 40.0) < 0.1
    text = " ".join(r.warnings)
    assert "generator busy" in text and "worker(s) 1" in text
    assert "below 95%" in text and "limited by the generator" in text
    table = render_table(r)
    assert "WARNING" in table and "http_5xx 8" in table


def test_server_limited_run_blames_the_target() -> None:
    cfg = LoadConfig("http://127.0.0.1:1/", rate=1000, duration=1.0)
    rec = Recorder(["request"])
    for _ in range(500):
        rec.scheduled(0)
        rec.ok("request", 1_000_000)
    r = build_result(cfg, ["request"], [_final(rec, cpu=0.1, wall=1.0)], [], 0.0)
    assert r.achieved_rate == 500
    assert any("limited by the target" in w for w in r.warnings)
