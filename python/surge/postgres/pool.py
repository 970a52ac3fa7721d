"""`Pool`: several connections to one server.

Where it differs from asyncpg: a surge connection may be shared by any number
of coroutines, so the shortcuts (`Pool.fetch`, `execute` ...) do not take a
connection away from others: each goes to the connection with the fewest
requests in flight among those nobody holds. `acquire()` gives a connection to
one holder alone (for transactions, LISTEN, session settings) until released;
when all are held, acquirers wait, and the pool grows up to ``max_size``.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import AsyncIterable, Callable, Iterable, Sequence
from types import TracebackType
from typing import Any

from surge._core import Record
from surge.errors import ClosedError, InterfaceError
from surge.postgres.connection import Connection
from surge.postgres.dsn import ConnectParams

#: What `release` runs to give the next user a clean session (prepared
#: statements stay: they belong to the connection's cache, not to the user).
RESET_QUERY = "CLOSE ALL; UNLISTEN *; RESET ALL; SELECT pg_advisory_unlock_all()"

#: asyncpg's defaults.
DEFAULT_MIN_SIZE = 10
DEFAULT_MAX_SIZE = 10


def _in_flight(c: Connection) -> int:
    return c.engine.in_flight


def _copy_load(c: Connection) -> tuple[int, int]:
    return (c._session.copies, c.engine.in_flight)


class Pool:
    """Connections to one server; shortcuts spread queries over them."""

    def __init__(
        self, params: ConnectParams, min_size: int, max_size: int, connect_kwargs: dict[str, Any]
    ) -> None:
        if not 0 <= min_size <= max_size or max_size < 1:
            raise InterfaceError(
                f"need 0 <= min_size <= max_size, max_size >= 1: {min_size}, {max_size}"
            )
        self._params = params
        self.min_size = min_size
        self.max_size = max_size
        self._kwargs = connect_kwargs
        self._all: list[Connection] = []
        self._held: set[Connection] = set()
        self._waiters: deque[asyncio.Future[None]] = deque()
        self._opening = 0
        self._closed = False

    async def _init(self) -> Pool:
        conns = [self._new() for _ in range(self.min_size)]
        try:
            await asyncio.gather(*(c.connect() for c in conns))
        except BaseException:
            await asyncio.gather(*(c.close() for c in conns), return_exceptions=True)
            self._all.clear()
            raise
        return self

    def _new(self) -> Connection:
        c = Connection(self._params, **self._kwargs)
        self._all.append(c)
        return c

    def __await__(self) -> Any:
        return self._init().__await__()

    def get_size(self) -> int:
        """Connections open (or opening)."""
        return len(self._all)

    def get_idle_size(self) -> int:
        """Connections nobody holds."""
        return len(self._all) - len(self._held)

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
                    return best
            if len(self._all) < self.max_size:
                c = self._new()
                try:
                    await c.connect()
                except BaseException:
                    self._all.remove(c)
                    raise
                return c
            fut = asyncio.get_running_loop().create_future()
            self._waiters.append(fut)
            await fut

    def acquire(self, *, timeout: float | None = None) -> _Acquire:
        """A connection for the caller alone: ``async with pool.acquire() as conn``
        (released on exit) or ``conn = await pool.acquire()`` (then `release` it)."""
        return _Acquire(self, timeout)

    async def _acquire(self, timeout: float | None) -> Connection:
        if timeout is None:
            c = await self._free(True)
        else:
            c = await asyncio.wait_for(self._free(True), timeout)
        self._held.add(c)
        return c

    async def release(self, conn: Connection) -> None:
        """Give back a connection from `acquire`: an open transaction is rolled back
        and session state reset (settings, LISTENs, cursors, advisory locks), as in
        asyncpg, so the next user (or a shortcut) does not inherit it."""
        if conn not in self._held:
            return
        try:
            if conn.is_in_transaction() or conn._codec.transaction_status != "I":
                conn._session.unclaim()
                await conn.execute("ROLLBACK")
            conn._listeners.clear()
            await conn.execute(RESET_QUERY)
        except Exception:
            conn.terminate()
            if conn in self._all:
                self._all.remove(conn)
        finally:
            self._held.discard(conn)
            self._wake()

    def _wake(self) -> None:
        waiters, self._waiters = self._waiters, deque()
        for w in waiters:
            if not w.done():
                w.set_result(None)

    async def fetch(self, query: str, *args: Any, timeout: float | None = None) -> list[Record]:
        """`Connection.fetch` on the least busy free connection."""
        return await (await self._free(False)).fetch(query, *args, timeout=timeout)

    async def fetchrow(self, query: str, *args: Any, timeout: float | None = None) -> Record | None:
        """`Connection.fetchrow` on the least busy free connection."""
        return await (await self._free(False)).fetchrow(query, *args, timeout=timeout)

    async def fetchval(
        self, query: str, *args: Any, column: int = 0, timeout: float | None = None
    ) -> Any:
        """`Connection.fetchval` on the least busy free connection."""
        return await (await self._free(False)).fetchval(
            query, *args, column=column, timeout=timeout
        )

    async def execute(self, query: str, *args: Any, timeout: float | None = None) -> str:
        """`Connection.execute` on the least busy free connection."""
        return await (await self._free(False)).execute(query, *args, timeout=timeout)

    async def executemany(
        self, command: str, args: Iterable[Sequence[Any]], *, timeout: float | None = None
    ) -> None:
        """`Connection.executemany` on the least busy free connection."""
        await (await self._free(False)).executemany(command, args, timeout=timeout)

    async def copy_records_to_table(
        self,
        table_name: str,
        *,
        records: Iterable[Sequence[Any]] | AsyncIterable[Sequence[Any]],
        columns: Sequence[str] | None = None,
        schema_name: str | None = None,
        timeout: float | None = None,
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
        return await conn.copy_records_to_table(
            table_name, records=records, columns=columns, schema_name=schema_name, timeout=timeout
        )

    async def close(self) -> None:
        """Close every connection; waiting acquirers fail with ClosedError."""
        self._closed = True
        self._wake()
        conns, self._all = self._all, []
        self._held.clear()
        await asyncio.gather(*(c.close() for c in conns), return_exceptions=True)

    async def __aenter__(self) -> Pool:
        return await self._init()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


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
