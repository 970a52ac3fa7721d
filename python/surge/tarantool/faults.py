"""How the Tarantool driver reports faults: the ``surge.tarantool`` logger, and
which exceptions are *expected* (the network or the server went away, or took
too long) as opposed to bugs.

An expected fault is logged as one line naming it, once per state change (an
instance going down, a watched connection lost), never as a traceback and never
per failed retry: a dead instance polled every second would otherwise fill the
log with the same story. Anything else is logged with its traceback, since it
means something surge did not plan for.
"""

from __future__ import annotations

import logging

from surge.errors import RequestTimeoutError, SurgeConnectionError, SurgeError

log = logging.getLogger("surge.tarantool")

#: What a lost, refused, cut or slow connection raises.
#: (surge's own derive from the first two; they are named for the reader.)
EXPECTED_FAULTS: tuple[type[BaseException], ...] = (
    OSError,
    TimeoutError,
    SurgeConnectionError,
    RequestTimeoutError,
)


def is_expected(exc: BaseException) -> bool:
    """True for a fault of the network or the server, reported in one line."""
    return isinstance(exc, EXPECTED_FAULTS)


def describe(exc: BaseException) -> str:
    """``ConnectError: cannot connect to ...``: the exception in one line."""
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def traceback_of(exc: BaseException) -> BaseException | None:
    """What to pass as ``exc_info``: nothing for the faults surge expects (their one
    line says it all) or a server's error reply, the exception for anything else."""
    return None if is_expected(exc) or isinstance(exc, SurgeError) else exc
