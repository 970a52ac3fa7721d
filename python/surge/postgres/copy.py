"""COPY: records in the binary format (encoded in Rust), and raw data to and
from files.

Records are streamed: encoded into CopyData messages of about `COPY_CHUNK`
bytes, each written out as soon as it is made, so the server works on one while
the next is encoded; between them the transport's back-pressure is minded and
other coroutines run. While the data streams, requests that others make wait
in the codec and follow the COPY (see ``crates/surge-py/src/postgres/copy_in.rs``).
A record that cannot be encoded, a cancellation or a timeout ends the stream
with CopyFail: the server drops the COPY (nothing of it is written) and the
connection goes on. Raw data (`copy_in`) goes in one request with its COPY.
"""

from __future__ import annotations

import asyncio
import inspect
import ipaddress
import os
from collections.abc import AsyncIterable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

from surge.errors import InterfaceError, RequestTimeoutError
from surge.postgres._sqlstate import InsufficientPrivilegeError
from surge.postgres.errors import InvalidArgumentError, PostgresError
from surge.postgres.session import RowMode
from surge.postgres.types import type_oid

if TYPE_CHECKING:
    from surge.postgres.session import Session

#: COPY formats (asyncpg's ``format=`` values).
FORMATS = ("text", "csv", "binary")

#: Bytes of records per CopyData message, each written out as it is made: the
#: server starts on the first while the next is encoded (asyncpg writes 512 KiB,
#: as here). 512 KiB rather than 256: a backend that has used up a chunk waits in
#: recv for the next, and half as many chunks is half as many of those waits and
#: of the client's turns through the loop. Binary COPY of 100k rows (int4, text,
#: float8), 10 connections, uvloop, A/B 4 rounds: 1.02x COPYs/s, server CPU
#: 28.8 -> 28.3 ms and client CPU 10.6 -> 9.0 ms per COPY.
COPY_CHUNK = 512 * 1024
#: Records of an asynchronous iterable taken before they are encoded together.
ASYNC_BATCH = 1024
#: CopyFail's reason when the records fail on the client (the exception itself
#: is raised to the caller; its text, which may hold data, stays out of the
#: server's log).
ABORTED = "COPY aborted by the client: {}"

#: Each column's name, its type with domains resolved to their base type, that
#: type's name for a cast, and its binary send function.
_COLUMN_TYPES = (
    "WITH RECURSIVE base(attnum, oid) AS ("
    "  SELECT a.attnum, a.atttypid FROM pg_catalog.pg_attribute a"
    "  WHERE a.attrelid = $1::text::regclass AND a.attnum > 0 AND NOT a.attisdropped"
    "  UNION ALL SELECT b.attnum, t.typbasetype FROM base b"
    "  JOIN pg_catalog.pg_type t ON t.oid = b.oid WHERE t.typtype = 'd')"
    " SELECT a.attname, b.oid::int8, a.atttypid::regtype::text, t.typsend::text"
    " FROM base b JOIN pg_catalog.pg_type t ON t.oid = b.oid"
    " JOIN pg_catalog.pg_attribute a ON a.attrelid = $1::text::regclass"
    "  AND a.attnum = b.attnum"
    " WHERE t.typtype <> 'd' ORDER BY a.attnum"
)
#: The statement whose columns are a COPY's (see `_probed_columns`).
PROBE = "SELECT {} FROM {} LIMIT 0"
#: Probes the role may not run, remembered per connection (then forgotten all at once).
MAX_FAILED_PROBES = 64
#: bytea: the COPY stream carries no type ids, so a value the server already put
#: in its binary form goes in as raw bytes.
_RAW = type_oid("bytea")


def _q(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def qualified(table: str, schema: str | None, columns: Sequence[str] | None) -> str:
    """``"schema"."table" ("a", "b")`` for a COPY statement."""
    t = (_q(schema) + "." if schema else "") + _q(table)
    if columns:
        t += " (" + ", ".join(_q(c) for c in columns) + ")"
    return t


def _literal(v: str) -> str:
    return "'" + str(v).replace("'", "''") + "'"


def _columns(v: bool | Sequence[str], star: bool) -> str:
    if v is True and star:
        return "*"
    return "(" + ", ".join(_q(c) for c in v) + ")"  # type: ignore[union-attr]


def options(
    format: str | None = None,
    *,
    oids: bool | None = None,
    freeze: bool | None = None,
    delimiter: str | None = None,
    null: str | None = None,
    header: bool | None = None,
    quote: str | None = None,
    escape: str | None = None,
    force_quote: bool | Sequence[str] | None = None,
    force_not_null: Sequence[str] | None = None,
    force_null: Sequence[str] | None = None,
    encoding: str | None = None,
) -> str:
    """A COPY statement's option list from asyncpg's keywords (`` (FORMAT csv,
    HEADER true)``); options left None are not sent."""
    parts = []
    if format is not None:
        if format not in FORMATS:
            raise InterfaceError(f"COPY format is one of {FORMATS}, not {format!r}")
        parts.append(f"FORMAT {format}")
    for name, flag in (("OIDS", oids), ("FREEZE", freeze), ("HEADER", header)):
        if flag is not None:
            parts.append(f"{name} {'true' if flag else 'false'}")
    for name, text in (
        ("DELIMITER", delimiter),
        ("NULL", null),
        ("QUOTE", quote),
        ("ESCAPE", escape),
        ("ENCODING", encoding),
    ):
        if text is not None:
            parts.append(f"{name} {_literal(text)}")
    if force_quote:
        parts.append("FORCE_QUOTE " + _columns(force_quote, star=True))
    for name, cols in (("FORCE_NOT_NULL", force_not_null), ("FORCE_NULL", force_null)):
        if cols:
            parts.append(f"{name} {_columns(cols, star=False)}")
    return f" ({', '.join(parts)})" if parts else ""


async def records_to_table(
    s: Session,
    table: str,
    records: Iterable[Sequence[Any]] | AsyncIterable[Sequence[Any]],
    columns: Sequence[str] | None,
    schema: str | None,
    timeout: Any,
    where: str | None = None,
) -> str:
    """COPY records in, binary, streamed: column types from a probe or the
    catalog; ``where`` keeps the rows it matches (COPY ... WHERE, PostgreSQL 12+)."""
    s.copies += 1
    try:
        rel = (_q(schema) + "." if schema else "") + _q(table)
        probed = await _probed_columns(s, rel, columns, timeout)
        if probed is None:
            names, oids, records = await _catalog_columns(s, rel, columns, records, timeout)
        else:
            names, oids = probed
        sql = f"COPY {qualified(table, schema, names)} FROM STDIN (FORMAT binary)"
        if where:
            sql += f" WHERE {where}"
        async with s.copy_lock:
            return await _stream(s, sql, oids, records, timeout)
    finally:
        s.copies -= 1


async def _catalog_columns(
    s: Session,
    rel: str,
    columns: Sequence[str] | None,
    records: Iterable[Sequence[Any]] | AsyncIterable[Sequence[Any]],
    timeout: Any,
) -> tuple[list[str], list[int], Iterable[Sequence[Any]] | AsyncIterable[Sequence[Any]]]:
    """The COPY's column names and types from the catalog, and its records: as
    given, or with the values of types that have no binary codec here (enums,
    inet, ...) put in their binary form by the server."""
    rows = await s.run(_COLUMN_TYPES, (rel,), RowMode.ALL, 0, timeout)
    types = {r[0]: (int(r[1]), r[2], r[3]) for r in rows}
    names = list(columns) if columns else [r[0] for r in rows]
    missing = [c for c in names if c not in types]
    if missing:
        raise InterfaceError(f"no column(s) {missing} in {rel}")
    oids = [types[c][0] for c in names]
    unknown = [o for o, ok in zip(oids, s.codec.known_types(oids), strict=True) if not ok]
    if unknown:
        # Enums, composites, ranges ... : looked up once, then encoded here.
        await s.introspect(unknown)
    known = s.codec.known_types(oids)
    if not all(known):
        if isinstance(records, AsyncIterable):
            records = [r async for r in records]
        rewritten: list[list[Any]] = [list(r) for r in records]
        for i, ok in enumerate(known):
            if not ok:
                _, cast, send = types[names[i]]
                await _server_encoded(s, rewritten, i, cast, send, timeout)
                oids[i] = _RAW
        records = rewritten
    return names, oids, records


async def _probed_columns(
    s: Session, rel: str, columns: Sequence[str] | None, timeout: Any
) -> tuple[list[str], list[int]] | None:
    """The COPY's column names and types, from a statement that selects them
    (`PROBE`), run afresh for each COPY; None: ask the catalog (`_COLUMN_TYPES`).

    The catalog query cost the server about 1.1M instructions per COPY (a
    recursive CTE over pg_attribute and pg_type, planned again and again) where
    the probe costs 26k (callgrind on a PostgreSQL 15 backend), the rest of a
    100k-row COPY being some 277M. The probe is as safe: its cached plan is
    checked on every run, so a column whose type changed since it was prepared
    fails it (``cached plan must not change result type``: `Session.run`
    prepares it again), and its RowDescription gives domains as their base
    type, as the catalog query does. Not used in a transaction (a failed probe
    would abort it), for a query the statement cache does not keep, or when a
    column's type has no binary codec here (the catalog path has what the
    server must encode then). A probe that failed (no such table or column)
    leaves the error to the catalog path; one that the role may not run (no
    SELECT privilege) is not tried again on this connection."""
    if s.tx is not None or s.codec.transaction_status != "I":
        return None
    probe = PROBE.format(", ".join(_q(c) for c in columns) if columns else "*", rel)
    if probe in s.failed_probes or not s.cache.keeps(probe):
        return None
    try:
        await s.run(probe, (), RowMode.STATUS, 0, timeout)
    except InsufficientPrivilegeError:
        # COPY needs INSERT only: this role goes to the catalog from now on.
        if len(s.failed_probes) >= MAX_FAILED_PROBES:
            s.failed_probes.clear()
        s.failed_probes.add(probe)
        return None
    except PostgresError:
        return None  # no such table or column: the catalog path says which
    stmt = s.cache.get(probe)
    if stmt is None:
        return None
    names = [c[0] for c in stmt.columns]
    oids = [c[1] for c in stmt.columns]
    if not all(s.codec.known_types(oids)):
        return None
    return (list(columns) if columns else names), oids


async def _stream(
    s: Session,
    sql: str,
    oids: list[int],
    records: Iterable[Sequence[Any]] | AsyncIterable[Sequence[Any]],
    timeout: Any,
) -> str:
    """Send the COPY, then its records a chunk at a time; its status. ``timeout``
    (None: ``command_timeout``) bounds it all, the records' own waits included."""
    codec, engine = s.codec, s.engine
    t = engine.request_timeout if timeout is None else timeout
    loop = asyncio.get_running_loop()
    deadline = None if t is None else loop.time() + t
    reply = await s.send_now(codec.copy_records_start, sql, oids, timeout=timeout)
    sid = codec.copy_stream
    assert sid is not None
    try:
        async with asyncio.timeout_at(deadline):
            if isinstance(records, AsyncIterable):
                n = 0
                batch: list[Sequence[Any]] = []
                async for rec in records:
                    batch.append(rec)
                    if len(batch) >= ASYNC_BATCH:
                        n = await _put(s, sid, reply, iter(batch), n)
                        batch = []
                        if reply.done():
                            break
                if batch and not reply.done():
                    await _put(s, sid, reply, iter(batch), n)
            else:
                if not isinstance(records, (list, tuple)):
                    records = iter(records)  # read from where it stands, call after call
                await _put(s, sid, reply, records, 0)
    except BaseException as e:
        # A bad record, a cancellation, a timeout: the server drops the COPY.
        codec.copy_end(sid, ABORTED.format(type(e).__name__))
        engine.flush()
        reply.add_done_callback(_retrieve)
        if isinstance(e, TimeoutError) and not isinstance(e, RequestTimeoutError):
            raise RequestTimeoutError(f"COPY not done within the timeout ({t} s)") from None
        raise
    # Done, or the COPY failed already (the server's error, a timeout, the
    # connection lost): the server ignores the CopyFail then.
    codec.copy_end(sid, ABORTED.format("stopped") if reply.done() else None)
    engine.flush()
    return str(await reply)


async def _put(s: Session, sid: int, reply: asyncio.Future[Any], records: Any, n: int) -> int:
    """Records into stream ``sid`` (a list or tuple from index ``n``, or an iterator
    numbered from ``n``), a chunk per write; the next record's number. A last
    piece under a chunk stays buffered for what follows (more records, the end)."""
    codec, engine = s.codec, s.engine
    while not reply.done():
        n, ran_out = codec.copy_records_data(sid, records, n, COPY_CHUNK)
        if codec.pending() >= COPY_CHUNK:
            engine.flush()
            # Others run (their replies, their COPYs on other connections) ...
            await asyncio.sleep(0)
            # ... and the transport's back-pressure holds the next chunk back.
            await engine.writable()
        if ran_out:
            break
    return n


def _retrieve(fut: asyncio.Future[Any]) -> None:
    if not fut.cancelled():
        fut.exception()


def _as_text(v: Any) -> str:
    # str as the type's text form; ints and ipaddress objects have exact text.
    if isinstance(v, str):
        return v
    if isinstance(v, int) and not isinstance(v, bool):
        return str(v)
    if isinstance(v, (ipaddress.IPv4Address, ipaddress.IPv6Address)):
        return str(v)
    if isinstance(v, (ipaddress.IPv4Network, ipaddress.IPv6Network)):
        return str(v)
    if isinstance(v, (ipaddress.IPv4Interface, ipaddress.IPv6Interface)):
        return str(v)
    raise InvalidArgumentError(
        f"a {type(v).__name__} for a column without a binary codec here: pass its text as str"
    )


async def _server_encoded(
    s: Session, records: list[list[Any]], i: int, cast: str, send: str, timeout: Any
) -> None:
    """Column ``i`` of ``records`` (types without a binary codec here: enums,
    inet, ...) replaced by the server's binary form of each value, in one query."""
    texts = []
    for n, r in enumerate(records):
        if len(r) <= i:
            raise InvalidArgumentError(f"record {n} has {len(r)} values")
        texts.append(None if r[i] is None else _as_text(r[i]))
    sql = (
        f"SELECT {send}(v.x::{cast}) FROM unnest($1::text[]) WITH ORDINALITY AS v(x, n)"
        " ORDER BY v.n"
    )
    binary = await s.run(sql, (texts,), RowMode.ALL, 0, timeout)
    for r, b in zip(records, binary, strict=True):
        r[i] = b[0]


async def copy_out(s: Session, target: str, output: Any, opts: str, timeout: Any) -> str:
    """COPY ``target`` TO STDOUT (with `options` ``opts``) and hand the data to ``output``."""
    sql = f"COPY {target} TO STDOUT{opts}"
    status, data = await s.send(s.codec.copy_out, sql, timeout=timeout)
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
    s: Session, target: str, source: Any, opts: str, where: str | None, timeout: Any
) -> str:
    """COPY ``target`` FROM STDIN (with `options` ``opts``) with all of ``source``:
    bytes, a path, a file object, or an (async) iterable of bytes."""
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
    elif hasattr(source, "__aiter__"):
        data = b"".join([bytes(chunk) async for chunk in source])
    elif hasattr(source, "__iter__"):
        data = b"".join(bytes(chunk) for chunk in source)
    else:
        raise InterfaceError("source is bytes, a path, a file object or an iterable of bytes")
    sql = f"COPY {target} FROM STDIN{opts}" + (f" WHERE {where}" if where else "")
    return str(await s.send(s.codec.copy_in, sql, data, timeout=timeout))
