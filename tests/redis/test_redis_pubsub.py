"""Pub/sub on a connection of its own: messages as redis-py's dicts."""

from __future__ import annotations

import asyncio

import pytest
import surge.redis
from surge.errors import ConnectionLostError

pytestmark = pytest.mark.timeout(60)


def test_subscribe_publish_get_message(url, arun):
    r = surge.redis.connect(url)

    async def main():
        ps = r.pubsub()
        assert await ps.get_message(timeout=0.01) is None
        await ps.subscribe("news", "sport")
        assert ps.subscribed
        m1 = await ps.get_message(timeout=1)
        m2 = await ps.get_message(timeout=1)
        assert m1 == {"type": "subscribe", "pattern": None, "channel": b"news", "data": 1}
        assert m2 == {"type": "subscribe", "pattern": None, "channel": b"sport", "data": 2}
        await ps.psubscribe("weather.*")
        assert (await ps.get_message(timeout=1))["type"] == "psubscribe"
        assert await r.publish("news", "hello") == 1
        assert await r.publish("weather.rome", b"sun") == 1
        assert await ps.get_message(timeout=1) == {
            "type": "message",
            "pattern": None,
            "channel": b"news",
            "data": b"hello",
        }
        assert await ps.get_message(timeout=1) == {
            "type": "pmessage",
            "pattern": b"weather.*",
            "channel": b"weather.rome",
            "data": b"sun",
        }
        assert await ps.get_message(timeout=0.05) is None
        await ps.unsubscribe("news")
        assert (await ps.get_message(timeout=1))["type"] == "unsubscribe"
        assert await r.publish("news", "nobody") == 0
        await ps.unsubscribe()
        await ps.punsubscribe()
        assert not ps.subscribed
        # the commands connection was never subscribed: it still answers commands
        assert await r.ping() is True
        await ps.close()
        await r.close()

    arun(main())


@pytest.mark.parametrize("protocol", [2, 3])
def test_listen_and_handlers(url, arun, protocol):
    r = surge.redis.connect(url, protocol=protocol, decode_responses=True)

    async def main():
        ps = r.pubsub(ignore_subscribe_messages=True)
        seen = []
        await ps.subscribe("a", b=seen.append)
        got = []

        async def reader():
            async for m in ps.listen():
                got.append(m)
                if m["data"] == "stop":
                    return

        task = asyncio.ensure_future(reader())
        for i in range(100):
            await r.publish("a", str(i))
        await r.publish("b", "handled")
        await r.publish("a", "stop")
        await asyncio.wait_for(task, 5)
        assert [m["data"] for m in got] == [*map(str, range(100)), "stop"]
        assert all(m["channel"] == "a" and m["type"] == "message" for m in got)
        assert [m["data"] for m in seen] == ["handled"]
        await ps.close()
        await r.close()

    arun(main())


def test_subscriber_resubscribes_after_losing_its_connection(url, arun):
    r = surge.redis.connect(url)

    async def main():
        ps = r.pubsub(ignore_subscribe_messages=True)
        await ps.subscribe("ch")
        await r.execute_command("CLIENT", "KILL", "TYPE", "pubsub")
        with pytest.raises(ConnectionLostError):
            await ps.get_message(timeout=2)
        # The next call reconnects and subscribes again.
        assert await ps.get_message(timeout=0.2) is None
        assert await r.publish("ch", "again") == 1
        msg = await ps.get_message(timeout=2)
        assert msg is not None and msg["data"] == b"again"
        await ps.close()
        await r.close()

    arun(main())


@pytest.mark.parametrize("protocol", [2, 3])
def test_subscriber_reconnects_by_itself_and_pings_while_idle(url, arun, protocol):
    """A dropped subscriber's connection comes back and subscribes again with no
    call from the user; while it only listens, the liveness ping (PING in
    subscribed mode) is answered and never taken for a message."""
    r = surge.redis.connect(url, protocol=protocol, liveness_interval=0.2, liveness_timeout=0.5)

    async def main():
        ps = r.pubsub(ignore_subscribe_messages=True)
        await ps.subscribe("surge-resub")
        await asyncio.sleep(0.7)  # idle: pinged a few times
        assert ps._engine.stats["dead"] == 0
        assert await ps.get_message(timeout=0.05) is None  # no PONG taken for a message
        await r.execute_command("CLIENT", "KILL", "TYPE", "pubsub")
        for _ in range(200):
            if ps._engine.stats["connects"] == 2 and ps._engine.is_connected:
                break
            await asyncio.sleep(0.02)
        assert ps._engine.stats["connects"] == 2  # back without any call on ps
        for _ in range(100):
            if await r.publish("surge-resub", "again") == 1:
                break
            await asyncio.sleep(0.02)
        else:
            raise AssertionError("not subscribed again")
        msgs = []
        with pytest.raises(ConnectionLostError):  # told once that it was dropped
            while True:
                msgs.append(await ps.get_message(timeout=1))
        msg = await ps.get_message(timeout=1)
        got = [m for m in [*msgs, msg] if m]
        assert got and got[-1]["data"] == b"again"
        await ps.close()
        await r.close()

    arun(main())
