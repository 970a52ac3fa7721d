"""Busy polling after a write (`surge.engine.SPIN_WINDOW`), against a real Redis on
loopback, on asyncio and uvloop: the loop polls while a reply is due and only
then, a server slower than the window turns polling off for a doubling number of
writes, and a reply read while polling turns it back on."""

from __future__ import annotations

import asyncio

import pytest
from surge import engine, services

from tests.test_engine import RespCodec

pytestmark = pytest.mark.timeout(60)

#: The window in these tests: a PING's reply comes well within it even on a
#: loaded machine where Redis may share the client's core and wait for the
#: polling client's time slice to end (the default, 100 us, is about a round trip).
WINDOW = 0.1
#: BLPOP on a key nobody pushes to: a reply that comes after this many seconds,
#: far beyond the window.
SLOW = "0.3"


@pytest.fixture(autouse=True)
def window(monkeypatch):
    monkeypatch.setattr(engine, "SPIN_WINDOW", WINDOW)


@pytest.fixture(scope="module")
def redis_svc():
    with services.redis() as svc:
        yield svc


def _counted(svc) -> tuple[engine.PipelinedConnection, RespCodec, list[int]]:
    """A connection whose polls are counted (the poll queues itself by attribute)."""
    codec = RespCodec()
    conn = engine.PipelinedConnection(svc.host, svc.port, codec, make_error=RuntimeError)
    polls = [0]
    poll = conn._spin

    def counted() -> None:
        polls[0] += 1
        poll()

    conn._spin = counted  # type: ignore[method-assign]
    return conn, codec, polls


def test_polls_only_while_a_reply_is_due(redis_svc, arun):
    conn, codec, polls = _counted(redis_svc)

    async def main():
        await conn.connect()
        before = polls[0]
        assert await conn.request(codec.command, "PING") == "PONG"
        assert polls[0] > before  # the write queued a poll while the reply was due
        # Nothing pending: the poll stopped and the loop sleeps (no CPU burnt idle).
        idle = polls[0]
        await asyncio.sleep(0.05)
        assert polls[0] - idle <= 1
        assert not conn._spinning
        await conn.close()

    arun(main())


def test_a_slow_server_turns_polling_off_for_doubling_runs_of_writes(redis_svc, arun):
    conn, codec, polls = _counted(redis_svc)

    async def polled(*cmd: str) -> bool:
        """Whether the request's write polled for its reply."""
        before = polls[0]
        await conn.request(codec.command, *cmd)
        return polls[0] > before

    async def main():
        await conn.connect()
        # Each miss (a window over with the reply still out) skips 2, 4, 8 writes.
        assert await polled("BLPOP", "spin:none", SLOW)
        assert [await polled("BLPOP", "spin:none", SLOW) for _ in range(2)] == [False] * 2
        assert await polled("BLPOP", "spin:none", SLOW)
        assert [await polled("BLPOP", "spin:none", SLOW) for _ in range(4)] == [False] * 4
        assert await polled("BLPOP", "spin:none", SLOW)
        # Skipped writes of fast requests do not poll either; the first write that
        # polls again sees its reply come and clears the backoff ...
        assert [await polled("PING") for _ in range(8)] == [False] * 8
        assert await polled("PING")
        # ... so the next miss skips 2 writes again, not 16.
        assert await polled("BLPOP", "spin:none", SLOW)
        assert [await polled("PING") for _ in range(2)] == [False] * 2
        assert await polled("PING")
        await conn.close()

    arun(main())


def test_backoff_is_capped(redis_svc, arun):
    conn, codec, _polls = _counted(redis_svc)

    async def main():
        await conn.connect()
        for _ in range(engine.SPIN_BACKOFF.bit_length() + 1):  # more misses than the cap needs
            conn._spin_skip = 0
            await conn.request(codec.command, "BLPOP", "spin:none", SLOW)
        assert conn._spin_skip == engine.SPIN_BACKOFF
        await conn.close()

    arun(main())


def test_window_zero_turns_polling_off(redis_svc, arun, monkeypatch):
    monkeypatch.setattr(engine, "SPIN_WINDOW", 0)
    conn, codec, polls = _counted(redis_svc)

    async def main():
        await conn.connect()
        for _ in range(3):
            assert await conn.request(codec.command, "PING") == "PONG"
        assert polls[0] == 0
        await conn.close()

    arun(main())
