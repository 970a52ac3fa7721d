"""PostgreSQL errors: server errors as `PostgresError` subclasses chosen by
SQLSTATE (asyncpg's class names, generated into `_sqlstate` from PostgreSQL's
errcodes.txt by ``scripts/gen_pg_sqlstates.py``), plus the client-side ones
under asyncpg's names and inheritance.

Connection trouble is reported with the engine's errors shared by every driver
(`surge.errors.ConnectError`, `ConnectionLostError`, `RequestTimeoutError`);
they are not `PostgresError`s.
"""

from __future__ import annotations

from typing import Any

from surge import errors as _errors
from surge.errors import InterfaceError
from surge.postgres._sqlstate import (
    BY_SQLSTATE,
    DataError,
    NoActiveSQLTransactionError,
    PostgresWarning,
)
from surge.postgres.error_base import (
    FatalPostgresError,
    PostgresError,
    PostgresLogMessage,
    PostgresMessage,
    UnknownPostgresError,
)


class InterfaceWarning(UserWarning):
    """A warning about how the driver is used (asyncpg's name)."""


class ClientConfigurationError(InterfaceError, ValueError):
    """A connection option or DSN is wrong."""


class UnknownTypeError(InterfaceError, ValueError):
    """A type named to `set_type_codec` and its kin is not in the catalog (a
    `ValueError` as asyncpg raises, and an `InterfaceError` as surge did)."""


class UnsupportedClientFeatureError(InterfaceError):
    """The server asks for something this client does not do."""


class UnsupportedServerFeatureError(InterfaceError):
    """The server lacks something the call needs."""


class UnsupportedAuthError(UnsupportedClientFeatureError):
    """The server asks for an authentication method surge does not speak."""


class InternalClientError(_errors.SurgeError):
    """A fault inside the client (asyncpg's root of the classes below)."""


class ProtocolError(InternalClientError, _errors.ProtocolError):
    """The server's byte stream broke the protocol (also `surge.errors.ProtocolError`)."""


class OutdatedSchemaCacheError(InternalClientError):
    """A cached statement's types changed under it."""


class TargetServerAttributeNotMatched(InternalClientError):
    """No host matched ``target_session_attrs``."""


def make_error(value: Any) -> BaseException:
    """The exception for a failed request: the codec's exception, or an
    ErrorResponse's fields mapped to the class of its SQLSTATE."""
    if isinstance(value, BaseException):
        return value
    code = value.get("C", "")
    cls = BY_SQLSTATE.get(code) or BY_SQLSTATE.get(code[:2] + "000") or UnknownPostgresError
    err = cls(value.get("M", "unknown error"), value)
    assert isinstance(err, BaseException)
    return err


def make_log_message(fields: dict[str, str]) -> PostgresMessage:
    """A NoticeResponse as asyncpg hands it to log listeners: the class of its
    exact SQLSTATE (a warning's, or even an error's), else `PostgresWarning`
    for a WARNING and `PostgresLogMessage` (not an exception) for the rest."""
    cls: type[PostgresMessage] | None = BY_SQLSTATE.get(fields.get("C", ""))
    if cls is None:
        severity = fields.get("V") or fields.get("S") or ""
        cls = PostgresWarning if severity.upper() == "WARNING" else PostgresLogMessage
    return cls(fields.get("M", ""), fields)


class InvalidArgumentError(DataError, InterfaceError, TypeError):
    """A query argument does not fit its parameter's type, or the count is wrong;
    nothing was sent. A `DataError` as in asyncpg, and an `InterfaceError`."""


class CursorOutsideTransactionError(NoActiveSQLTransactionError, InterfaceError):
    """A cursor opened outside a transaction; nothing was sent. asyncpg's
    `NoActiveSQLTransactionError`, and an `InterfaceError`."""


__all__ = [
    "ClientConfigurationError",
    "CursorOutsideTransactionError",
    "FatalPostgresError",
    "InterfaceError",
    "InterfaceWarning",
    "InternalClientError",
    "InvalidArgumentError",
    "OutdatedSchemaCacheError",
    "PostgresError",
    "PostgresLogMessage",
    "PostgresMessage",
    "ProtocolError",
    "TargetServerAttributeNotMatched",
    "UnknownPostgresError",
    "UnsupportedAuthError",
    "UnsupportedClientFeatureError",
    "UnsupportedServerFeatureError",
]
