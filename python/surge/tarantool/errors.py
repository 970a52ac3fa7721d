"""Tarantool errors: server error codes mapped to classes under `TarantoolError`."""

from __future__ import annotations

from surge.errors import InterfaceError, SurgeError
from surge.tarantool.types import ErrorInfo


class TarantoolError(SurgeError):
    """Base of the errors that come from Tarantool or its schema."""


class SchemaError(TarantoolError, InterfaceError, LookupError):
    """A space, index or field name the server's schema does not have (nothing was sent)."""


class UpdateOperationError(TarantoolError, InterfaceError, TypeError):
    """A malformed update or upsert operation (nothing was sent). A `TypeError`, as
    asynctnt raises for one, so a port's ``except TypeError`` still catches it."""


class UpdateOperationLengthError(UpdateOperationError, IndexError, ValueError):
    """An update operation with too few items: (op, field, value), or five for a
    splice (asynctnt raises `IndexError`, and `ValueError` for a splice)."""


class FeatureNotSupportedError(TarantoolError, InterfaceError):
    """The server lacks a protocol feature (IPROTO_ID said so, or the server does not
    know IPROTO_ID at all: Tarantool < 2.10); nothing was sent."""


class DatabaseError(TarantoolError):
    """The server answered with an error; `code`, `message` and `info` say which."""

    code: int = 0

    def __init__(self, code: int, message: str, info: ErrorInfo | None = None) -> None:
        super().__init__(f"({code}) {message}")
        self.code = code
        self.message = message
        self.info = info

    @property
    def error(self) -> ErrorInfo | None:
        """`info` under asynctnt's name (its ``IProtoError``: ``.trace`` lists the
        error and its causes, each with ``error_type``, ``message``, ``code``, ...)."""
        return self.info


class DuplicateKeyError(DatabaseError):
    """ER_TUPLE_FOUND: a tuple with this key exists."""


class ReadOnlyError(DatabaseError):
    """ER_READONLY: the instance is read-only."""


class LuaError(DatabaseError):
    """ER_PROC_LUA: a Lua function raised."""


class NoSuchProcedureError(DatabaseError):
    """ER_NO_SUCH_PROC: no such function."""


class NoSuchSpaceError(DatabaseError):
    """ER_NO_SUCH_SPACE."""


class NoSuchIndexError(DatabaseError):
    """ER_NO_SUCH_INDEX_ID."""


class AccessDeniedError(DatabaseError):
    """ER_ACCESS_DENIED."""


class AuthenticationError(DatabaseError):
    """ER_NO_SUCH_USER / ER_PASSWORD_MISMATCH."""


class SQLError(DatabaseError):
    """An SQL statement failed to parse or run."""


class TupleTooLargeError(DatabaseError):
    """ER_MEMTX_MAX_TUPLE_SIZE / ER_VINYL_MAX_TUPLE_SIZE: the tuple is over the limit."""


#: SQL error codes (names from box.error on 2.6).
SQL_ERROR_CODES = (
    156,
    157,
    158,
    159,
    161,
    171,
    175,
    176,
    179,
    180,
    181,
    182,
    184,
    185,
    186,
    187,
    188,
    191,
    197,
    204,
    206,
    210,
)

#: Server error code -> class (codes from Tarantool's errcode.h, checked against 2.6).
ERROR_CLASSES: dict[int, type[DatabaseError]] = {
    3: DuplicateKeyError,
    7: ReadOnlyError,
    32: LuaError,
    33: NoSuchProcedureError,
    35: NoSuchIndexError,
    36: NoSuchSpaceError,
    42: AccessDeniedError,
    45: AuthenticationError,
    47: AuthenticationError,
    110: TupleTooLargeError,
    139: TupleTooLargeError,
    **dict.fromkeys(SQL_ERROR_CODES, SQLError),
}


def make_error(value: tuple[int, str, ErrorInfo | None]) -> DatabaseError:
    """Turn a codec error triple into the matching exception."""
    code, message, info = value
    return ERROR_CLASSES.get(code, DatabaseError)(code, message, info)


# asynctnt's names, so its ``except`` clauses port unchanged.
TarantoolDatabaseError = DatabaseError
TarantoolSchemaError = SchemaError
