"""The connection pool of `surge.http.Client`.

Theory of operation
-------------------
Each (scheme, host, port) has a `HostPool` of `Connection`s, each one engine
`PipelinedConnection` (``surge.engine``) with an `HttpClientCodec`: requests
are encoded into the codec's buffer and every request made in one event-loop
iteration leaves in one write; replies are matched in order.

Without pipelining a connection carries one request at a time: `acquire` takes
an idle keep-alive connection (the most recently used, so idle ones expire),
opens a new one while under `max_connections_per_host` and `max_connections`,
or waits (bounded by the pool timeout). With pipelining, requests pile onto the
least busy live connection until it has `max_pipeline` in flight; only then is
another opened.

A connection is retired (never handed out again) when the server says
`Connection: close`, a reply does not parse, a non-pipelined request times out
or is cancelled (its reply would arrive later and sit in front of the next
one), or a streamed body is left unread. It is closed once nothing on it is
active; its slot wakes one waiter.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from surge._core import HttpClientCodec, HttpResponse
from surge.engine import PipelinedConnection, liveness
from surge.errors import ConnectionLostError

from .errors import PoolTimeout, ReadTimeout, RemoteProtocolError


@dataclass(frozen=True, slots=True)
class PoolSettings:
    """What every connection of a client shares."""

    max_connections: int
    max_connections_per_host: int
    keepalive_expiry: float
    pipeline: int  # 0: no pipelining; else the most requests in flight per connection
    max_response_body: int
    liveness_interval: float | None = None
    liveness_timeout: float = 5.0
    tcp_keepalive: bool = True


class BodyStream:
    """The body pieces of one streamed response, as its connection receives them."""

    __slots__ = ("_chunks", "_error", "_waiter", "complete", "read_timeout")

    def __init__(self, read_timeout: float | None) -> None:
        self._chunks: deque[bytes] = deque()
        self._waiter: asyncio.Future | None = None
        self._error: BaseException | None = None
        self.complete = False
        self.read_timeout = read_timeout

    def _wake(self) -> None:
        w = self._waiter
        if w is not None and not w.done():
            w.set_result(None)

    def feed(self, chunk: bytes) -> None:
        self._chunks.append(chunk)
        self._wake()

    def end(self) -> None:
        self.complete = True
        self._wake()

    def fail(self, exc: BaseException) -> None:
        if not self.complete and self._error is None:
            self._error = exc
            self._wake()

    async def next(self) -> bytes | None:
        """The next piece, or None at the end of the body."""
        while True:
            if self._chunks:
                return self._chunks.popleft()
            if self.complete:
                return None
            if self._error is not None:
                raise self._error
            self._waiter = asyncio.get_running_loop().create_future()
            try:
                async with asyncio.timeout(self.read_timeout):
                    await self._waiter
            except TimeoutError:
                raise ReadTimeout(
                    f"no body data within the read timeout ({self.read_timeout} s)"
                ) from None
            finally:
                self._waiter = None


class Connection:
    """One HTTP/1.1 connection of a `HostPool`."""

    __slots__ = (
        "active",
        "codec",
        "engine",
        "idle_since",
        "pool",
        "removed",
        "reusable",
        "sent",
        "streams",
    )

    def __init__(self, pool: HostPool, connect_timeout: float) -> None:
        s = pool.settings
        self.pool = pool
        self.codec = HttpClientCodec(max_body=s.max_response_body)
        self.streams: dict[int, BodyStream] = {}
        self.engine = PipelinedConnection(
            pool.host,
            pool.port,
            self.codec,
            on_out_of_band=self._out_of_band,
            make_error=RemoteProtocolError,
            on_batch=self._after_batch,
            on_lost=self._lost,
            connect_timeout=connect_timeout,
            max_in_flight=max(1, s.pipeline),
            reconnect=False,
            retry_connect=False,
            tcp_keepalive=s.tcp_keepalive,
            # HTTP has no in-band ping: the probe asks the server itself, on a new
            # connection, with the server-wide no-op (RFC 9110 9.3.7).
            liveness=liveness(
                s.liveness_interval,
                s.liveness_timeout,
                probe=b"OPTIONS * HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n"
                % _host_header(pool.host, pool.port).encode("idna"),
            ),
            # A streamed body arrives after its request's future resolved: the
            # liveness check watches the connection while one is open (with
            # reconnect off, that is all this does).
            keep_connected=lambda: bool(self.streams),
            driver="http",
        )
        #: Requests assigned and not finished (a streamed one until its body ends).
        self.active = 0
        #: Requests sent on this connection so far.
        self.sent = 0
        self.reusable = True
        self.removed = False
        self.idle_since = 0.0

    def _encode(
        self, method: str, target: str, headers: list, body: bytes | None, stream: BodyStream | None
    ) -> int:
        rid = self.codec.request(method, target, headers, body, stream is not None)
        if stream is not None:
            self.streams[rid] = stream
        return rid

    def send(
        self,
        method: str,
        target: str,
        headers: list,
        body: bytes | None,
        stream: BodyStream | None,
        read_timeout: float | None,
    ) -> Any:
        """Queues one request; returns an awaitable of its `HttpResponse`."""
        self.sent += 1
        return self.engine.request(
            self._encode, method, target, headers, body, stream, timeout=read_timeout
        )

    def _out_of_band(self, value: Any) -> None:
        if type(value) is not tuple:
            # A response nobody asked for (say a 408 before the server closes):
            # the stream is no longer in step with the requests.
            self.reusable = False
            return
        rid, piece = value
        stream = self.streams.get(rid)
        if type(piece) is bytes:
            if stream is not None:
                stream.feed(piece)
            return
        self.streams.pop(rid, None)
        if stream is None:
            return
        if piece is None:
            stream.end()
        else:
            stream.fail(RemoteProtocolError(f"{self.pool.host}:{self.pool.port}: {piece}"))

    def _after_batch(self) -> None:
        if self.codec.failed:
            # Requests behind a malformed reply cannot be matched any more.
            self.reusable = False
            self.engine.abort()

    def _lost(self, err: BaseException) -> None:
        self.reusable = False
        streams, self.streams = self.streams, {}
        for stream in streams.values():
            stream.fail(err)
        self.pool.lost(self)

    @property
    def usable(self) -> bool:
        return self.reusable and not self.removed and not self.codec.failed


class HostPool:
    """The connections to one (scheme, host, port)."""

    def __init__(self, pools: Pools, host: str, port: int) -> None:
        self.pools = pools
        self.settings = pools.settings
        self.host = host
        self.port = port
        self.conns: list[Connection] = []
        self.idle: list[Connection] = []
        self.waiters: deque[asyncio.Future] = deque()

    async def acquire(self, connect_timeout: float, pool_timeout: float | None) -> Connection:
        """A connection to send one request on; raises `PoolTimeout` when none frees up."""
        loop = asyncio.get_running_loop()
        deadline = None if pool_timeout is None else loop.time() + pool_timeout
        while True:
            conn = self._take(loop.time(), connect_timeout)
            if conn is not None:
                conn.active += 1
                return conn
            waiter = loop.create_future()
            self.waiters.append(waiter)
            self.pools.waiting[self] = None
            woken = False
            try:
                left = None if deadline is None else max(0.0, deadline - loop.time())
                async with asyncio.timeout(left):
                    await waiter
                woken = True
            except TimeoutError:
                raise PoolTimeout(
                    f"no connection to {self.host}:{self.port} free within {pool_timeout} s"
                ) from None
            finally:
                if not woken:
                    # Leaving early (timeout, cancel): take the entry out now, so
                    # waits leave nothing behind, and pass on a wake-up that came
                    # too late to be used.
                    if waiter.done() and not waiter.cancelled():
                        self._wake()
                    else:
                        waiter.cancel()
                    with contextlib.suppress(ValueError):
                        self.waiters.remove(waiter)
                    if not self.waiters:
                        self.pools.waiting.pop(self, None)

    def _take(self, now: float, connect_timeout: float) -> Connection | None:
        s = self.settings
        if s.pipeline:
            best = None
            for c in self.conns:
                if c.usable and (best is None or c.active < best.active):
                    best = c
            if best is not None and (best.active == 0 or best.active < s.pipeline):
                return best
        else:
            while self.idle:
                c = self.idle.pop()
                if c.usable and c.engine.is_connected and now - c.idle_since < s.keepalive_expiry:
                    return c
                self.remove(c)
        if len(self.conns) < s.max_connections_per_host and self.pools.reserve():
            c = Connection(self, connect_timeout)
            self.conns.append(c)
            return c
        return None

    def release(self, conn: Connection, reusable: bool) -> None:
        """The request on `conn` is done; `reusable` False retires the connection."""
        conn.active -= 1
        if not reusable:
            conn.reusable = False
        if not conn.usable or (not conn.engine.is_connected and conn.sent):
            conn.reusable = False
            if conn.active <= 0:
                self.remove(conn)
            return
        if not self.settings.pipeline:
            conn.idle_since = asyncio.get_running_loop().time()
            self.idle.append(conn)
        self._wake()

    def lost(self, conn: Connection) -> None:
        if conn.active <= 0:
            self.remove(conn)

    def remove(self, conn: Connection) -> None:
        """Closes `conn` and frees its slot."""
        if conn.removed:
            return
        conn.removed = True
        conn.reusable = False
        if conn in self.conns:
            self.conns.remove(conn)
        if conn in self.idle:
            self.idle.remove(conn)
        self.pools.closing(conn.engine)
        self.pools.release_slot()
        self._wake()

    def _wake(self) -> bool:
        """Wakes the first live waiter; False when there is none."""
        while self.waiters:
            w = self.waiters.popleft()
            if not w.done():
                w.set_result(None)
                return True
        self.pools.waiting.pop(self, None)
        return False

    def close_idle(self) -> bool:
        """Closes one idle connection; True if there was one."""
        for c in self.idle:
            if c.active <= 0:
                self.remove(c)
                return True
        return False


class Pools:
    """Every host's pool, and the client-wide connection count."""

    def __init__(self, settings: PoolSettings) -> None:
        self.settings = settings
        self.hosts: dict[tuple[str, str, int], HostPool] = {}
        self.total = 0
        #: Hosts with waiters, oldest first, to wake when a client-wide slot frees
        #: (a dict as an ordered set: a host is in it once, however many wait).
        self.waiting: dict[HostPool, None] = {}
        self._closing: set[asyncio.Task] = set()

    def get(self, key: tuple[str, str, int]) -> HostPool:
        pool = self.hosts.get(key)
        if pool is None:
            pool = self.hosts[key] = HostPool(self, key[1], key[2])
        return pool

    def reserve(self) -> bool:
        """Takes a client-wide slot for a new connection, closing an idle one if need be."""
        if self.total >= self.settings.max_connections:
            for pool in self.hosts.values():
                if pool.close_idle():
                    break
            else:
                return False
        self.total += 1
        return True

    def release_slot(self) -> None:
        self.total -= 1
        for pool in list(self.waiting):
            if pool._wake():
                return

    def closing(self, engine: PipelinedConnection) -> None:
        task = asyncio.get_running_loop().create_task(engine.close())
        self._closing.add(task)
        task.add_done_callback(self._closing.discard)

    async def aclose(self) -> None:
        for pool in list(self.hosts.values()):
            for conn in list(pool.conns):
                for stream in conn.streams.values():
                    stream.fail(ConnectionLostError("client closed"))
                pool.remove(conn)
        if self._closing:
            await asyncio.gather(*self._closing, return_exceptions=True)


def _host_header(host: str, port: int) -> str:
    h = f"[{host}]" if ":" in host else host
    return h if port == 80 else f"{h}:{port}"


Release = Callable[[bool], None]
__all__ = ["BodyStream", "Connection", "HostPool", "HttpResponse", "PoolSettings", "Pools"]
