"""`AsgiApp`: an ASGI 3 application served over surge's connections.

It is a dispatcher like surge's own `App`: `freeze()` yields a `Plan` whose
router sends every method and path to one deferred, streaming route, so each
request arrives with its body still to come through the connection's
`BodyStream` (read back-pressure), under the same parser, limits, pipelining
bounds and deadlines. The route's handler builds the scope and returns an
`HttpCycle`, which the connection writes in request order.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from surge._core import AsgiDispatch
from surge.http.app import catch_all_plan
from surge.http.config import Limits
from surge.http.plan import Plan

from .cycle import TASK_NAME, ASGIApp, HttpCycle, _await, _raise
from .eager import EagerStarter
from .protocol import AsgiProtocol
from .websocket import WebSocketUpgrade, websocket_upgrade

if TYPE_CHECKING:
    from surge._core import Request
    from surge.http.protocol import HttpProtocol

log = logging.getLogger("surge.asgi")


class AsgiApp:
    """Serves the ASGI 3 callable `app` (mounted at `root_path`) with surge's server."""

    # What the native dispatcher (`AsgiDispatch(self)`) takes besides `app`,
    # `root_path`, `state` and `limits`: the cycle type, and the coroutines that
    # raise an app's call error or await an app's non-coroutine awaitable.
    _cycle_type = HttpCycle
    _raise_in_coro = staticmethod(_raise)
    _await_in_coro = staticmethod(_await)

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
        self._plan: Plan | None = None

    def freeze(self) -> Plan:
        """The serving plan: a dispatcher taking every request (see `Plan.dispatch`),
        over a catch-all streaming route that frames the bodies."""
        if self._plan is None:
            self._plan = catch_all_plan(
                None,
                self.limits,
                websocket=self._handle_websocket,
                # Per request: the scope built natively (`Request._asgi_scope`: the
                # connection's constant keys copied, the request's own added), an
                # `HttpCycle`, and the app's first step (see `AsgiDispatch`).
                dispatch=AsgiDispatch(self),
                # Its reads go straight to the native side (see `AsgiProtocol`).
                protocol=AsgiProtocol,
            )
        return self._plan

    def _starter_for(self, loop: asyncio.AbstractEventLoop) -> EagerStarter:
        """What runs each request's app on `loop` (see `surge.asgi.eager`)."""
        return EagerStarter(loop, TASK_NAME)

    def _connection_base(self, conn: HttpProtocol) -> dict[str, Any]:
        """The scope keys that are the same for every request of a connection."""
        scheme, server, client = _connection_scope(conn)
        return {
            "type": "http",
            "scheme": scheme,
            "server": server,
            "client": client,
            "root_path": self.root_path,
            # Served with the kernel's sendfile (see `HttpCycle._pathsend`).
            "extensions": {"http.response.pathsend": {}},
            # The request's own keys, set by `Request._asgi_scope` on each copy. With
            # every key present the copy has its final size and the native side only
            # replaces values: no dict growth per request (~2k instructions). The
            # dispatcher gives http_version, method and query_string their usual
            # values here ("1.1", "GET", b""), set on a copy only where a request
            # differs (`surge._core.AsgiDispatch`).
            **dict.fromkeys(_REQUEST_KEYS),
        }

    def _handle_websocket(self, request: Request, **_params: Any) -> WebSocketUpgrade:
        # The websocket scope and cycle live in `surge.asgi.websocket`.
        return websocket_upgrade(self, request)


#: The scope keys `Request._asgi_scope` sets for each request.
_REQUEST_KEYS = (
    "asgi",
    "http_version",
    "method",
    "path",
    "raw_path",
    "query_string",
    "headers",
    "state",
)


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
