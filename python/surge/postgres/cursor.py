"""Cursors: a query's rows read in pieces through a named portal (asyncpg's
``conn.cursor(query, *args, prefetch=)``), for results too big to hold at once.

A portal lives until its transaction ends, so, as in asyncpg, a cursor needs a
transaction open in the calling context. Each cursor prepares a statement of
its own (not the cached one: evicting a statement would close its portals)
and closes both when done.
"""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator, Generator, Sequence
from typing import TYPE_CHECKING, Any

from surge._core import Record, Statement
from surge.errors import InterfaceError
from surge.postgres.errors import CursorOutsideTransactionError

if TYPE_CHECKING:
    from surge.postgres.session import Session

#: Rows fetched per round trip when iterating (asyncpg's default).
DEFAULT_PREFETCH = 50

_names = itertools.count(1)


class CursorFactory:
    """What ``conn.cursor(...)`` returns: ``async for row in ...`` or ``await``."""

    __slots__ = ("_args", "_prefetch", "_query", "_record_class", "_session", "_timeout")

    def __init__(
        self,
        session: Session,
        query: str,
        args: Sequence[Any],
        prefetch: int | None,
        timeout: float | None,
        record_class: type[Record] | None = None,
    ) -> None:
        if prefetch is not None and prefetch <= 0:
            raise InterfaceError(f"prefetch must be positive, not {prefetch}")
        self._session = session
        self._query = query
        self._args = args
        self._prefetch = prefetch or DEFAULT_PREFETCH
        self._timeout = timeout
        self._record_class = record_class

    def __await__(self) -> Generator[Any, None, Cursor]:
        return self._open().__await__()

    async def _open(self) -> Cursor:
        cur = Cursor(self._session, self._timeout, self._record_class)
        await cur._open(self._query, self._args)
        return cur

    async def __aiter__(self) -> AsyncIterator[Record]:
        cur = await self._open()
        try:
            while True:
                rows = await cur.fetch(self._prefetch)
                for r in rows:
                    yield r
                if cur.exhausted:
                    return
        finally:
            await cur.close()


class Cursor:
    """An open cursor: `fetch(n)`, `fetchrow()`, `forward(n)`, `close()`."""

    __slots__ = (
        "_closed",
        "_portal",
        "_record_class",
        "_session",
        "_stmt",
        "_timeout",
        "exhausted",
    )

    def __init__(
        self, session: Session, timeout: float | None, record_class: type[Record] | None = None
    ) -> None:
        self._session = session
        self._record_class = record_class
        self._timeout = timeout
        self._stmt: Statement | None = None
        self._portal = f"__surge_portal_{next(_names)}"
        #: True once the portal has given its last row.
        self.exhausted = False
        self._closed = False

    async def _open(self, query: str, args: Sequence[Any]) -> None:
        s = self._session
        # As asyncpg: in a transaction of this context, or in one begun by hand
        # (``execute("BEGIN")``, on a connection held alone) and none of ours.
        if not s.in_own_tx() and (s.tx is not None or s.codec.transaction_status == "I"):
            raise CursorOutsideTransactionError("cursor cannot be created outside of a transaction")
        name = f"__surge_cursor_{next(_names)}"
        self._stmt = await s.send(s.codec.prepare, name, query, timeout=self._timeout)
        try:
            await s.send(s.codec.bind_portal, self._stmt, args, self._portal, timeout=self._timeout)
        except BaseException:
            await self._close_statement()
            raise

    async def fetch(self, n: int, *, timeout: float | None = None) -> list[Record]:
        """The next ``n`` rows (fewer at the end); ``timeout`` (seconds) for this
        call, else the cursor's."""
        if self._closed:
            raise InterfaceError("the cursor is closed")
        if n <= 0:  # checked first: a bad count is a bug even at the end (asyncpg)
            raise InterfaceError(f"n must be positive, not {n}")
        if self.exhausted:
            return []
        s = self._session
        stmt = self._stmt
        assert stmt is not None
        # A COPY ... FROM STDIN starts on this Execute: it goes out alone (see
        # session.py, the alone gate) and is refused with CopyFail as `execute` is.
        rows, more = await s.send(
            s.codec.execute_portal,
            stmt,
            self._portal,
            n,
            self._record_class,
            timeout=self._timeout if timeout is None else timeout,
            alone=stmt.copy_in,
        )
        self.exhausted = not more
        return rows  # type: ignore[no-any-return]

    async def fetchrow(self, *, timeout: float | None = None) -> Record | None:
        """The next row, or None at the end."""
        rows = await self.fetch(1, timeout=timeout)
        return rows[0] if rows else None

    async def forward(self, n: int, *, timeout: float | None = None) -> int:
        """Skip ``n`` rows; returns how many were skipped."""
        return len(await self.fetch(n, timeout=timeout))

    async def close(self) -> None:
        """Close the portal and its statement (the transaction's end would too)."""
        if self._closed:
            return
        self._closed = True
        s = self._session
        if s.in_own_tx():
            await s.send(s.codec.close_portal, self._portal, timeout=self._timeout)
            await self._close_statement()

    async def _close_statement(self) -> None:
        if self._stmt is not None:
            s = self._session
            await s.send(s.codec.close_statement, self._stmt.name, timeout=self._timeout)
