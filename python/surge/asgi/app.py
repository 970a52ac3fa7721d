"""`AsgiApp`: an ASGI 3 application served over surge's connections.

It is a dispatcher like surge's own `App`: `freeze()` yields a `Plan` whose
router sends every method and path to one deferred, streaming route, so each
request arrives with its body still to come through the connection's
`BodyStream` (read back-pressure), under the same parser, limits, pipelining
bounds and deadlines. The route's handler builds the scope and returns an
`HttpCycle`, which the connection writes in request order.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from surge.http.app import catch_all_plan
from surge.http.config import Limits
from surge.http.plan import Plan

from .cycle import ASGIApp, HttpCycle
from .websocket import WebSocketUpgrade, websocket_upgrade

if TYPE_CHECKING:
    from surge._core import Request
    from surge.http.protocol import HttpProtocol

log = logging.getLogger("surge.asgi")


class AsgiApp:
    """Serves the ASGI 3 callable `app` (mounted at `root_path`) with surge's server."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        root_path: str = "",
        limits: Limits | None = None,
        debug: bool = False,
    ) -> None:
        self.app = app
        self.root_path = root_path.rstrip("/")
        self.limits = limits or Limits()
        self.debug = debug
        #: The lifespan state; every request's scope gets a shallow copy.
        self.state: dict[str, Any] = {}
        self._root_raw = self.root_path.encode()
        self._plan: Plan | None = None

    def freeze(self) -> Plan:
        """The serving plan: one catch-all streaming route for every method."""
        if self._plan is None:
            self._plan = catch_all_plan(self._handle, self.limits, websocket=self._handle_websocket)
        return self._plan

    def _handle(self, request: Request, **_params: Any) -> HttpCycle:
        stream = request._stream
        conn: HttpProtocol = stream.connection
        per_conn = conn.dispatcher_data
        if per_conn is None:
            per_conn = conn.dispatcher_data = _connection_scope(conn)
        scheme, server, client = per_conn
        path = request.path
        raw_path = request.raw_path
        if self.root_path:
            path = self.root_path + path
            raw_path = self._root_raw + raw_path
        scope = {
            "type": "http",
            "asgi": {"version": "3.0", "spec_version": "2.4"},
            "http_version": request.version,
            "server": server,
            "client": client,
            "scheme": scheme,
            "method": request.method,
            "root_path": self.root_path,
            "path": path,
            "raw_path": raw_path,
            "query_string": request.query_string.encode(),
            # Values arrive latin-1 decoded: encoding back gives the bytes as sent.
            "headers": [
                (name.encode("latin-1"), value.encode("latin-1"))
                for name, value in request.headers.items()
            ],
            "state": self.state.copy(),
        }
        return HttpCycle(self.app, scope, request, stream, conn, self.limits.write_high_water)

    def _handle_websocket(self, request: Request, **_params: Any) -> WebSocketUpgrade:
        # The websocket scope and cycle live in `surge.asgi.websocket`.
        return websocket_upgrade(self, request)

    #: The connection calls `_handle` without path parameters (see protocol.py).
    _handle.surge_dispatcher = True  # type: ignore[attr-defined]


def _connection_scope(
    conn: HttpProtocol,
) -> tuple[str, tuple[str, int | None] | None, tuple[str, int] | None]:
    """(scheme, server, client) of a connection, computed once per connection."""
    scheme = "https" if conn.extra_info("sslcontext") is not None else "http"
    return scheme, _address(conn.extra_info("sockname")), _address(conn.extra_info("peername"))  # type: ignore[return-value]


def _address(addr: Any) -> tuple[str, int | None] | None:
    # (host, port[, flowinfo, scope_id]) for TCP; a path (str) for a Unix socket.
    if isinstance(addr, tuple) and len(addr) >= 2:
        return str(addr[0]), int(addr[1])
    if isinstance(addr, str) and addr:
        return addr, None
    return None
