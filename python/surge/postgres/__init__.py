"""PostgreSQL driver: the queries of many coroutines pipelined over ONE
connection, binary protocol, prepared statements with cached codecs, no libpq.

    conn = await surge.postgres.connect("postgresql://postgres@127.0.0.1/postgres")
    rows = await conn.fetch("SELECT * FROM pg_type WHERE typlen = $1", 4)
    pool = await surge.postgres.create_pool(dsn, min_size=2, max_size=10)

asyncpg's names and shapes: `fetch`, `fetchrow`, `fetchval`, `execute`,
`executemany`, `prepare`, `transaction`, `cursor`, COPY, `add_listener`, `Record`,
SQLSTATE exception classes. Where surge differs, and why:

- A connection may be used by any number of coroutines at once (asyncpg raises
  "another operation is in progress"): their queries are pipelined, each with
  its own Sync, so one failing query does not affect the others. That is the
  point: one connection carries the load of many.
- While a transaction is open, other coroutines' queries on that connection
  wait for it to end (they would otherwise run inside it); see `transaction`.
- `Pool` shortcuts share connections rather than taking one each.
- A dead server gives `surge.errors.ConnectError` at once (no retries unless
  ``retry_connect=True``); a dropped connection fails the queries in flight
  with `ConnectionLostError` and the next query reconnects.
- Types: json/jsonb come back as str (as in asyncpg) but any JSON-serialisable
  value may be passed for them; a naive datetime for timestamptz is taken as
  UTC; the few types with no stable binary form (money, reg*, tsvector,
  tsquery, aclitem) come back as their text (str), as in asyncpg, and are
  passed as str; `set_type_codec` takes asyncpg's three formats and runs
  where asyncpg runs it (arrays, composite fields, records).
- As asyncpg, and never a silent change: ±infinity dates and timestamps read
  as `date.max`/`date.min` (`datetime.max`/`min`) and those values are written
  back as ±infinity; an interval's months become days with a year as 365 days
  and a month as 30 (``'5 years 1 month'`` is 1855 days: months are not kept
  exact, select ``::text`` or ``extract`` for that); ``'24:00:00'::time``
  raises (``datetime.time`` stops at 23:59:59.999999; select ``::text`` to
  keep it); ``"char"`` is bytes; a date is taken for timestamp(tz) (midnight,
  local time for timestamptz), a datetime for date (its date part), a Decimal
  for float4/8, a str for numeric. A duplicated column name gives the last
  column's value (``record["id"]`` for ``SELECT a.id, b.id``).
- Exceptions: asyncpg's class names and inheritance (surge's older names stay
  as aliases); a SQLSTATE surge does not know raises its class's exception
  (asyncpg raises UnknownPostgresError), an unknown class UnknownPostgresError.
- copy_records_to_table takes every column type: domains go as their base
  type; a type with no binary codec here is put in its binary form by the
  server in one extra query per such column (values as their text).
- A timed-out query is cancelled on the server only when it is the only one in
  flight (a CancelRequest hits whichever pipelined query runs when it lands);
  otherwise it is left to finish and later queries queue behind it.
- Connection options as libpq and asyncpg spell them (see `surge.postgres.dsn`
  and `surge.postgres.endpoints`): TLS with ``sslmode`` (``prefer`` when not
  given) or ``ssl=``, Unix sockets (a host that is a directory), several hosts
  tried in order with ``target_session_attrs``. A connection that is lost
  reconnects by walking the host list again, so it follows a failover.
- COPY data is sent whole rather than streamed (copy_records_to_table streams).
- Types: every type asyncpg decodes, in binary (see `surge.postgres.types`);
  anonymous records and arrays inside them decode (asyncpg 0.32 cannot decode
  an array in an anonymous record); hstore comes back as a dict without asking
  (asyncpg returns its text unless its hstore codec is set); a timetz offset
  keeps its seconds (asyncpg rounds it to minutes).

Modules form a tree (an arrow: "uses"; nothing below calls back up)::

    __init__ (connect, create_pool)
     └─ pool ─ connection
                ├─ transaction ─┐
                ├─ cursor ──────┤
                ├─ copy ────────┼─ session (sending, transaction and cancel gates,
                ├─ prepared ────┘   RowMode, statements) ─┬─ statement_cache
                ├─ handshake, endpoints, dsn, pgpass       └─ introspection (catalog SQL)
                └─ errors, types, serverversion, _core (the Rust codec)
"""

from __future__ import annotations

import inspect
import ssl as _ssl
from collections.abc import Sequence
from typing import Any

from surge._core import Record
from surge.engine import (
    DEFAULT_CONNECT_TIMEOUT,
    DEFAULT_LIVENESS_INTERVAL,
    DEFAULT_LIVENESS_TIMEOUT,
    DEFAULT_MAX_IN_FLIGHT,
)
from surge.errors import InterfaceError
from surge.postgres import dsn as _dsn
from surge.postgres import exceptions
from surge.postgres._sqlstate import *  # noqa: F403
from surge.postgres._sqlstate import __all__ as _sqlstate_names
from surge.postgres.connection import Connection
from surge.postgres.errors import *  # noqa: F403
from surge.postgres.errors import __all__ as _error_names
from surge.postgres.pool import (
    DEFAULT_MAX_INACTIVE_CONNECTION_LIFETIME,
    DEFAULT_MAX_QUERIES,
    DEFAULT_MAX_SIZE,
    DEFAULT_MIN_SIZE,
    Hook,
    Pool,
)
from surge.postgres.prepared import PreparedStatement
from surge.postgres.query_log import LoggedQuery
from surge.postgres.session import record_class_of
from surge.postgres.statement_cache import (
    DEFAULT_MAX_CACHEABLE_STATEMENT_SIZE,
    DEFAULT_MAX_CACHED_STATEMENT_LIFETIME,
    DEFAULT_STATEMENT_CACHE_SIZE,
)
from surge.postgres.transaction import Transaction
from surge.postgres.types import *  # noqa: F403
from surge.postgres.types import __all__ as __all__

#: `connect`'s keywords that go to `surge.postgres.dsn.parse` (the rest are the
#: connection's options): read from `parse`'s own signature, so a keyword added
#: there is routed to it (tests/test_porting_surface.py checks that
#: `connect` and `create_pool` take each of them).
_DSN_KEYWORDS = tuple(
    name
    for name, p in inspect.signature(_dsn.parse).parameters.items()
    if p.kind is inspect.Parameter.KEYWORD_ONLY
)


def _configure(
    dsn: str | None,
    *,
    timeout: float | None = None,
    connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
    record_class: type[Record] = Record,
    **kwargs: Any,
) -> tuple[_dsn.ConnectParams, dict[str, Any]]:
    """`connect`'s arguments as the connection's parameters and options
    (``timeout`` is asyncpg's name for ``connect_timeout``)."""
    params = _dsn.parse(dsn, **{k: kwargs.pop(k) for k in _DSN_KEYWORDS if k in kwargs})
    if timeout is not None:
        connect_timeout = timeout
    elif params.connect_timeout is not None:
        connect_timeout = params.connect_timeout
    record_class_of(record_class)  # raises for a bad one, at the call
    return params, {**kwargs, "connect_timeout": connect_timeout, "record_class": record_class}


def _check_connection_class(cls: Any) -> None:
    if not isinstance(cls, type) or not issubclass(cls, Connection):
        raise InterfaceError(
            f"connection_class is expected to be a subclass of"
            f" surge.postgres.Connection, got {cls!r}"
        )


async def connect(
    dsn: str | None = None,
    *,
    host: str | Sequence[str] | None = None,
    port: int | str | Sequence[int | str] | None = None,
    user: str | None = None,
    password: str | None = None,
    database: str | None = None,
    server_settings: dict[str, str] | None = None,
    ssl: _ssl.SSLContext | bool | str | None = None,
    sslmode: str | None = None,
    sslrootcert: str | None = None,
    sslcert: str | None = None,
    sslkey: str | None = None,
    sslpassword: str | None = None,
    target_session_attrs: str | None = None,
    channel_binding: str | None = None,
    passfile: str | None = None,
    statement_cache_size: int = DEFAULT_STATEMENT_CACHE_SIZE,
    max_cached_statement_lifetime: float = DEFAULT_MAX_CACHED_STATEMENT_LIFETIME,
    max_cacheable_statement_size: int = DEFAULT_MAX_CACHEABLE_STATEMENT_SIZE,
    connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
    command_timeout: float | None = None,
    max_in_flight: int = DEFAULT_MAX_IN_FLIGHT,
    retry_connect: bool = False,
    timeout: float | None = None,
    liveness_interval: float | None = DEFAULT_LIVENESS_INTERVAL,
    liveness_timeout: float = DEFAULT_LIVENESS_TIMEOUT,
    tcp_keepalive: bool = True,
    connection_class: type[Connection] = Connection,
    record_class: type[Record] = Record,
) -> Connection:
    """Connect and authenticate; keyword arguments win over the DSN (``timeout`` is
    asyncpg's name for ``connect_timeout``). ``host``/``port`` may be lists (tried
    in order); ``ssl`` takes an ``ssl.SSLContext``, True (verify-full against the
    default trust store) or an sslmode, as asyncpg; ``passfile`` is libpq's
    password file (read when no password is given). ``connection_class`` (a
    `Connection` subclass) and ``record_class`` (a `Record` subclass, the rows'
    class) as asyncpg's; so are the statement cache's three bounds (a
    ``max_cached_statement_lifetime`` of 0, surge's default, keeps statements
    until evicted)."""
    kwargs = dict(locals())
    _check_connection_class(kwargs.pop("connection_class"))
    params, opts = _configure(kwargs.pop("dsn"), **kwargs)
    return await connection_class(params, **opts).connect()


def create_pool(
    dsn: str | None = None,
    *,
    min_size: int = DEFAULT_MIN_SIZE,
    max_size: int = DEFAULT_MAX_SIZE,
    init_size: int | None = None,
    host: str | Sequence[str] | None = None,
    port: int | str | Sequence[int | str] | None = None,
    user: str | None = None,
    password: str | None = None,
    database: str | None = None,
    server_settings: dict[str, str] | None = None,
    ssl: _ssl.SSLContext | bool | str | None = None,
    sslmode: str | None = None,
    sslrootcert: str | None = None,
    sslcert: str | None = None,
    sslkey: str | None = None,
    sslpassword: str | None = None,
    target_session_attrs: str | None = None,
    channel_binding: str | None = None,
    passfile: str | None = None,
    statement_cache_size: int = DEFAULT_STATEMENT_CACHE_SIZE,
    max_cached_statement_lifetime: float = DEFAULT_MAX_CACHED_STATEMENT_LIFETIME,
    max_cacheable_statement_size: int = DEFAULT_MAX_CACHEABLE_STATEMENT_SIZE,
    connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
    command_timeout: float | None = None,
    max_in_flight: int = DEFAULT_MAX_IN_FLIGHT,
    retry_connect: bool = False,
    liveness_interval: float | None = DEFAULT_LIVENESS_INTERVAL,
    liveness_timeout: float = DEFAULT_LIVENESS_TIMEOUT,
    tcp_keepalive: bool = True,
    timeout: float | None = None,
    init: Hook | None = None,
    setup: Hook | None = None,
    reset: Hook | None = None,
    max_queries: int = DEFAULT_MAX_QUERIES,
    max_inactive_connection_lifetime: float = DEFAULT_MAX_INACTIVE_CONNECTION_LIFETIME,
    connection_class: type[Connection] = Connection,
    record_class: type[Record] = Record,
) -> Pool:
    """A pool: ``pool = await create_pool(dsn)`` or ``async with create_pool(dsn) as pool``
    (the connection options as in `connect`). asyncpg's hooks: ``init(conn)`` for
    each new connection (type codecs), ``setup(conn)`` on each acquire,
    ``reset(conn)`` on each release; ``max_queries``,
    ``max_inactive_connection_lifetime``, ``connection_class`` and
    ``record_class`` as asyncpg's, and its ``init_size`` (the connections opened
    at start, ``min_size`` unless given); `Pool.set_connect_args` changes the
    connection options for the connections made after it."""
    kwargs = dict(locals())
    pool_kwargs = {
        k: kwargs.pop(k)
        for k in ("min_size", "max_size", "init_size", "init", "setup", "reset", "max_queries")
    }
    lifetime = kwargs.pop("max_inactive_connection_lifetime")
    _check_connection_class(kwargs.pop("connection_class"))
    params, opts = _configure(kwargs.pop("dsn"), **kwargs)
    return Pool(
        params,
        pool_kwargs.pop("min_size"),
        pool_kwargs.pop("max_size"),
        opts,
        **pool_kwargs,
        max_inactive_connection_lifetime=lifetime,
        connection_class=connection_class,
        configure=_configure,
    )


# asyncpg.types' names (imported above, as asyncpg's package has them), then the
# rest; tuples, so `+=` makes a new one (types.__all__ stays as it is). mypy reads
# the literal names and the import, not the SQLSTATE and error lists.
__all__ += (
    "Connection",
    "LoggedQuery",
    "Pool",
    "PreparedStatement",
    "Record",
    "Transaction",
    "connect",
    "create_pool",
    "exceptions",
)
__all__ += (*_sqlstate_names, *_error_names)
