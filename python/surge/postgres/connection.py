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
them (in Rust). Sending, the transaction and cancel gates and the statement
cache live in `session.py`; transactions pin the connection (`transaction.py`).
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import re
from collections.abc import AsyncIterable, Callable, Iterable, Iterator, Sequence
from typing import Any, NamedTuple

from surge._core import PgCodec, Record
from surge.engine import (
    DEFAULT_CONNECT_TIMEOUT,
    DEFAULT_LIVENESS_INTERVAL,
    DEFAULT_LIVENESS_TIMEOUT,
    DEFAULT_MAX_IN_FLIGHT,
    PipelinedConnection,
    liveness,
)
from surge.errors import InterfaceError, ProtocolError
from surge.postgres import copy as _copy
from surge.postgres.cursor import CursorFactory
from surge.postgres.dsn import ConnectParams
from surge.postgres.endpoints import SSL_REQUEST, endpoints
from surge.postgres.errors import (
    InvalidArgumentError,
    UnknownTypeError,
    UnsupportedClientFeatureError,
    make_error,
    make_log_message,
)
from surge.postgres.handshake import check_target, handshake
from surge.postgres.prepared import TYPES_QUERY, PreparedStatement, Type
from surge.postgres.query_log import LoggedQuery, logged
from surge.postgres.serverversion import ServerVersion, server_version
from surge.postgres.session import RowMode, Session, record_class_of
from surge.postgres.statement_cache import (
    DEFAULT_MAX_CACHEABLE_STATEMENT_SIZE,
    DEFAULT_MAX_CACHED_STATEMENT_LIFETIME,
    DEFAULT_STATEMENT_CACHE_SIZE,
)
from surge.postgres.transaction import Transaction
from surge.postgres.types import type_oid

#: Built-in types with a tuple format in `Connection.set_type_codec` (asyncpg's).
_TUPLE_OIDS = frozenset(
    type_oid(n) for n in ("date", "time", "timetz", "timestamp", "timestamptz", "interval")
)

#: asyncpg's built-in codecs that give a type's values as str both ways: the
#: `set_builtin_type_codec` aliases of enums and extension types surge keeps.
_TEXT_CODECS = frozenset({"text", "varchar", "bpchar", "name"})


#: SQL's names for pg_catalog types that asyncpg's `set_type_codec` and its kin
#: take beside the catalog's (any case), as asyncpg spells them.
_SQL_NAMES = {
    "int": "int4",
    "integer": "int4",
    "smallint": "int2",
    "bigint": "int8",
    "real": "float4",
    "double precision": "float8",
    "decimal": "numeric",
    "char": "bpchar",
    "character": "bpchar",
    "character varying": "varchar",
    "bit varying": "varbit",
    "time without timezone": "time",
    "time with timezone": "timetz",
    "timestamp without timezone": "timestamp",
    "timestamp with timezone": "timestamptz",
}


class _TypeInfo(NamedTuple):
    """A type as `set_type_codec` and its kin see it (asyncpg's checks)."""

    oid: int
    #: pg_type.typtype: 'b' base, 'c' composite, 'd' domain, 'e' enum, 'r' range ...
    kind: str
    #: asyncpg's "scalar": a base type, domain or enum that is not an array
    scalar: bool
    #: a domain's base type name (None for other kinds)
    base: str | None
    #: its values are str both ways here: an enum, or an extension type with no codec
    as_text: bool


#: What `Connection.reset` runs to give the next user a clean session, as
#: asyncpg's (prepared statements stay: they belong to the connection's cache).
RESET_QUERY = "SELECT pg_advisory_unlock_all();\nCLOSE ALL;\nUNLISTEN *;\nRESET ALL;"

#: The engine's busy-polling window for PostgreSQL connections (see
#: `surge.engine.SPIN_WINDOW`, 100 us): a query's reply takes the server longer
#: than a Tarantool or Redis request, and with 10 connections on one loop each
#: reply waits behind the other connections' queries (generate_series(1000):
#: ~150 us of server CPU each; pg_type: ~350 us), so a 100 us window ran out
#: before most replies and the loop slept (0.8 voluntary switches per query).
#: Measured at 10 connections x 10 coroutines, uvloop, A/B alternated: 300 us:
#: generate_series 1.11x, pg_type 1.05x queries/s, switches 0.82 -> 0.44 per query,
#: and server CPU per query -5 % (a sleeping reader's wake-up is paid by the
#: sending backend on loopback); 1 ms: generate_series 1.16x but pg_type 0.96x
#: and +20 % client CPU per query. A slow query still costs at most one window
#: per `surge.engine.SPIN_BACKOFF` writes (the backoff).
SPIN_WINDOW = 300e-6
#: The liveness probe: an SSLRequest, which a live server answers with one byte
#: ('S' or 'N') before any authentication.
PROBE = SSL_REQUEST


def quote_ident(name: str) -> str:
    """An SQL identifier, double-quoted."""
    return '"' + name.replace('"', '""') + '"'


class ConnectionSettings(dict[str, str]):
    """Server parameters: a dict that also answers attributes (asyncpg's shape)."""

    def __getattr__(self, name: str) -> str:
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None


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
        max_cacheable_statement_size: int = DEFAULT_MAX_CACHEABLE_STATEMENT_SIZE,
        max_cached_statement_lifetime: float = DEFAULT_MAX_CACHED_STATEMENT_LIFETIME,
        connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
        command_timeout: float | None = None,
        max_in_flight: int = DEFAULT_MAX_IN_FLIGHT,
        reconnect: bool = True,
        retry_connect: bool = False,
        liveness_interval: float | None = DEFAULT_LIVENESS_INTERVAL,
        liveness_timeout: float = DEFAULT_LIVENESS_TIMEOUT,
        tcp_keepalive: bool = True,
        record_class: type[Record] = Record,
    ) -> None:
        self._params = params
        #: The rows' class when not Record (asyncpg's ``record_class``).
        self._record_class = record_class_of(record_class)
        self._codec = codec = PgCodec(InvalidArgumentError, ProtocolError)
        guard = _StreamGuard(codec)
        eps = endpoints(params)
        self._engine = guard.engine = PipelinedConnection(
            eps[0].host,
            eps[0].port,
            codec,
            endpoints=eps,
            on_connect=self._on_connect,
            on_out_of_band=self._on_out_of_band,
            on_lost=self._on_lost,
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
            driver="postgres",
            spin_window=SPIN_WINDOW,
            read_pacing=True,
        )
        #: Sending, gates and statements: what transactions, cursors, COPY and
        #: prepared statements use (see `session.py`).
        self._session = Session(
            self._engine,
            codec,
            statement_cache_size,
            max_cacheable_statement_size,
            max_cached_statement_lifetime,
        )
        self._listeners: dict[str, list[Callable[..., Any]]] = {}
        self._log_listeners: list[Callable[..., Any]] = []
        self._termination_listeners: list[Callable[..., Any]] = []
        self._query_loggers: list[Callable[[LoggedQuery], Any]] = []
        #: Types as `PreparedStatement.get_parameters` reports them, by oid.
        self._types: dict[int, Type] = {}
        self._tasks: set[asyncio.Task[Any]] = set()
        self._closed = False
        #: A pool's shortcut calls under way here (`Pool` closes this connection
        #: only once they are done).
        self._pool_calls = 0
        self._run = self._session.run

    # -- lifecycle ----------------------------------------------------------------

    async def _on_connect(self, engine: PipelinedConnection) -> None:
        await handshake(engine, self._params)
        await check_target(engine)
        # Statements died with the previous session (and the server may be another
        # host now, types with it); LISTENs must be said again.
        self._session.cache.clear()
        self._codec.reset_types()
        self._types.clear()
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

    def get_server_version(self) -> ServerVersion:
        """The server's version as asyncpg's ``ServerVersion(major, minor, micro,
        releaselevel, serial)``: 15.4 is (15, 0, 4, 'final', 0)."""
        return server_version(self._codec.server_params.get("server_version", "0"))

    def get_server_address(self) -> str:
        """Where the connection goes now: ``host:port`` or a Unix socket's path
        (of several hosts, the one connected to)."""
        return str(self._engine.endpoint)

    def is_tls(self) -> bool:
        """True while the connection runs over TLS."""
        return self._engine.is_connected and self._engine.tls_active

    def get_settings(self) -> ConnectionSettings:
        """The server parameters reported so far, by key or as attributes as in
        asyncpg (``get_settings().server_encoding``, ``["TimeZone"]``)."""
        return ConnectionSettings(self._codec.server_params)

    async def close(self, *, timeout: float | None = None) -> None:
        """Say Terminate and close; requests still waiting fail with ClosedError."""
        if self._closed:
            return
        self._closed = True
        connected = self._engine.is_connected
        if self._engine.send_no_reply(self._codec.terminate):  # type: ignore[arg-type]
            await asyncio.sleep(0)  # let the scheduled flush write it
        await self._engine.close()
        if not connected:
            self._terminated()  # no session to lose: `_on_lost` will not say it

    def terminate(self) -> None:
        """Drop the connection at once; later queries raise `ClosedError` (an
        `InterfaceError`), as after `close`."""
        if self._closed:
            return
        self._closed = True
        connected = self._engine.is_connected
        self._engine.terminate()
        if not connected:
            self._terminated()

    def add_termination_listener(self, callback: Callable[..., Any]) -> None:
        """Call ``callback(connection)`` when the connection is closed or its server
        session ends (a coroutine function's result runs as a task). Where asyncpg's
        connection stays dead after a lost session, surge's reconnects on the next
        query: the callback then tells of each session's end. A callback added
        twice is called once (asyncpg keeps a set)."""
        if callback not in self._termination_listeners:
            self._termination_listeners.append(callback)

    def remove_termination_listener(self, callback: Callable[..., Any]) -> None:
        """Stop calling ``callback`` at termination."""
        if callback in self._termination_listeners:
            self._termination_listeners.remove(callback)

    def _on_lost(self, err: BaseException) -> None:
        self._terminated()

    def _terminated(self) -> None:
        for cb in list(self._termination_listeners):
            self._call(cb, self)
        if self._closed:
            # Closed for good: nothing more to tell (asyncpg drops them too).
            self._termination_listeners.clear()
            self._query_loggers.clear()
            self._run = self._session.run

    # -- query loggers (see `query_log`) ------------------------------------------

    def add_query_logger(self, callback: Callable[[LoggedQuery], Any]) -> None:
        """Call ``callback(LoggedQuery)`` after each query of this connection's
        fetch/fetchrow/fetchval/execute/executemany (asyncpg's call; a callback
        added twice is called once)."""
        if callback not in self._query_loggers:
            self._query_loggers.append(callback)
        self._run = self._run_logged

    def remove_query_logger(self, callback: Callable[[LoggedQuery], Any]) -> None:
        """Stop calling ``callback`` after queries."""
        if callback in self._query_loggers:
            self._query_loggers.remove(callback)
        if not self._query_loggers:
            self._run = self._session.run

    @contextlib.contextmanager
    def query_logger(self, callback: Callable[[LoggedQuery], Any]) -> Iterator[None]:
        """``with conn.query_logger(cb): ...``: `add_query_logger` for the block."""
        self.add_query_logger(callback)
        try:
            yield
        finally:
            self.remove_query_logger(callback)

    def _logged(self, run: Any, query: str, args: Any, timeout: float | None) -> Any:
        ep = self._engine.endpoint
        addr = ep.path if ep.path is not None else (ep.host, ep.port)
        return logged(run, query, args, timeout, addr, self._params, self._report_query)

    def _report_query(self, q: LoggedQuery) -> None:
        for cb in list(self._query_loggers):
            self._call(cb, q)

    def _run_logged(
        self,
        query: str,
        args: Sequence[Any],
        mode: int,
        column: int,
        timeout: float | None,
        record_class: type[Record] | None = None,
    ) -> Any:
        run = self._session.run(query, args, mode, column, timeout, record_class)
        return self._logged(run, query, args, timeout)

    # -- queries (asyncpg's names) --------------------------------------------------

    def _internal(
        self, query: str, args: Sequence[Any], mode: RowMode, timeout: float | None = None
    ) -> Any:
        """A query of the driver's own (catalog lookups): plain Records, not logged."""
        return self._session.run(query, args, mode, 0, timeout)

    def _rows_of(self, record_class: Any) -> type[Record] | None:
        """The rows' class for a call: its ``record_class`` or the connection's."""
        return self._record_class if record_class is None else record_class_of(record_class)

    async def fetch(
        self,
        query: str,
        *args: Any,
        timeout: float | None = None,
        record_class: type[Record] | None = None,
    ) -> list[Record]:
        """All rows of ``query`` as Records (of ``record_class``, a Record subclass,
        when given, else the connection's)."""
        rc = self._record_class if record_class is None else record_class_of(record_class)
        return await self._run(query, args, RowMode.ALL, 0, timeout, rc)  # type: ignore[no-any-return]

    async def fetchrow(
        self,
        query: str,
        *args: Any,
        timeout: float | None = None,
        record_class: type[Record] | None = None,
    ) -> Record | None:
        """The first row of ``query``, or None (the server stops after one row)."""
        rc = self._record_class if record_class is None else record_class_of(record_class)
        return await self._run(query, args, RowMode.FIRST, 0, timeout, rc)  # type: ignore[no-any-return]

    async def fetchval(
        self, query: str, *args: Any, column: int | str = 0, timeout: float | None = None
    ) -> Any:
        """Column ``column`` (its position, or its name as in asyncpg) of the first
        row, or None when there is no row."""
        if isinstance(column, str):
            row = await self._run(query, args, RowMode.FIRST, 0, timeout)
            return None if row is None else row[column]
        return await self._run(query, args, RowMode.VALUE, column, timeout)

    async def execute(self, query: str, *args: Any, timeout: float | None = None) -> str:
        """Run ``query`` and return its status (``"INSERT 0 1"``). Without arguments it
        goes as a simple query, so it may hold several statements (the last one's
        status is returned); with arguments, as a prepared statement."""
        if args:
            return await self._run(query, args, RowMode.STATUS, 0, timeout)  # type: ignore[no-any-return]
        if self._query_loggers:
            run = self._session.simple_query(query, timeout)
            return await self._logged(run, query, args, timeout)  # type: ignore[no-any-return]
        return await self._session.simple_query(query, timeout)

    async def executemany(
        self, command: str, args: Iterable[Sequence[Any]], *, timeout: float | None = None
    ) -> None:
        """Run ``command`` for each argument sequence, pipelined, in one implicit
        transaction (all or nothing, as in asyncpg)."""
        arglist = list(args)
        if not arglist:
            return
        run = self._session.run_many(command, arglist, timeout)
        if self._query_loggers:
            await self._logged(run, command, arglist, timeout)
        else:
            await run

    async def fetchmany(
        self,
        query: str,
        args: Iterable[Sequence[Any]],
        *,
        timeout: float | None = None,
        record_class: type[Record] | None = None,
    ) -> list[Record]:
        """``query`` once per argument sequence, all rows in order, in one
        transaction (all or nothing, as asyncpg's). The queries are pipelined."""
        arglist = list(args)
        if not arglist:
            return []
        async with self.transaction():
            # Tasks started inside the transaction go through its gate (see
            # transaction.py), so the queries leave together.
            got = await asyncio.gather(
                *(
                    self.fetch(query, *a, timeout=timeout, record_class=record_class)
                    for a in arglist
                ),
                return_exceptions=True,
            )
            for g in got:
                if isinstance(g, BaseException):
                    raise g
        return [row for rows in got for row in rows]  # type: ignore[union-attr]

    async def prepare(
        self,
        query: str,
        *,
        timeout: float | None = None,
        record_class: type[Record] | None = None,
        name: str | None = None,
    ) -> PreparedStatement:
        """A prepared statement for ``query`` (shared with the statement cache); its
        rows are of ``record_class`` when given. ``name`` is taken for asyncpg's
        signature: the server-side name is the cache's (`get_name` tells it)."""
        rc = self._rows_of(record_class)
        stmt = await self._session.prepare(query, timeout)
        oids = {*stmt.param_types, *(o for _, o in stmt.columns)}
        unknown = [o for o in oids if o not in self._types]
        if unknown:
            # Names, kinds and schemas as asyncpg reports them; one query per new
            # set of types, kept for the connection (`reload_schema_state` forgets).
            found = await self._internal(TYPES_QUERY, (unknown,), RowMode.ALL, timeout)
            for oid, name, kind, schema in found:
                self._types[oid] = Type(oid, name, kind, schema)
        return PreparedStatement(
            self._session, query, stmt, self._types, self.cursor, self.transaction, rc
        )

    def cursor(
        self,
        query: str,
        *args: Any,
        prefetch: int | None = None,
        timeout: float | None = None,
        record_class: type[Record] | None = None,
    ) -> CursorFactory:
        """Rows of ``query`` in pieces, inside a transaction: ``async for row in
        conn.cursor(q)`` (``prefetch`` rows per round trip) or ``cur = await conn.cursor(q)``."""
        rc = self._rows_of(record_class)
        return CursorFactory(self._session, query, args, prefetch, timeout, rc)

    def transaction(
        self, *, isolation: str | None = None, readonly: bool = False, deferrable: bool = False
    ) -> Transaction:
        """A transaction (a savepoint when nested): ``async with conn.transaction(): ...``."""
        return Transaction(self._session, isolation, readonly, deferrable)

    async def set_type_codec(
        self,
        typename: str,
        *,
        schema: str = "public",
        encoder: Callable[[Any], Any],
        decoder: Callable[[Any], Any],
        format: str = "text",
    ) -> None:
        """Values of type ``schema.typename`` go through ``encoder(value)`` and come
        back through ``decoder(wire value)`` (asyncpg's call), in ``format``:

        * ``"text"``: str both ways, e.g. ``set_type_codec("jsonb",
          schema="pg_catalog", encoder=json.dumps, decoder=json.loads)``;
        * ``"binary"``: bytes both ways, the type's binary wire form;
        * ``"tuple"``: asyncpg's tuple layouts: date ``(days from 2000-01-01,)``,
          timestamp/timestamptz ``(microseconds from 2000-01-01,)``, time
          ``(microseconds,)``, timetz ``(microseconds, offset in seconds west of
          UTC)``, interval ``(months, days, microseconds)``, a composite type its
          fields; ±infinity are the integer limits.

        Where asyncpg runs a codec besides the type's own values, so does this:
        a text codec on the elements of arrays of the type, of enums and of
        domains over it (the array then travels in its text form, but for
        json/jsonb and enums); binary and tuple codecs on array elements,
        composite and record fields and range bounds. A text codec on a
        composite's field is not run there (asyncpg refuses the composite): the
        field keeps the built-in codec."""
        if format not in ("text", "binary", "tuple"):
            raise InterfaceError(f"format must be 'text', 'binary' or 'tuple', not {format!r}")
        info = await self._type_info(typename, schema)
        oid, kind = info.oid, info.kind
        # asyncpg's checks, in its order and with its exception classes.
        if kind == "c":
            if format != "tuple":
                raise UnsupportedClientFeatureError(
                    f"only tuple-format codecs can be used on composite types ({schema}.{typename})"
                )
        elif not info.scalar:
            # arrays, ranges, multiranges, pseudo-types: their codecs are made of
            # their parts' (set the codec on the element or subtype instead)
            raise InterfaceError(
                f"cannot use custom codec on type {schema}.{typename}:"
                " it is neither a scalar type nor a composite type"
            )
        if kind == "d":
            # a domain's values come back under its base type's oid: a codec on
            # the domain would never run (asyncpg refuses it too)
            raise UnsupportedClientFeatureError(
                f"custom codecs on domain types are not supported ({schema}.{typename}):"
                " set the codec on the base type"
            )
        if format == "tuple" and kind != "c" and oid not in _TUPLE_OIDS:
            raise InterfaceError(
                f"type {schema}.{typename} has no tuple format (only date, time, timetz, "
                "timestamp, timestamptz, interval and composite types have one)"
            )
        self._codec.set_type_codec(oid, encoder, decoder, format)
        self._session.cache.evict_all()  # their formats were chosen with the old codecs

    async def set_builtin_type_codec(
        self,
        typename: str,
        *,
        schema: str = "public",
        codec_name: str,
        format: str | None = None,
    ) -> None:
        """asyncpg's call for extension types, for the pairings whose values
        surge already gives as the named built-in codec would: hstore (a dict
        both ways), an enum or a type without a codec here (citext, ...) as
        text, a domain as its base type, a type as itself. Other pairings raise rather than be
        ignored; what asyncpg refuses (a non-scalar type, the tuple format) is
        refused with its exception."""
        info = await self._type_info(typename, schema)  # raises for a type that is not there
        if not info.scalar:
            raise InterfaceError(f"cannot alias non-scalar type {schema}.{typename}")
        if format not in (None, "text", "binary"):
            raise InterfaceError(
                f"invalid `format` argument, expected 'text' or 'binary', got {format!r}"
            )
        name = codec_name
        if name not in ("pg_contrib.hstore", "hstore"):
            try:
                type_oid(name)
            except KeyError:
                raise InterfaceError(
                    f"cannot alias {typename} to {name}: there is no built-in codec named {name}"
                ) from None
        if (
            (name in ("pg_contrib.hstore", "hstore") and typename == "hstore")
            or (name in _TEXT_CODECS and info.as_text)
            or name == (info.base if info.kind == "d" else typename)
        ):
            return
        raise UnsupportedClientFeatureError(
            f"set_builtin_type_codec({typename!r}, codec_name={codec_name!r}) is not"
            " supported: extension types without a codec come back as text; use"
            " set_type_codec for a codec of your own"
        )

    async def reset_type_codec(self, typename: str, *, schema: str = "public") -> None:
        """Undo `set_type_codec` for the type."""
        self._codec.reset_type_codec((await self._type_info(typename, schema)).oid)
        self._session.cache.evict_all()

    async def _type_info(self, typename: str, schema: str) -> _TypeInfo:
        """What `set_type_codec` and its kin need to know of a type."""
        name = typename
        if schema == "pg_catalog":
            name = _SQL_NAMES.get(typename.lower(), typename.lower())
        row = await self._internal(
            # asyncpg's "scalar": a base type, domain or enum that is not an
            # array; pg_catalog's own types are all scalar to it, but arrays and
            # ranges (so point, whose typelem is float8, takes a codec)
            "SELECT t.oid, t.typtype::text,"
            " t.typtype IN ('b', 'd', 'e') AND (t.typelem = 0"
            "  OR (n.nspname = 'pg_catalog' AND t.typcategory <> 'A')),"
            " b.typname::text,"
            " t.typtype = 'e' OR (t.typtype = 'b' AND t.typelem = 0"
            "  AND t.oid >= 16384 AND t.typname <> 'hstore')"
            " FROM pg_catalog.pg_type t"
            " JOIN pg_catalog.pg_namespace n ON n.oid = t.typnamespace"
            " LEFT JOIN pg_catalog.pg_type b ON b.oid = t.typbasetype"
            " WHERE t.typname = $1 AND n.nspname = $2",
            (name, schema),
            RowMode.FIRST,
        )
        if row is None:
            raise UnknownTypeError(f"unknown type: {schema}.{typename}")
        return _TypeInfo(
            oid=int(row[0]),
            kind=str(row[1]),
            scalar=bool(row[2]),
            base=row[3],
            as_text=bool(row[4]),
        )

    async def reload_schema_state(self) -> None:
        """Forget the types looked up in the catalog and the cached statements
        (asyncpg's call; after DDL that changes composite types or enums)."""
        self._types.clear()
        self._session.reload_schema_state()

    def get_reset_query(self) -> str:
        """The SQL `reset` runs (a pool's custom ``reset=`` may add to it)."""
        return RESET_QUERY

    async def reset(self, *, timeout: float | None = None) -> None:
        """Give the session back clean, as asyncpg: roll back an open transaction,
        drop the listeners, close cursors, release advisory locks, reset settings."""
        await self._rollback_and_unlisten(timeout)
        await self.execute(RESET_QUERY, timeout=timeout)

    async def _rollback_and_unlisten(self, timeout: float | None) -> None:
        """The part of `reset` a pool runs before a custom ``reset=`` callback."""
        self._listeners.clear()
        self._log_listeners.clear()
        if self.is_in_transaction():
            self._session.unclaim()
            await self.execute("ROLLBACK", timeout=timeout)

    def is_in_transaction(self) -> bool:
        """True while a transaction is open: one made with `transaction`, or, as
        asyncpg tells from the server's status, one begun with ``execute("BEGIN")``."""
        return self._session.tx is not None or self._codec.transaction_status != "I"

    # -- COPY ---------------------------------------------------------------------

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
        """COPY ``records`` (an iterable or an asynchronous iterable) into a table in
        the binary format, streamed in chunks; ``where`` filters them on the server;
        returns ``"COPY n"``."""
        return await _copy.records_to_table(
            self._session, table_name, records, columns, schema_name, timeout, where
        )

    async def copy_from_query(
        self,
        query: str,
        *args: Any,
        output: Any,
        timeout: float | None = None,
        **copy_options: Any,
    ) -> str:
        """COPY (``query``) TO ``output`` (a path, a file object or a callable);
        asyncpg's COPY options (``format``, ``header``, ``delimiter``, ``null``,
        ``quote``, ``escape``, ``force_quote``, ``encoding`` ...)."""
        if args:
            query = await self._mogrify(query, args, timeout)
        opts = _copy.options(**copy_options)
        return await _copy.copy_out(self._session, f"({query})", output, opts, timeout)

    async def _mogrify(self, query: str, args: Sequence[Any], timeout: float | None) -> str:
        """``query`` with each ``$n`` replaced by its argument as a typed SQL literal
        (COPY takes no parameters; asyncpg does the same). The server makes the
        literals: the arguments are encoded as for any query, then quoted there."""
        stmt = await self._session.prepare(query, timeout)
        oids = list(stmt.param_types)
        if len(oids) != len(args):
            raise InvalidArgumentError(
                f"the query takes {len(oids)} argument(s), {len(args)} given"
            )
        names = await self._internal(
            "SELECT array_agg(format_type(t, NULL) ORDER BY n)"
            " FROM unnest($1::oid[]) WITH ORDINALITY AS u(t, n)",
            (oids,),
            RowMode.VALUE,
            timeout,
        )
        quoted = ", ".join(f"quote_nullable(${i}::{t}::text)" for i, t in enumerate(names, 1))
        literals = await self._internal(f"SELECT {quoted}", args, RowMode.FIRST, timeout)
        assert literals is not None
        return re.sub(
            r"\$(\d+)\b",
            lambda m: f"({literals[int(m.group(1)) - 1]}::{names[int(m.group(1)) - 1]})",
            query,
        )

    async def copy_from_table(
        self,
        table_name: str,
        *,
        output: Any,
        columns: Sequence[str] | None = None,
        schema_name: str | None = None,
        timeout: float | None = None,
        **copy_options: Any,
    ) -> str:
        """COPY a table TO ``output`` (a path, a file object or a callable), with
        asyncpg's COPY options."""
        target = _copy.qualified(table_name, schema_name, columns)
        opts = _copy.options(**copy_options)
        return await _copy.copy_out(self._session, target, output, opts, timeout)

    async def copy_to_table(
        self,
        table_name: str,
        *,
        source: Any,
        columns: Sequence[str] | None = None,
        schema_name: str | None = None,
        timeout: float | None = None,
        where: str | None = None,
        **copy_options: Any,
    ) -> str:
        """COPY ``source`` (bytes, a path, a file object or an iterable of bytes)
        into a table, with asyncpg's COPY options and ``where``."""
        target = _copy.qualified(table_name, schema_name, columns)
        opts = _copy.options(**copy_options)
        return await _copy.copy_in(self._session, target, source, opts, where, timeout)

    # -- LISTEN / NOTIFY and notices ------------------------------------------------

    async def add_listener(self, channel: str, callback: Callable[..., Any]) -> None:
        """Call ``callback(connection, pid, channel, payload)`` on each NOTIFY to
        ``channel`` (a coroutine function's result is run as a task)."""
        first = channel not in self._listeners
        cbs = self._listeners.setdefault(channel, [])
        if callback not in cbs:  # asyncpg keeps a set: added twice, called once
            cbs.append(callback)
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
        if callback not in self._log_listeners:  # once, as in asyncpg's set
            self._log_listeners.append(callback)

    def remove_log_listener(self, callback: Callable[..., Any]) -> None:
        """Stop calling ``callback`` for notices."""
        if callback in self._log_listeners:
            self._log_listeners.remove(callback)

    def _on_out_of_band(self, event: tuple | BaseException) -> None:
        if not isinstance(event, tuple):
            # A stream error that belongs to no query (the peer is not PostgreSQL,
            # say): the engine fails the connection with it; nothing to dispatch.
            return
        kind = event[0]
        if kind == "notify":
            _, pid, channel, payload = event
            for cb in list(self._listeners.get(channel, ())):
                self._call(cb, self, pid, channel, payload)
        elif kind == "notice" and self._log_listeners:
            msg = make_log_message(event[1])
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
        return f"<surge.postgres.Connection {p.user}@{self._engine.endpoint}/{p.database}>"
