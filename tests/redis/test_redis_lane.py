"""The native GET/SET lane (`surge._core.RespLane`): the same answers and errors as
the Python methods it stands in for, and the engine's gate and limits kept."""

from __future__ import annotations

import asyncio

import pytest
import surge.errors
import surge.redis
from surge._core import RespLane
from surge.redis import client as client_mod


def _on_lane(r: surge.redis.Redis) -> bool:
    return isinstance(getattr(r.get, "__self__", None), RespLane)


def test_get_and_set_go_through_the_lane_with_the_same_results(url, arun):
    async def main():
        r = surge.redis.connect(url)
        assert _on_lane(r)
        # Before the connection is up the lane hands over to the Python path.
        assert await r.set("lane:a", b"1") is True
        assert await r.get("lane:a") == b"1"
        assert await r.get("lane:missing") is None
        before = r.engine.stats["requests"]
        got = await asyncio.gather(*(r.set(f"lane:{i}", i) for i in range(500)))
        assert got == [True] * 500
        got = await asyncio.gather(*(r.get(f"lane:{i}") for i in range(500)))
        assert got == [str(i).encode() for i in range(500)]
        # Reads go through the engine's native read path.
        assert type(r.engine._protocol.buffer_updated).__name__ == "builtin_function_or_method"
        # Every lane request counted as the engine counts its own.
        assert r.engine.stats["requests"] - before == 1000
        assert r.engine.ops["command_ok"] >= 500
        # Arguments the codec does not take as they are: the Python path decides.
        assert await r.set(memoryview(b"lane:mv"), memoryview(b"v")) is True
        assert await r.get(memoryview(b"lane:mv")) == b"v"
        with pytest.raises(surge.redis.DataError, match="NoneType"):
            r.set("lane:none", None)
        with pytest.raises(surge.redis.DataError, match="bool"):
            r.get(True)
        # SET options go through Commands.set, positionally or by name.
        assert await r.set("lane:a", "2", None, None, True) is None  # nx
        assert await r.set("lane:a", "3", xx=True, get=True) == b"1"
        assert await r.set("lane:a", "4", ex=100) is True
        assert 0 < await r.ttl("lane:a") <= 100
        # Every other command is sent through the lane too (replies converted after).
        assert isinstance(getattr(r._submit, "__self__", None), RespLane)
        assert await r.hset("lane:h", "f", "v") == 1
        assert await r.hget("lane:h", "f") == b"v"
        assert await r.hgetall("lane:h") == {b"f": b"v"}
        assert await r.execute_command("PING") == "PONG"  # raw, as before
        assert await r.mset({"lane:m1": memoryview(b"1"), "lane:m2": 2}) is True
        assert await r.mget("lane:m1", "lane:m2") == [b"1", b"2"]
        with pytest.raises(surge.redis.DataError, match="dict"):
            r.execute_command("SET", "lane:x", {})
        await r.rpush("lane:list", 1)
        with pytest.raises(surge.redis.ResponseError, match="WRONGTYPE"):
            await r.get("lane:list")
        await r.aclose()

    arun(main())


def test_the_lane_keeps_the_engines_limits_and_timeouts(url, arun):
    async def main():
        # Over max_in_flight the lane hands over and callers wait their turn.
        r = surge.redis.connect(url, max_in_flight=3)
        await r.set("lane:k", "v")
        got = await asyncio.gather(*(r.get("lane:k") for _ in range(200)))
        assert got == [b"v"] * 200
        assert r.engine.in_flight == 0
        await r.aclose()
        # A request timeout is armed by the engine's own path.
        r = surge.redis.connect(url, request_timeout=5.0)
        await r.set("lane:k", "w")
        assert await r.get("lane:k") == b"w"
        assert r.engine._deadline_of == {}  # the timed request left its deadline
        await r.aclose()

    arun(main())


def test_a_lost_connection_fails_lane_requests_then_reconnects(url, arun):
    async def main():
        r = surge.redis.connect(url)
        await r.set("lane:k", "v")
        futs = [r.get("lane:k") for _ in range(100)]
        r.engine.abort()
        results = await asyncio.gather(*futs, return_exceptions=True)
        assert all(isinstance(x, (bytes, surge.errors.ConnectionLostError)) for x in results)
        assert await r.get("lane:k") == b"v"
        await r.aclose()
        with pytest.raises(surge.errors.ClosedError):
            await r.get("lane:k")

    arun(main())


def test_subclasses_and_the_switch_keep_the_python_methods(url, arun, monkeypatch):
    class Mine(surge.redis.Redis):
        def get(self, name):
            return super().get(f"mine:{name}")

    async def main():
        r = Mine(*_host_port_db(url))
        assert not _on_lane(r)
        await r.set("mine:x", "1")
        assert await r.get("x") == b"1"
        await r.aclose()
        monkeypatch.setattr(client_mod, "NATIVE_LANE", False)
        r = surge.redis.connect(url)
        assert not _on_lane(r)
        assert await r.get("mine:x") == b"1"
        await r.aclose()

    arun(main())


def _host_port_db(url: str) -> tuple[str, int, int]:
    rest = url.split("://", 1)[1]
    hostport, db = rest.split("/")
    host, port = hostport.rsplit(":", 1)
    return host, int(port), int(db)
