"""WebSocket exceptions."""

from __future__ import annotations

from surge.errors import SurgeError


class WebSocketDisconnect(SurgeError, ConnectionError):
    """The WebSocket is closed: `code` is the close code (1006 when the client went
    away without a close frame) and `reason` its text. Starlette's name."""

    def __init__(self, code: int = 1000, reason: str = "") -> None:
        super().__init__(code, reason)
        self.code = code
        self.reason = reason
