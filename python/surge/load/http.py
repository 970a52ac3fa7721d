"""HTTP/1.1 target: a pool of keep-alive connections driven by callbacks.

No task or future per request: a request is its due time appended to a
connection's in-flight deque, and a response pops it and records the latency.
Requests are identical, so their bytes are built once and a connection's
unsent requests leave in one write per loop iteration.

Open model: a request goes to a connection with room (fewer than ``pipeline``
requests in flight); if none has room, it waits in the pool's queue (its latency
still counts from its due time) and a new connection is opened, up to
``connections``. Closed model: ``connections`` connections each keep
``pipeline`` requests in flight; each response sends the next request.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from urllib.parse import urlsplit

from surge._core import HttpResponseParser
from surge.load.recorder import Recorder
from surge.load.target import (
    DEFAULT_CLOSED_CONNECTIONS,
    DEFAULT_OPEN_CONNECTIONS,
    LoadConfig,
    LoadError,
    Target,
    connect_error_kind,
    register,
)

#: Closed model: wait this long before reopening a connection that failed.
RECONNECT_DELAY = 0.05
_OP = "request"


class MalformedReply(Exception):
    """The server's bytes are not an HTTP/1.x response."""


class _Framer:
    """Status codes of the responses a byte stream completes (surge-proto's parser)."""

    __slots__ = ("_p", "_statuses", "close_after")

    def __init__(self) -> None:
        self._p = HttpResponseParser()
        self._statuses = self._p.feed_statuses
        # The server's Connection: close shows as the connection ending.
        self.close_after = False

    def expect_head(self) -> None:
        """A HEAD request was sent: its response has no body."""
        self._p.expect(True)

    def feed(self, data: bytes) -> list[int]:
        try:
            return self._statuses(data)
        except Exception as exc:
            raise MalformedReply(str(exc)) from None

    def eof(self) -> int | None:
        try:
            done = self._p.feed_eof(True)
        except Exception:
            return None
        return done[0] if done else None


def build_request(config: LoadConfig) -> tuple[str, int, bytes]:
    """(host, port, request bytes) for the run's URL, method, headers and body."""
    url = urlsplit(config.target)
    if not url.hostname:
        raise LoadError(f"no host in {config.target!r}")
    port = url.port or 80
    path = url.path or "/"
    if url.query:
        path += "?" + url.query
    host_header = url.hostname if port == 80 else f"{url.hostname}:{port}"
    names = {k.lower() for k, _ in config.headers}
    lines = [f"{config.method.upper()} {path} HTTP/1.1"]
    if "host" not in names:
        lines.append(f"Host: {host_header}")
    lines += [f"{k}: {v}" for k, v in config.headers]
    if config.body and "content-length" not in names:
        lines.append(f"Content-Length: {len(config.body)}")
    head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
    return url.hostname, port, head + config.body


class _Conn(asyncio.Protocol):
    __slots__ = ("dead", "framer", "in_free", "inflight", "pool", "transport", "unsent")

    def __init__(self, pool: HttpTarget) -> None:
        self.pool = pool
        self.transport: asyncio.Transport | None = None
        self.framer = _Framer()
        self.inflight: deque[int] = deque()
        self.unsent = 0
        self.in_free = False
        self.dead = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        try:
            statuses = self.framer.feed(data)
        except MalformedReply:
            self.pool._kill(self, "malformed")
            return
        if statuses:
            self.pool._responses(self, statuses)

    def eof_received(self) -> bool:
        status = self.framer.eof()
        if status is not None and self.inflight:
            self.pool._responses(self, [status])
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self.pool._lost(self)


@register("http", "https")
class HttpTarget(Target):
    """Load on one HTTP URL."""

    ops = [_OP]
    example = "http://host:port/path"

    @classmethod
    def operations(cls, config: LoadConfig) -> list[str]:
        if config.target.lower().startswith("https:"):
            raise LoadError("https targets are not supported (surge's HTTP is plain HTTP/1.1)")
        return [_OP]

    def __init__(self, config: LoadConfig, recorder: Recorder) -> None:
        super().__init__(config, recorder)
        self.host, self.port, self.request = build_request(config)
        self.head_only = config.method.upper() == "HEAD"
        self.depth = config.pipeline
        default = DEFAULT_OPEN_CONNECTIONS if config.open_model else DEFAULT_CLOSED_CONNECTIONS
        self.max_connections = config.connections or default
        self.timeout_ns = int(config.timeout * 1e9)
        self.conns: set[_Conn] = set()
        self.free: list[_Conn] = []
        self.queue: deque[int] = deque()
        self.connecting = 0
        self._dirty: list[_Conn] = []
        self._flush_scheduled = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._tasks: set[asyncio.Task] = set()
        #: Connections opened, and attempts that failed (for reports and tests).
        self.opened = 0
        self.failed_connects = 0
        self._closed = False

    async def prepare(self) -> None:
        self._loop = asyncio.get_running_loop()

    # -- open model ---------------------------------------------------------------------

    def issue(self, due_ns: int) -> None:
        if not self.queue:
            free = self.free
            while free:
                conn = free[-1]
                if conn.dead or len(conn.inflight) >= self.depth:
                    free.pop()
                    conn.in_free = False
                    continue
                self._send(conn, due_ns)
                if len(conn.inflight) >= self.depth:
                    free.pop()
                    conn.in_free = False
                return
        self.queue.append(due_ns)
        if len(self.conns) + self.connecting < self.max_connections and self.connecting < len(
            self.queue
        ):
            self._open()

    # -- closed model -------------------------------------------------------------------

    def start_closed(self) -> None:
        for _ in range(self.max_connections):
            self._open()

    # -- bookkeeping --------------------------------------------------------------------

    def outstanding(self) -> int:
        return len(self.queue) + sum(len(c.inflight) for c in self.conns)

    def expire(self, now_ns: int) -> None:
        limit = now_ns - self.timeout_ns
        q = self.queue
        rec = self.recorder
        while q and q[0] <= limit:
            q.popleft()
            rec.error(_OP, "timeout")
        for conn in list(self.conns):
            if conn.inflight and conn.inflight[0] <= limit:
                # A response can no longer be matched to its request once one is
                # skipped: every request on this connection ends as a timeout.
                self._kill(conn, "timeout")

    def abandon(self) -> None:
        rec = self.recorder
        while self.queue:
            self.queue.popleft()
            rec.error(_OP, "timeout")
        for conn in list(self.conns):
            self._kill(conn, "timeout")

    async def close(self) -> None:
        self.stopping = self._closed = True
        for conn in list(self.conns):
            if conn.transport is not None:
                conn.transport.abort()
        for t in list(self._tasks):
            t.cancel()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)

    # -- internals ----------------------------------------------------------------------

    def _open(self) -> None:
        assert self._loop is not None
        self.connecting += 1
        task = self._loop.create_task(self._connect())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _connect(self) -> None:
        assert self._loop is not None
        try:
            _, conn = await asyncio.wait_for(
                self._loop.create_connection(lambda: _Conn(self), self.host, self.port),
                self.config.connect_timeout,
            )
        except asyncio.CancelledError:
            self.connecting -= 1
            raise
        except Exception as exc:
            self.connecting -= 1
            self.failed_connects += 1
            self._connect_failed(connect_error_kind(exc))
            return
        self.connecting -= 1
        self.opened += 1
        if conn.dead:
            # The peer hung up before we got here (`_kill` ran with nothing in
            # flight): feeding it would strand the queued requests uncounted.
            if self.config.open_model:
                self._connect_failed("disconnect")
            else:  # its loop's requests fail; `_kill` has opened its replacement
                for _ in range(self.depth):
                    self.recorder.error(_OP, "disconnect")
            return
        # Closed model: no new work after the stop. Open model: queued requests still go.
        if self._closed or (self.stopping and not self.config.open_model):
            if conn.transport is not None:
                conn.transport.abort()
            return
        self.conns.add(conn)
        if self.config.open_model:
            self._feed(conn)
        else:
            for _ in range(self.depth):
                self._send(conn, time.monotonic_ns())

    def _connect_failed(self, kind: str) -> None:
        rec = self.recorder
        if self.config.open_model:
            # Queued requests wait for any connection; they fail only when none is left.
            if not self.conns and not self.connecting:
                while self.queue:
                    self.queue.popleft()
                    rec.error(_OP, kind)
            return
        # Closed model: this connection's requests fail; try again after a pause.
        for _ in range(self.depth):
            rec.error(_OP, kind)
        if not self.stopping and not self._closed:
            self._reopen_later()

    def _reopen_later(self) -> None:
        assert self._loop is not None
        self.connecting += 1

        def reopen() -> None:
            self.connecting -= 1
            if not self.stopping:
                self._open()

        self._loop.call_later(RECONNECT_DELAY, reopen)

    def _feed(self, conn: _Conn) -> None:
        """Give a connection with room queued requests; else list it as free."""
        q = self.queue
        depth = self.depth
        while q and len(conn.inflight) < depth:
            self._send(conn, q.popleft())
        if len(conn.inflight) < depth and not conn.in_free:
            conn.in_free = True
            self.free.append(conn)

    def _send(self, conn: _Conn, due_ns: int) -> None:
        conn.inflight.append(due_ns)
        if self.head_only:
            conn.framer.expect_head()
        if conn.unsent == 0:
            self._dirty.append(conn)
            if not self._flush_scheduled:
                self._flush_scheduled = True
                assert self._loop is not None
                self._loop.call_soon(self._flush)
        conn.unsent += 1

    def _flush(self) -> None:
        self._flush_scheduled = False
        dirty, self._dirty = self._dirty, []
        req = self.request
        for conn in dirty:
            n, conn.unsent = conn.unsent, 0
            if conn.dead or conn.transport is None:
                continue
            conn.transport.write(req * n if n > 1 else req)

    def _responses(self, conn: _Conn, statuses: list[int]) -> None:
        now = time.monotonic_ns()
        rec = self.recorder
        inflight = conn.inflight
        for status in statuses:
            if not inflight:
                self._kill(conn, "malformed")  # a response nobody asked for
                return
            rec.http(_OP, status, now - inflight.popleft())
        if conn.framer.close_after:
            self._kill(conn, "disconnect")  # what was pipelined behind it is lost
            return
        if self.config.open_model:
            self._feed(conn)
        elif not self.stopping:
            for _ in range(len(statuses)):
                self._send(conn, now)

    def _kill(self, conn: _Conn, kind: str) -> None:
        """End a connection; its requests in flight end as `kind`."""
        if conn.dead:
            return
        conn.dead = True
        self.conns.discard(conn)
        rec = self.recorder
        while conn.inflight:
            conn.inflight.popleft()
            rec.error(_OP, kind)
        if conn.transport is not None:
            conn.transport.abort()
        self._replace()

    def _lost(self, conn: _Conn) -> None:
        if not conn.dead:
            self._kill(conn, "disconnect")

    def _replace(self) -> None:
        if self._closed:
            return
        if self.config.open_model:
            if self.queue and len(self.conns) + self.connecting < self.max_connections:
                self._open()
        elif not self.stopping:
            self._open()
