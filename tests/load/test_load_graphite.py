"""Seed 000's picture for real: per-second rates pushed to a real Graphite
(carbon-cache from Debian's graphite-carbon, started by surge.services) and read
back from its whisper files."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import surge.load
import whisper
from surge import services, stats

pytestmark = pytest.mark.timeout(60)


@pytest.fixture(scope="module")
def graphite() -> Iterator[services.Service]:
    with services.graphite() as svc:
        yield svc


@pytest.fixture(scope="module")
def tnt() -> Iterator[services.Service]:
    with services.tarantool() as svc:
        yield svc


def _points(svc: services.Service, metric: str, want: int, since: int) -> list[tuple[int, float]]:
    """The (timestamp, value) points of `metric`, once carbon has written `want` of them."""
    path = Path(svc.extra["whisper_dir"], *metric.split(".")).with_suffix(".wsp")
    deadline = time.monotonic() + 15
    points: list[tuple[int, float]] = []
    while time.monotonic() < deadline:
        if path.exists():
            (start, _, step), values = whisper.fetch(str(path), since, int(time.time()) + 1)
            points = [(start + i * step, v) for i, v in enumerate(values) if v is not None]
            if len(points) >= want:
                return points
        time.sleep(0.1)
    raise AssertionError(f"{metric}: {len(points)} of {want} points in {path}")


def test_push_graphite_lands_in_whisper(graphite) -> None:
    reg = stats.Registry()
    c = reg.counter("pushed_total", "a counter pushed to a real Graphite")
    c.inc(41)
    since = int(time.time()) - 5
    pusher = stats.push_graphite(graphite.host, graphite.port, 3600, "t1", registry=reg)
    try:
        pusher.push_now()
    finally:
        pusher.stop()
    assert pusher.pushes == 1 and pusher.failures == 0, pusher.last_error
    [(_, value)] = _points(graphite, "t1.pushed_total", 1, since)
    assert value == 41


def test_seed000_rates_in_graphite_equal_the_generators_counts(graphite, tnt) -> None:
    """The mixed CRUD load at 400 ops/s for 3 s: Graphite holds one point per
    second and operation, each equal to the generator's own count of that second."""
    since = int(time.time()) - 5
    r = surge.load.run(
        tnt.url,
        rate=400,
        duration=3.0,
        mix="insert=25,select=25,update=25,delete=25",
        graphite=graphite.address,
    )
    assert r.errors == {}
    assert len(r.series) == 3
    for op in ("insert", "select", "update", "delete", "all"):
        ours = [p["n"] if op == "all" else p["ops"][op] for p in r.series]
        stamps, values = zip(*_points(graphite, f"surge.load.{op}.rate", 3, since), strict=True)
        assert list(values) == ours, (op, values, ours)
        assert list(stamps) == list(range(stamps[0], stamps[0] + 3))  # one per second
    assert sum(r.ops[op]["replies"] for op in r.ops) == r.replies == 1200


def test_cli_sends_to_graphite(graphite, surge_server, tmp_path, capsys) -> None:
    import json

    from surge import cli

    since = int(time.time()) - 5
    out = tmp_path / "r.json"
    args = ["load", surge_server.url("/"), "--rate", "100", "-d", "2", "-q", "--json", str(out)]
    assert cli.main([*args, "--graphite", graphite.address, "--graphite-prefix", "clitest"]) == 0
    assert "achieved" in capsys.readouterr().out
    series = json.loads(out.read_text())["series"]
    values = [v for _, v in _points(graphite, "clitest.request.rate", 2, since)]
    assert values == [p["n"] for p in series]
    assert sum(values) == 200
