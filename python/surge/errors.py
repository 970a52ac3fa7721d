"""The root of surge's exception hierarchy: every error surge raises on purpose
derives from `SurgeError`."""

from __future__ import annotations


class SurgeError(Exception):
    """Base class of every surge error."""


class InterfaceError(SurgeError):
    """The API was used wrongly (bad argument, closed object); nothing was sent."""


class SurgeConnectionError(SurgeError, ConnectionError):
    """The connection to a server is not usable."""


class ConnectError(SurgeConnectionError):
    """Could not connect (or handshake) within the connect timeout."""


class ConnectRefusedError(ConnectError, ConnectionRefusedError):
    """Every address tried refused the connection: also a `ConnectionRefusedError`,
    which asynctnt and asyncpg let through, so a port's ``except`` still catches it."""


class ConnectionLostError(SurgeConnectionError):
    """The connection dropped while the request was in flight; it may or may not have run."""


class ClosedError(SurgeConnectionError, InterfaceError):
    """The connection (or pool) was closed by its owner; also an `InterfaceError`,
    as using a closed object is (asyncpg raises InterfaceError there)."""


class ProtocolError(SurgeConnectionError):
    """The server sent bytes that do not parse; the connection was dropped."""


class RequestTimeoutError(SurgeError, TimeoutError):
    """No reply within the request timeout; the connection stays usable."""


class ConnectionDeadError(ConnectionLostError):
    """The liveness check found the path dead: nothing arrived for the liveness
    interval while requests were pending, and neither an in-band ping nor a probe
    on a new connection was answered. The connection was dropped."""


class EndpointRejectedError(ConnectError):
    """A server was reached but is not the one wanted (a standby where a primary
    is needed, no TLS where TLS is required); the next address is tried."""
