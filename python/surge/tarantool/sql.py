"""`execute`'s result, `SQLResult`, readable under surge's names (`rows`,
`columns`, `row_count`) and under asynctnt's `Response` names (`body`,
`rowcount`, `metadata.fields`, `autoincrement_ids`, `code`, `sync`, ...); and
`prepare`'s `PreparedStatement`, asynctnt's."""

from __future__ import annotations

from collections.abc import Generator, Iterator
from typing import TYPE_CHECKING, Any

from surge.errors import InterfaceError

if TYPE_CHECKING:
    from surge.tarantool.connection import Connection

# IPROTO_FIELD_* keys of a column's metadata map.
_NAME, _TYPE, _COLLATION, _IS_NULLABLE, _IS_AUTOINCREMENT, _SPAN = range(6)


class Field:
    """One result column's metadata (asynctnt's ``Field``)."""

    __slots__ = ("collation", "is_autoincrement", "is_nullable", "name", "span", "type")

    def __init__(self, meta: dict) -> None:
        self.name: str | None = meta.get(_NAME)
        self.type: str | None = meta.get(_TYPE)
        self.collation: str | None = meta.get(_COLLATION)
        self.is_nullable: bool | None = meta.get(_IS_NULLABLE)
        self.is_autoincrement: bool | None = meta.get(_IS_AUTOINCREMENT)
        self.span: str | None = meta.get(_SPAN)

    def __repr__(self) -> str:
        return f"<Field name={self.name} type={self.type} is_nullable={self.is_nullable}>"


class Metadata(list):  # type: ignore[type-arg]
    """The columns' metadata maps as the server sent them (a list, as surge gave
    them before), with asynctnt's ``fields`` and ``name_id_map``."""

    @property
    def fields(self) -> list[Field]:
        """A `Field` per column."""
        return [Field(m) for m in self]

    @property
    def name_id_map(self) -> dict[str, int]:
        """Column name -> position."""
        return {m.get(_NAME): i for i, m in enumerate(self)}

    def __repr__(self) -> str:
        return f"<Metadata [fields_count={len(self)}]>"


class SQLResult:
    """An `execute` result: rows (with column names) or the affected row count.

    asynctnt's `Response` attributes have its values: ``body`` and ``metadata``
    are None for a statement that returns no rows, ``autoincrement_ids`` None
    when none were made; ``code``/``return_code`` 0, ``errmsg``/``error`` None
    (a failed request raises), ``done()`` True."""

    __slots__ = (
        "_has_rows",
        "autoincrement_ids",
        "metadata",
        "params",
        "params_count",
        "row_count",
        "rows",
        "schema_id",
        "stmt_id",
        "sync",
    )

    #: Always 0: a failed request raises instead of giving a result.
    code = 0
    return_code = 0
    errmsg = None
    error = None
    #: asynctnt's: the encoding strings are decoded with.
    encoding = b"utf-8"

    def __init__(self, reply: dict, schema_id: int | None = None) -> None:
        meta = reply.get("metadata")
        self.metadata = None if meta is None else Metadata(meta)
        self._has_rows = "rows" in reply
        self.rows = reply.get("rows", [])
        info = reply.get("sql_info") or {}
        self.row_count = info.get(0, len(self.rows))
        self.autoincrement_ids = info.get(1)
        self.stmt_id = reply.get("stmt_id") or 0
        #: A prepared statement's parameters (a `prepare_iproto` reply's only, as
        #: asynctnt's; `execute` never has them).
        bind = reply.get("bind_metadata")
        self.params = None if bind is None else Metadata(bind)
        self.params_count: int = reply.get("bind_count", 0)
        #: The request's id on its connection (asynctnt's).
        self.sync: int = reply.get("sync", 0)
        #: The schema version the reply carries (the new one after DDL, as
        #: asynctnt's); else the connection's when the reply came.
        sid = reply.get("schema_id", schema_id)
        self.schema_id = -1 if sid is None else sid

    @property
    def columns(self) -> list[str]:
        """Column names."""
        return [m.get(_NAME) for m in self.metadata or ()]

    @property
    def body(self) -> list | None:
        """The rows; None for a statement that returns none (asynctnt's)."""
        return self.rows if self._has_rows else None

    @property
    def rowcount(self) -> int:
        """Rows returned or changed (asynctnt's name for `row_count`)."""
        return int(self.row_count)

    def done(self) -> bool:
        """True: the result is complete (asynctnt's)."""
        return True

    def __iter__(self) -> Iterator[Any]:
        return iter(self.rows)

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, i: int) -> Any:
        return self.rows[i]

    def __repr__(self) -> str:
        return f"<SQLResult rows={len(self.rows)} row_count={self.row_count}>"


class PreparedStatement:
    """An SQL statement to prepare on the server, asynctnt's (`Connection.prepare`):
    ``async with`` prepares it and unprepares it after; `prepare`, `execute` and
    `unprepare` one by one. Awaiting it prepares it and gives its id, as surge's
    ``await conn.prepare(sql)`` always did."""

    __slots__ = ("_conn", "_params", "_params_count", "_query", "_stmt_id", "_timeout")

    def __init__(self, conn: Connection, query: str, timeout: float | None = None) -> None:
        self._conn = conn
        self._query = query
        self._timeout = timeout
        self._stmt_id: int | None = None
        self._params: Metadata | None = None
        self._params_count = 0

    @property
    def id(self) -> int | None:
        """The statement's id on the server; None until prepared."""
        return self._stmt_id

    @property
    def params(self) -> Metadata | None:
        """The parameters' metadata, once prepared."""
        return self._params

    @property
    def params_count(self) -> int:
        """How many parameters the statement binds, once prepared."""
        return self._params_count

    async def prepare(self, timeout: float | None = None) -> int:
        """Prepare the statement; its id."""
        reply = await self._conn.prepare_iproto(self._query, timeout=timeout)
        self._stmt_id = reply.stmt_id
        self._params = reply.params
        self._params_count = reply.params_count
        return reply.stmt_id

    async def execute(
        self, args: Any = None, *, parse_metadata: bool = True, timeout: float | None = None
    ) -> SQLResult:
        """Run the prepared statement with ``args`` (positional or named)."""
        if self._stmt_id is None:
            raise InterfaceError("the statement is not prepared: await stmt.prepare() first")
        return await self._conn.execute(self._stmt_id, args, timeout=timeout)

    async def unprepare(self, timeout: float | None = None) -> None:
        """Drop the statement on the server."""
        if self._stmt_id is not None:
            await self._conn.unprepare_iproto(self._stmt_id, timeout=timeout)
            self._stmt_id = None

    def __await__(self) -> Generator[Any, None, int]:
        return self.prepare(self._timeout).__await__()

    async def __aenter__(self) -> PreparedStatement:
        if self._stmt_id is None:
            await self.prepare(self._timeout)
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.unprepare(self._timeout)
