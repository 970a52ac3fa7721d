"""COPY: records in the binary format (encoded in Rust), and raw data to and
from files. The data of one COPY goes in one request: the codec sends the COPY
and its CopyData together without waiting for CopyInResponse (pipelined like
everything else); if the COPY fails, the server skips that data."""

from __future__ import annotations

import inspect
import os
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from surge.errors import InterfaceError

if TYPE_CHECKING:
    from surge.postgres.connection import Connection

#: COPY formats (asyncpg's ``format=`` values).
FORMATS = ("text", "csv", "binary")

_COLUMN_TYPES = (
    "SELECT a.attname, a.atttypid::int8 FROM pg_catalog.pg_attribute a"
    " WHERE a.attrelid = $1::text::regclass AND a.attnum > 0 AND NOT a.attisdropped"
    " ORDER BY a.attnum"
)


def _q(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def qualified(table: str, schema: str | None, columns: Sequence[str] | None) -> str:
    """``"schema"."table" ("a", "b")`` for a COPY statement."""
    t = (_q(schema) + "." if schema else "") + _q(table)
    if columns:
        t += " (" + ", ".join(_q(c) for c in columns) + ")"
    return t


def _options(format: str | None) -> str:
    if format is None:
        return ""
    if format not in FORMATS:
        raise InterfaceError(f"COPY format is one of {FORMATS}, not {format!r}")
    return f" (FORMAT {format})"


async def records_to_table(
    conn: Connection,
    table: str,
    records: Iterable[Sequence[Any]],
    columns: Sequence[str] | None,
    schema: str | None,
    timeout: Any,
) -> str:
    """COPY records in, binary: column types come from the catalog."""
    rel = (_q(schema) + "." if schema else "") + _q(table)
    rows = await conn.fetch(_COLUMN_TYPES, rel, timeout=timeout)
    types = {r[0]: int(r[1]) for r in rows}
    names = list(columns) if columns else [r[0] for r in rows]
    missing = [c for c in names if c not in types]
    if missing:
        raise InterfaceError(f"no column(s) {missing} in {rel}")
    sql = f"COPY {qualified(table, schema, names)} FROM STDIN (FORMAT binary)"
    oids = [types[c] for c in names]
    s = conn._session
    status = await s.send(s.codec.copy_records, sql, oids, records, timeout=timeout)
    return str(status)


async def copy_out(
    conn: Connection, target: str, output: Any, format: str | None, timeout: Any
) -> str:
    """COPY ``target`` TO STDOUT and hand the data to ``output``."""
    sql = f"COPY {target} TO STDOUT{_options(format)}"
    status, data = await conn._session.send(conn._session.codec.copy_out, sql, timeout=timeout)
    if isinstance(output, (str, os.PathLike)):
        with open(output, "wb") as f:
            f.write(data)
    elif hasattr(output, "write"):
        r = output.write(data)
        if inspect.isawaitable(r):
            await r
    elif callable(output):
        r = output(data)
        if inspect.isawaitable(r):
            await r
    else:
        raise InterfaceError("output is a path, a file object or a callable")
    return str(status)


async def copy_in(
    conn: Connection, target: str, source: Any, format: str | None, timeout: Any
) -> str:
    """COPY ``target`` FROM STDIN with all of ``source``."""
    if isinstance(source, (bytes, bytearray, memoryview)):
        data = bytes(source)
    elif isinstance(source, (str, os.PathLike)):
        with open(source, "rb") as f:
            data = f.read()
    elif hasattr(source, "read"):
        data = source.read()
        if inspect.isawaitable(data):
            data = await data
        if isinstance(data, str):
            data = data.encode()
    else:
        raise InterfaceError("source is bytes, a path or a file object")
    sql = f"COPY {target} FROM STDIN{_options(format)}"
    return str(await conn._session.send(conn._session.codec.copy_in, sql, data, timeout=timeout))
