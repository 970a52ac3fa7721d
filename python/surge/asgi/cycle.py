"""One ASGI HTTP request/response cycle over a surge connection.

Theory of operation: the dispatcher's handler (`surge.asgi.app`) makes an
`HttpCycle` for each request and returns it at once, so the connection queues it
like any other response (in request order), while the app runs in a task of its
own. What the app sends before its turn comes is kept in `_pending` (its `send`
waits once that passes the high-water mark); when every earlier response has
left, the connection calls `write`, which flushes what is pending, and from then
on `send` writes straight to the transport and waits for it to drain.

The request body comes through the connection's `BodyStream` (reading pauses
while the app does not call `receive`). `receive` returns `http.disconnect` once
the client is gone or the response is complete; `send` raises
`ClientDisconnected` (an OSError, as spec 2.4 asks) once the client is gone.

The app is never cancelled when the client leaves (it learns it from
`receive`/`send`), so work after the response (background tasks) still runs.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Awaitable, Callable, MutableMapping
from functools import partial
from http import HTTPStatus
from typing import TYPE_CHECKING, Any

from surge._core import http_date
from surge.http.errors import ClientDisconnected
from surge.http.response import WriterResponse

if TYPE_CHECKING:
    from surge._core import Request
    from surge.http.protocol import BodyStream, HttpProtocol

log = logging.getLogger("surge.asgi")

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

_REASONS = {s.value: s.phrase.encode() for s in HTTPStatus}
_SERVER = b"server: surge\r\n"
_BAD_NAME = frozenset(b' \t\r\n\0:()<>@,;\\"/[]?={}')
_BAD_VALUE = (b"\r", b"\n", b"\0")
_ERROR_500 = b"Internal Server Error"

#: The tasks running apps (see `HttpCycle.__init__`).
_running: set[asyncio.Task[None]] = set()
#: The name of every app task (a name given skips formatting one per request).
_TASK_NAME = "surge-asgi"

#: Status lines, made once per status.
_STATUS_LINES: dict[int, bytes] = {}
#: A response header as the app gives it -> (what it is, its line). Apps send the
#: same headers again and again: each is checked and encoded once.
_HEADER_LINES: dict[tuple[bytes, bytes], tuple[int, bytes]] = {}
_HEADER_CACHE_MAX = 4096
# What a response header is, for framing.
_H_OTHER, _H_LENGTH, _H_TE, _H_CONNECTION, _H_SERVER, _H_DATE = range(6)
_HEADER_KINDS = {
    b"content-length": _H_LENGTH,
    b"transfer-encoding": _H_TE,
    b"connection": _H_CONNECTION,
    b"server": _H_SERVER,
    b"date": _H_DATE,
}
#: The last `http_date()` and its header line (the date changes once a second).
_date_line: list[Any] = ["", b""]

# How the body is framed, chosen at `http.response.start`.
_NONE, _LENGTH, _CHUNKED, _UNTIL_CLOSE = 0, 1, 2, 3


def _resolve(future: asyncio.Future[None], _done: object = None) -> None:
    if not future.done():
        future.set_result(None)


def _check_header(name: bytes, value: bytes) -> None:
    if not name or not _BAD_NAME.isdisjoint(name):
        raise RuntimeError(f"invalid HTTP header name {name!r}")
    for bad in _BAD_VALUE:
        if bad in value:
            raise RuntimeError(f"invalid HTTP header value for {name!r}")


def _header_line(name: bytes, value: bytes) -> tuple[int, bytes]:
    """What the header `name: value` is, and its line (checked; cached)."""
    key = (name, value)
    try:
        return _HEADER_LINES[key]
    except (KeyError, TypeError):
        pass
    _check_header(name, value)
    entry = (_HEADER_KINDS.get(bytes(name).lower(), _H_OTHER), b"%s: %s\r\n" % (name, value))
    if type(name) is bytes and type(value) is bytes and len(_HEADER_LINES) < _HEADER_CACHE_MAX:
        _HEADER_LINES[key] = entry
    return entry


def _status_line(status: int) -> bytes:
    line = _STATUS_LINES.get(status)
    if line is None:
        line = _STATUS_LINES[status] = b"HTTP/1.1 %d %s\r\n" % (status, _REASONS.get(status, b""))
    return line


def _date() -> bytes:
    now = http_date()
    if now != _date_line[0]:
        _date_line[0] = now
        _date_line[1] = b"date: %s\r\n" % now.encode()
    return _date_line[1]  # type: ignore[no-any-return]


class HttpCycle(WriterResponse):
    """The ASGI `receive`/`send` of one request, and its response as the app sends it."""

    __slots__ = (
        "_active",
        "_body_done",
        "_closing",
        "_complete",
        "_conn",
        "_framing",
        "_gone",
        "_head",
        "_head_only",
        "_high_water",
        "_http10",
        "_keep_alive",
        "_pending",
        "_pending_size",
        "_receiving",
        "_remaining",
        "_request",
        "_sent",
        "_sent_head",
        "_space",
        "_started",
        "_status",
        "_stream",
        "_task",
        "_waiting",
        "_writer",
        "failed",
    )

    inline = True

    def __init__(
        self,
        app: ASGIApp,
        scope: Scope,
        request: Request,
        stream: BodyStream | None,
        conn: HttpProtocol,
        high_water: int,
    ) -> None:
        self._conn = conn
        self._high_water = high_water
        self._body_done = False
        self._request = request
        self._stream = stream
        self._http10 = request.version == "1.0"
        self._head_only = request.method == "HEAD"
        self._keep_alive = request.keep_alive
        self._started = False
        self._complete = False
        self._closing = False  # the response cannot be framed for keep-alive
        self.failed = False
        self._framing = _NONE
        self._remaining = 0
        self._head: bytes | None = None
        # For the access log: status, body bytes and head of the response.
        self._status = 0
        self._sent = 0
        self._sent_head: bytes | None = None
        self._active = False
        self._pending: list[bytes] = []
        self._pending_size = 0
        self._receiving = False
        self._space: asyncio.Future[None] | None = None
        self._writer: asyncio.Future[None] | None = None
        self._gone: asyncio.Future[None] | None = None
        #: The connection waits for `writer_done` (see `begin`).
        self._waiting = False
        self._task = task = conn._loop.create_task(self._run(app, scope), name=_TASK_NAME)
        # The loop keeps only weak references to tasks; an app awaiting something
        # only it references (after its response left) must not be collected
        # (`_run` takes it out: no done callback per request).
        _running.add(task)

    # The app's side ----------------------------------------------------------------

    async def _run(self, app: ASGIApp, scope: Scope) -> None:
        try:
            await app(scope, self.receive, self.send)
        except asyncio.CancelledError:
            self._fail()
            raise
        except BaseException as exc:
            if not self._started or self._head is not None:
                # Nothing of the response has left (the head waits for the body):
                # the client can still get an honest 500.
                log.error("Exception in ASGI application", exc_info=exc)
                self._answer_500()
            elif not self._complete and not self._conn.closed:
                log.error("Exception in ASGI application", exc_info=exc)
                self._fail()
            elif isinstance(exc, OSError) or self._conn.closed:
                log.debug("ASGI application stopped: client gone (%r)", exc)
                self._fail()
            else:
                log.error("Exception in ASGI application after the response", exc_info=exc)
        else:
            if not self._started:
                if not self._conn.closed:  # else nobody is waiting for an answer
                    log.error("ASGI callable returned without starting response")
                self._answer_500()
            elif not self._complete:
                log.error("ASGI callable returned without completing response")
                self._fail()
        finally:
            _running.discard(self._task)
            self._wake_writer()

    async def receive(self) -> Message:
        """The ASGI `receive`: body chunks, then `http.disconnect` once the client is gone."""
        if not self._body_done and not self._complete:
            if self._stream is None:
                # The whole body had arrived when the request was dispatched.
                self._body_done = True
                body = self._conn.whole_body(self._request)
                return {"type": "http.request", "body": body, "more_body": False}
            self._receiving = True
            try:
                body, more = await self._stream.read_some()
            except ClientDisconnected:
                self._body_done = True
                return {"type": "http.disconnect"}
            finally:
                self._receiving = False
            if not more:
                self._body_done = True
            return {"type": "http.request", "body": body, "more_body": more}
        if not self._complete and not self._conn.closed:
            await self._gone_future()
        return {"type": "http.disconnect"}

    async def send(self, message: Message) -> None:
        """The ASGI `send`: `http.response.start`, then `http.response.body` messages."""
        kind = message["type"]
        if self._conn.closed or self.failed:
            raise ClientDisconnected("the client went away")
        if kind == "http.response.start":
            if self._started:
                raise RuntimeError("'http.response.start' sent twice")
            self._start(message)
        elif kind == "http.response.body":
            if not self._started:
                raise RuntimeError("'http.response.body' sent before 'http.response.start'")
            if self._complete:
                raise RuntimeError("'http.response.body' sent after the response completed")
            await self._body(message.get("body", b""), message.get("more_body", False))
        elif kind == "http.response.pathsend":
            if not self._started:
                raise RuntimeError("'http.response.pathsend' sent before 'http.response.start'")
            if self._complete:
                raise RuntimeError("'http.response.pathsend' sent after the response completed")
            await self._pathsend(message["path"])
        else:
            raise RuntimeError(f"unexpected ASGI message type {kind!r} for an HTTP request")

    def _start(self, message: Message) -> None:
        status = message["status"]
        if type(status) is not int or not 100 <= status <= 999:
            raise RuntimeError(f"invalid HTTP status {status!r}")
        self._started = True
        if self._conn.draining:  # the server is shutting down: this is the last one
            self._keep_alive = False
        parts = [_status_line(status)]
        length: int | None = None
        app_chunked = has_server = has_date = has_connection = False
        for name, value in message.get("headers", ()):
            kind, line = _header_line(name, value)
            if kind:
                if kind == _H_LENGTH:
                    try:
                        length = int(value)
                    except ValueError:
                        raise RuntimeError(f"invalid content-length {value!r}") from None
                elif kind == _H_TE:
                    if b"chunked" not in value.lower():
                        raise RuntimeError(f"unsupported transfer-encoding {value!r}")
                    app_chunked = True
                    if self._http10:
                        continue  # an HTTP/1.0 client cannot read chunks: close-delimited
                elif kind == _H_CONNECTION:
                    has_connection = True
                    if value.lower() == b"close":
                        self._keep_alive = False
                elif kind == _H_SERVER:
                    has_server = True
                else:
                    has_date = True
            parts.append(line)
        if not has_server:
            parts.insert(1, _SERVER)
        if not has_date:
            parts.insert(1, _date())
        if self._head_only or status < 200 or status in (204, 304):
            self._framing = _NONE
        elif length is not None and not app_chunked:
            self._framing = _LENGTH
            self._remaining = length
        elif not self._http10:
            self._framing = _CHUNKED
            if not app_chunked:
                parts.append(b"transfer-encoding: chunked\r\n")
        else:
            self._framing = _UNTIL_CLOSE
            self._keep_alive = False
        if not has_connection:
            if not self._keep_alive:
                parts.append(b"connection: close\r\n")
            elif self._http10:
                parts.append(b"connection: keep-alive\r\n")
        parts.append(b"\r\n")
        # Held back to leave with the first body bytes, in one write.
        self._head = self._sent_head = b"".join(parts)
        self._status = status

    async def _body(self, body: bytes, more: bool) -> None:
        framing = self._framing
        if framing == _CHUNKED:
            data = b"%x\r\n%b\r\n" % (len(body), body) if body else b""
            if not more:
                data += b"0\r\n\r\n"
        elif framing == _LENGTH:
            self._remaining -= len(body)
            if self._remaining < 0:
                raise RuntimeError("response content longer than its content-length")
            data = bytes(body)
        elif framing == _UNTIL_CLOSE:
            data = bytes(body)
        else:
            data = b""
        if framing != _NONE:
            self._sent += len(body)
        if self._head is not None:
            data = self._head + data
            self._head = None
        if not more:
            self._complete = True
            if self._conn.access_log is not None:
                self._conn.access_log.log(self._request, self._status, self._sent, self._sent_head)
            if framing == _LENGTH and self._remaining > 0:
                log.error("ASGI response shorter than its content-length: closing")
                self._closing = True
        if data:
            if self._active:
                conn = self._conn
                if not conn._closed:
                    conn._transport.write(data)
            else:
                self._pending.append(data)
                self._pending_size += len(data)
        if not more:
            if self._gone is not None and not self._gone.done():
                self._gone.set_result(None)
            self._wake_writer()
            return
        if self._active:
            await self._conn.drain()
        elif self._pending_size >= self._high_water:
            # Not our turn yet and a high-water mark's worth kept: wait for it.
            await self._wait_turn()

    async def _wait_turn(self) -> None:
        """Waits until every earlier response has left (`begin`/`write`), or the
        client has left (ClientDisconnected)."""
        if not self._active:
            space = self._space = asyncio.get_running_loop().create_future()
            self._conn.lost().add_done_callback(partial(_resolve, space))
            try:
                await space
            finally:
                self._space = None
        if self._conn.closed:
            raise ClientDisconnected("the client went away")

    async def _pathsend(self, path: str) -> None:
        """`http.response.pathsend`: the body is the file at `path`, sent with the
        kernel's sendfile where the transport allows (see `HttpProtocol.sendfile`)."""
        if not isinstance(path, str) or not os.path.isabs(path):
            raise RuntimeError(f"'http.response.pathsend' needs an absolute path, got {path!r}")
        with open(path, "rb") as file:
            size = os.fstat(file.fileno()).st_size
            framing = self._framing
            if framing == _LENGTH and size != self._remaining:
                raise RuntimeError(
                    f"'http.response.pathsend' of {size} bytes for a content-length "
                    f"of {self._remaining}"
                )
            head = self._head or b""
            self._head = None
            await self._wait_turn()
            conn = self._conn
            if framing == _NONE or size == 0:
                conn.write(head + (b"0\r\n\r\n" if framing == _CHUNKED else b""))
            else:
                conn.write(head + (b"%x\r\n" % size if framing == _CHUNKED else b""))
                try:
                    await conn.sendfile(file, 0, size)
                except ConnectionResetError:
                    raise ClientDisconnected("the client went away") from None
                if framing == _CHUNKED:
                    conn.write(b"\r\n0\r\n\r\n")
        self._remaining = 0
        self._complete = True
        if self._conn.access_log is not None:
            sent = 0 if framing == _NONE else size
            self._conn.access_log.log(self._request, self._status, sent, self._sent_head)
        if self._gone is not None and not self._gone.done():
            self._gone.set_result(None)
        self._wake_writer()

    def _answer_500(self) -> None:
        self._started = self._complete = True
        self._keep_alive = False
        self._pending = [
            b"HTTP/1.1 500 Internal Server Error\r\n"
            b"date: %s\r\n%scontent-type: text/plain; charset=utf-8\r\n"
            b"content-length: %d\r\nconnection: close\r\n\r\n%s"
            % (http_date().encode(), _SERVER, len(_ERROR_500), _ERROR_500)
        ]
        if self._conn.access_log is not None:
            self._conn.access_log.log_rendered(self._request, self._pending[0])
        if self._active:
            self._conn.write(self._pending.pop())
            self._wake_writer()

    def _fail(self) -> None:
        # The head may be out: the only honest signal left is to close.
        self.failed = True
        self._complete = True
        self._pending.clear()

    def _gone_future(self) -> asyncio.Future[None]:
        if self._gone is None:
            gone = self._gone = asyncio.get_running_loop().create_future()
            self._conn.lost().add_done_callback(partial(_resolve, gone))
        return self._gone

    # The connection's side (`WriterResponse`) ---------------------------------------

    def _wake_writer(self) -> None:
        # The response is complete (or failed): tell the connection, if it waits.
        if self._waiting:
            self._waiting = False
            keep_alive = self._keep_alive_after()
            if keep_alive is not None:
                self._conn.writer_done(keep_alive)
        elif self._writer is not None and not self._writer.done():
            self._writer.set_result(None)

    def begin(self, conn: HttpProtocol) -> bool | None:
        """Its turn came: flushes what the app sent before, then lets it write
        directly; the connection learns the end from `writer_done` unless the
        response is complete already."""
        self._active = True
        if self._pending:
            conn.write(b"".join(self._pending) if len(self._pending) > 1 else self._pending[0])
            self._pending.clear()
            self._pending_size = 0
        if self._space is not None and not self._space.done():
            self._space.set_result(None)
        if not self._complete:
            self._waiting = True
            return None
        return self._keep_alive_after()

    def _keep_alive_after(self) -> bool | None:
        """Whether the connection may stay open after the complete response; None
        when the rest of the request body must be read away first (then a task
        does it and calls `writer_done`)."""
        if self.failed or self._closing or not self._keep_alive:
            return False
        if self._stream is None or self._request._eof:
            return True
        # The app answered without reading the whole body: read the rest away
        # (if it is not reading itself) so the next request can be parsed.
        if self._receiving:
            return False
        task = self._conn._loop.create_task(self._discard_body())
        _running.add(task)
        task.add_done_callback(_running.discard)
        return None

    async def _discard_body(self) -> None:
        stream = self._stream
        assert stream is not None  # the body had not all arrived
        try:
            while (await stream.read_some())[1]:
                pass
        except ClientDisconnected:
            self._conn.writer_done(False)
        else:
            self._conn.writer_done(True)

    async def write(self, conn: HttpProtocol) -> bool:
        """Flushes what the app sent before its turn, then lets it write directly
        (when the connection does not call `begin`)."""
        self._active = True
        if self._pending:
            conn.write(b"".join(self._pending))
            self._pending.clear()
            self._pending_size = 0
        if self._space is not None and not self._space.done():
            self._space.set_result(None)
        if not self._complete and not self._task.done():
            self._writer = asyncio.get_running_loop().create_future()
            await self._writer
        if self.failed or self._closing or not self._keep_alive:
            return False
        if self._stream is not None and not self._request._eof:
            if self._receiving:
                return False
            stream = self._stream
            assert stream is not None  # the body had not all arrived
            try:
                while (await stream.read_some())[1]:
                    pass
            except ClientDisconnected:
                return False
        return True
