"""Serving an App (or another dispatcher's plan) on a listening socket inside one event loop."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import socket
from collections.abc import Callable
from ssl import SSLContext
from typing import TYPE_CHECKING, Any

from surge._core import AccessLog, ProxyTrust, Request, TlsServerConfig, encode_response_head

from .protocol import HttpProtocol
from .response import WriterResponse

#: Seconds an idle keep-alive connection is left open after a shutdown starts,
#: so that a client between two requests gets its next one answered.
DRAIN_LINGER = 0.5

if TYPE_CHECKING:
    from .app import App
    from .plan import Plan, Servable

log = logging.getLogger("surge.http")

#: listen() backlog of the serving socket.
DEFAULT_BACKLOG = 2048
#: Seconds a client has to finish the TLS handshake.
TLS_HANDSHAKE_TIMEOUT = 10.0
#: Seconds a connection of the Python TLS backend (``ssl=``) closed by the server
#: (``Connection: close``, a limit, a deadline, a drain) waits for the client's
#: close_notify before its socket is closed anyway. asyncio's and uvloop's SSL
#: transports send their own close_notify and then wait for the peer's, 30 s by
#: default: most clients (curl, browsers, http.client) never send one once they
#: have the response, so each closed connection kept its socket, memory and a
#: slot of ``--limit-concurrency`` for 30 s. The response has been flushed
#: before the shutdown starts, so a short wait loses nothing.
TLS_SHUTDOWN_TIMEOUT = 1.0
#: Seconds between two sweeps of the connections' deadlines (header, keep-alive);
#: shorter when a deadline is, so a deadline is kept within half of itself.
TICK = 1.0
#: Seconds between two "over the concurrency limit" warnings (each counts the
#: connections refused since the previous one), so an overload does not flood the log.
OVERLOAD_LOG_EVERY = 1.0


class Server:
    """One worker's server: accepts connections and keeps their timeouts.

    ``keepalive_timeout`` overrides the plan's limit of that name (uvicorn's
    ``--timeout-keep-alive``). With ``limit_concurrency`` N (uvicorn's
    ``--limit-concurrency``), a connection opened while N are open already is
    served by `refusing_plan`: each request it sends gets ``503 Service
    Unavailable`` and the connection closes, so at most N connections (and the
    requests on them) are served at once by this worker, whatever the interface.
    With ``access_log``, every response is logged there (closed by the caller).
    With ``proxy_trust``, a connection from a trusted peer takes each request's
    client, scheme and host from its forwarding headers (`surge._core.ProxyTrust`).
    With ``proxy_protocol`` (the peers trusted to send it), each connection must
    open with a PROXY v1/v2 header from one of them, whose source address becomes
    the connection's peer.
    """

    def __init__(
        self,
        app: Servable,
        *,
        debug: bool = False,
        keepalive_timeout: float | None = None,
        limit_concurrency: int | None = None,
        access_log: AccessLog | None = None,
        proxy_trust: ProxyTrust | None = None,
        proxy_protocol: ProxyTrust | None = None,
    ) -> None:
        self.app = app
        #: Where every connection logs its responses (see `surge.serve.access_log`).
        self.access_log = access_log
        #: Peers whose forwarding headers are believed (``--proxy-headers``).
        self.proxy_trust = proxy_trust
        #: Peers that open every connection with a PROXY protocol header
        #: (`surge.serve.proxy_protocol`); None: no PROXY protocol.
        self.proxy_protocol = proxy_protocol
        if debug:
            app.debug = True
        if limit_concurrency is not None and limit_concurrency < 1:
            raise ValueError(f"limit_concurrency must be >= 1 or None, got {limit_concurrency}")
        plan = app.freeze()
        if keepalive_timeout is not None:
            limits = dataclasses.replace(plan.limits, keepalive_timeout=keepalive_timeout)
            plan = dataclasses.replace(plan, limits=limits)
        #: What every connection serves by (the transport never reads the App).
        self.plan = plan
        self.limit_concurrency = limit_concurrency
        self.connections: set[HttpProtocol] = set()
        self.closing = False
        self._server: asyncio.AbstractServer | None = None
        self._ticker: asyncio.TimerHandle | None = None
        self._tick_every = min(
            TICK, plan.limits.header_timeout / 2, plan.limits.keepalive_timeout / 2
        )
        self._refusing: Plan | None = None
        self._refused = 0
        self._refused_logged_at = -OVERLOAD_LOG_EVERY

    async def serve(
        self,
        sock: socket.socket,
        *,
        backlog: int = DEFAULT_BACKLOG,
        ssl: SSLContext | None = None,
        ssl_handshake_timeout: float = TLS_HANDSHAKE_TIMEOUT,
        tls: TlsServerConfig | None = None,
    ) -> None:
        """Starts serving on a bound socket (HTTPS with ``tls``, the native stack, or
        ``ssl``, Python's); returns once serving.

        The loop calls listen() again with `backlog` (asyncio's own default is 100),
        so pass the backlog the socket was meant to have.
        """
        loop = asyncio.get_running_loop()
        sock.setblocking(False)
        factory: Callable[[], asyncio.Protocol]
        connection = self.plan.protocol or HttpProtocol
        if tls is not None:
            from surge.serve.rustls import TlsProtocol

            def factory() -> asyncio.Protocol:
                return TlsProtocol(connection(self), tls, ssl_handshake_timeout)
        else:

            def factory() -> asyncio.Protocol:
                return connection(self)

        if self.proxy_protocol is not None:
            if ssl is not None:
                raise ValueError("the PROXY protocol needs the rustls TLS backend or plain HTTP")
            from surge.serve.proxy_protocol import ProxyProtocolReader

            trust = self.proxy_protocol
            inner = factory

            def factory() -> asyncio.Protocol:
                return ProxyProtocolReader(inner, trust.trusts)

        self._server = await loop.create_server(
            factory,
            sock=sock,
            backlog=backlog,
            start_serving=True,
            ssl=ssl,
            ssl_handshake_timeout=ssl_handshake_timeout if ssl is not None else None,
            ssl_shutdown_timeout=TLS_SHUTDOWN_TIMEOUT if ssl is not None else None,
        )

    def over_limit(self) -> Plan | None:
        """Asked by a connection as it opens: None to serve it by `plan`, or, when
        `limit_concurrency` connections are open already, the plan answering its
        requests with 503 (see `refusing_plan`)."""
        limit = self.limit_concurrency
        if limit is None or len(self.connections) < limit:
            return None
        self._refused += 1
        now = asyncio.get_running_loop().time()
        if now - self._refused_logged_at >= OVERLOAD_LOG_EVERY:
            log.warning(
                "exceeded the concurrency limit (%d connections): %d connection(s) answered 503",
                limit,
                self._refused,
            )
            self._refused = 0
            self._refused_logged_at = now
        if self._refusing is None:
            self._refusing = refusing_plan(self.plan)
        return self._refusing

    def connection_opened(self, conn: HttpProtocol) -> None:
        """Tracks a new connection; the timeout sweep runs only while there are any,
        so an idle worker does not wake up at all."""
        self.connections.add(conn)
        if self.closing:
            # Accepted just before shutdown began: it drains like the others (the
            # native dispatchers read `draining` rather than `closing`).
            conn.stop_keep_alive()
        if self._ticker is None:
            self._ticker = asyncio.get_running_loop().call_later(self._tick_every, self._tick)

    def _tick(self) -> None:
        if not self.connections:
            self._ticker = None
            return
        limits = self.plan.limits
        for conn in list(self.connections):
            conn.check_timeouts(limits.header_timeout, limits.keepalive_timeout)
        self._ticker = asyncio.get_running_loop().call_later(self._tick_every, self._tick)

    async def shutdown(self, grace: float = 10.0) -> None:
        """Stops accepting, lets in-flight requests finish within `grace`, closes the rest."""
        self.closing = True
        if self._server is not None:
            self._server.close()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + grace
        for conn in self.connections:
            conn.stop_keep_alive()
        while True:
            for conn in list(self.connections):
                # An idle keep-alive connection is closed only once its client has
                # sent nothing for a moment: one about to send its next request
                # gets it answered (with `Connection: close`) instead of racing
                # the close, which would fail that request.
                conn.close_if_idle(DRAIN_LINGER)
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


def refusing_plan(plan: Plan) -> Plan:
    """The plan of a connection over the concurrency limit: every request, whatever
    its method and path, is answered ``503 Service Unavailable`` (text/plain, as
    uvicorn answers it) and the connection closes after it. Same limits and parser,
    so a malformed request still gets its 4xx."""
    from .app import catch_all_plan

    return catch_all_plan(_unavailable, plan.limits, debug=plan.debug)


_UNAVAILABLE_BODY = b"Service Unavailable"


class _Unavailable(WriterResponse):
    """A 503 written at once, ending the connection."""

    __slots__ = ("_head_only", "_http10")
    inline = True

    def __init__(self, head_only: bool, http10: bool) -> None:
        self._head_only = head_only
        self._http10 = http10

    def begin(self, conn: HttpProtocol) -> bool:
        head = encode_response_head(
            503,
            None,
            "text/plain; charset=utf-8",
            len(_UNAVAILABLE_BODY),
            False,
            self._http10,
            ours=conn._plan.head_defaults,
        )
        data = head if self._head_only else head + _UNAVAILABLE_BODY
        conn.write(data)
        request = conn._inline_request
        if conn.access_log is not None and request is not None:
            conn.access_log.log_rendered(request, data)  # as uvicorn logs its 503s
        return False

    async def write(self, conn: HttpProtocol) -> bool:
        return self.begin(conn)


def _unavailable(request: Request, **_params: Any) -> _Unavailable:
    return _Unavailable(request.method == "HEAD", request.version == "1.0")


async def serve(app: App, host: str = "127.0.0.1", port: int = 8080) -> Server:
    """Binds `host:port` and serves `app` in the running loop (for embedding and tests)."""
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(DEFAULT_BACKLOG)
    server = Server(app)
    await server.serve(sock, backlog=DEFAULT_BACKLOG)
    return server
