"""The ASGI websocket scope (spec_version 2.4) over surge's WebSocket connections.

When the upgrade request's turn comes and its handshake is valid, the
connection is handed to a `WebSocketConnection` (see `surge.websocket`) and
the app runs with a `websocket` scope: `receive` gives `websocket.connect`,
then `websocket.receive` (`text` or `bytes`), then `websocket.disconnect`
(code, reason); `send` takes `websocket.accept` (subprotocol, headers),
`websocket.send`, `websocket.close` (before accept: HTTP 403, as uvicorn does)
and the `websocket.http.response` extension (`.start`/`.body`) to refuse with a
response of the app's own. An app that fails or returns before accepting is
answered with 500; after accepting, a failure closes with 1011 and a return
with 1000. `send` once the connection is closed raises `WebSocketDisconnect`,
a ConnectionError (an OSError, as the spec asks).
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from surge.websocket.app import WebSocketUpgrade
from surge.websocket.connection import CONNECTING, OPEN, WebSocketConnection, http_response
from surge.websocket.errors import WebSocketDisconnect

from .cycle import ASGIApp, Message, Scope

if TYPE_CHECKING:
    from surge._core import Request

    from .app import AsgiApp

log = logging.getLogger("surge.asgi")

_CONNECT: dict[str, Any] = {"type": "websocket.connect"}
_ERROR_500 = http_response(
    500, [(b"content-type", b"text/plain; charset=utf-8")], b"Internal Server Error"
)
_FORBIDDEN = http_response(403, [(b"content-type", b"text/plain; charset=utf-8")], b"Forbidden")


class WebSocketCycle:
    """`receive` and `send` of one ASGI websocket connection."""

    __slots__ = ("_body", "_conn", "_connect_sent", "_start")

    def __init__(self, conn: WebSocketConnection) -> None:
        self._conn = conn
        self._connect_sent = False
        self._start: Message | None = None
        self._body: list[bytes] = []

    async def receive(self) -> Message:
        if not self._connect_sent:
            self._connect_sent = True
            return dict(_CONNECT)
        try:
            message = await self._conn.receive()
        except WebSocketDisconnect as exc:
            return {"type": "websocket.disconnect", "code": exc.code, "reason": exc.reason}
        if type(message) is str:
            return {"type": "websocket.receive", "text": message}
        return {"type": "websocket.receive", "bytes": message}

    async def send(self, message: Message) -> None:
        conn = self._conn
        kind = message["type"]
        if kind == "websocket.send":
            text = message.get("text")
            if text is not None:
                await conn.send_text(text)
            else:
                data = message.get("bytes")
                if data is None:
                    raise RuntimeError("websocket.send needs 'text' or 'bytes'")
                await conn.send_bytes(data)
        elif kind == "websocket.accept":
            if conn.state != CONNECTING:
                raise RuntimeError("websocket.accept after the handshake")
            conn.accept(message.get("subprotocol"), message.get("headers") or None)
        elif kind == "websocket.close":
            if conn.state == CONNECTING:
                if self._start is not None:
                    raise RuntimeError("websocket.close during websocket.http.response")
                conn.deny(_FORBIDDEN)
            elif conn.state == OPEN:
                conn.close(message.get("code") or 1000, message.get("reason") or "")
            else:
                raise WebSocketDisconnect(conn.close_code or 1006, conn.close_reason)
        elif kind == "websocket.http.response.start":
            if conn.state != CONNECTING or self._start is not None:
                raise RuntimeError("websocket.http.response.start after the handshake")
            self._start = message
        elif kind == "websocket.http.response.body":
            start = self._start
            if start is None or conn.state != CONNECTING:
                raise RuntimeError("websocket.http.response.body without a start")
            self._body.append(bytes(message.get("body", b"")))
            if not message.get("more_body", False):
                headers = [(bytes(n), bytes(v)) for n, v in start.get("headers", ())]
                conn.deny(http_response(int(start["status"]), headers, b"".join(self._body)))
        else:
            raise RuntimeError(f"unexpected ASGI message {kind!r} on a websocket")


def websocket_upgrade(dispatcher: AsgiApp, request: Request) -> WebSocketUpgrade:
    """The upgrade response of an ASGI app's websocket request."""

    async def run(conn: WebSocketConnection, req: Request) -> None:
        await run_app(dispatcher.app, _scope(dispatcher, conn, req), conn)

    return WebSocketUpgrade(request, run)


async def run_app(app: ASGIApp, scope: Scope, conn: WebSocketConnection) -> None:
    """Runs the app on `conn`, answering what it leaves unanswered."""
    cycle = WebSocketCycle(conn)
    try:
        await app(scope, cycle.receive, cycle.send)
    except asyncio.CancelledError:
        raise
    except Exception:
        if conn.state == CONNECTING:
            log.exception("ASGI websocket app failed before accepting")
            conn.deny(_ERROR_500)
        elif conn.state == OPEN:
            log.exception("ASGI websocket app failed")
            conn.close(1011, "internal error")
        return
    if conn.state == CONNECTING:
        log.error("ASGI websocket app returned without accepting or closing")
        conn.deny(_ERROR_500)
    elif conn.state == OPEN:
        conn.close(1000)


def _scope(dispatcher: AsgiApp, conn: WebSocketConnection, request: Request) -> Scope:
    from .app import _address

    root = dispatcher.root_path
    extra = conn.extra_info
    return {
        "type": "websocket",
        "asgi": {"version": "3.0", "spec_version": "2.4"},
        "http_version": request.version,
        "scheme": "wss" if extra("sslcontext") is not None else "ws",
        "server": _address(extra("sockname")),
        "client": _address(extra("peername")),
        "root_path": root,
        "path": root + request.path,
        "raw_path": root.encode() + request.raw_path,
        "query_string": request.query_string.encode(),
        "headers": [
            (name.encode("latin-1"), value.encode("latin-1"))
            for name, value in request.headers.items()
        ],
        "subprotocols": conn.subprotocols,
        "state": dispatcher.state.copy(),
        "extensions": {"websocket.http.response": {}},
    }
