"""`Pool`: several connections to one server.

Where it differs from asyncpg: a surge connection may be shared by any number
of coroutines, so the shortcuts (`Pool.fetch`, `execute` ...) do not take a
connection away from others: each goes to the connection with the fewest
requests in flight among those nobody holds. `acquire()` gives a connection to
one holder alone (for transactions, LISTEN, session settings) until released;
when all are held, acquirers wait, and the pool grows up to ``max_size``.

asyncpg's hooks run as in asyncpg: ``init(conn)`` once per new connection,
and again before a connection is handed out when it has a new server session
(it reconnects by itself after a loss, e.g. a failover; asyncpg makes a new
connection then, which runs ``init``, so what ``init`` made in the session, a
temp table or a prepared plan, is there again); ``setup(conn)`` on each
`acquire`, ``reset(conn)`` on each `release` (after an open transaction is
rolled back; by default `Connection.reset`); a connection that served
``max_queries`` requests is closed on release, and one that sat unused for
``max_inactive_connection_lifetime`` seconds is closed while the pool has more
than ``min_size``.
"""

from __future__ import annotations

import asyncio
import logging
import time
import weakref
from collections import deque
from collections.abc import AsyncIterable, Awaitable, Callable, Iterable, Sequence
from types import TracebackType
from typing import Any

from surge._core import Record
from surge.errors import ClosedError, InterfaceError
from surge.postgres.connection import Connection
from surge.postgres.dsn import ConnectParams

#: asyncpg's defaults.
DEFAULT_MIN_SIZE = 10
DEFAULT_MAX_SIZE = 10
#: Requests a connection serves before it is replaced on release (asyncpg's).
DEFAULT_MAX_QUERIES = 50000
#: Seconds an unused connection above ``min_size`` stays open (asyncpg's; 0: forever).
DEFAULT_MAX_INACTIVE_CONNECTION_LIFETIME = 300.0
#: Seconds `Pool.close` waits for held connections before it warns (asyncpg's).
CLOSE_WARN_AFTER = 60.0

log = logging.getLogger(__name__)

#: A pool hook: a coroutine function taking the connection.
Hook = Callable[[Connection], Awaitable[Any]]
#: `connect`'s arguments (a DSN, keywords) made into parameters and options.
Configure = Callable[..., tuple[ConnectParams, dict[str, Any]]]


def _in_flight(c: Connection) -> int:
    return c.engine.in_flight


def _copy_load(c: Connection) -> tuple[int, int]:
    return (c._session.copies, c.engine.in_flight)


#: How often a closing pool looks whether a connection's shortcut calls are done
#: (a rare path: a counter per call is cheaper than a future per call).
CALLS_POLL = 0.01


async def _close_when_done(c: Connection) -> None:
    """Close ``c`` once the pool's shortcut calls on it (``_pool_calls``) are done.

    The count is written out in each shortcut rather than through one helper:
    under callgrind (busy-polling off), a sequential ``pool.fetchval`` took 96.7k
    client instructions before the count, 97.1k with it written out, 102.3k
    through a helper coroutine (its frame, getattr and argument packing)."""
    while c._pool_calls and not c.is_closed():
        await asyncio.sleep(CALLS_POLL)
    await c.close()


class Pool:
    """Connections to one server; shortcuts spread queries over them."""

    def __init__(
        self,
        params: ConnectParams,
        min_size: int,
        max_size: int,
        connect_kwargs: dict[str, Any],
        *,
        init: Hook | None = None,
        setup: Hook | None = None,
        reset: Hook | None = None,
        max_queries: int = DEFAULT_MAX_QUERIES,
        max_inactive_connection_lifetime: float = DEFAULT_MAX_INACTIVE_CONNECTION_LIFETIME,
        connection_class: type[Connection] = Connection,
        configure: Configure | None = None,
        init_size: int | None = None,
    ) -> None:
        if not 0 <= min_size <= max_size or max_size < 1:
            raise InterfaceError(
                f"need 0 <= min_size <= max_size, max_size >= 1: {min_size}, {max_size}"
            )
        # asyncpg 0.32's checks and messages
        if init_size is None:
            init_size = min_size
        if init_size < 0:
            raise ValueError("init_size is expected to be greater or equal to zero")
        if init_size > max_size:
            raise ValueError("init_size is greater than max_size")
        if init_size < min_size:
            raise ValueError("init_size is smaller than min_size")
        if max_queries <= 0:
            raise ValueError("max_queries is expected to be greater than zero")
        if max_inactive_connection_lifetime < 0:
            raise ValueError(
                "max_inactive_connection_lifetime is expected to be greater or equal to zero"
            )
        self._params = params
        self.min_size = min_size
        self.max_size = max_size
        self.init_size = init_size
        self._kwargs = connect_kwargs
        self._connection_class = connection_class
        self._configure = configure
        self._init_hook, self._setup_hook, self._reset_hook = init, setup, reset
        self._max_queries = max_queries
        self._max_idle = max_inactive_connection_lifetime
        self._all: list[Connection] = []
        self._held: set[Connection] = set()
        # Every connection this pool made (weakly): `release` tells a connection
        # of another pool or of `connect` from one of its own already dropped.
        self._made: weakref.WeakSet[Connection] = weakref.WeakSet()
        # Free, connected connections and when each was last used (loop time):
        # what the inactivity sweep looks at.
        self._idle_since: dict[Connection, float] = {}
        self._sweep: asyncio.TimerHandle | None = None
        # Closes of inactive connections under way (kept so they are not collected).
        self._closing: set[asyncio.Task[None]] = set()
        # Connections `expire_connections` found held: closed on release.
        self._expired: set[Connection] = set()
        self._waiters: deque[asyncio.Future[None]] = deque()
        # The server session each connection last ran ``init`` in, and the
        # re-runs under way (shared by the callers that want the connection).
        self._inited: weakref.WeakKeyDictionary[Connection, int] = weakref.WeakKeyDictionary()
        self._reiniting: dict[Connection, asyncio.Future[None]] = {}
        self._opening = 0
        self._closed = False

    async def _init(self) -> Pool:
        conns = [self._new() for _ in range(self.init_size)]
        try:
            await asyncio.gather(*(self._open(c) for c in conns))
        except BaseException:
            await asyncio.gather(*(c.close() for c in conns), return_exceptions=True)
            self._all.clear()
            self._idle_since.clear()
            raise
        return self

    def _new(self) -> Connection:
        c = self._connection_class(self._params, **self._kwargs)
        self._all.append(c)
        self._made.add(c)
        return c

    async def _open(self, c: Connection) -> None:
        """Connect ``c`` and run ``init`` on it; on failure it leaves the pool."""
        try:
            await c.connect()
            if self._init_hook is not None:
                await self._init_hook(c)
                self._inited[c] = c._codec.session
                if c.engine.in_flight:
                    # What init left behind (set_type_codec closes the cached
                    # statements in the background) ends before this query's
                    # reply: the first acquire then finds the connection idle
                    # rather than opening another.
                    await c.execute("SELECT 1")
        except BaseException:
            self._drop(c)
            await c.close()
            raise
        self._touch(c)

    def _drop(self, c: Connection) -> None:
        if c in self._all:
            self._all.remove(c)
        self._idle_since.pop(c, None)
        self._held.discard(c)
        self._expired.discard(c)

    def _touch(self, c: Connection) -> None:
        """``c`` was used just now (and is free): the inactivity clock restarts.
        On every shortcut's path: a dict store, the timer armed once."""
        self._idle_since[c] = time.monotonic()
        if self._sweep is None and self._max_idle:
            loop = asyncio.get_running_loop()
            self._sweep = loop.call_later(self._max_idle, self._close_inactive)

    def _close_inactive(self) -> None:
        """Close the connections unused for ``max_inactive_connection_lifetime``
        while the pool has more than ``min_size``; look again when the next may be due."""
        self._sweep = None
        if self._closed:
            return
        loop = asyncio.get_running_loop()
        now = time.monotonic()
        for c, since in sorted(self._idle_since.items(), key=lambda kv: kv[1]):
            if len(self._all) <= self.min_size:
                break
            if now - since >= self._max_idle and c.engine.in_flight == 0:
                self._drop(c)
                task = loop.create_task(c.close())
                self._closing.add(task)
                task.add_done_callback(self._closing.discard)
        if self._idle_since and len(self._all) > self.min_size:
            due = min(self._idle_since.values()) + self._max_idle - now
            self._sweep = loop.call_later(max(due, 0.01), self._close_inactive)

    def __await__(self) -> Any:
        return self._init().__await__()

    def get_size(self) -> int:
        """Connections open (or opening)."""
        return len(self._all)

    def get_idle_size(self) -> int:
        """Connections nobody holds."""
        return len(self._all) - len(self._held)

    def get_init_size(self) -> int:
        """``init_size``: the connections opened when the pool starts (``min_size``
        unless given)."""
        return self.init_size

    def get_min_size(self) -> int:
        """``min_size``."""
        return self.min_size

    def get_max_size(self) -> int:
        """``max_size``."""
        return self.max_size

    def is_closing(self) -> bool:
        """True once `close` or `terminate` was called."""
        return self._closed

    async def _free(
        self, exclusive: bool, load: Callable[[Connection], Any] = _in_flight
    ) -> Connection:
        """A connection nobody holds: for a holder, an idle one if any; for a
        shortcut, the one with the least ``load`` (requests in flight)."""
        while True:
            if self._closed:
                raise ClosedError("the pool is closed")
            free = [c for c in self._all if c not in self._held]
            if free:
                best = min(free, key=load)
                if not exclusive or best.engine.in_flight == 0 or len(self._all) >= self.max_size:
                    self._touch(best)
                    if self._init_hook is not None and self._new_session(best):
                        await self._reinit(best)
                    return best
            if len(self._all) < self.max_size:
                c = self._new()
                await self._open(c)
                return c
            fut = asyncio.get_running_loop().create_future()
            self._waiters.append(fut)
            await fut

    def _new_session(self, c: Connection) -> bool:
        """True when ``c`` lost the server session ``init`` ran in (it is not
        connected now, or reconnected since)."""
        return not c.engine.is_connected or c._codec.session != self._inited.get(c)

    async def _reinit(self, c: Connection) -> None:
        """Reconnect ``c`` now and run ``init`` in its new session; callers that
        want it meanwhile wait for the same run. A failure (no server yet) goes to
        them; the connection stays in the pool and the next caller tries again."""
        fut = self._reiniting.get(c)
        if fut is None:
            fut = self._reiniting[c] = asyncio.ensure_future(self._run_init(c))

            def done(f: asyncio.Future[None]) -> None:
                self._reiniting.pop(c, None)
                if not f.cancelled():
                    f.exception()  # retrieved: its callers got it (or left)

            fut.add_done_callback(done)
        await asyncio.shield(fut)

    async def _run_init(self, c: Connection) -> None:
        await c.connect()
        session = c._codec.session
        assert self._init_hook is not None
        await self._init_hook(c)
        self._inited[c] = session

    def acquire(self, *, timeout: float | None = None) -> _Acquire:
        """A connection for the caller alone: ``async with pool.acquire() as conn``
        (released on exit) or ``conn = await pool.acquire()`` (then `release` it)."""
        return _Acquire(self, timeout)

    async def _acquire(self, timeout: float | None) -> Connection:
        if timeout is None:
            c = await self._hold()
        else:
            c = await asyncio.wait_for(self._hold(), timeout)
        return c

    async def _hold(self) -> Connection:
        c = await self._free(True)
        self._held.add(c)
        self._idle_since.pop(c, None)
        if self._setup_hook is not None:
            try:
                await self._setup_hook(c)
            except BaseException:
                # As asyncpg: after a failed setup the connection's state is
                # unknown, so it is closed (a new one is made when needed).
                self._drop(c)
                self._wake()
                await c.close()
                raise
        return c

    async def release(self, connection: Connection, *, timeout: float | None = None) -> None:
        """Give back a connection from `acquire`: an open transaction is rolled back
        and the session reset (`Connection.reset`, or the pool's ``reset=``), as in
        asyncpg, so the next user (or a shortcut) does not inherit it. A connection
        past ``max_queries`` requests, or expired, is closed instead."""
        conn = connection
        if conn not in self._held:
            if conn not in self._made:
                # As asyncpg: giving it back would hand another pool's (or a
                # lone) connection to this pool's users.
                raise InterfaceError(
                    f"Pool.release() received invalid connection: {conn!r} "
                    "is not a member of this pool"
                )
            return
        try:
            if conn in self._expired or conn.engine.stats["requests"] >= self._max_queries:
                self._drop(conn)
                await conn.close()
            elif self._reset_hook is not None:
                await conn._rollback_and_unlisten(timeout)
                await self._reset_hook(conn)
            else:
                await conn.reset(timeout=timeout)
        except Exception:
            conn.terminate()
            self._drop(conn)
        finally:
            self._held.discard(conn)
            if conn in self._all:
                self._touch(conn)
            self._wake()

    def set_connect_args(self, dsn: str | None = None, **connect_kwargs: Any) -> None:
        """Connect the connections made from now on with ``dsn`` and
        ``connect_kwargs`` (`connect`'s), in place of the pool's (asyncpg's call;
        `expire_connections` replaces the open ones)."""
        if self._configure is None:
            raise InterfaceError("this pool was not made by create_pool")
        self._params, self._kwargs = self._configure(dsn, **connect_kwargs)

    async def expire_connections(self) -> None:
        """Replace every connection now free and each held one when released, so new
        ones (with new `set_connect_args` or server settings) take the next
        requests. The free ones leave the pool at once and close when the
        shortcut calls on them are done (asyncpg, which replaces a connection
        on its next acquire, lets running queries finish too)."""
        held = [c for c in self._all if c in self._held]
        self._expired.update(held)
        free = [c for c in self._all if c not in self._held]
        loop = asyncio.get_running_loop()
        for c in free:
            self._drop(c)
            task = loop.create_task(_close_when_done(c))
            self._closing.add(task)
            task.add_done_callback(self._closing.discard)

    def _wake(self) -> None:
        waiters, self._waiters = self._waiters, deque()
        for w in waiters:
            if not w.done():
                w.set_result(None)

    async def fetch(
        self,
        query: str,
        *args: Any,
        timeout: float | None = None,
        record_class: type[Record] | None = None,
    ) -> list[Record]:
        """`Connection.fetch` on the least busy free connection."""
        c = await self._free(False)
        c._pool_calls += 1
        try:
            return await c.fetch(query, *args, timeout=timeout, record_class=record_class)
        finally:
            c._pool_calls -= 1

    async def fetchrow(
        self,
        query: str,
        *args: Any,
        timeout: float | None = None,
        record_class: type[Record] | None = None,
    ) -> Record | None:
        """`Connection.fetchrow` on the least busy free connection."""
        c = await self._free(False)
        c._pool_calls += 1
        try:
            return await c.fetchrow(query, *args, timeout=timeout, record_class=record_class)
        finally:
            c._pool_calls -= 1

    async def fetchval(
        self, query: str, *args: Any, column: int | str = 0, timeout: float | None = None
    ) -> Any:
        """`Connection.fetchval` on the least busy free connection."""
        c = await self._free(False)
        c._pool_calls += 1
        try:
            return await c.fetchval(query, *args, column=column, timeout=timeout)
        finally:
            c._pool_calls -= 1

    async def fetchmany(
        self,
        query: str,
        args: Iterable[Sequence[Any]],
        *,
        timeout: float | None = None,
        record_class: type[Record] | None = None,
    ) -> list[Record]:
        """`Connection.fetchmany` (a transaction) on a connection held for it."""
        async with self.acquire() as conn:
            return await conn.fetchmany(query, args, timeout=timeout, record_class=record_class)

    async def execute(self, query: str, *args: Any, timeout: float | None = None) -> str:
        """`Connection.execute` on the least busy free connection."""
        c = await self._free(False)
        c._pool_calls += 1
        try:
            return await c.execute(query, *args, timeout=timeout)
        finally:
            c._pool_calls -= 1

    async def executemany(
        self, command: str, args: Iterable[Sequence[Any]], *, timeout: float | None = None
    ) -> None:
        """`Connection.executemany` on the least busy free connection."""
        c = await self._free(False)
        c._pool_calls += 1
        try:
            await c.executemany(command, args, timeout=timeout)
        finally:
            c._pool_calls -= 1

    async def copy_records_to_table(
        self,
        table_name: str,
        *,
        records: Iterable[Sequence[Any]] | AsyncIterable[Sequence[Any]],
        columns: Sequence[str] | None = None,
        schema_name: str | None = None,
        timeout: float | None = None,
        where: str | None = None,
    ) -> str:
        """`Connection.copy_records_to_table` on a free connection with no COPY
        under way, idle if any (asyncpg's pool has it too).

        Why not the one with the fewest requests in flight, as the other
        shortcuts: a COPY holds its connection while it streams, and between
        its catalog lookup and its data the connection looks idle; chosen by
        requests in flight, 10 coroutines copying over 10 connections queued
        behind each other on a few (98 % of the COPYs found one under way)
        while the others idled."""
        conn = await self._free(True, _copy_load)
        conn._pool_calls += 1
        try:
            return await conn.copy_records_to_table(
                table_name,
                records=records,
                columns=columns,
                schema_name=schema_name,
                timeout=timeout,
                where=where,
            )
        finally:
            conn._pool_calls -= 1

    async def copy_from_query(self, query: str, *args: Any, **kwargs: Any) -> str:
        """`Connection.copy_from_query` on a free connection with no COPY under way."""
        conn = await self._free(True, _copy_load)
        conn._pool_calls += 1
        try:
            return await conn.copy_from_query(query, *args, **kwargs)
        finally:
            conn._pool_calls -= 1

    async def copy_from_table(self, table_name: str, **kwargs: Any) -> str:
        """`Connection.copy_from_table` on a free connection with no COPY under way."""
        conn = await self._free(True, _copy_load)
        conn._pool_calls += 1
        try:
            return await conn.copy_from_table(table_name, **kwargs)
        finally:
            conn._pool_calls -= 1

    async def copy_to_table(self, table_name: str, **kwargs: Any) -> str:
        """`Connection.copy_to_table` on a free connection with no COPY under way."""
        conn = await self._free(True, _copy_load)
        conn._pool_calls += 1
        try:
            return await conn.copy_to_table(table_name, **kwargs)
        finally:
            conn._pool_calls -= 1

    def _forget_all(self) -> list[Connection]:
        self._closed = True
        if self._sweep is not None:
            self._sweep.cancel()
            self._sweep = None
        self._wake()
        conns, self._all = self._all, []
        self._held.clear()
        self._idle_since.clear()
        self._expired.clear()
        return conns

    async def close(self) -> None:
        """Close the pool gracefully, as asyncpg: from now on `acquire` and the
        shortcuts fail with ClosedError (so do the acquirers waiting), the
        connections held are waited for until their holders release them, and
        the shortcut calls under way until they are done, then every connection
        is closed. An error or a cancellation meanwhile (bound
        the wait with ``asyncio.wait_for``) terminates the pool."""
        self._closed = True
        self._wake()
        loop = asyncio.get_running_loop()
        # asyncpg's warning: a holder that never releases holds close() forever.
        warn = loop.call_later(CLOSE_WARN_AFTER, _warn_long_close, self)
        try:
            while self._held:
                fut = loop.create_future()
                self._waiters.append(fut)
                await fut
        except BaseException:
            self.terminate()
            raise
        finally:
            warn.cancel()
        conns = self._forget_all()
        try:
            # The shortcut calls under way end first: in asyncpg they hold their
            # connections, so close() waits for them too.
            await asyncio.gather(
                *(_close_when_done(c) for c in conns), *self._closing, return_exceptions=True
            )
        except BaseException:
            for c in conns:
                c.terminate()
            raise

    def terminate(self) -> None:
        """Drop every connection at once (no goodbye to the server)."""
        for c in self._forget_all():
            c.terminate()

    async def __aenter__(self) -> Pool:
        return await self._init()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


def _warn_long_close(pool: Pool) -> None:
    log.warning(
        "Pool.close() is waiting over %s s for %d connection(s) to be released; "
        "bound it with asyncio.wait_for()",
        CLOSE_WARN_AFTER,
        len(pool._held),
    )


class _Acquire:
    """What ``pool.acquire()`` is used as: ``async with`` (released on exit)."""

    __slots__ = ("_conn", "_pool", "_timeout")

    def __init__(self, pool: Pool, timeout: float | None) -> None:
        self._pool = pool
        self._timeout = timeout
        self._conn: Connection | None = None

    def __await__(self) -> Any:
        return self._pool._acquire(self._timeout).__await__()

    async def __aenter__(self) -> Connection:
        self._conn = await self._pool._acquire(self._timeout)
        return self._conn

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._conn is not None:
            await self._pool.release(self._conn)
