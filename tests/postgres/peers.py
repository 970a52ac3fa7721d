"""surge's connection beside asyncpg's, for the tests that compare the two."""

from __future__ import annotations

import functools
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
