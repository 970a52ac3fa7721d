"""WebSocket (RFC 6455, permessage-deflate RFC 7692) on surge's server.

`@app.websocket("/ws")` registers an `async def handler(websocket)` on a surge
`App` (`WebSocket` has Starlette's method names); ASGI apps get the websocket
scope through `surge.asgi`. The codec is native (`surge._core.WebSocketCodec`).
"""

from .app import WebSocket
from .connection import WebSocketConnection
from .errors import WebSocketDisconnect

__all__ = ["WebSocket", "WebSocketConnection", "WebSocketDisconnect"]
