"""asyncpg's query loggers: ``conn.add_query_logger(cb)`` calls ``cb(LoggedQuery)``
after each query a connection's own methods run (fetch, fetchrow, fetchval,
execute, executemany), whether it succeeded or failed.

Why a wrapper swapped in rather than a check in every query: with no logger
(the common case) a query pays nothing; `Connection` routes its queries
through `logged` only while a logger is registered.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Any, NamedTuple


class LoggedQuery(NamedTuple):
    """What a query logger is given (asyncpg's fields)."""

    query: str
    args: Any
    timeout: float | None
    #: Seconds from the call to the reply (or the error).
    elapsed: float
    #: The exception the query raised, or None.
    exception: BaseException | None
    #: ``(host, port)``, or a Unix socket's path.
    conn_addr: tuple[str, int] | str
    #: How the connection was made (surge's `ConnectParams`, where asyncpg gives its own).
    conn_params: Any


async def logged(
    run: Awaitable[Any],
    query: str,
    args: Any,
    timeout: float | None,
    conn_addr: tuple[str, int] | str,
    conn_params: Any,
    report: Callable[[LoggedQuery], None],
) -> Any:
    """Await ``run`` and ``report`` it as a `LoggedQuery`; its result or error passes on."""
    start = time.monotonic()
    error: BaseException | None = None
    try:
        return await run
    except BaseException as e:
        error = e
        raise
    finally:
        elapsed = time.monotonic() - start
        report(LoggedQuery(query, args, timeout, elapsed, error, conn_addr, conn_params))
