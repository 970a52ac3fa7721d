"""`WebSocketConnection`: the server side of one WebSocket, after the upgrade.

Theory of operation. When the upgrade request's turn comes (every response
before it written), the HTTP connection gives up its transport (`detach`) and
this protocol takes it over with `transport.set_protocol`, along with the bytes
already read past the request head. Until the app accepts, what arrives is
only held (reading pauses past a small bound); a close before accept answers
with an HTTP response (403) instead. After `accept` writes the `101`, every
read goes through the native codec in one call (`WebSocketCodec.feed`), which
returns all the whole messages in it; pings are answered at once, messages
queue for `receive` (reading pauses while the app lags behind, so a fast
sender cannot grow the queue without bound), and a protocol error closes with
the code the codec names (1002, 1007, 1009).

Sending writes the frame at once and waits only when the transport is over its
high-water mark (`pause_writing`), so a client that does not read pins about
one high-water mark. The server pings every `ws_ping_interval` and closes with
1011 when a pong takes longer than `ws_ping_timeout`. A close (ours or the
peer's) follows RFC 6455's handshake, bounded by `ws_close_timeout`; server
shutdown closes with 1001.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import deque
from typing import TYPE_CHECKING, Any

from surge._core import WS_CLOSE, WS_ERROR, WS_PING, WS_PONG, WebSocketHandshake

from .errors import WebSocketDisconnect

if TYPE_CHECKING:
    from surge._core import AccessLog, Request, WebSocketCodec
    from surge.http.config import Limits
    from surge.http.server import Server

log = logging.getLogger("surge.websocket")

#: Connection states.
CONNECTING, OPEN, CLOSING, CLOSED = range(4)
#: Bytes held before accept past which reading pauses.
_PRE_ACCEPT_BUFFER = 64 * 1024
#: Messages queued for `receive` past which reading pauses.
_MAX_QUEUED = 64
#: Bytes of messages queued for `receive` past which reading pauses: with what one
#: read can add and the message being assembled, this bounds a client that sends
#: while the app does not receive.
_MAX_QUEUED_BYTES = 1024 * 1024
#: Close code for a connection lost without a close frame (never sent).
ABNORMAL_CLOSURE = 1006
NO_STATUS = 1005


class WebSocketConnection(asyncio.Protocol):
    """One WebSocket over a transport taken from an HTTP connection."""

    def __init__(
        self,
        server: Server,
        transport: asyncio.Transport,
        handshake: WebSocketHandshake,
        limits: Limits,
        rest: bytes,
    ) -> None:
        self._server = server
        #: The server's own response headers, for the 101 and any denial.
        self._ours = server.plan.head_defaults
        self._transport = transport
        self._handshake = handshake
        self._limits = limits
        self._loop = asyncio.get_running_loop()
        self._codec: WebSocketCodec | None = None
        self._pending = bytearray(rest)
        self.state = CONNECTING
        self._inbox: deque[str | bytes] = deque()
        self._inbox_bytes = 0
        self._waiter: asyncio.Future[None] | None = None
        self._drain: asyncio.Future[None] | None = None
        self._paused_writing = False
        self._paused_reading = False
        #: (code, reason) once the connection is closing or closed.
        self.close_code: int | None = None
        self.close_reason = ""
        self._closed = self._loop.create_future()
        self._ping_handle: asyncio.TimerHandle | None = None
        self._pong_handle: asyncio.TimerHandle | None = None
        self._close_handle: asyncio.TimerHandle | None = None
        #: Set by the owner (App or ASGI cycle): the app's task, cancelled on shutdown abort.
        self.task: asyncio.Task[Any] | None = None
        #: The access log and the upgrade request, when the server keeps a log:
        #: the answer to the upgrade (101, or the app's refusal) gets its line.
        self.access: tuple[AccessLog, Request] | None = None

    # Taking over -------------------------------------------------------------------

    def start(self) -> None:
        """Switches the transport over to this protocol."""
        transport = self._transport
        transport.set_protocol(self)
        transport.set_write_buffer_limits(high=self._limits.write_high_water)
        self._server.connections.add(self)  # type: ignore[arg-type]
        if len(self._pending) > _PRE_ACCEPT_BUFFER:
            self._pause_reading()
        else:
            # The HTTP side may have paused reading (pipelining bounds).
            transport.resume_reading()

    def extra_info(self, name: str) -> Any:
        """The transport's `get_extra_info(name)`."""
        return self._transport.get_extra_info(name)

    @property
    def subprotocols(self) -> list[str]:
        """The subprotocols the client offered, in its order."""
        return self._handshake.subprotocols

    def accept(
        self,
        subprotocol: str | None = None,
        headers: Any = None,
    ) -> None:
        """Writes the `101` response; messages flow from now on. Raises
        `WebSocketDisconnect` (1006) when the client left before."""
        if self.state == CLOSED:
            raise WebSocketDisconnect(self.close_code or ABNORMAL_CLOSURE, self.close_reason)
        if self.state != CONNECTING:
            raise RuntimeError("the WebSocket was accepted already")
        limits = self._limits
        head, codec = self._handshake.accept(
            subprotocol,
            headers,
            compress=limits.ws_per_message_deflate,
            max_message_size=limits.ws_max_message_size,
        )
        head = self._ours.insert(head)
        self._codec = codec
        self.state = OPEN
        self._transport.write(head)
        if self.access is not None:
            self.access[0].log_rendered(self.access[1], head)
        pending, self._pending = bytes(self._pending), bytearray()
        if self._paused_reading:
            self._resume_reading()
        if pending:
            self._on_events(codec.feed(pending))
        if self.state == OPEN:
            self._ping_handle = self._loop.call_later(limits.ws_ping_interval, self._ping)

    def deny(self, response: bytes) -> None:
        """Answers the upgrade request with an HTTP response (`response`, whole) and
        closes; nothing to do once the client has left."""
        if self.state == CLOSED:
            return
        if self.state != CONNECTING:
            raise RuntimeError("the WebSocket was accepted already")
        self.state = CLOSED
        self.close_code = 1006
        response = self._ours.insert(response)
        self._transport.write(response)
        if self.access is not None:
            self.access[0].log_rendered(self.access[1], response)
        self._transport.close()

    # asyncio callbacks -------------------------------------------------------------

    def data_received(self, data: bytes) -> None:
        codec = self._codec
        if codec is None:
            if self.state == CONNECTING:
                self._pending += data
                if len(self._pending) > _PRE_ACCEPT_BUFFER:
                    self._pause_reading()
            return
        self._on_events(codec.feed(data))

    def eof_received(self) -> bool:
        return False  # close our side too: connection_lost follows

    def connection_lost(self, exc: Exception | None) -> None:
        if self.close_code is None:
            self.close_code = ABNORMAL_CLOSURE
        self.state = CLOSED
        self._server.connections.discard(self)  # type: ignore[arg-type]
        for handle in (self._ping_handle, self._pong_handle, self._close_handle):
            if handle is not None:
                handle.cancel()
        self._wake()
        if self._drain is not None and not self._drain.done():
            self._drain.set_result(None)
        if not self._closed.done():
            self._closed.set_result(None)

    def pause_writing(self) -> None:
        self._paused_writing = True

    def resume_writing(self) -> None:
        self._paused_writing = False
        if self._drain is not None and not self._drain.done():
            self._drain.set_result(None)

    # Frames in ---------------------------------------------------------------------

    def _on_events(self, events: list[Any]) -> None:
        inbox = self._inbox
        for ev in events:
            kind = type(ev)
            if kind is str or kind is bytes:
                if self.state == OPEN:
                    inbox.append(ev)
                    self._inbox_bytes += len(ev)
                continue
            tag = ev[0]
            if tag == WS_PING:
                if self.state == OPEN:
                    self._write(self._codec.pong(ev[1]))  # type: ignore[union-attr]
            elif tag == WS_PONG:
                if self._pong_handle is not None:
                    self._pong_handle.cancel()
                    self._pong_handle = None
            elif tag == WS_CLOSE:
                self._peer_closed(ev[1], ev[2])
            elif tag == WS_ERROR:
                self._fail(ev[1], ev[2])
        if inbox:
            self._wake()
            if len(inbox) >= _MAX_QUEUED or self._inbox_bytes > _MAX_QUEUED_BYTES:
                self._pause_reading()

    def _peer_closed(self, code: int, reason: str) -> None:
        if self.state == OPEN:
            # Echo the code and reason (RFC 6455 5.5.1; an empty close for none).
            self.close_code, self.close_reason = code, reason
            self._write(self._codec.close(code, reason))  # type: ignore[union-attr]
        # The server closes the TCP connection first (RFC 6455 7.1.1).
        self.state = CLOSED
        self._transport.close()
        self._wake()

    def _fail(self, code: int, reason: str) -> None:
        """A protocol error (or a dead peer): send close `code` and drop the connection."""
        if self.state == OPEN:
            self._write(self._codec.close(code, reason))  # type: ignore[union-attr]
        if self.close_code is None:
            self.close_code, self.close_reason = code, reason
        self.state = CLOSED
        self._transport.close()
        self._wake()

    # Messages for the app ----------------------------------------------------------

    async def receive(self) -> str | bytes:
        """The next message; raises `WebSocketDisconnect` once the connection is closing."""
        inbox = self._inbox
        while not inbox:
            if self.state != OPEN:
                raise WebSocketDisconnect(self.close_code or ABNORMAL_CLOSURE, self.close_reason)
            self._waiter = self._loop.create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None
        message = inbox.popleft()
        self._inbox_bytes -= len(message)
        if (
            self._paused_reading
            and len(inbox) < _MAX_QUEUED // 2
            and self._inbox_bytes <= _MAX_QUEUED_BYTES // 2
        ):
            self._resume_reading()
        return message

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    # Frames out --------------------------------------------------------------------

    def _write(self, data: bytes) -> None:
        if not self._transport.is_closing():
            self._transport.write(data)

    def _check_open(self) -> WebSocketCodec:
        if self.state != OPEN or self._codec is None:
            if self.state == CONNECTING:
                raise RuntimeError("accept the WebSocket before sending")
            raise WebSocketDisconnect(self.close_code or ABNORMAL_CLOSURE, self.close_reason)
        return self._codec

    async def send_text(self, text: str) -> None:
        """Sends a text message; waits while the client is not reading."""
        self._write(self._check_open().text(text))
        if self._paused_writing:
            await self.drain()

    async def send_bytes(self, data: bytes) -> None:
        """Sends a binary message; waits while the client is not reading."""
        self._write(self._check_open().binary(data))
        if self._paused_writing:
            await self.drain()

    async def send_many(self, messages: list[str | bytes]) -> None:
        """Sends several messages in one write (str as text, bytes as binary)."""
        self._write(self._check_open().encode_many(messages))
        if self._paused_writing:
            await self.drain()

    async def drain(self) -> None:
        """Waits until the transport is under its high-water mark (or gone)."""
        while self._paused_writing and self.state != CLOSED:
            if self._drain is None or self._drain.done():
                self._drain = self._loop.create_future()
            await self._drain
        if self.state == CLOSED and self._transport.is_closing():
            raise WebSocketDisconnect(self.close_code or ABNORMAL_CLOSURE, self.close_reason)

    def close(self, code: int = 1000, reason: str = "") -> None:
        """Starts the closing handshake: sends close `code`; the connection ends when the
        client answers, or after `ws_close_timeout`."""
        if self.state != OPEN:
            return
        self._write(self._codec.close(code, reason))  # type: ignore[union-attr]
        self.state = CLOSING
        self.close_code, self.close_reason = code, reason
        if self._ping_handle is not None:
            self._ping_handle.cancel()
        self._close_handle = self._loop.call_later(
            self._limits.ws_close_timeout, self._transport.abort
        )
        if self._paused_reading:
            self._resume_reading()  # the client's close must get through
        self._wake()

    async def wait_closed(self) -> None:
        """Waits until the transport is closed."""
        await asyncio.shield(self._closed)

    # Keep-alive --------------------------------------------------------------------

    def _ping(self) -> None:
        if self.state != OPEN:
            return
        self._write(self._codec.ping(b"surge"))  # type: ignore[union-attr]
        if self._pong_handle is None:
            self._pong_handle = self._loop.call_later(
                self._limits.ws_ping_timeout, self._ping_timed_out
            )
        self._ping_handle = self._loop.call_later(self._limits.ws_ping_interval, self._ping)

    def _ping_timed_out(self) -> None:
        self._pong_handle = None
        log.info("closing a WebSocket whose client did not answer a ping in time")
        self._fail(1011, "keepalive ping timeout")
        self._transport.abort()

    # Reading back-pressure ---------------------------------------------------------

    def _pause_reading(self) -> None:
        if not self._paused_reading:
            self._paused_reading = True
            with contextlib.suppress(RuntimeError, AttributeError):
                self._transport.pause_reading()

    def _resume_reading(self) -> None:
        if self._paused_reading:
            self._paused_reading = False
            with contextlib.suppress(RuntimeError, AttributeError):
                self._transport.resume_reading()

    # What the server asks of its connections ---------------------------------------

    def check_timeouts(self, header_timeout: float, keepalive_timeout: float) -> None:
        """The HTTP deadlines do not apply (pings keep a WebSocket honest)."""

    def stop_keep_alive(self) -> None:
        """Server shutdown starts: nothing to announce on a WebSocket (see `close_if_idle`)."""

    def close_if_idle(self, linger: float = 0.0) -> bool:
        """Server shutdown: closes with 1001 (going away) at once (`linger` is for
        HTTP keep-alive connections)."""
        if self.state == OPEN:
            self.close(1001, "server shutdown")
        elif self.state == CONNECTING:
            self.deny(_SERVICE_UNAVAILABLE)
        return False

    def abort(self) -> None:
        """Drops the connection at once."""
        self._transport.abort()
        if self.task is not None:
            self.task.cancel()


_SERVICE_UNAVAILABLE = (
    b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain; charset=utf-8\r\n"
    b"Connection: close\r\nContent-Length: 20\r\n\r\nserver shutting down"
)


def http_response(status: int, headers: list[tuple[bytes, bytes]], body: bytes) -> bytes:
    """A whole HTTP/1.1 response that closes the connection (for denials)."""
    from http import HTTPStatus

    try:
        phrase = HTTPStatus(status).phrase
    except ValueError:
        phrase = ""
    lines = [f"HTTP/1.1 {status} {phrase}".encode("latin-1")]
    for name, value in headers:
        if b"\r" in name + value or b"\n" in name + value:
            raise ValueError("CR or LF in a response header")
        if name.lower() in (b"content-length", b"connection", b"transfer-encoding"):
            continue
        lines.append(name + b": " + value)
    lines.append(b"Connection: close")
    lines.append(b"Content-Length: " + str(len(body)).encode())
    return b"\r\n".join(lines) + b"\r\n\r\n" + body
