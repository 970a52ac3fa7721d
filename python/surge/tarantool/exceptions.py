"""asynctnt's ``asynctnt.exceptions`` names, so ``from ... exceptions import
TarantoolDatabaseError`` ports. Network faults are surge's own classes, shared by
every driver (`surge.errors`): they are not `TarantoolError`s here."""

from surge.errors import SurgeConnectionError
from surge.tarantool.errors import TarantoolDatabaseError, TarantoolError, TarantoolSchemaError

#: Any fault of the connection itself (asynctnt's `TarantoolNetworkError`).
TarantoolNetworkError = SurgeConnectionError
#: asynctnt raises its `TarantoolNotConnectedError` for every fault of the
#: connection: not connected, refused, lost with requests in flight, closed by
#: `disconnect()`. surge's classes for these (`ConnectError`, `ConnectionLostError`,
#: `ClosedError`, `ConnectionDeadError`) share `SurgeConnectionError`, so a port's
#: ``except TarantoolNotConnectedError`` catches what it caught there.
TarantoolNotConnectedError = SurgeConnectionError

__all__ = [
    "TarantoolDatabaseError",
    "TarantoolError",
    "TarantoolNetworkError",
    "TarantoolNotConnectedError",
    "TarantoolSchemaError",
]
