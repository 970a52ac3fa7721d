"""`PreparedStatement`: asyncpg's handle on a prepared query. It shares the
connection's statement cache: if the cache evicts (closes) the statement, the
next use prepares it again transparently."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from surge._core import Record, Statement
from surge.postgres.session import RowMode
from surge.postgres.types import Attribute, Type, type_name

if TYPE_CHECKING:
    from surge.postgres.session import Session

#: How a statement opens a cursor or a transaction: the connection's own
#: `cursor` and `transaction` methods, handed down (this module sits beside
#: cursor.py and transaction.py in the tree, it does not import them).
Opener = Callable[..., Any]


#: Each type's name, kind and schema as asyncpg reports them (an array is
#: named ``int4[]``; int2vector and oidvector count as arrays), for the oids in $1.
TYPES_QUERY = """
SELECT t.oid::int8,
    CASE WHEN t.typcategory = 'A' AND t.typelem <> 0
         THEN regexp_replace(t.typname::text, '^_', '') || '[]' ELSE t.typname::text END,
    CASE WHEN t.typcategory = 'A' AND t.typelem <> 0 THEN 'array'
         WHEN t.typtype = 'c' THEN 'composite' WHEN t.typtype = 'r' THEN 'range'
         WHEN t.typtype = 'm' THEN 'multirange' ELSE 'scalar' END,
    n.nspname::text
FROM pg_catalog.pg_type t
JOIN pg_catalog.pg_namespace n ON n.oid = t.typnamespace
WHERE t.oid = ANY($1::oid[])
"""


class PreparedStatement:
    """A prepared query: run it with arguments, inspect its types."""

    __slots__ = (
        "_cursor",
        "_query",
        "_record_class",
        "_session",
        "_statusmsg",
        "_stmt",
        "_transaction",
        "_types",
    )

    def __init__(
        self,
        session: Session,
        query: str,
        stmt: Statement,
        types: Mapping[int, Type] | None = None,
        cursor: Opener | None = None,
        transaction: Opener | None = None,
        record_class: type[Record] | None = None,
    ) -> None:
        self._session = session
        self._record_class = record_class
        self._statusmsg: str | None = None
        self._query = query
        self._stmt = stmt
        self._types = types or {}
        self._cursor = cursor
        self._transaction = transaction

    def _type(self, oid: int) -> Type:
        return self._types.get(oid) or Type(oid, type_name(oid))

    def get_query(self) -> str:
        """The query text."""
        return self._query

    def get_name(self) -> str:
        """The server-side statement name."""
        return str(self._stmt.name)

    def get_parameters(self) -> tuple[Type, ...]:
        """The parameter types the server inferred."""
        return tuple(self._type(o) for o in self._stmt.param_types)

    def get_attributes(self) -> tuple[Attribute, ...]:
        """The result columns."""
        return tuple(Attribute(n, self._type(o)) for n, o in self._stmt.columns)

    def get_statusmsg(self) -> str | None:
        """The command status of its last run (``"SELECT 3"``, ``"UPDATE 3"``), as
        asyncpg's: None before any, or when a fetchrow/fetchval stopped after its row."""
        return self._statusmsg

    async def _run(self, mode: RowMode, args: Any, column: int, timeout: float | None) -> Any:
        s = self._session
        mode_tagged = mode | RowMode.TAGGED
        got, self._statusmsg = await s.run(
            self._query, args, mode_tagged, column, timeout, self._record_class
        )
        return got

    async def fetch(self, *args: Any, timeout: float | None = None) -> list[Record]:
        """All rows."""
        return await self._run(RowMode.ALL, args, 0, timeout)  # type: ignore[no-any-return]

    async def fetchrow(self, *args: Any, timeout: float | None = None) -> Record | None:
        """The first row, or None."""
        return await self._run(RowMode.FIRST, args, 0, timeout)  # type: ignore[no-any-return]

    async def fetchval(
        self, *args: Any, column: int | str = 0, timeout: float | None = None
    ) -> Any:
        """Column ``column`` (its position or its name) of the first row, or None."""
        if isinstance(column, str):
            row = await self._run(RowMode.FIRST, args, 0, timeout)
            return None if row is None else row[column]
        return await self._run(RowMode.VALUE, args, column, timeout)

    async def execute(self, *args: Any, timeout: float | None = None) -> str:
        """Run it; returns the status (``"UPDATE 3"``)."""
        return await self._run(RowMode.STATUS, args, 0, timeout)  # type: ignore[no-any-return]

    async def fetchmany(self, args: Any, *, timeout: float | None = None) -> list[Record]:
        """The rows of each argument sequence, in order, in one transaction."""
        results: list[Record] = []
        tx = self._transaction() if self._transaction is not None else None
        assert tx is not None, "made by Connection.prepare"
        async with tx:
            for a in args:
                results += await self.fetch(*a, timeout=timeout)
        return results

    async def executemany(self, args: Any, *, timeout: float | None = None) -> None:
        """Run it for each argument sequence, in one implicit transaction."""
        arglist = list(args)
        if arglist:
            await self._session.run_many(self._query, arglist, timeout)

    def cursor(self, *args: Any, prefetch: int | None = None, timeout: float | None = None) -> Any:
        """Rows in pieces, inside a transaction, as `Connection.cursor`."""
        assert self._cursor is not None, "made by Connection.prepare"
        return self._cursor(
            self._query, *args, prefetch=prefetch, timeout=timeout, record_class=self._record_class
        )

    async def explain(self, *args: Any, analyze: bool = False) -> Any:
        """The plan as PostgreSQL's JSON (``EXPLAIN (FORMAT JSON, VERBOSE)``), parsed;
        with ``analyze`` the statement runs, in a transaction rolled back after."""
        sql = "EXPLAIN (FORMAT JSON, VERBOSE" + (", ANALYZE) " if analyze else ") ") + self._query
        if not analyze:
            plan = await self._session.run(sql, args, RowMode.VALUE, 0, None)
            return json.loads(plan)
        assert self._transaction is not None, "made by Connection.prepare"
        tx = self._transaction()
        await tx.start()
        try:
            plan = await self._session.run(sql, args, RowMode.VALUE, 0, None)
        finally:
            await tx.rollback()
        return json.loads(plan)

    def __repr__(self) -> str:
        return f"<PreparedStatement {self._query!r}>"
