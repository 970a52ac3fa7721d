"""The engine is protocol-agnostic: here it drives a real Redis through a tiny RESP
codec written in the test (in-order matching), on asyncio and uvloop."""

from __future__ import annotations

import asyncio

import pytest
from surge import services
from surge.engine import EARLY_FLUSH, PipelinedConnection
from surge.errors import ConnectionLostError, RequestTimeoutError

pytestmark = pytest.mark.timeout(60)


class RespCodec:
    """Minimal RESP2: requests numbered in order, replies matched in order."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.wbuf = bytearray()
        self.rbuf = b""
        self.sent = 0
        self.received = 0

    def command(self, *args: str | bytes) -> int:
        self.wbuf += b"*%d\r\n" % len(args)
        for a in args:
            b = a.encode() if isinstance(a, str) else a
            self.wbuf += b"$%d\r\n%s\r\n" % (len(b), b)
        self.sent += 1
        return self.sent

    def take(self) -> bytes:
        out, self.wbuf = bytes(self.wbuf), bytearray()
        return out

    def pending(self) -> int:
        return len(self.wbuf)

    def forget(self, rid: int) -> None:
        pass

    def _parse(self, pos: int):
        end = self.rbuf.find(b"\r\n", pos)
        if end < 0:
            return None
        kind, line = self.rbuf[pos : pos + 1], self.rbuf[pos + 1 : end]
        if kind == b"+":
            return True, line.decode(), end + 2
        if kind == b"-":
            return False, line.decode(), end + 2
        if kind == b":":
            return True, int(line), end + 2
        if kind == b"*" and int(line) < 0:
            return True, None, end + 2
        if kind == b"$":
            n = int(line)
            if n < 0:
                return True, None, end + 2
            if len(self.rbuf) < end + 2 + n + 2:
                return None
            return True, self.rbuf[end + 2 : end + 2 + n], end + 4 + n
        raise ValueError(f"unsupported RESP reply {kind!r}")

    def feed(self, data: bytes):
        self.rbuf += data
        out, pos = [], 0
        while (r := self._parse(pos)) is not None:
            ok, value, pos = r
            self.received += 1
            out.append((self.received, ok, value))
        self.rbuf = self.rbuf[pos:]
        return out


@pytest.fixture(scope="module")
def redis_svc():
    with services.redis() as svc:
        yield svc


def _conn(svc, **kw) -> tuple[PipelinedConnection, RespCodec]:
    codec = RespCodec()
    conn = PipelinedConnection(svc.host, svc.port, codec, make_error=RuntimeError, **kw)
    return conn, codec


@pytest.mark.parametrize("n", [3, 10, 1000])
def test_one_iterations_requests_leave_in_at_most_two_writes(redis_svc, arun, n):
    conn, codec = _conn(redis_svc)

    async def main():
        await conn.request(codec.command, "PING")  # connected: nothing on the wire now
        w0 = conn.stats["writes"]
        got = await asyncio.gather(*(conn.request(codec.command, "ECHO", str(i)) for i in range(n)))
        assert got == [str(i).encode() for i in range(n)]
        # The first EARLY_FLUSH go at once to the idle server (no read has brought
        # several replies yet to make it half of those), the rest at the end of the
        # iteration; fewer than EARLY_FLUSH leave together.
        assert conn.stats["writes"] - w0 == (1 if n < EARLY_FLUSH else 2)
        await conn.close()

    arun(main())


def test_batching_and_in_order_matching(redis_svc, arun):
    conn, codec = _conn(redis_svc)  # made outside any loop: connects on first use

    async def main():
        await asyncio.gather(
            *(conn.request(codec.command, "SET", f"k{i}", str(i)) for i in range(1000))
        )
        got = await asyncio.gather(
            *(conn.request(codec.command, "GET", f"k{i}") for i in range(1000))
        )
        assert got == [str(i).encode() for i in range(1000)]
        assert conn.stats["writes"] <= 10
        with pytest.raises(RuntimeError, match="ERR"):
            await conn.request(codec.command, "NOSUCHCOMMAND")
        assert await conn.request(codec.command, "PING") == "PONG"
        await conn.close()

    arun(main())


def test_timeout_and_cancel_keep_order(redis_svc, arun):
    conn, codec = _conn(redis_svc)

    async def main():
        with pytest.raises(RequestTimeoutError):
            await conn.request(codec.command, "BLPOP", "nothing", "0.2", timeout=0.05)
        t = asyncio.ensure_future(conn.request(codec.command, "ECHO", "cancelled"))
        await asyncio.sleep(0)
        t.cancel()
        assert await conn.request(codec.command, "ECHO", "next") == b"next"
        await conn.close()

    arun(main())


def test_lost_connection_fails_everything_at_once(redis_svc, arun):
    conn, codec = _conn(redis_svc)
    killer, kcodec = _conn(redis_svc)

    async def main():
        await conn.request(codec.command, "CLIENT", "SETNAME", "victim")
        blocked = [
            asyncio.ensure_future(conn.request(codec.command, "BLPOP", f"nothing{i}", "10"))
            for i in range(20)
        ]
        await asyncio.sleep(0.1)
        await killer.request(kcodec.command, "CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes")
        res = await asyncio.gather(*blocked, return_exceptions=True)
        assert all(isinstance(r, ConnectionLostError) for r in res)
        assert await conn.request(codec.command, "PING") == "PONG"  # reconnected
        assert conn.stats["connects"] == 2
        await conn.close()
        await killer.close()

    arun(main())


def test_engine_state_slots_are_collected_in_cycles():
    """The engine's per-request state lives in native slots (`EngineState`); the
    garbage collector must see through them: an engine kept alive only by a cycle
    through a slot (a pending future whose callback holds the engine) is freed."""
    import gc
    import weakref

    loop = asyncio.new_event_loop()
    try:
        conn = PipelinedConnection("127.0.0.1", 1, RespCodec())
        fut = loop.create_future()
        fut.add_done_callback(lambda f, c=conn: c)
        conn._pending[1] = fut
        conn._loop = loop
        assert "_pending" not in vars(conn) and conn._pending[1] is fut
        gone = weakref.ref(conn)
        del conn, fut
        gc.collect()
        assert gone() is None
    finally:
        loop.close()
