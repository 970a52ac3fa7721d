"""WebSocket routes of surge's own `App`: `@app.websocket("/ws")`.

The route's handler is `async def handler(websocket, **path_params)`; the
`WebSocket` it gets has Starlette's method names (`accept`, `receive_text`,
`send_bytes`, `close`, `async for`...). When the upgrade request's turn comes,
`WebSocketUpgrade.begin` checks the handshake (a bad one is answered with its
4xx at once) and hands the transport to a `WebSocketConnection`, then runs the
handler in its own task.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable, Coroutine
from typing import TYPE_CHECKING, Any

import orjson

from surge._core import WebSocketHandshake
from surge.http.response import Response, WriterResponse

from .connection import CLOSED, CONNECTING, OPEN, WebSocketConnection, http_response
from .errors import WebSocketDisconnect

if TYPE_CHECKING:
    from surge._core import Request
    from surge.http.protocol import HttpProtocol

log = logging.getLogger("surge.websocket")

Starter = Callable[[WebSocketConnection, "Request"], Coroutine[Any, Any, None]]

_FORBIDDEN = http_response(403, [(b"Content-Type", b"text/plain; charset=utf-8")], b"Forbidden")
_SERVER_ERROR = http_response(
    500, [(b"Content-Type", b"text/plain; charset=utf-8")], b"Internal Server Error"
)


class WebSocketUpgrade(WriterResponse):
    """Answers an upgrade request once every response before it has left: its
    refusal, or the transport handed to a `WebSocketConnection` running `run`."""

    __slots__ = ("_request", "_run")
    inline = True

    def __init__(self, request: Request, run: Starter) -> None:
        self._request = request
        self._run = run

    def begin(self, conn: HttpProtocol) -> bool | None:
        req = self._request
        handshake = WebSocketHandshake(req.method.encode(), req.headers.items())
        if not handshake.ok:
            rejection = handshake.rejection()
            conn.write(rejection)
            if conn.access_log is not None:
                conn.access_log.log_rendered(req, rejection)
            return False
        access_log = conn.access_log
        transport, rest, server = conn.detach()
        ws = WebSocketConnection(server, transport, handshake, server.plan.limits, rest)
        if access_log is not None:
            # The 101 (or the app's refusal) is logged when the app answers.
            ws.access = (access_log, req)
        ws.start()
        ws.task = asyncio.get_running_loop().create_task(self._run(ws, req))
        return None


class WebSocket:
    """One WebSocket as a surge handler sees it (Starlette's names)."""

    __slots__ = ("_conn", "path_params", "request")

    def __init__(
        self, conn: WebSocketConnection, request: Request, path_params: dict[str, Any]
    ) -> None:
        self._conn = conn
        #: The upgrade request (headers, query, cookies, client).
        self.request = request
        self.path_params = path_params

    # The request -------------------------------------------------------------------

    @property
    def headers(self) -> Any:
        """The upgrade request's headers."""
        return self.request.headers

    @property
    def query_params(self) -> Any:
        """The upgrade request's query parameters."""
        return self.request.query_params

    @property
    def path(self) -> str:
        return self.request.path  # type: ignore[no-any-return]

    @property
    def client(self) -> tuple[str, int] | None:
        return self.request.client

    @property
    def subprotocols(self) -> list[str]:
        """The subprotocols the client offered, in its order."""
        return self._conn.subprotocols

    @property
    def close_code(self) -> int | None:
        """The close code once closing (the client's, ours, or 1006)."""
        return self._conn.close_code

    # The conversation --------------------------------------------------------------

    async def accept(
        self,
        subprotocol: str | None = None,
        headers: Any = None,
    ) -> None:
        """Accepts the connection, choosing `subprotocol` (one the client offered) and
        adding `headers` (a mapping or (name, value) pairs) to the 101 response."""
        if headers is not None and hasattr(headers, "items"):
            headers = list(headers.items())
        self._conn.accept(subprotocol, headers)

    async def receive(self) -> str | bytes:
        """The next message: str for text, bytes for binary. Raises `WebSocketDisconnect`."""
        return await self._conn.receive()

    async def receive_text(self) -> str:
        """The next message, which must be text (else close 1003 and raise TypeError)."""
        message = await self._conn.receive()
        if type(message) is not str:
            self._conn.close(1003, "expected a text message")
            raise TypeError("expected a text message, got binary")
        return message

    async def receive_bytes(self) -> bytes:
        """The next message, which must be binary (else close 1003 and raise TypeError)."""
        message = await self._conn.receive()
        if type(message) is not bytes:
            self._conn.close(1003, "expected a binary message")
            raise TypeError("expected a binary message, got text")
        return message

    async def receive_json(self) -> Any:
        """The next message (text or binary) parsed as JSON."""
        return orjson.loads(await self._conn.receive())

    async def send_text(self, data: str) -> None:
        """Sends a text message (waits while the client is not reading)."""
        await self._conn.send_text(data)

    async def send_bytes(self, data: bytes) -> None:
        """Sends a binary message (waits while the client is not reading)."""
        await self._conn.send_bytes(data)

    async def send(self, data: str | bytes) -> None:
        """Sends str as text, bytes as binary."""
        if isinstance(data, str):
            await self._conn.send_text(data)
        else:
            await self._conn.send_bytes(data)

    async def send_many(self, messages: list[str | bytes]) -> None:
        """Sends several messages in one write."""
        await self._conn.send_many(messages)

    async def send_json(self, data: Any) -> None:
        """Sends `data` as JSON in a text message."""
        await self._conn.send_text(orjson.dumps(data).decode())

    async def close(self, code: int = 1000, reason: str = "") -> None:
        """Closes with `code`; before `accept` it refuses the upgrade with HTTP 403."""
        conn = self._conn
        if conn.state == CONNECTING:
            conn.deny(_FORBIDDEN)
        else:
            conn.close(code, reason)

    async def deny(self, response: Response) -> None:
        """Refuses the upgrade with an HTTP response instead of accepting."""
        headers = [(k.encode("latin-1"), v.encode("latin-1")) for k, v in response.headers]
        if response.content_type is not None:
            headers.insert(0, (b"Content-Type", response.content_type.encode("latin-1")))
        self._conn.deny(http_response(response.status, headers, response.body))

    def __aiter__(self) -> AsyncIterator[str | bytes]:
        return self._iterate()

    async def _iterate(self) -> AsyncIterator[str | bytes]:
        try:
            while True:
                yield await self._conn.receive()
        except WebSocketDisconnect:
            return

    async def iter_text(self) -> AsyncIterator[str]:
        """Text messages until the client closes."""
        try:
            while True:
                yield await self.receive_text()
        except WebSocketDisconnect:
            return

    async def iter_bytes(self) -> AsyncIterator[bytes]:
        """Binary messages until the client closes."""
        try:
            while True:
                yield await self.receive_bytes()
        except WebSocketDisconnect:
            return


def websocket_route(handler: Callable[..., Any]) -> Callable[..., WebSocketUpgrade]:
    """The route's `websocket` callable for `handler` (see `Route.websocket`)."""

    async def run(conn: WebSocketConnection, request: Request) -> None:
        params = request.path_params
        websocket = WebSocket(conn, request, params)
        try:
            await handler(websocket, **params)
        except WebSocketDisconnect:
            pass
        except Exception:
            log.exception("WebSocket handler %r failed", getattr(handler, "__name__", handler))
            if conn.state == CONNECTING:
                conn.deny(_SERVER_ERROR)
            elif conn.state == OPEN:
                conn.close(1011, "internal error")
            return
        if conn.state == CONNECTING:
            conn.deny(_FORBIDDEN)  # returned without accepting: refused
        elif conn.state == OPEN:
            conn.close(1000)

    def upgrade(request: Request, **_params: Any) -> WebSocketUpgrade:
        return WebSocketUpgrade(request, run)

    return upgrade


def upgrade_required(request: Request, **_params: Any) -> Response:
    """A WebSocket route's answer to a plain GET."""
    return Response(
        "Upgrade Required: this is a WebSocket endpoint\n",
        status=426,
        headers={"Upgrade": "websocket", "Sec-WebSocket-Version": "13", "Connection": "close"},
    )


__all__ = ["CLOSED", "WebSocket", "WebSocketUpgrade", "upgrade_required", "websocket_route"]
