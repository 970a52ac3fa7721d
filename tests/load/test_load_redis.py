"""`surge load` on a real Redis: GET/SET through surge's driver, setup and cleanup."""

from __future__ import annotations

import asyncio
import gc
import time
from collections.abc import Iterator

import pytest
import surge.load
import surge.redis
from surge import services

pytestmark = pytest.mark.timeout(40)


@pytest.fixture(scope="module")
def redis() -> Iterator[services.Service]:
    with services.redis() as svc:
        yield svc


def _load_keys(url: str) -> int:
    async def go() -> int:
        r = surge.redis.connect(url)
        try:
            return len(await r.keys("surge:load:*"))
        finally:
            await r.close()

    return asyncio.run(go())


def test_get_set_at_a_fixed_rate_leaves_no_keys(redis) -> None:
    r = surge.load.run(redis.url, rate=400, duration=1.0, prefill=500, tuple_size=100)
    assert r.errors == {}
    assert list(r.ops) == ["get", "set"]
    assert r.ops["get"]["replies"] == 200 and r.ops["set"]["replies"] == 200
    assert _load_keys(redis.url) == 0


def test_closed_model_from_two_processes_leaves_no_keys(redis) -> None:
    r = surge.load.run(redis.url, connections=1, pipeline=20, duration=0.5, procs=2)
    assert r.errors == {} and r.replies > 100
    assert r.sent == r.replies
    assert _load_keys(redis.url) == 0


def test_unreachable_redis_takes_its_duration_and_is_refused() -> None:
    port = services.free_port()
    t0 = time.monotonic()
    r = surge.load.run(f"redis://127.0.0.1:{port}", rate=20, duration=1.0)
    # The defect retried for the whole connect timeout (5 s) before the clock
    # started; the bound leaves room for a loaded machine below that.
    assert time.monotonic() - t0 < 5.0
    assert r.errors == {"connect_refused": 20}


def test_wrong_protocol_is_a_clear_error(surge_server, capfd) -> None:
    with pytest.raises(surge.load.LoadError, match="is it a Redis server"):
        surge.load.run(f"redis://127.0.0.1:{surge_server.port}", rate=10, duration=0.5)
    with pytest.raises(surge.load.LoadError, match="is it a Redis server"):
        surge.load.run(f"redis://127.0.0.1:{surge_server.port}", rate=10, duration=0.5, procs=2)
    gc.collect()
    err = capfd.readouterr().err
    assert "Traceback" not in err and "never retrieved" not in err, err
