"""surge's connection beside asyncpg's, for the tests that compare the two."""

from __future__ import annotations

import functools
import struct
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import asyncpg
import surge.postgres as pg

#: A program written once against a driver module (``surge.postgres`` or
#: ``asyncpg``) and a DSN, returning what it saw.
Story = Callable[[Any, str], Awaitable[Any]]


@asynccontextmanager
async def both(dsn: str) -> AsyncIterator[tuple[Any, Any]]:
    """A surge connection and an asyncpg one to the same server."""
    s = await pg.connect(dsn)
    a = await asyncpg.connect(dsn)
    try:
        yield s, a
    finally:
        await a.close()
        await s.close()


def on_connection(story: Callable[[Any, Any], Awaitable[Any]]) -> Story:
    """A story over one connection of the module's own, opened for it and
    closed after it (also when it raises)."""

    @functools.wraps(story)
    async def run(mod: Any, dsn: str) -> Any:
        c = await mod.connect(dsn)
        try:
            return await story(mod, c)
        finally:
            await c.close()

    return run


async def same(dsn: str, story: Story) -> Any:
    """Runs ``story`` with asyncpg first, then with surge, and asserts that
    surge saw what asyncpg saw; returns it."""
    expected = await story(asyncpg, dsn)
    got = await story(pg, dsn)
    assert got == expected
    return got


async def tenfold_int4(c: Any, format: str = "text") -> None:
    """A codec on int4 whose work shows: values read are ten times the server's,
    values sent a tenth (in the text or the binary format)."""
    if format == "binary":
        enc: Callable[[int], Any] = lambda v: struct.pack("!i", v // 10)  # noqa: E731
        dec: Callable[[Any], int] = lambda b: struct.unpack("!i", b)[0] * 10  # noqa: E731
    else:
        enc, dec = (lambda v: str(v // 10)), (lambda s: int(s) * 10)
    await c.set_type_codec("int4", schema="pg_catalog", encoder=enc, decoder=dec, format=format)


def plain(v: Any) -> Any:
    """Rows and composites as tuples, ranges as their bounds, recursively
    (asyncpg's and surge's Records and Ranges are different classes)."""
    if isinstance(v, (asyncpg.Range, pg.Range)):
        return ("range", v.lower, v.upper, v.lower_inc, v.upper_inc, v.isempty)
    if isinstance(v, (asyncpg.Record, pg.Record, tuple)):
        return tuple(plain(x) for x in v)
    if isinstance(v, list):
        return [plain(x) for x in v]
    return v
