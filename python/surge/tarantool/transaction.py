"""Interactive transactions over IPROTO streams (Tarantool >= 2.10).

Theory of operation: a transaction owns one stream id on its connection. Every
request in it carries IPROTO_STREAM_ID, so the server runs them one after the
other, in order, inside the transaction opened by IPROTO_BEGIN and closed by
IPROTO_COMMIT or IPROTO_ROLLBACK - while requests of other coroutines on the
same connection keep flowing around it. The server rolls a stream's
transaction back when the connection closes, so a transaction is pinned to the
connection it began on (`PipelinedConnection.request_pinned`): after a
reconnect its requests fail with `ConnectionLostError` rather than run outside
any transaction. A graceful shutdown (`box.shutdown`) waits for open
transactions to end before it closes the connection.

Where the server is older than 2.10 (no IPROTO_ID, or no "transactions" in its
features) `begin` raises `FeatureNotSupportedError` before sending anything.

Note: memtx needs ``box.cfg{memtx_use_mvcc_engine = true}`` for transactions
that span several requests (otherwise the server aborts them at the first
yield between requests); vinyl always supports them.

This code has been tested against a scripted IPROTO server that speaks the
protocol's bytes (tests/tarantool/fake_iproto.py), not a live Tarantool >= 2.10:
the Debian Tarantool available here is 2.6.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from surge.engine import _DEFAULT
from surge.errors import ConnectionLostError, InterfaceError

if TYPE_CHECKING:
    from surge.tarantool.connection import Connection

#: Isolation levels by name (box.txn_isolation_level); "default" leaves it to the server.
ISOLATION_LEVELS = {
    "default": 0,
    "read-committed": 1,
    "read-confirmed": 2,
    "best-effort": 3,
}

#: IPROTO_FEATURES bits this module needs.
FEATURE_STREAMS = 0
FEATURE_TRANSACTIONS = 1

#: The transaction the current task is inside (its requests on the connection join it).
CURRENT: contextvars.ContextVar[Transaction | None] = contextvars.ContextVar(
    "surge_tarantool_transaction", default=None
)


class Transaction:
    """`async with conn.transaction() as tx:` - begin, then commit (rollback on error).

    Inside the block, requests made through ``tx`` or through the connection
    itself by this task (and tasks it starts) carry the transaction's stream id.
    """

    def __init__(
        self,
        conn: Connection,
        stream_id: int,
        *,
        isolation: str | int = "default",
        timeout: float | None = None,
    ) -> None:
        if isinstance(isolation, str):
            try:
                isolation = ISOLATION_LEVELS[isolation]
            except KeyError:
                raise InterfaceError(
                    f"unknown isolation {isolation!r}: one of {list(ISOLATION_LEVELS)}"
                ) from None
        self.conn = conn
        self.stream_id = stream_id
        self.isolation = isolation
        self.timeout = timeout
        self._generation: int | None = None
        self._token: contextvars.Token | None = None

    @property
    def active(self) -> bool:
        """True between a successful `begin` and `commit`/`rollback`."""
        return self._generation is not None

    async def begin(self) -> None:
        """Send IPROTO_BEGIN on this transaction's stream."""
        if self.active:
            raise InterfaceError("transaction already begun")
        conn = self.conn
        await conn.engine.ensure_connected()
        conn.require_feature(FEATURE_STREAMS, "streams (interactive transactions)")
        conn.require_feature(FEATURE_TRANSACTIONS, "interactive transactions")
        engine = conn.engine
        gen = engine.generation
        fut = engine.request_pinned(
            gen, conn._codec.begin, self.stream_id, self.timeout or 0.0, self.isolation
        )
        self._generation = gen
        conn._tx_begun(self)
        try:
            await fut
        except BaseException:
            self._finish()
            raise

    async def commit(self) -> None:
        """Send IPROTO_COMMIT; the transaction ends whatever the answer."""
        await self._end(self.conn._codec.commit)

    async def rollback(self) -> None:
        """Send IPROTO_ROLLBACK; a lost connection already rolled it back, so that is
        not an error here."""
        with contextlib.suppress(ConnectionLostError):
            await self._end(self.conn._codec.rollback)

    async def _end(self, encode: Any) -> None:
        gen = self._generation
        if gen is None:
            raise InterfaceError("transaction is not active")
        try:
            await self.conn.engine.request_pinned(gen, encode, self.stream_id)
        finally:
            self._finish()

    def _finish(self) -> None:
        self._generation = None
        self.conn._tx_ended(self)

    def send(self, encode: Any, *args: Any, timeout: Any = _DEFAULT) -> Any:
        """Send one request on the stream (the connection's methods call this)."""
        gen = self._generation
        if gen is None:
            raise InterfaceError("transaction is not active (begin it, or it has ended)")
        return self.conn.engine.request_pinned(gen, encode, *args, self.stream_id, timeout=timeout)

    async def __aenter__(self) -> Transaction:
        await self.begin()
        self._token = CURRENT.set(self)
        return self

    async def __aexit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if self._token is not None:
            CURRENT.reset(self._token)
            self._token = None
        if not self.active:
            return
        if exc_type is None:
            await self.commit()
        else:
            await self.rollback()

    def _via(self, method: Any, *args: Any, **kwargs: Any) -> Any:
        # The connection picks its sender when called, so route this one call here.
        if self._generation is None:
            raise InterfaceError("transaction is not active (begin it, or it has ended)")
        token = CURRENT.set(self)
        try:
            return method(*args, **kwargs)
        finally:
            CURRENT.reset(token)

    # The connection's request methods, on this stream.

    def select(self, space: int | str, key: Any = None, **kwargs: Any) -> Any:
        """`Connection.select` in this transaction."""
        return self._via(self.conn.select, space, key, **kwargs)

    def insert(self, space: int | str, t: Sequence[Any]) -> Any:
        """`Connection.insert` in this transaction."""
        return self._via(self.conn.insert, space, t)

    def replace(self, space: int | str, t: Sequence[Any]) -> Any:
        """`Connection.replace` in this transaction."""
        return self._via(self.conn.replace, space, t)

    def update(self, space: int | str, key: Any, ops: Sequence[Any], **kwargs: Any) -> Any:
        """`Connection.update` in this transaction."""
        return self._via(self.conn.update, space, key, ops, **kwargs)

    def upsert(self, space: int | str, t: Sequence[Any], ops: Sequence[Any]) -> Any:
        """`Connection.upsert` in this transaction."""
        return self._via(self.conn.upsert, space, t, ops)

    def delete(self, space: int | str, key: Any, **kwargs: Any) -> Any:
        """`Connection.delete` in this transaction."""
        return self._via(self.conn.delete, space, key, **kwargs)

    def call(self, function: str, args: Sequence[Any] = ()) -> Any:
        """`Connection.call` in this transaction."""
        return self._via(self.conn.call, function, args)

    def eval(self, expr: str, args: Sequence[Any] = ()) -> Any:
        """`Connection.eval` in this transaction."""
        return self._via(self.conn.eval, expr, args)

    def execute(self, query: str | int, params: Any = ()) -> Any:
        """`Connection.execute` in this transaction."""
        return self._via(self.conn.execute, query, params)

    def __repr__(self) -> str:
        return f"<Transaction stream={self.stream_id} active={self.active}>"
