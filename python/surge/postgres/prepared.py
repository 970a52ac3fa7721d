"""`PreparedStatement`: asyncpg's handle on a prepared query. It shares the
connection's statement cache: if the cache evicts (closes) the statement, the
next use prepares it again transparently."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NamedTuple

from surge._core import Record, Statement
from surge.postgres.types import type_name

if TYPE_CHECKING:
    from surge.postgres.connection import Connection


class Type(NamedTuple):
    """A PostgreSQL type as a parameter or column has it."""

    oid: int
    name: str


class Attribute(NamedTuple):
    """A result column: its name and type."""

    name: str
    type: Type


class PreparedStatement:
    """A prepared query: run it with arguments, inspect its types."""

    __slots__ = ("_conn", "_query", "_stmt")

    def __init__(self, conn: Connection, query: str, stmt: Statement) -> None:
        self._conn = conn
        self._query = query
        self._stmt = stmt

    def get_query(self) -> str:
        """The query text."""
        return self._query

    def get_name(self) -> str:
        """The server-side statement name."""
        return str(self._stmt.name)

    def get_parameters(self) -> tuple[Type, ...]:
        """The parameter types the server inferred."""
        return tuple(Type(o, type_name(o)) for o in self._stmt.param_types)

    def get_attributes(self) -> tuple[Attribute, ...]:
        """The result columns."""
        return tuple(Attribute(n, Type(o, type_name(o))) for n, o in self._stmt.columns)

    async def fetch(self, *args: Any, timeout: float | None = None) -> list[Record]:
        """All rows."""
        return await self._conn._run(self._query, args, 0, 0, timeout)  # type: ignore[no-any-return]

    async def fetchrow(self, *args: Any, timeout: float | None = None) -> Record | None:
        """The first row, or None."""
        return await self._conn._run(self._query, args, 1, 0, timeout)  # type: ignore[no-any-return]

    async def fetchval(self, *args: Any, column: int = 0, timeout: float | None = None) -> Any:
        """Column ``column`` of the first row, or None."""
        return await self._conn._run(self._query, args, 2, column, timeout)

    async def execute(self, *args: Any, timeout: float | None = None) -> str:
        """Run it; returns the status (``"UPDATE 3"``)."""
        return await self._conn._run(self._query, args, 3, 0, timeout)  # type: ignore[no-any-return]

    async def executemany(self, args: Any, *, timeout: float | None = None) -> None:
        """Run it for each argument sequence, in one implicit transaction."""
        await self._conn.executemany(self._query, args, timeout=timeout)

    def __repr__(self) -> str:
        return f"<PreparedStatement {self._query!r}>"
