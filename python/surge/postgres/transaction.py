"""`Transaction`: BEGIN ... COMMIT/ROLLBACK on one connection, nested ones as
savepoints (asyncpg's API: ``async with conn.transaction(): ...`` or
``start()``/``commit()``/``rollback()``).

Why a transaction pins the connection: many coroutines pipeline over ONE
connection, so while a transaction is open any query another coroutine sends
would run inside it (and be committed or rolled back with it). So an open
transaction makes the connection wait: queries from coroutines outside it are
held (they queue, not fail) until it ends; queries from the coroutine that
opened it, and from tasks it starts (they inherit its context), go straight
out, pinned to that connection (if the connection drops meanwhile they fail
with ConnectionLostError rather than run, reconnected, outside the transaction).
Use a `Pool` to run transactions side by side. A BEGIN sent by hand through
`execute` is not tracked: on a shared connection, use `transaction()` (or hold
the connection alone, from `Pool.acquire`).
"""

from __future__ import annotations

import contextlib
import itertools
from contextvars import Token
from types import TracebackType

from surge.errors import InterfaceError
from surge.postgres.session import CURRENT, RowMode, Session

ISOLATION_LEVELS = {
    "read_committed": "READ COMMITTED",
    "read_uncommitted": "READ UNCOMMITTED",
    "repeatable_read": "REPEATABLE READ",
    "serializable": "SERIALIZABLE",
}

_savepoints = itertools.count(1)


class IsolationLevelError(InterfaceError, ValueError):
    """An isolation level `Transaction` does not know (a ValueError, as asyncpg
    raises, and an InterfaceError, as surge raised before)."""


#: Why a transaction in this state cannot start, commit or roll back (asyncpg's words).
_WHY_NOT = {
    "started": "the transaction is already started",
    "committed": "the transaction is already committed",
    "rolledback": "the transaction is already rolled back",
    "failed": "the transaction is in error state",
    "new": "the transaction is not yet started",
}


class Transaction:
    """One transaction (or savepoint, when nested) on a connection's `Session`."""

    __slots__ = (
        "_savepoint",
        "_session",
        "_state",
        "_token",
        "deferrable",
        "generation",
        "isolation",
        "readonly",
    )

    def __init__(
        self,
        session: Session,
        isolation: str | None = None,
        readonly: bool = False,
        deferrable: bool = False,
    ) -> None:
        if isolation is not None and isolation not in ISOLATION_LEVELS:
            raise IsolationLevelError(
                f"isolation is one of {sorted(ISOLATION_LEVELS)}, not {isolation!r}"
            )
        self._session = session
        self.isolation = isolation
        self.readonly = readonly
        self.deferrable = deferrable
        self._savepoint: str | None = None
        self._token: Token | None = None
        self.generation = 0
        self._state = "new"

    def _begin_sql(self) -> str:
        sql = "BEGIN"
        if self.isolation:
            sql += " ISOLATION LEVEL " + ISOLATION_LEVELS[self.isolation]
        if self.readonly:
            sql += " READ ONLY"
        if self.deferrable:
            sql += " DEFERRABLE"
        return sql

    async def start(self) -> None:
        """BEGIN (or SAVEPOINT inside a transaction this context already holds)."""
        if self._state != "new":
            raise InterfaceError(f"cannot start; {_WHY_NOT.get(self._state, self._state)}")
        s = self._session
        outer = s.tx
        if outer is not None and outer in CURRENT.get():
            # asyncpg's rule: a savepoint ignores readonly and deferrable (they
            # are the outer transaction's), and takes an isolation level only
            # when it is the one already in force, so a helper that always asks
            # for SERIALIZABLE runs inside a caller's SERIALIZABLE transaction.
            if self.isolation:
                current = getattr(outer, "isolation", None)
                if current is None:
                    shown = await s.run("SHOW transaction_isolation", (), RowMode.VALUE, 0, None)
                    current = str(shown).replace(" ", "_")
                if self.isolation != current:
                    raise InterfaceError(
                        "nested transaction has a different isolation level: "
                        f"current {self.isolation!r} != outer {current!r}"
                    )
            self._savepoint = f"surge_sp_{next(_savepoints)}"
            await s.simple_query(f"SAVEPOINT {self._savepoint}", None)
            self._state = "started"
            return
        await s.claim(self)
        if s.codec.transaction_status != "I":
            # A BEGIN sent through `execute`: a BEGIN here would only warn, and
            # this transaction's COMMIT or ROLLBACK would end that one.
            s.unclaim(self)
            raise InterfaceError(
                "cannot use Connection.transaction() in a manually started transaction"
            )
        self._token = CURRENT.set((*CURRENT.get(), self))
        try:
            await s.simple_query(self._begin_sql(), None)
        except BaseException:
            self._release()
            self._state = "failed"
            raise
        self._state = "started"

    def _release(self) -> None:
        if self._token is not None:
            try:
                CURRENT.reset(self._token)
            except ValueError:  # ended from another context than it began in
                CURRENT.set(tuple(t for t in CURRENT.get() if t is not self))
            self._token = None
        self._session.unclaim(self)

    async def _end(self, sql: str, state: str) -> None:
        if self._state != "started":
            verb = {"committed": "commit", "rolledback": "rollback"}.get(state, state)
            raise InterfaceError(f"cannot {verb}; {_WHY_NOT.get(self._state, self._state)}")
        try:
            await self._session.simple_query(sql, None)
        finally:
            self._state = state
            if self._savepoint is None:
                self._release()

    async def commit(self) -> None:
        """COMMIT (or RELEASE the savepoint)."""
        if self._savepoint is not None:
            await self._end(f"RELEASE SAVEPOINT {self._savepoint}", "committed")
        else:
            await self._end("COMMIT", "committed")

    async def rollback(self) -> None:
        """ROLLBACK (or roll back to the savepoint)."""
        if self._savepoint is not None:
            sp = self._savepoint
            await self._end(f"ROLLBACK TO SAVEPOINT {sp}; RELEASE SAVEPOINT {sp}", "rolledback")
        else:
            await self._end("ROLLBACK", "rolledback")

    async def __aenter__(self) -> Transaction:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._state != "started":
            return
        if exc_type is None:
            await self.commit()
            return
        # The body's error is the one to see; a failed rollback (connection gone)
        # must not hide it. The server rolls back a dropped session by itself.
        with contextlib.suppress(Exception):
            await self.rollback()
        if self._state == "started":
            self._state = "rolledback"
            if self._savepoint is None:
                self._release()

    def __repr__(self) -> str:
        kind = f"savepoint {self._savepoint}" if self._savepoint else "transaction"
        return f"<Transaction {kind} {self._state}>"
