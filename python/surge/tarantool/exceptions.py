"""asynctnt's ``asynctnt.exceptions`` names, so ``from ... exceptions import
TarantoolDatabaseError`` ports. Network faults are surge's own classes, shared by
every driver (`surge.errors`): they are not `TarantoolError`s here."""

from surge.errors import ConnectError, SurgeConnectionError
from surge.tarantool.errors import TarantoolDatabaseError, TarantoolError, TarantoolSchemaError

#: Any fault of the connection itself (asynctnt's `TarantoolNetworkError`).
TarantoolNetworkError = SurgeConnectionError
#: The server could not be reached (asynctnt's `TarantoolNotConnectedError`;
#: surge connects, and reconnects, on the next request instead of refusing it).
TarantoolNotConnectedError = ConnectError

__all__ = [
    "TarantoolDatabaseError",
    "TarantoolError",
    "TarantoolNetworkError",
    "TarantoolNotConnectedError",
    "TarantoolSchemaError",
]
