"""surge's connection beside asyncpg's, for the tests that compare the two."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import asyncpg
import surge.postgres as pg


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
