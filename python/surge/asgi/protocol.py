"""`AsgiProtocol`: the connection of an ASGI app, its usual reads taken natively.

An `HttpProtocol` whose `data_received` is an instance attribute, the native
`surge._core.AsgiReader`: the loop looks `data_received` up once per connection
(uvloop keeps the bound method), so a read goes from the loop into Rust with no
Python frame. The reader takes the usual read (an idle connection, no body
being streamed: parse, start the app, begin its response) and hands every other
one to `HttpProtocol.data_received`, so behaviour is the same either way.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from surge._core import AsgiDispatch, AsgiReader
from surge.http.protocol import HttpProtocol

if TYPE_CHECKING:
    from surge.http.server import Server

log = logging.getLogger("surge.http")


class AsgiProtocol(HttpProtocol):
    """The connection type of an `AsgiApp`'s plan."""

    __slots__ = ("data_received",)

    def __init__(self, server: Server) -> None:
        super().__init__(server)
        dispatch = self._dispatcher
        if isinstance(dispatch, AsgiDispatch):
            self.data_received = AsgiReader(self, dispatch, HttpProtocol.data_received)  # type: ignore[method-assign]
        else:  # another plan's dispatcher
            self.data_received = self._read  # type: ignore[method-assign]

    def _read(self, data: bytes) -> None:
        HttpProtocol.data_received(self, data)

    def connection_lost(self, exc: Exception | None) -> None:
        super().connection_lost(exc)
        # The reader refers to this protocol: no cycle is left behind (nothing
        # reads after the connection is lost).
        self.data_received = _ignore  # type: ignore[method-assign, assignment]

    def _read_failed(self, exc: BaseException) -> None:
        """The native reader's `feed` failed: as `HttpProtocol.data_received`."""
        log.error("internal error while handling a request", exc_info=exc)
        self._transport.abort()


def _ignore(_data: Any) -> None:
    pass
