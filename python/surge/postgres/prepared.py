"""`PreparedStatement`: asyncpg's handle on a prepared query. It shares the
connection's statement cache: if the cache evicts (closes) the statement, the
next use prepares it again transparently."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NamedTuple

from surge._core import Record, Statement
from surge.postgres.session import RowMode
from surge.postgres.types import type_name

if TYPE_CHECKING:
    from surge.postgres.session import Session


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

    __slots__ = ("_query", "_session", "_stmt")

    def __init__(self, session: Session, query: str, stmt: Statement) -> None:
        self._session = session
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
        return await self._session.run(self._query, args, RowMode.ALL, 0, timeout)  # type: ignore[no-any-return]

    async def fetchrow(self, *args: Any, timeout: float | None = None) -> Record | None:
        """The first row, or None."""
        return await self._session.run(self._query, args, RowMode.FIRST, 0, timeout)  # type: ignore[no-any-return]

    async def fetchval(self, *args: Any, column: int = 0, timeout: float | None = None) -> Any:
        """Column ``column`` of the first row, or None."""
        return await self._session.run(self._query, args, RowMode.VALUE, column, timeout)

    async def execute(self, *args: Any, timeout: float | None = None) -> str:
        """Run it; returns the status (``"UPDATE 3"``)."""
        return await self._session.run(self._query, args, RowMode.STATUS, 0, timeout)  # type: ignore[no-any-return]

    async def executemany(self, args: Any, *, timeout: float | None = None) -> None:
        """Run it for each argument sequence, in one implicit transaction."""
        arglist = list(args)
        if arglist:
            await self._session.run_many(self._query, arglist, timeout)

    def __repr__(self) -> str:
        return f"<PreparedStatement {self._query!r}>"
