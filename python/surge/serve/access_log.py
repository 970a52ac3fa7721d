"""``--access-log``: where the lines go and in which form.

The log itself is native (`surge._core.AccessLog`): the event loop formats a
line per response into a bounded buffer and a thread of the log's own writes
it (see `crates/surge-py/src/http/server/access_log.rs`). Each worker opens its
own after the fork; they append to one file (``O_APPEND``: whole writes of
lines do not interleave mid-line on a local file system) or share stderr.
"""

from __future__ import annotations

import os
import weakref

from surge._core import AccessLog

#: gunicorn's default ``--access-logformat``: the Combined Log Format.
DEFAULT_ACCESS_LOG_FORMAT = '%(h)s %(l)s %(u)s %(t)s "%(r)s" %(s)s %(b)s "%(f)s" "%(a)s"'
#: Bytes of lines a worker keeps while its writer thread catches up; past it,
#: lines are dropped and counted (`AccessLog.dropped`), never the server slowed.
DEFAULT_ACCESS_LOG_BUFFER = 1 << 20

#: The logs open in this process, whose dropped lines `surge.stats` exports
#: (``surge_access_log_dropped_total``).
OPEN_LOGS: weakref.WeakSet[AccessLog] = weakref.WeakSet()

__all__ = [
    "DEFAULT_ACCESS_LOG_BUFFER",
    "DEFAULT_ACCESS_LOG_FORMAT",
    "OPEN_LOGS",
    "open_access_log",
]


def open_access_log(
    target: str, format: str | None = None, *, buffer: int = DEFAULT_ACCESS_LOG_BUFFER
) -> AccessLog:
    """An access log writing to ``target`` ("-" for stderr, else a file appended to).

    ``format`` takes gunicorn's atoms (``%(h)s``, ``%(r)s``, ``%({x-request-id}i)s``...;
    default `DEFAULT_ACCESS_LOG_FORMAT`) or ``"json"`` for one JSON object per line.
    Raises ValueError for an unknown atom and OSError when the file cannot be opened.
    """
    as_json = format == "json"
    fmt = None if as_json else (format or DEFAULT_ACCESS_LOG_FORMAT)
    if target == "-":
        log = AccessLog(2, fmt, as_json, buffer)
    else:
        fd = os.open(target, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            log = AccessLog(fd, fmt, as_json, buffer)  # it keeps a duplicate
        finally:
            os.close(fd)
    OPEN_LOGS.add(log)
    return log


def check_access_log(target: str, format: str | None) -> None:
    """Fails now (ValueError, OSError) on a bad format or an unwritable file, before
    any worker starts."""
    open_access_log(target, format).close()
