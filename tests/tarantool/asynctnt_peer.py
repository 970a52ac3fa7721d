"""asynctnt beside surge.tarantool on one server, for the tests that run a ported
program through both and compare: the two connections made by one call, and
replies read as plain lists."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import asynctnt
import surge.tarantool
from surge import services


@asynccontextmanager
async def both(
    tnt: services.Service, space: str, create: str, fill: str = "", **kw: Any
) -> AsyncIterator[tuple[Any, Any]]:
    """asynctnt's connection and surge's, made by the same call (``kw`` beside the
    server's host and port: asynctnt's keywords), to the space the Lua ``create``
    makes (and ``fill`` fills); the space is dropped after."""
    kw = {"host": tnt.host, "port": tnt.port, **kw}
    a = asynctnt.Connection(**kw)
    await a.connect()
    s = surge.tarantool.Connection(**kw)
    await s.connect()
    try:
        await a.eval(create)
        if fill:
            await a.eval(fill)
        await a.refetch_schema()
        await s.refetch_schema()
        yield a, s
    finally:
        await a.eval(f"box.space.{space}:drop()")
        await a.disconnect()
        await s.disconnect()


def plain(v: Any) -> Any:
    """A reply (asynctnt's `Response` or surge's), its tuples and what they hold,
    as plain lists and dicts: the two clients' replies compare equal this way."""
    if hasattr(v, "body") and hasattr(v, "code"):
        v = v.body
    if isinstance(v, dict):
        return {k: plain(x) for k, x in v.items()}
    if isinstance(v, list | tuple | asynctnt.TarantoolTuple | surge.tarantool.Tuple):
        return [plain(x) for x in v]
    return v
