"""PostgreSQL target: a query of your own (``--query``) or a small CRUD mix, through
surge's PostgreSQL driver.

``--query "SELECT ..."`` runs that statement as the one operation ``query``
(its rows are fetched and dropped). Without it, the mix works on a small table
(``--table``, created if missing: ``id bigint`` primary key, a counter ``n``,
``data text`` of ``tuple_size`` characters). Each worker owns a random key range
and pre-fills ``prefill`` rows of it before the clock starts; its live keys are a
window ``[lo, hi)``: insert takes ``hi``, delete takes ``lo``, select and update
pick a key inside. The default mix is ``select=80,update=20``; the window's rows
are deleted when the worker ends. Every request of a worker shares
``connections`` connections (one by default: surge pipelines the queries of
many coroutines on it).
"""

from __future__ import annotations

import asyncio
import inspect
import random
import re
from collections.abc import Callable
from typing import Any

from surge.load.driver import DriverTarget, engine_error_kind, mix_ops
from surge.load.recorder import Recorder
from surge.load.target import LoadConfig, LoadError, register

#: Operations of the PostgreSQL workload, and the default mixes.
OPS = ("query", "select", "insert", "update", "delete")
DEFAULT_MIX = {"select": 80.0, "update": 20.0}
QUERY_MIX = {"query": 1.0}
#: Table names we accept (they go into the SQL text).
IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,62}")


def check(config: LoadConfig) -> list[str]:
    """The run's operations; `LoadError` for a mix or a table name that cannot run."""
    if not IDENT.fullmatch(config.table):
        raise LoadError(f"bad --table {config.table!r}: want a plain SQL identifier")
    ops = mix_ops("PostgreSQL", OPS, mix_of(config), DEFAULT_MIX)
    if "query" in ops and not config.query:
        raise LoadError("the PostgreSQL operation 'query' needs --query 'SELECT ...'")
    return ops


def mix_of(config: LoadConfig) -> dict[str, float]:
    """The run's mix: --mix, else the query alone if --query, else select=80,update=20."""
    return config.mix or (QUERY_MIX if config.query else DEFAULT_MIX)


def error_kind(exc: BaseException) -> str:
    """The report's error kind for a driver exception."""
    import surge.postgres as pg

    db_errors = tuple(
        c
        for c in (getattr(pg, n, None) for n in ("PostgresError", "DatabaseError", "ServerError"))
        if isinstance(c, type) and issubclass(c, BaseException)
    )
    if (db_errors and isinstance(exc, db_errors)) or getattr(exc, "sqlstate", None):
        return "db_error"
    return engine_error_kind(exc)


def _connect_kwargs(connect: Callable[..., Any], config: LoadConfig) -> dict[str, Any]:
    """The timeouts `connect` takes, by the names surge's drivers use (asyncpg's
    ``command_timeout`` for the request timeout)."""
    try:
        params = inspect.signature(connect).parameters
    except (TypeError, ValueError):
        return {}
    wanted = {
        "connect_timeout": config.connect_timeout,
        "command_timeout": config.timeout,
        "request_timeout": config.timeout,
    }
    return {k: v for k, v in wanted.items() if k in params}


@register("postgresql", "postgres")
class PostgresTarget(DriverTarget):
    """A query, or a CRUD mix on one table, through surge's PostgreSQL driver."""

    protocol = "PostgreSQL"
    default_port = 5432
    example = "postgresql://user@host:port/db"

    @classmethod
    def operations(cls, config: LoadConfig) -> list[str]:
        return check(config)

    def __init__(self, config: LoadConfig, recorder: Recorder) -> None:
        super().__init__(config, recorder)
        import surge.postgres

        self._connect = surge.postgres.connect
        self._use_mix(self.operations(config), mix_of(config))
        self.table = table = config.table
        self.query = config.query
        # Placeholders until prepare() connects.
        self.conns: list[Any] = [None] * (config.connections or 1)
        rng = random.Random()
        # 56-bit random base: workers and runs never share keys.
        self.base = self.lo = self.hi = rng.getrandbits(40) << 16
        self._rand = rng.random
        self._data = "x" * config.tuple_size
        self._sql = {
            "select": f"SELECT id, n, data FROM {table} WHERE id = $1",
            "insert": f"INSERT INTO {table} (id, data) VALUES ($1, $2)",
            "update": f"UPDATE {table} SET n = n + 1 WHERE id = $1",
            "delete": f"DELETE FROM {table} WHERE id = $1",
        }
        self._issue: dict[str, Callable[[Any], Any]] = {
            "query": self._query,
            "select": self._select,
            "insert": self._insert,
            "update": self._update,
            "delete": self._delete,
        }

    async def _setup(self) -> None:
        kw = _connect_kwargs(self._connect, self.config)
        for i in range(len(self.conns)):
            conn: Any = self._connect(self.config.target, **kw)
            if inspect.isawaitable(conn):  # `await connect(dsn)`, as asyncpg
                conn = await asyncio.wait_for(conn, self.config.connect_timeout)
            self.conns[i] = conn
        if self.ops == ["query"]:
            return
        first = self.conns[0]
        await self._create_table(first)
        n = self.config.prefill
        if n > 0:
            await first.execute(
                f"INSERT INTO {self.table} (id, data) "
                "SELECT g, $2 FROM generate_series($1::bigint, $1::bigint + $3 - 1) AS g",
                self.hi,
                self._data,
                n,
            )
            self.hi += n

    async def _create_table(self, conn: Any) -> None:
        sql = (
            f"CREATE TABLE IF NOT EXISTS {self.table} "
            "(id bigint PRIMARY KEY, n bigint NOT NULL DEFAULT 0, data text NOT NULL)"
        )
        try:
            await conn.execute(sql)
        except Exception as exc:
            # Two workers creating it at once: one loses on the catalog's unique index.
            if self.classify(exc) != "db_error":
                raise
            await asyncio.sleep(0.1)
            await conn.execute(sql)

    # -- the operations -----------------------------------------------------------------

    def _key(self) -> int:
        span = self.hi - self.lo
        return self.lo + int(self._rand() * span) if span > 0 else self.lo

    def _query(self, conn: Any) -> Any:
        return conn.fetch(self.query)

    def _select(self, conn: Any) -> Any:
        return conn.fetchrow(self._sql["select"], self._key())

    def _insert(self, conn: Any) -> Any:
        key = self.hi
        self.hi += 1
        return conn.execute(self._sql["insert"], key, self._data)

    def _update(self, conn: Any) -> Any:
        return conn.execute(self._sql["update"], self._key())

    def _delete(self, conn: Any) -> Any:
        key = self.lo
        if self.lo < self.hi:
            self.lo += 1
        return conn.execute(self._sql["delete"], key)

    def classify(self, exc: BaseException) -> str:
        return error_kind(exc)

    async def _cleanup(self) -> None:
        if self.ops == ["query"]:
            return
        # The worker's rows go: a long insert-heavy run leaves no table behind it.
        await self.conns[0].execute(
            f"DELETE FROM {self.table} WHERE id >= $1 AND id < $2", self.base, self.hi
        )
