"""`Connection`: the queries of any number of coroutines pipelined over one
PostgreSQL connection, with asyncpg's method names.

Theory of operation: each query leaves as Bind + Execute + Sync of a named
prepared statement (its first use sends Parse + Describe + Sync and waits for
the parameter and column types, see `StatementCache`), all encoded straight
into the engine's write buffer; requests made in one loop iteration leave in
one write, and the server answers them in order, each ending at its
ReadyForQuery. Because every request has its own Sync, an error in one (a
unique violation, a syntax error) fails that one only. Rows arrive in the
binary format and are decoded to Python objects in the one pass that parses
them (in Rust). Transactions pin the connection: see `transaction.py`.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import inspect
import itertools
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from surge._core import PgCodec, Record, Statement, StatementGone
from surge.engine import _DEFAULT as _ENGINE_DEFAULT
from surge.engine import (
    DEFAULT_CONNECT_TIMEOUT,
    DEFAULT_LIVENESS_INTERVAL,
    DEFAULT_LIVENESS_TIMEOUT,
    DEFAULT_MAX_IN_FLIGHT,
    PipelinedConnection,
    liveness,
)
from surge.errors import InterfaceError, ProtocolError, RequestTimeoutError
from surge.postgres import copy as _copy
from surge.postgres._sqlstate import FeatureNotSupportedError, InvalidSqlStatementNameError
from surge.postgres.cursor import CursorFactory
from surge.postgres.dsn import ConnectParams
from surge.postgres.errors import InvalidArgumentError, PostgresError, make_error
from surge.postgres.handshake import handshake
from surge.postgres.prepared import PreparedStatement
from surge.postgres.statement_cache import DEFAULT_STATEMENT_CACHE_SIZE, StatementCache
from surge.postgres.transaction import CURRENT, Transaction

#: Row modes of `PgCodec.bind_execute`.
ALL, FIRST, VALUE, STATUS = 0, 1, 2, 3
#: Longest wait for a CancelRequest to be delivered and the cancelled query to
#: answer; new queries on the connection wait at most this long meanwhile.
CANCEL_TIMEOUT = 2.0
#: How often the cancel waits check that the cancelled query has answered.
CANCEL_POLL = 0.005
#: The liveness probe: an SSLRequest, which a live server answers with one byte
#: ('S' or 'N') before any authentication.
PROBE = (8).to_bytes(4, "big") + (80877103).to_bytes(4, "big")
#: Prefix of the statements this driver prepares (asyncpg uses __asyncpg_stmt_).
STATEMENT_PREFIX = "__surge_"


class _NotSentTimeout(RequestTimeoutError):
    """A timeout before the request was sent (it waited for a cancel or another's
    transaction): nothing runs on the server, so nothing is to be cancelled."""


def quote_ident(name: str) -> str:
    """An SQL identifier, double-quoted."""
    return '"' + name.replace('"', '""') + '"'


def _is_stale_plan(e: PostgresError) -> bool:
    # After ALTER TABLE the server refuses a cached plan whose result type
    # changed; asyncpg re-prepares in that case too (outside transactions).
    return isinstance(e, InvalidSqlStatementNameError) or (
        isinstance(e, FeatureNotSupportedError) and "cached plan" in e.message
    )


class _StreamGuard:
    """After each read: replies behind bytes that are not the protocol cannot be
    matched, so the connection is dropped (requests still waiting fail)."""

    __slots__ = ("codec", "engine")

    def __init__(self, codec: PgCodec) -> None:
        self.codec = codec
        self.engine: PipelinedConnection | None = None

    def __call__(self) -> None:
        if self.codec.failed and self.engine is not None:
            self.engine.abort()


class Connection:
    """A PostgreSQL connection shared by any number of coroutines."""

    def __init__(
        self,
        params: ConnectParams,
        *,
        statement_cache_size: int = DEFAULT_STATEMENT_CACHE_SIZE,
        connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
        command_timeout: float | None = None,
        max_in_flight: int = DEFAULT_MAX_IN_FLIGHT,
        reconnect: bool = True,
        retry_connect: bool = False,
        liveness_interval: float | None = DEFAULT_LIVENESS_INTERVAL,
        liveness_timeout: float = DEFAULT_LIVENESS_TIMEOUT,
        tcp_keepalive: bool = True,
    ) -> None:
        self._params = params
        self._codec = codec = PgCodec(InvalidArgumentError, ProtocolError)
        guard = _StreamGuard(codec)
        self._engine = guard.engine = PipelinedConnection(
            params.host,
            params.port,
            codec,
            on_connect=self._on_connect,
            on_out_of_band=self._on_out_of_band,
            make_error=make_error,
            on_batch=guard,
            connect_timeout=connect_timeout,
            request_timeout=command_timeout,
            max_in_flight=max_in_flight,
            reconnect=reconnect,
            retry_connect=retry_connect,
            tcp_keepalive=tcp_keepalive,
            liveness=liveness(liveness_interval, liveness_timeout, codec.sync, PROBE),
            # A LISTENing connection has nothing pending: the engine keeps it
            # connected (and `_on_connect` LISTENs again) without waiting for a query.
            keep_connected=lambda: bool(self._listeners) and not self._closed,
        )
        self._cache = StatementCache(statement_cache_size, self._close_statement)
        self._preparing: dict[str, asyncio.Future[Statement]] = {}
        self._names = itertools.count(1)
        self._tx: Transaction | None = None
        self._tx_waiters: deque[asyncio.Future[None]] = deque()
        self._listeners: dict[str, list[Callable[..., Any]]] = {}
        self._log_listeners: list[Callable[..., Any]] = []
        self._tasks: set[asyncio.Task[Any]] = set()
        self._closed = False
        self._cancel_gate: asyncio.Future[None] | None = None
        self._req = self._engine.request
        self._bind_execute = codec.bind_execute

    # -- lifecycle ----------------------------------------------------------------

    async def _on_connect(self, engine: PipelinedConnection) -> None:
        await handshake(engine, self._params)
        # Statements died with the previous session; LISTENs must be said again.
        self._cache.clear()
        if self._listeners:
            sql = "; ".join(f"LISTEN {quote_ident(c)}" for c in self._listeners)
            await engine.submit_raw(self._codec.simple_query, sql)

    async def connect(self) -> Connection:
        """Connect (and authenticate) now rather than on first use."""
        await self._engine.connect()
        return self

    @property
    def engine(self) -> PipelinedConnection:
        """The pipelined connection underneath (stats, limits)."""
        return self._engine

    def is_closed(self) -> bool:
        """True once `close` was called."""
        return self._closed

    def get_server_pid(self) -> int:
        """The backend's process id (for pg_terminate_backend, pg_stat_activity)."""
        return int(self._codec.backend_pid)

    def get_server_version(self) -> tuple[int, ...]:
        """The server's version as numbers, e.g. (15, 4)."""
        v = self._codec.server_params.get("server_version", "0")
        return tuple(int(p) for p in v.split()[0].split(".") if p.isdigit())

    def get_settings(self) -> dict[str, str]:
        """The server parameters reported so far (TimeZone, server_version ...)."""
        return dict(self._codec.server_params)

    async def close(self, *, timeout: float | None = None) -> None:
        """Say Terminate and close; requests still waiting fail with ClosedError."""
        if self._closed:
            return
        self._closed = True
        if self._engine.send_no_reply(self._codec.terminate):  # type: ignore[arg-type]
            await asyncio.sleep(0)  # let the scheduled flush write it
        await self._engine.close()

    def terminate(self) -> None:
        """Drop the connection at once."""
        self._closed = True
        self._engine.abort()

    # -- sending ------------------------------------------------------------------

    def _send(self, encode: Callable[..., int], *args: Any, timeout: float | None = None) -> Any:
        """Send a request, minding an open transaction (see `transaction.py`) and a
        cancel in progress (see `_cancel_if_alone`); ``timeout`` None is the
        connection's ``command_timeout`` (asyncpg's rule)."""
        if timeout is None:
            timeout = _ENGINE_DEFAULT
        if self._cancel_gate is not None:
            return self._send_later(encode, args, timeout)
        tx = self._tx
        if tx is None:
            return self._req(encode, *args, timeout=timeout)
        if tx in CURRENT.get():
            return self._engine.request_pinned(tx.generation, encode, *args, timeout=timeout)
        return self._send_later(encode, args, timeout)

    async def _send_later(self, encode: Callable[..., int], args: tuple, timeout: Any) -> Any:
        """`_send` once no cancel is in progress and no other coroutine's transaction
        holds the connection; the caller's timeout covers that wait too."""
        t = self._engine.request_timeout if timeout is _ENGINE_DEFAULT else timeout
        loop = asyncio.get_running_loop()
        start = loop.time()
        try:
            async with asyncio.timeout(t):
                while True:
                    if self._cancel_gate is not None:
                        await asyncio.shield(self._cancel_gate)
                    elif self._tx is not None and self._tx not in CURRENT.get():
                        await self._wait_tx()
                    else:
                        break
        except TimeoutError:
            what = "a cancel" if self._cancel_gate is not None else "another transaction"
            raise _NotSentTimeout(
                f"not sent within the timeout ({t} s): the connection was held by {what}"
            ) from None
        if t is None:
            return await self._send(encode, *args, timeout=timeout)
        left = t - (loop.time() - start)
        if left <= 0:
            raise _NotSentTimeout(f"not sent within the timeout ({t} s)")
        return await self._send(encode, *args, timeout=left)

    def _cancel_if_alone(self) -> None:
        """After a timeout: when the timed-out query is the only one in flight, ask
        the server to cancel it (a CancelRequest on a connection of its own).

        Why only then: a cancel interrupts whatever the backend runs when the
        signal lands, and with pipelining that could be a neighbour's query. Alone,
        it is this one or nothing (a cancel that finds the backend idle is
        ignored); new queries wait until the signal is delivered and the reply is
        in, so none can be the one hit. With others in flight the query is left to
        finish, and later queries queue behind it.
        """
        if (
            self._cancel_gate is not None
            or self._codec.waiting() != 1
            or not self._engine.is_connected
        ):
            return
        loop = asyncio.get_running_loop()
        self._cancel_gate = loop.create_future()
        task = loop.create_task(self._cancel())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _cancel(self) -> None:
        gen = self._engine.generation
        request = self._codec.cancel_request()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + CANCEL_TIMEOUT
        try:
            reader, writer = await asyncio.wait_for(
                asyncio.open_connection(self._params.host, self._params.port), CANCEL_TIMEOUT
            )
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
                self._codec.waiting()
                and self._engine.generation == gen
                and self._engine.is_connected
                and loop.time() < deadline
            ):
                await asyncio.sleep(CANCEL_POLL)
        except (OSError, TimeoutError):
            pass  # the query is left to finish; later ones queue behind it
        finally:
            gate, self._cancel_gate = self._cancel_gate, None
            if gate is not None and not gate.done():
                gate.set_result(None)

    async def _wait_tx(self) -> None:
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

    async def _claim(self, tx: Transaction) -> None:
        """Make ``tx`` the connection's transaction, once no other is open."""
        while self._tx is not None:
            await self._wait_tx()
        await self._engine.connect()
        self._tx = tx
        tx.generation = self._engine.generation

    def _unclaim(self, tx: Transaction) -> None:
        if self._tx is tx:
            self._tx = None
        waiters, self._tx_waiters = self._tx_waiters, deque()
        for w in waiters:
            if not w.done():
                w.set_result(None)

    def _close_statement(self, stmt: Statement) -> None:
        if not self._engine.is_connected:
            return  # nothing to close: the session is gone or not there yet
        fut = self._req(self._codec.close_statement, stmt.name)
        if isinstance(fut, asyncio.Future):
            fut.add_done_callback(_retrieve)
        else:
            asyncio.ensure_future(fut).add_done_callback(_retrieve)

    async def _prepare(self, query: str, timeout: float | None = None) -> Statement:
        """The statement for ``query``: cached, being prepared, or new.

        A preparation is shared by every caller that needs the statement at once
        and belongs to none of them: a caller that is cancelled or times out stops
        waiting for it, and the others (and the cache) still get it, as its reply
        is on its way anyway. ``timeout`` (None: ``command_timeout``) bounds this
        caller's wait, including for another coroutine's transaction to end.
        """
        t = self._engine.request_timeout if timeout is None else timeout
        try:
            async with asyncio.timeout(t):
                while True:
                    stmt = self._cache.get(query)
                    if stmt is not None:
                        return stmt
                    shared = self._preparing.get(query)
                    if shared is None:
                        if self._tx is not None and self._tx not in CURRENT.get():
                            # Wait out another's transaction before preparing: sent
                            # now, the Parse would queue behind it anyway, and a
                            # preparation held at the gate would block the
                            # transaction's own uses of the statement.
                            await self._wait_tx()
                            continue
                        shared = self._start_prepare(query)
                    return await asyncio.shield(shared)
        except TimeoutError as e:
            if isinstance(e, RequestTimeoutError):
                raise  # the preparation's own (command_timeout)
            raise _NotSentTimeout(f"statement not prepared within the timeout ({t} s)") from None

    def _start_prepare(self, query: str) -> asyncio.Future[Statement]:
        name = f"{STATEMENT_PREFIX}{next(self._names)}"
        # The task copies this context: inside a transaction it goes pinned to it.
        task = asyncio.ensure_future(self._send(self._codec.prepare, name, query))
        self._preparing[query] = task
        task.add_done_callback(functools.partial(self._prepared, query))
        return task

    def _prepared(self, query: str, task: asyncio.Future[Statement]) -> None:
        if self._preparing.get(query) is task:
            del self._preparing[query]
        if task.cancelled() or task.exception() is not None:
            return
        stmt = task.result()
        if stmt.session == self._codec.session:
            self._cache.put(query, stmt)

    async def _run(
        self, query: str, args: Sequence[Any], mode: int, column: int, timeout: float | None
    ) -> Any:
        stmt = self._cache.get(query)
        deadline = None
        if stmt is None:
            # The caller's timeout covers preparing and running together.
            t = self._engine.request_timeout if timeout is None else timeout
            if t is not None:
                deadline = asyncio.get_running_loop().time() + t
            stmt = await self._prepare(query, timeout)
        for attempt in range(2):
            if deadline is not None:
                timeout = deadline - asyncio.get_running_loop().time()
                if timeout <= 0:
                    raise _NotSentTimeout("statement prepared but not run within the timeout")
            try:
                result = await self._send(
                    self._bind_execute, stmt, args, mode, column, timeout=timeout
                )
            except StatementGone:
                if attempt:
                    raise
            except _NotSentTimeout:
                raise
            except RequestTimeoutError:
                self._cancel_if_alone()
                raise
            except PostgresError as e:
                if attempt or self._tx is not None or not _is_stale_plan(e):
                    raise
                self._cache.discard(query)
            else:
                if self._cache.max_size <= 0:
                    self._close_statement(stmt)
                return result
            if deadline is None:
                t = self._engine.request_timeout if timeout is None else timeout
                if t is not None:
                    deadline = asyncio.get_running_loop().time() + t
            stmt = await self._prepare(query, timeout)
        raise AssertionError("unreachable")

    # -- queries (asyncpg's names) --------------------------------------------------

    async def fetch(self, query: str, *args: Any, timeout: float | None = None) -> list[Record]:
        """All rows of ``query`` as Records."""
        return await self._run(query, args, ALL, 0, timeout)  # type: ignore[no-any-return]

    async def fetchrow(self, query: str, *args: Any, timeout: float | None = None) -> Record | None:
        """The first row of ``query``, or None (the server stops after one row)."""
        return await self._run(query, args, FIRST, 0, timeout)  # type: ignore[no-any-return]

    async def fetchval(
        self, query: str, *args: Any, column: int = 0, timeout: float | None = None
    ) -> Any:
        """Column ``column`` of the first row, or None when there is no row."""
        return await self._run(query, args, VALUE, column, timeout)

    async def execute(self, query: str, *args: Any, timeout: float | None = None) -> str:
        """Run ``query`` and return its status (``"INSERT 0 1"``). Without arguments it
        goes as a simple query, so it may hold several statements (the last one's
        status is returned); with arguments, as a prepared statement."""
        if args:
            return await self._run(query, args, STATUS, 0, timeout)  # type: ignore[no-any-return]
        try:
            status = await self._send(self._codec.simple_query, query, timeout=timeout)
        except _NotSentTimeout:
            raise
        except RequestTimeoutError:
            self._cancel_if_alone()
            raise
        return status or ""

    async def executemany(
        self, command: str, args: Iterable[Sequence[Any]], *, timeout: float | None = None
    ) -> None:
        """Run ``command`` for each argument sequence, pipelined, in one implicit
        transaction (all or nothing, as in asyncpg)."""
        arglist = list(args)
        if not arglist:
            return
        stmt = await self._prepare(command, timeout)
        for attempt in range(2):
            try:
                await self._send(self._codec.execute_many, stmt, arglist, timeout=timeout)
                return
            except StatementGone:
                if attempt:
                    raise
            stmt = await self._prepare(command, timeout)

    async def prepare(self, query: str, *, timeout: float | None = None) -> PreparedStatement:
        """A prepared statement for ``query`` (shared with the statement cache)."""
        stmt = await self._prepare(query, timeout)
        return PreparedStatement(self, query, stmt)

    def cursor(
        self, query: str, *args: Any, prefetch: int | None = None, timeout: float | None = None
    ) -> CursorFactory:
        """Rows of ``query`` in pieces, inside a transaction: ``async for row in
        conn.cursor(q)`` (``prefetch`` rows per round trip) or ``cur = await conn.cursor(q)``."""
        return CursorFactory(self, query, args, prefetch, timeout)

    def transaction(
        self, *, isolation: str | None = None, readonly: bool = False, deferrable: bool = False
    ) -> Transaction:
        """A transaction (a savepoint when nested): ``async with conn.transaction(): ...``."""
        return Transaction(self, isolation, readonly, deferrable)

    async def set_type_codec(
        self,
        typename: str,
        *,
        schema: str = "public",
        encoder: Callable[[Any], str],
        decoder: Callable[[str], Any],
        format: str = "text",
    ) -> None:
        """Values of type ``schema.typename`` go through ``encoder(value) -> str`` and
        come back through ``decoder(str)`` (asyncpg's call; text format only here),
        e.g. ``set_type_codec("jsonb", schema="pg_catalog", encoder=json.dumps,
        decoder=json.loads)``. Arrays of the type keep the built-in handling."""
        if format != "text":
            raise InterfaceError("surge.postgres custom codecs use format='text'")
        oid = await self._type_oid(typename, schema)
        self._codec.set_type_codec(oid, encoder, decoder)
        self._cache.evict_all()  # their formats were chosen with the old codecs

    async def reset_type_codec(self, typename: str, *, schema: str = "public") -> None:
        """Undo `set_type_codec` for the type."""
        oid = await self._type_oid(typename, schema)
        self._codec.reset_type_codec(oid)
        self._cache.evict_all()

    async def _type_oid(self, typename: str, schema: str) -> int:
        oid = await self.fetchval(
            "SELECT t.oid::int8 FROM pg_catalog.pg_type t"
            " JOIN pg_catalog.pg_namespace n ON n.oid = t.typnamespace"
            " WHERE t.typname = $1 AND n.nspname = $2",
            typename,
            schema,
        )
        if oid is None:
            raise InterfaceError(f"no type {schema}.{typename}")
        return int(oid)

    def is_in_transaction(self) -> bool:
        """True while a transaction made with `transaction` is open."""
        return self._tx is not None

    # -- COPY ---------------------------------------------------------------------

    async def copy_records_to_table(
        self,
        table_name: str,
        *,
        records: Iterable[Sequence[Any]],
        columns: Sequence[str] | None = None,
        schema_name: str | None = None,
        timeout: float | None = None,
    ) -> str:
        """COPY ``records`` into a table in the binary format; returns ``"COPY n"``."""
        return await _copy.records_to_table(
            self, table_name, records, columns, schema_name, timeout
        )

    async def copy_from_query(
        self,
        query: str,
        *args: Any,
        output: Any,
        format: str | None = None,
        timeout: float | None = None,
    ) -> str:
        """COPY (``query``) TO ``output`` (a path, a file object or a callable)."""
        if args:
            raise InterfaceError("copy_from_query takes no query arguments in surge")
        return await _copy.copy_out(self, f"({query})", output, format, timeout)

    async def copy_from_table(
        self,
        table_name: str,
        *,
        output: Any,
        columns: Sequence[str] | None = None,
        schema_name: str | None = None,
        format: str | None = None,
        timeout: float | None = None,
    ) -> str:
        """COPY a table TO ``output`` (a path, a file object or a callable)."""
        target = _copy.qualified(table_name, schema_name, columns)
        return await _copy.copy_out(self, target, output, format, timeout)

    async def copy_to_table(
        self,
        table_name: str,
        *,
        source: Any,
        columns: Sequence[str] | None = None,
        schema_name: str | None = None,
        format: str | None = None,
        timeout: float | None = None,
    ) -> str:
        """COPY ``source`` (bytes, a path or a file object) into a table."""
        target = _copy.qualified(table_name, schema_name, columns)
        return await _copy.copy_in(self, target, source, format, timeout)

    # -- LISTEN / NOTIFY and notices ------------------------------------------------

    async def add_listener(self, channel: str, callback: Callable[..., Any]) -> None:
        """Call ``callback(connection, pid, channel, payload)`` on each NOTIFY to
        ``channel`` (a coroutine function's result is run as a task)."""
        first = channel not in self._listeners
        self._listeners.setdefault(channel, []).append(callback)
        if first:
            try:
                await self.execute(f"LISTEN {quote_ident(channel)}")
            except BaseException:
                self._listeners.pop(channel, None)
                raise

    async def remove_listener(self, channel: str, callback: Callable[..., Any]) -> None:
        """Stop calling ``callback`` for ``channel`` (UNLISTEN after the last one)."""
        cbs = self._listeners.get(channel)
        if not cbs or callback not in cbs:
            return
        cbs.remove(callback)
        if not cbs:
            del self._listeners[channel]
            await self.execute(f"UNLISTEN {quote_ident(channel)}")

    def add_log_listener(self, callback: Callable[..., Any]) -> None:
        """Call ``callback(connection, message)`` for each NoticeResponse (RAISE NOTICE ...);
        ``message`` is a `PostgresError`-like object with the notice's fields."""
        self._log_listeners.append(callback)

    def remove_log_listener(self, callback: Callable[..., Any]) -> None:
        """Stop calling ``callback`` for notices."""
        if callback in self._log_listeners:
            self._log_listeners.remove(callback)

    def _on_out_of_band(self, event: tuple) -> None:
        kind = event[0]
        if kind == "notify":
            _, pid, channel, payload = event
            for cb in list(self._listeners.get(channel, ())):
                self._call(cb, self, pid, channel, payload)
        elif kind == "notice" and self._log_listeners:
            msg = make_error(event[1])
            for cb in list(self._log_listeners):
                self._call(cb, self, msg)

    def _call(self, cb: Callable[..., Any], *args: Any) -> None:
        try:
            r = cb(*args)
        except Exception as exc:  # a listener's bug must not break the connection
            asyncio.get_running_loop().call_exception_handler(
                {"message": "surge.postgres listener failed", "exception": exc}
            )
            return
        if inspect.isawaitable(r):
            task = asyncio.ensure_future(r)
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    def __repr__(self) -> str:
        p = self._params
        return f"<surge.postgres.Connection {p.user}@{p.host}:{p.port}/{p.database}>"


def _retrieve(fut: asyncio.Future) -> None:
    if not fut.cancelled():
        fut.exception()
