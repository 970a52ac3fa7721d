"""`surge load` on a real Tarantool: seed 000's mixed CRUD workload."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import surge.load
from surge import services

pytestmark = pytest.mark.timeout(40)


@pytest.fixture(scope="module")
def tnt() -> Iterator[services.Service]:
    with services.tarantool() as svc:
        yield svc


def test_mixed_crud_at_a_fixed_rate(tnt) -> None:
    r = surge.load.run(
        tnt.url, rate=400, duration=1.0, mix="insert=25,select=25,update=25,delete=25"
    )
    assert r.errors == {}
    assert list(r.ops) == ["insert", "select", "update", "delete"]
    assert r.replies == 400
    for op in r.ops.values():
        assert op["replies"] == 100
        assert op["latency_ms"]["p50"] > 0
    assert r.series[0]["ops"] == {"insert": 100, "select": 100, "update": 100, "delete": 100}


def test_closed_model_from_two_processes(tnt) -> None:
    r = surge.load.run(
        tnt.url, connections=1, pipeline=50, duration=1.0, procs=2, mix="select=3,insert=1"
    )
    assert r.errors == {}
    assert list(r.ops) == ["insert", "select"]
    assert r.generator["procs"] == 2
    ins, sel = r.ops["insert"]["replies"], r.ops["select"]["replies"]
    assert ins > 100 and 2 < sel / ins < 4


def test_unknown_operation_is_refused(tnt) -> None:
    with pytest.raises(surge.load.LoadError, match="unknown Tarantool operations"):
        surge.load.run(tnt.url, rate=10, duration=0.1, mix="insert=1,upsertx=1")


def test_unreachable_tarantool_is_counted(tnt) -> None:
    port = services.free_port()
    r = surge.load.run(f"tarantool://127.0.0.1:{port}", rate=20, duration=0.5, connect_timeout=0.2)
    assert r.replies == 0
    # The driver retries until its connect timeout: the last attempt is refused, or
    # cut short by the deadline.
    assert set(r.errors) <= {"connect_refused", "connect_timeout"}, r.errors
    assert sum(r.errors.values()) == 10
