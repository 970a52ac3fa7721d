"""`surge load` on a real Redis: GET/SET at a fixed rate and kept busy."""

from __future__ import annotations

import pytest
import surge.load

pytestmark = pytest.mark.timeout(40)


def test_get_set_at_a_fixed_rate(redis_svc) -> None:
    r = surge.load.run(redis_svc.url, rate=400, duration=1.0, mix="get=1,set=1", prefill=50)
    assert r.errors == {}
    assert list(r.ops) == ["get", "set"]
    assert r.replies == 400
    for op in r.ops.values():
        assert op["replies"] == 200
        assert op["latency_ms"]["p50"] > 0


def test_closed_model(redis_svc) -> None:
    r = surge.load.run(redis_svc.url, connections=1, pipeline=50, duration=0.5, mix="get=3,set=1")
    assert r.errors == {}
    gets, sets = r.ops["get"]["replies"], r.ops["set"]["replies"]
    assert sets > 100 and 2 < gets / sets < 4


def test_unknown_operation_is_refused(redis_svc) -> None:
    with pytest.raises(surge.load.LoadError, match="unknown Redis operations"):
        surge.load.run(redis_svc.url, rate=10, duration=0.1, mix="hget=1")
