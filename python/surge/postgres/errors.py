"""PostgreSQL errors: server errors as `PostgresError` subclasses chosen by
SQLSTATE (asyncpg's class names, generated into `_sqlstate` from PostgreSQL's
errcodes.txt by ``scripts/gen_pg_sqlstates.py``), plus the client-side ones.

Connection trouble is reported with the engine's errors shared by every driver
(`surge.errors.ConnectError`, `ConnectionLostError`, `RequestTimeoutError`);
they are not `PostgresError`s.
"""

from __future__ import annotations

from typing import Any

from surge.errors import InterfaceError
from surge.postgres._sqlstate import BY_SQLSTATE, DataError
from surge.postgres.error_base import PostgresError


class UnsupportedAuthError(InterfaceError):
    """The server asks for an authentication method surge does not speak."""


def make_error(value: Any) -> BaseException:
    """The exception for a failed request: the codec's exception, or an
    ErrorResponse's fields mapped to the class of its SQLSTATE."""
    if isinstance(value, BaseException):
        return value
    code = value.get("C", "")
    cls = BY_SQLSTATE.get(code) or BY_SQLSTATE.get(code[:2] + "000") or PostgresError
    return cls(value.get("M", "unknown error"), value)


class InvalidArgumentError(DataError, InterfaceError, TypeError):
    """A query argument does not fit its parameter's type, or the count is wrong;
    nothing was sent. A `DataError` as in asyncpg, and an `InterfaceError`."""
