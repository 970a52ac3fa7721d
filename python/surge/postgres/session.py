"""`Session`: the one place that sends on a PostgreSQL connection.

Theory of operation
-------------------
Every request of a `Connection`, and of what hangs off it (transactions,
cursors, COPY, prepared statements), goes out through `Session.send`, which
minds two gates before handing it to the engine:

* the **transaction gate**: while a coroutine's transaction holds the connection
  (`claim`), only requests made in that transaction's context go out (pinned to
  the connection it began on); everyone else's wait for it to end;
* the **cancel gate**: after a timeout or its caller's cancellation, a query
  that was alone in flight is cancelled on the server (`cancel_if_alone`), and
  new requests wait until the cancel has landed, so it cannot hit them;
* the **alone gate**: a statement that may be a ``COPY ... FROM STDIN``
  (`PgCodec.may_copy_in`; `execute` cannot feed it data, so it is refused with
  CopyFail when the server asks for data) goes out with nothing behind it until
  its reply is in: in copy-in mode the server takes the next request's message
  for a protocol violation and closes the connection, failing its neighbours.
  For a cursor over such a statement, that request is the portal's Execute
  (`Cursor.fetch`).

A caller's timeout covers its wait at either gate (a request that timed out
there was never sent: `NotSentTimeout`, nothing to cancel).

Statements: `prepare` returns a cached statement, joins a preparation in
progress, or starts one. A preparation belongs to no caller: one that is
cancelled or times out stops waiting, and the others (and the cache) still get
the statement, as its reply is on its way anyway. `run` binds and executes a
statement in one of the `RowMode`s, preparing it first if need be and again
once if the server dropped it (after ALTER TABLE or a reconnect).

Types: a statement whose parameters or columns use types that are not built
in (composites, enums, domains, ranges, extension types) is held after its
Parse until they are looked up in the catalog (`introspection.py`), once per
connection; a schema change that makes them stale (``cache lookup failed for
type``, a composite whose fields changed) forgets them, as asyncpg does.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import itertools
from collections import deque
from collections.abc import Callable, Sequence
from contextvars import ContextVar
from enum import IntEnum
from typing import Any, Protocol

from surge._core import PgCodec, Record, Statement, StatementGone
from surge.engine import _DEFAULT as _ENGINE_DEFAULT
from surge.engine import PipelinedConnection
from surge.errors import ConnectionLostError, InterfaceError, RequestTimeoutError
from surge.postgres import introspection
from surge.postgres._sqlstate import (
    FeatureNotSupportedError,
    InternalServerError,
    InvalidSqlStatementNameError,
)
from surge.postgres.errors import InvalidArgumentError, OutdatedSchemaCacheError, PostgresError
from surge.postgres.serverversion import ServerVersion, server_version
from surge.postgres.statement_cache import (
    DEFAULT_MAX_CACHEABLE_STATEMENT_SIZE,
    DEFAULT_MAX_CACHED_STATEMENT_LIFETIME,
    StatementCache,
)


class Holder(Protocol):
    """What holds the connection at the transaction gate (a `Transaction`)."""

    generation: int


#: The transactions open in this context (innermost last), across connections.
CURRENT: ContextVar[tuple[Holder, ...]] = ContextVar("surge_postgres_tx", default=())

#: Longest wait for a CancelRequest to be delivered and the cancelled query to
#: answer; new queries on the connection wait at most this long meanwhile.
CANCEL_TIMEOUT = 2.0
#: How often the cancel waits check that the cancelled query has answered.
CANCEL_POLL = 0.005
#: Prefix of the statements this driver prepares (asyncpg uses __asyncpg_stmt_).
STATEMENT_PREFIX = "__surge_"


class RowMode(IntEnum):
    """What `PgCodec.bind_execute` makes of a query's rows."""

    #: Every row, as a list of Records.
    ALL = 0
    #: The first row or None (the server stops after one).
    FIRST = 1
    #: One column of the first row, or None.
    VALUE = 2
    #: The command status ("INSERT 0 1"), rows dropped.
    STATUS = 3
    #: Added to another mode: ``(reply, status or None)`` (None: a fetchrow's
    #: portal suspended after its row).
    TAGGED = 4


def record_class_of(cls: Any) -> type[Record] | None:
    """asyncpg's ``record_class`` argument, checked as asyncpg checks it; None for
    `Record` itself (the rows need no class of their own then)."""
    if cls is None or cls is Record:
        return None
    if not isinstance(cls, type) or not issubclass(cls, Record):
        raise InterfaceError(
            f"record_class is expected to be a subclass of surge.postgres.Record, got {cls!r}"
        )
    # Rows are made natively, as Records are, without calling the class.
    if cls.__new__ is not Record.__new__ or cls.__init__ is not Record.__init__:
        raise InterfaceError("record_class must not redefine __new__ or __init__")
    return cls


class NotSentTimeout(RequestTimeoutError):
    """A timeout before the request was sent (it waited for a cancel or another's
    transaction): nothing runs on the server, so nothing is to be cancelled."""


def _is_stale_plan(e: PostgresError) -> bool:
    # After ALTER TABLE the server refuses a cached plan whose result type
    # changed; asyncpg re-prepares in that case too (outside transactions).
    return isinstance(e, InvalidSqlStatementNameError) or (
        isinstance(e, FeatureNotSupportedError) and "cached plan" in e.message
    )


def _is_stale_type_lookup(e: PostgresError) -> bool:
    # A type dropped (and maybe made again) since it was looked up.
    return isinstance(e, InternalServerError) and "cache lookup failed for type" in e.message


def _is_stale_type(e: InvalidArgumentError) -> bool:
    # A composite value whose fields do not match the looked-up type.
    return "composite field" in str(e)


class Session:
    """Sending, gates and statements of one PostgreSQL connection."""

    def __init__(
        self,
        engine: PipelinedConnection,
        codec: PgCodec,
        statement_cache_size: int,
        max_cacheable_statement_size: int = DEFAULT_MAX_CACHEABLE_STATEMENT_SIZE,
        max_cached_statement_lifetime: float = DEFAULT_MAX_CACHED_STATEMENT_LIFETIME,
    ) -> None:
        self.engine = engine
        self.codec = codec
        self.cache = StatementCache(
            statement_cache_size,
            self.close_statement,
            max_cacheable_statement_size,
            max_cached_statement_lifetime,
        )
        #: The transaction holding the connection, if any (see `claim`).
        self.tx: Holder | None = None
        self._preparing: dict[str, asyncio.Future[Statement]] = {}
        self._names = itertools.count(1)
        self._tx_waiters: deque[asyncio.Future[None]] = deque()
        self._cancel_gate: asyncio.Future[None] | None = None
        self._alone_gate: asyncio.Future[None] | None = None
        self._tasks: set[asyncio.Task[Any]] = set()
        self._req = engine.request
        self._bind_execute = codec.bind_execute
        #: Held by the COPY streaming its data (one at a time per connection).
        self.copy_lock = asyncio.Lock()
        #: COPYs under way here, from their catalog lookup on (a pool sends the
        #: next one elsewhere).
        self.copies = 0
        #: COPY column probes this role may not run (see `surge.postgres.copy`).
        self.failed_probes: set[str] = set()

    # -- sending ------------------------------------------------------------------

    def send(
        self,
        encode: Callable[..., int],
        *args: Any,
        timeout: float | None = None,
        alone: bool = False,
    ) -> Any:
        """Send a request through the gates; ``timeout`` None is the connection's
        ``command_timeout`` (asyncpg's rule); ``alone``: nothing goes out behind it
        until its reply is in (the alone gate). Returns an awaitable of the reply."""
        if timeout is None:
            timeout = _ENGINE_DEFAULT
        if self._cancel_gate is not None or self._alone_gate is not None:
            return self._send_later(encode, args, timeout, alone)
        tx = self.tx
        if tx is None:
            reply = self._req(encode, *args, timeout=timeout)
        elif tx in CURRENT.get():
            reply = self.engine.request_pinned(tx.generation, encode, *args, timeout=timeout)
        else:
            return self._send_later(encode, args, timeout, alone)
        return self._held_until(reply) if alone else reply

    def _held_until(self, reply: Any) -> asyncio.Future[Any]:
        """Close the alone gate until ``reply`` (a future or a coroutine) is done."""
        gate = self._alone_gate = asyncio.get_running_loop().create_future()

        def reopen(_: object) -> None:
            if self._alone_gate is gate:
                self._alone_gate = None
            if not gate.done():
                gate.set_result(None)

        # A task, not the caller's await: the gate opens even if nobody awaits it.
        fut = asyncio.ensure_future(reply)
        fut.add_done_callback(reopen)
        return fut

    async def _send_later(
        self, encode: Callable[..., int], args: tuple, timeout: Any, alone: bool = False
    ) -> Any:
        t = self.engine.request_timeout if timeout is _ENGINE_DEFAULT else timeout
        loop = asyncio.get_running_loop()
        start = loop.time()
        try:
            async with asyncio.timeout(t):
                await self._gates_open()
        except TimeoutError:
            what = (
                "a cancel"
                if self._cancel_gate is not None
                else "a COPY FROM STDIN query"
                if self._alone_gate is not None
                else "another transaction"
            )
            raise NotSentTimeout(
                f"not sent within the timeout ({t} s): the connection was held by {what}"
            ) from None
        if t is None:
            return await self.send(encode, *args, timeout=timeout, alone=alone)
        left = t - (loop.time() - start)
        if left <= 0:
            raise NotSentTimeout(f"not sent within the timeout ({t} s)")
        return await self.send(encode, *args, timeout=left, alone=alone)

    async def _gates_open(self) -> None:
        """Wait until no gate holds this caller back."""
        while True:
            if self._cancel_gate is not None:
                await asyncio.shield(self._cancel_gate)
            elif self._alone_gate is not None:
                await asyncio.shield(self._alone_gate)
            elif not self.free_for_me():
                await self.wait_tx()
            else:
                return

    async def send_now(
        self, encode: Callable[..., int], *args: Any, timeout: float | None = None
    ) -> asyncio.Future[Any]:
        """Send a request once it can go out at once (the gates open, connected,
        the transport taking bytes) and return its reply's future, the request
        encoded: for a request whose data follows (a streamed COPY)."""
        t = self.engine.request_timeout if timeout is None else timeout
        loop = asyncio.get_running_loop()
        start = loop.time()
        try:
            async with asyncio.timeout(t):
                while True:
                    await self._gates_open()
                    if not self.engine.is_connected:
                        await self.engine.connect()
                        continue
                    await self.engine.writable()
                    # (it may have waited: the gates and the connection again)
                    gates = (
                        self._cancel_gate is None
                        and self._alone_gate is None
                        and self.free_for_me()
                    )
                    if gates and self.engine.is_connected:
                        break
        except TimeoutError as e:
            if isinstance(e, RequestTimeoutError):
                raise
            raise NotSentTimeout(f"not sent within the timeout ({t} s)") from None
        left = None if t is None else max(0.0, t - (loop.time() - start))
        fut = self.send(encode, *args, timeout=left)
        # Nothing was awaited since the checks: the request went out on the fast path.
        assert isinstance(fut, asyncio.Future)
        return fut

    # -- the transaction gate -------------------------------------------------------

    def in_own_tx(self) -> bool:
        """True inside the context of the transaction that holds the connection."""
        return self.tx is not None and self.tx in CURRENT.get()

    def free_for_me(self) -> bool:
        """True when no transaction holds the connection, or this context's does."""
        return self.tx is None or self.tx in CURRENT.get()

    async def wait_tx(self) -> None:
        """Wait until the transaction holding the connection ends."""
        fut = asyncio.get_running_loop().create_future()
        self._tx_waiters.append(fut)
        try:
            await fut
        finally:
            if not fut.done() or fut.cancelled():
                # Left early (timeout, cancel): drop the entry now, not when the
                # transaction ends, so a long transaction keeps nothing per caller.
                with contextlib.suppress(ValueError):
                    self._tx_waiters.remove(fut)

    async def claim(self, tx: Holder) -> None:
        """Make ``tx`` the connection's transaction, once no other is open."""
        while self.tx is not None:
            await self.wait_tx()
        await self.engine.connect()
        self.tx = tx
        tx.generation = self.engine.generation

    def unclaim(self, tx: Holder | None = None) -> None:
        """``tx`` (None: whichever) no longer holds the connection; waiters go on."""
        if tx is None or self.tx is tx:
            self.tx = None
        waiters, self._tx_waiters = self._tx_waiters, deque()
        for w in waiters:
            if not w.done():
                w.set_result(None)

    # -- the cancel gate ----------------------------------------------------------

    def cancel_if_alone(self) -> None:
        """After a timeout or a cancellation: when the query given up is the only
        one in flight, ask the server to cancel it (a CancelRequest on a
        connection of its own).

        Why only then: a cancel interrupts whatever the backend runs when the
        signal lands, and with pipelining that could be a neighbour's query. Alone,
        it is this one or nothing (a cancel that finds the backend idle is
        ignored); new queries wait until the signal is delivered and the reply is
        in, so none can be the one hit. With others in flight the query is left to
        finish, and later queries queue behind it.
        """
        if (
            self._cancel_gate is not None
            or self.codec.waiting() != 1
            or not self.engine.is_connected
        ):
            return
        loop = asyncio.get_running_loop()
        self._cancel_gate = loop.create_future()
        task = loop.create_task(self._cancel())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _cancelled(self, reply: Any) -> None:
        """The caller awaiting ``reply`` (what `send` returned) was cancelled: as
        asyncpg does, the query is cancelled on the server too, under the rule of
        `cancel_if_alone`, so the connection is not held by a query nobody awaits
        (a task cancelled on a client's disconnect, ``asyncio.wait_for``). Only a
        request that went out (a future; a coroutine may still have been waiting
        at a gate, with a neighbour's query the one in flight) and whose reply
        was not in yet (the cancellation cancelled its future): one already
        answered is not the query in flight."""
        if isinstance(reply, asyncio.Future) and reply.cancelled():
            self.cancel_if_alone()

    async def _cancel(self) -> None:
        gen = self.engine.generation
        request = self.codec.cancel_request()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + CANCEL_TIMEOUT
        try:
            # To the server this connection is on (of several hosts), in plaintext
            # as libpq: the server reads a CancelRequest before any TLS or pg_hba.
            ep = self.engine.endpoint
            opening = (
                asyncio.open_unix_connection(ep.path)
                if ep.path is not None
                else asyncio.open_connection(ep.host, ep.port)
            )
            reader, writer = await asyncio.wait_for(opening, CANCEL_TIMEOUT)
            try:
                writer.write(request)
                await writer.drain()
                # The server closes it once the backend is signalled.
                await asyncio.wait_for(reader.read(), max(0.0, deadline - loop.time()))
            finally:
                writer.close()
            # Hold new queries until the cancelled one has answered (or the
            # connection is gone): only then can the signal hit nothing else.
            while (
                self.codec.waiting()
                and self.engine.generation == gen
                and self.engine.is_connected
                and loop.time() < deadline
            ):
                await asyncio.sleep(CANCEL_POLL)
        except (OSError, TimeoutError):
            pass  # the query is left to finish; later ones queue behind it
        finally:
            gate, self._cancel_gate = self._cancel_gate, None
            if gate is not None and not gate.done():
                gate.set_result(None)

    # -- statements ---------------------------------------------------------------

    def close_statement(self, stmt: Statement) -> None:
        """Close ``stmt`` on the server, in the background (the cache's eviction)."""
        if not self.engine.is_connected:
            return  # nothing to close: the session is gone or not there yet
        fut = self._req(self.codec.close_statement, stmt.name)
        if isinstance(fut, asyncio.Future):
            fut.add_done_callback(_retrieve)
        else:
            asyncio.ensure_future(fut).add_done_callback(_retrieve)

    async def prepare(self, query: str, timeout: float | None = None) -> Statement:
        """The statement for ``query``: cached, being prepared, or new; ``timeout``
        (None: ``command_timeout``) bounds this caller's wait."""
        t = self.engine.request_timeout if timeout is None else timeout
        try:
            async with asyncio.timeout(t):
                while True:
                    stmt = self.cache.get(query)
                    if stmt is not None:
                        return stmt
                    shared = self._preparing.get(query)
                    if shared is None:
                        if not self.free_for_me():
                            # Wait out another's transaction before preparing: sent
                            # now, the Parse would queue behind it anyway, and a
                            # preparation held at the gate would block the
                            # transaction's own uses of the statement.
                            await self.wait_tx()
                            continue
                        shared = self._start_prepare(query)
                    return await asyncio.shield(shared)
        except TimeoutError as e:
            if isinstance(e, RequestTimeoutError):
                raise  # the preparation's own (command_timeout)
            raise NotSentTimeout(f"statement not prepared within the timeout ({t} s)") from None

    def _start_prepare(self, query: str) -> asyncio.Future[Statement]:
        name = f"{STATEMENT_PREFIX}{next(self._names)}"
        # The task copies this context: inside a transaction it goes pinned to it.
        task = asyncio.ensure_future(self._prepare_new(name, query))
        self._preparing[query] = task
        task.add_done_callback(functools.partial(self._prepared, query))
        return task

    async def _prepare_new(self, name: str, query: str) -> Statement:
        stmt: Statement = await self.send(self.codec.prepare, name, query)
        unknown = self.codec.unknown_types(stmt)
        if unknown:
            await self.introspect(unknown)
            stmt = self.codec.refresh(stmt)
        return stmt

    async def introspect(self, oids: list[int]) -> None:
        """Look up types ``oids`` (and what they are made of) in the catalog."""
        sql = introspection.query(self.server_version())
        rows = await self.run(sql, (oids,), RowMode.ALL, 0, None)
        self.codec.add_types(introspection.catalog_rows(oids, rows))

    def server_version(self) -> ServerVersion:
        """The server's version (asyncpg's `ServerVersion`)."""
        return server_version(self.codec.server_params.get("server_version", "0"))

    def reload_schema_state(self) -> None:
        """Forget looked-up types and cached statements (after DDL)."""
        self.codec.reset_types()
        self.cache.evict_all()

    def _prepared(self, query: str, task: asyncio.Future[Statement]) -> None:
        if self._preparing.get(query) is task:
            del self._preparing[query]
        if task.cancelled() or task.exception() is not None:
            return
        stmt = task.result()
        if stmt.session == self.codec.session:
            self.cache.put(query, stmt)

    def _deadline(self, timeout: float | None) -> float | None:
        t = self.engine.request_timeout if timeout is None else timeout
        return None if t is None else asyncio.get_running_loop().time() + t

    async def run(
        self,
        query: str,
        args: Sequence[Any],
        mode: int,
        column: int,
        timeout: float | None,
        record_class: type[Record] | None = None,
    ) -> Any:
        """Bind and execute ``query`` (prepared first if need be) in row mode ``mode``,
        rows of ``record_class`` (see `record_class_of`; None: Record); the
        caller's timeout covers preparing and running together."""
        stmt = self.cache.get(query)
        deadline = None
        #: Prepared for this call (not found in the cache): maybe not to be kept.
        fresh = stmt is None
        if stmt is None:
            deadline = self._deadline(timeout)
            stmt = await self.prepare(query, timeout)
        for attempt in range(2):
            if deadline is not None:
                timeout = deadline - asyncio.get_running_loop().time()
                if timeout <= 0:
                    raise NotSentTimeout("statement prepared but not run within the timeout")
            reply = None
            try:
                reply = self.send(
                    self._bind_execute,
                    stmt,
                    args,
                    mode,
                    column,
                    record_class,
                    timeout=timeout,
                    alone=stmt.copy_in,
                )
                result = await reply
            except asyncio.CancelledError:
                self._cancelled(reply)
                raise
            except StatementGone as exc:
                if attempt:
                    raise _lost_again(exc) from exc
            except NotSentTimeout:
                raise
            except RequestTimeoutError:
                self.cancel_if_alone()
                raise
            except InvalidArgumentError as e:
                if _is_stale_type(e):
                    # A composite's fields changed under a cached statement: the
                    # next use looks the type up again (asyncpg's error).
                    self.reload_schema_state()
                    raise OutdatedSchemaCacheError(
                        f"the type of a column changed since the statement was prepared: {e}"
                    ) from e
                raise
            except PostgresError as e:
                if _is_stale_type_lookup(e):
                    self.reload_schema_state()
                if attempt or self.tx is not None or not _is_stale_plan(e):
                    raise
                self.cache.discard(query)
            else:
                if fresh and not self.cache.keeps(query):
                    self.close_statement(stmt)
                return result
            if deadline is None:
                deadline = self._deadline(timeout)
            fresh = True
            stmt = await self.prepare(query, timeout)
        raise AssertionError("unreachable")

    async def simple_query(self, query: str, timeout: float | None) -> str:
        """``query`` as a simple query (several statements allowed); its status."""
        reply = None
        try:
            reply = self.send(
                self.codec.simple_query, query, timeout=timeout, alone=PgCodec.may_copy_in(query)
            )
            status = await reply
        except asyncio.CancelledError:
            self._cancelled(reply)
            raise
        except NotSentTimeout:
            raise
        except RequestTimeoutError:
            self.cancel_if_alone()
            raise
        return status or ""

    async def run_many(self, command: str, arglist: list, timeout: float | None) -> None:
        """``command`` once per argument sequence, in one implicit transaction."""
        stmt = await self.prepare(command, timeout)
        for attempt in range(2):
            try:
                await self.send(
                    self.codec.execute_many, stmt, arglist, timeout=timeout, alone=stmt.copy_in
                )
                return
            except StatementGone as exc:
                if attempt:
                    raise _lost_again(exc) from exc
            stmt = await self.prepare(command, timeout)


def _lost_again(exc: StatementGone) -> ConnectionLostError:
    """What a caller gets when the statement it prepared again is gone again: the
    codec refuses a statement of an earlier session, so the connection was lost
    (and remade) between the prepare and the run, twice. The internal
    `StatementGone` reached 200 callers at once when a server restarted twice
    within a second under load."""
    return ConnectionLostError(
        f"the connection was lost again between preparing statement {exc} and running it"
    )


def _retrieve(fut: asyncio.Future) -> None:
    if not fut.cancelled():
        fut.exception()
