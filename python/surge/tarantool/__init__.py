"""Tarantool driver: many coroutines share one pipelined connection.

tnt = surge.tarantool.connect("127.0.0.1:3301")   # lazy: connects on first use
await tnt.insert("tester", (1, "x" * 1536))
"""

from surge._core import TarantoolResponse as Response
from surge._core import Tuple
from surge.tarantool import exceptions
from surge.tarantool.connection import ITERATORS, Connection, SQLResult, connect
from surge.tarantool.errors import (
    AuthenticationError,
    DatabaseError,
    DuplicateKeyError,
    FeatureNotSupportedError,
    SchemaError,
    TarantoolDatabaseError,
    TarantoolError,
    TarantoolSchemaError,
    UpdateOperationError,
    UpdateOperationLengthError,
)
from surge.tarantool.pool import NoHealthyInstanceError, Pool
from surge.tarantool.push import PushFuture, PushIterator
from surge.tarantool.sql import Field, Metadata
from surge.tarantool.transaction import ISOLATION_LEVELS, Transaction
from surge.tarantool.types import Adjust, ConnectionState, ErrorInfo, ExtValue, Interval, Iterator
from surge.tarantool.watch import Watcher

#: asynctnt's name for the tuples of replies.
TarantoolTuple = Tuple

__all__ = [
    "ISOLATION_LEVELS",
    "ITERATORS",
    "Adjust",
    "AuthenticationError",
    "Connection",
    "ConnectionState",
    "DatabaseError",
    "DuplicateKeyError",
    "ErrorInfo",
    "ExtValue",
    "FeatureNotSupportedError",
    "Field",
    "Interval",
    "Iterator",
    "Metadata",
    "NoHealthyInstanceError",
    "Pool",
    "PushFuture",
    "PushIterator",
    "Response",
    "SQLResult",
    "SchemaError",
    "TarantoolDatabaseError",
    "TarantoolError",
    "TarantoolSchemaError",
    "TarantoolTuple",
    "Transaction",
    "Tuple",
    "UpdateOperationError",
    "UpdateOperationLengthError",
    "Watcher",
    "connect",
    "exceptions",
]
