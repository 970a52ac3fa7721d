"""Busy polling after a write or a read (`surge.engine.SPIN_WINDOW`), against a real
Redis on loopback, on asyncio and uvloop: the loop polls while a reply is due and
only then, a server slower than the window turns polling off for a doubling number
of writes, and a reply read while polling turns it back on. A reply that comes in
pieces (through `FaultProxy`'s thin link, a piece every 50 ms) keeps the loop
polling from piece to piece while they come within the window, on the engine's
Python read path and on the native one, and a stall between pieces longer than
the window stops it, with the same backoff."""

from __future__ import annotations

import asyncio
import socket
import time
from typing import Any

import pytest
from surge import engine, redis, services

from tests.faults.proxy import FaultProxy
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


#: `FaultProxy.bandwidth` sends a piece every 1/20 s: bytes per second for pieces
#: of `PIECE` bytes, and the value a reply of `PIECES` pieces carries.
PIECE = 1000
PIECES = 16
PIECE_GAP = 0.05
BIG_SET = (b"SET", b"spin:big", b"x" * (PIECE * PIECES))


@pytest.fixture
def thin_link(redis_svc):
    """A proxy in front of Redis that holds `spin:big` (`PIECES` pieces' worth) and,
    once switched to its thin link, passes replies on a piece every `PIECE_GAP`."""
    proxy = FaultProxy(redis_svc.host, redis_svc.port).start()
    with socket.create_connection((redis_svc.host, redis_svc.port)) as s:
        s.sendall(b"".join(b"$%d\r\n%s\r\n" % (len(a), a) for a in BIG_SET).join([b"*3\r\n", b""]))
        assert s.recv(16) == b"+OK\r\n"
    yield proxy
    proxy.stop()


def _starts(conn: engine.PipelinedConnection) -> list[int]:
    """Counts the polls started (polling off -> on) on `conn`."""
    starts = [0]
    poll = conn._poll

    def counted() -> None:
        was = conn._spinning
        poll()
        starts[0] += conn._spinning and not was

    conn._poll = counted  # type: ignore[method-assign]
    return starts


def _counted(
    svc, port: int | None = None, **kw: Any
) -> tuple[engine.PipelinedConnection, RespCodec, list[int]]:
    """A connection whose polls are counted (the poll queues itself by attribute)."""
    codec = RespCodec()
    conn = engine.PipelinedConnection(
        svc.host, port or svc.port, codec, make_error=RuntimeError, **kw
    )
    polls = [0]
    poll = conn._spin

    def counted(*now: float) -> bool:
        polls[0] += 1
        return poll(*now)

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


@pytest.mark.parametrize("own", [None, WINDOW], ids=["default", "own-window"])
def test_window_zero_turns_polling_off(redis_svc, arun, monkeypatch, own):
    # also for a connection with a window of its own (PostgreSQL's)
    monkeypatch.setattr(engine, "SPIN_WINDOW", 0)
    conn, codec, polls = _counted(redis_svc, spin_window=own)

    async def main():
        await conn.connect()
        for _ in range(3):
            assert await conn.request(codec.command, "PING") == "PONG"
        assert polls[0] == 0
        await conn.close()

    arun(main())


async def _polling_through(conn, get, watch: list[bool]) -> bytes:
    """``get()``'s reply, sampling whether the loop polls while its pieces come."""

    async def sample() -> None:
        await asyncio.sleep(PIECE_GAP * PIECES / 4)  # past the first window
        while True:
            watch.append(conn._spinning)
            await asyncio.sleep(PIECE_GAP / 2)

    sampler = asyncio.ensure_future(sample())
    try:
        return await get()
    finally:
        sampler.cancel()


def test_pieces_within_the_window_keep_the_loop_polling(thin_link, arun, monkeypatch):
    # Pieces come 50 ms apart, the reply over ~0.8 s: a window counted from the
    # write alone (0.25 s) would run out halfway; counted from each read it lasts.
    monkeypatch.setattr(engine, "SPIN_WINDOW", 0.25)
    conn, codec, _polls = _counted(thin_link, thin_link.port)

    async def main():
        await conn.connect()
        thin_link.bandwidth(PIECE / PIECE_GAP)
        watch: list[bool] = []
        reply = await _polling_through(
            conn, lambda: conn.request(codec.command, "GET", "spin:big"), watch
        )
        assert reply == b"x" * (PIECE * PIECES)
        assert len(watch) >= 4 and all(watch)  # polled from piece to piece
        assert conn._spin_skip == 0 and conn._spin_misses == 0  # no window wasted
        await conn.close()

    arun(main())


def test_pieces_keep_the_native_reader_polling(thin_link, arun, monkeypatch):
    # The same through surge.redis, whose reads go through the native EngineReader.
    monkeypatch.setattr(engine, "SPIN_WINDOW", 0.25)

    async def main():
        client = redis.connect(f"redis://{thin_link.host}:{thin_link.port}/0")
        assert await client.ping()
        conn = client._engine
        assert isinstance(conn._protocol, engine._NativeReadProtocol)
        thin_link.bandwidth(PIECE / PIECE_GAP)
        watch: list[bool] = []
        reply = await _polling_through(conn, lambda: client.get("spin:big"), watch)
        assert reply == b"x" * (PIECE * PIECES)
        assert len(watch) >= 4 and all(watch)
        assert conn._spin_skip == 0 and conn._spin_misses == 0
        await client.close()

    arun(main())


def test_a_stall_between_pieces_stops_polling_with_backoff(thin_link, arun, monkeypatch):
    # A window far shorter than the 50 ms between pieces: each piece that starts a
    # poll wastes one window, and the backoff lets ever fewer pieces start one
    # (pieces 1, 4, 9, ...: skips of 2, 4, 8 after each miss), so polling takes a
    # few windows of the reply's ~0.8 s, not all of it.
    monkeypatch.setattr(engine, "SPIN_WINDOW", 0.005)
    conn, codec, _polls = _counted(thin_link, thin_link.port)
    starts = _starts(conn)

    async def main():
        await conn.connect()
        thin_link.bandwidth(PIECE / PIECE_GAP)
        before = starts[0]
        reply = await conn.request(codec.command, "GET", "spin:big")
        assert reply == b"x" * (PIECE * PIECES)
        # the write's poll and at most those the backoff lets through; more than
        # the write's alone (reads do start polls)
        assert 2 <= starts[0] - before <= 5
        assert conn._spin_misses >= 2
        await conn.close()

    arun(main())


class _Clock:
    """`engine.time` with its ``perf_counter`` reads counted."""

    def __init__(self) -> None:
        self.reads = 0

    def perf_counter(self) -> float:
        self.reads += 1
        return time.perf_counter()


def test_one_poll_per_loop_iteration_for_all_connections(redis_svc, arun, monkeypatch):
    # Four connections wait for slow replies, all polling: the loop runs ONE
    # polling callback per iteration, which reads the clock once and asks each
    # connection (one callback and one clock read per connection and iteration
    # made the loop's polling cost grow with a pool's size).
    conns = [_counted(redis_svc) for _ in range(4)]
    clock = _Clock()

    async def main():
        loop = asyncio.get_running_loop()
        for conn, _, _ in conns:
            await conn.connect()
        pending = [
            asyncio.ensure_future(conn.request(codec.command, "BLPOP", "spin:none", SLOW))
            for conn, codec, _ in conns
        ]
        await asyncio.sleep(0.01)  # the requests are out, every connection polls
        assert all(conn._spinning for conn, _, _ in conns)
        monkeypatch.setattr(engine, "time", clock)
        polls = [p[0] for _, _, p in conns]
        iterations = 0
        done = loop.create_future()

        def probe() -> None:  # queued once per loop iteration
            nonlocal iterations
            iterations += 1
            if iterations == 200:
                done.set_result(None)
            else:
                loop.call_soon(probe)

        loop.call_soon(probe)
        await done
        # every connection was asked once per iteration (give or take the edges) ...
        for (_, _, p), before in zip(conns, polls, strict=True):
            assert 190 <= p[0] - before <= 210
        # ... by one callback that read the clock once per iteration
        assert 190 <= clock.reads <= 210
        monkeypatch.setattr(engine, "time", time)
        await asyncio.gather(*pending)
        for conn, _, _ in conns:
            await conn.close()

    arun(main())


def test_reads_on_one_connection_keep_the_loop_polling_for_all(redis_svc, arun):
    # The loop polls for all of its connections at once, so a read on any of them
    # renews the window of every one that waits: a connection whose reply is slow
    # polls (and wastes no window) while another one's replies come, and stops,
    # with the backoff's miss, once they stop coming.
    slow, slow_codec, _ = _counted(redis_svc)
    busy, busy_codec, _ = _counted(redis_svc)

    async def main():
        loop = asyncio.get_running_loop()
        await slow.connect()
        await busy.connect()
        start = loop.time()
        reply = asyncio.ensure_future(slow.request(slow_codec.command, "BLPOP", "spin:none", "0.8"))
        while loop.time() - start < 2.5 * WINDOW:  # replies on `busy` all along
            assert await busy.request(busy_codec.command, "PING") == "PONG"
            assert slow._spinning  # past its own window too
        assert slow._spin_misses == 0
        await asyncio.sleep(2 * WINDOW)  # no reads: the loop's window runs out
        assert not slow._spinning and slow._spin_misses == 1
        assert await reply is None
        await slow.close()
        await busy.close()

    arun(main())
