"""Serving an App (or another dispatcher's plan) on a listening socket inside one event loop."""

from __future__ import annotations

import asyncio
import logging
import socket
from ssl import SSLContext
from typing import TYPE_CHECKING

from .protocol import HttpProtocol

if TYPE_CHECKING:
    from .app import App
    from .plan import Servable

log = logging.getLogger("surge.http")

#: listen() backlog of the serving socket.
DEFAULT_BACKLOG = 2048
#: Seconds a client has to finish the TLS handshake.
TLS_HANDSHAKE_TIMEOUT = 10.0


class Server:
    """One worker's server: accepts connections and keeps their timeouts."""

    def __init__(self, app: Servable, *, debug: bool = False) -> None:
        self.app = app
        if debug:
            app.debug = True
        #: What every connection serves by (the transport never reads the App).
        self.plan = app.freeze()
        self.connections: set[HttpProtocol] = set()
        self.closing = False
        self._server: asyncio.AbstractServer | None = None
        self._ticker: asyncio.TimerHandle | None = None

    async def serve(
        self,
        sock: socket.socket,
        *,
        backlog: int = DEFAULT_BACKLOG,
        ssl: SSLContext | None = None,
        ssl_handshake_timeout: float = TLS_HANDSHAKE_TIMEOUT,
    ) -> None:
        """Starts serving on a bound socket (HTTPS with ``ssl``); returns once serving.

        The loop calls listen() again with `backlog` (asyncio's own default is 100),
        so pass the backlog the socket was meant to have.
        """
        loop = asyncio.get_running_loop()
        sock.setblocking(False)
        self._server = await loop.create_server(
            lambda: HttpProtocol(self),
            sock=sock,
            backlog=backlog,
            start_serving=True,
            ssl=ssl,
            ssl_handshake_timeout=ssl_handshake_timeout if ssl is not None else None,
        )

    def connection_opened(self, conn: HttpProtocol) -> None:
        """Tracks a new connection; the timeout sweep runs only while there are any,
        so an idle worker does not wake up at all."""
        self.connections.add(conn)
        if self._ticker is None:
            self._ticker = asyncio.get_running_loop().call_later(1.0, self._tick)

    def _tick(self) -> None:
        if not self.connections:
            self._ticker = None
            return
        limits = self.plan.limits
        for conn in list(self.connections):
            conn.check_timeouts(limits.header_timeout, limits.keepalive_timeout)
        self._ticker = asyncio.get_running_loop().call_later(1.0, self._tick)

    async def shutdown(self, grace: float = 10.0) -> None:
        """Stops accepting, lets in-flight requests finish within `grace`, closes the rest."""
        self.closing = True
        if self._server is not None:
            self._server.close()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + grace
        while True:
            for conn in list(self.connections):
                conn.close_if_idle()
            if not self.connections or loop.time() >= deadline:
                break
            await asyncio.sleep(0.05)
        for conn in list(self.connections):
            log.warning("closing a connection still busy after the %.1fs grace period", grace)
            conn.abort()
        if self._ticker is not None:
            self._ticker.cancel()
        if self._server is not None:
            await self._server.wait_closed()
        self.plan.executor.shutdown()


async def serve(app: App, host: str = "127.0.0.1", port: int = 8080) -> Server:
    """Binds `host:port` and serves `app` in the running loop (for embedding and tests)."""
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(DEFAULT_BACKLOG)
    server = Server(app)
    await server.serve(sock, backlog=DEFAULT_BACKLOG)
    return server
