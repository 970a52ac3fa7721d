"""One ASGI HTTP request/response cycle over a surge connection.

Theory of operation: the dispatcher (`surge.asgi.app`) makes an `HttpCycle` for
each request and returns it at once, so the connection queues it like any other
response (in request order), while the app runs in a task of its own. What the
app sends before its turn comes is kept pending (its `send` waits once that
passes the high-water mark); when every earlier response has left, the
connection calls `begin`, which flushes what is pending, and from then on
`send` writes straight to the transport, waiting only while the transport is
over its high-water mark.

`receive` and `send` are native (`surge._core.AsgiCycle`, the base class): they
encode and frame the response and return awaitables that complete without
suspending whenever nothing has to be waited for. This class holds the paths
that wait (a body still arriving, the response's turn, a file to send), the
app's task and the connection's side (`begin`, `write`).

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
from collections.abc import Awaitable, Callable, Coroutine, MutableMapping
from functools import partial
from types import CoroutineType
from typing import TYPE_CHECKING, Any

from surge._core import AsgiCycle
from surge.http.errors import ClientDisconnected
from surge.http.response import WriterResponse, server_error_answer

if TYPE_CHECKING:
    from surge.http.protocol import HttpProtocol

    from .eager import EagerStarter

log = logging.getLogger("surge.asgi")

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


#: The tasks running apps (see `HttpCycle.start`).
_running: set[asyncio.Task[None]] = set()
#: The name of every app task (a name given skips formatting one per request).
TASK_NAME = "surge-asgi"

# How the body is framed, chosen at `http.response.start` (`_framing`; the
# native side's values).
_NONE, _LENGTH, _CHUNKED, _UNTIL_CLOSE = 0, 1, 2, 3


async def _raise(exc: BaseException) -> None:
    raise exc


async def _await(step: Awaitable[None]) -> None:
    await step


def _resolve(future: asyncio.Future[None], _done: object = None) -> None:
    if not future.done():
        future.set_result(None)


class HttpCycle(AsgiCycle, WriterResponse):
    """The ASGI `receive`/`send` of one request, and its response as the app sends it.

    Made with ``HttpCycle(request, stream, conn, high_water)``; `start` runs the app.
    """

    __slots__ = ()

    inline = True

    def start(self, app: ASGIApp, scope: Scope, starter: EagerStarter) -> None:
        """Runs `app` for this request as a task of its own, its first step at once
        (see `surge.asgi.eager`): an app that answers without suspending has its
        response ready when this returns, and no task is scheduled. The app's
        coroutine is started bare; `_guard` wraps it only when its first step
        raised or suspended (one coroutine less per request).

        The server's dispatcher does this natively (`surge._core.AsgiDispatch`)."""
        try:
            step = app(scope, self.receive, self.send)
        except BaseException as exc:  # an app that is not a coroutine function
            step = _raise(exc)
        # Any awaitable may come back; the starter drives coroutines.
        self._run(step if type(step) is CoroutineType else _await(step), starter)

    def _run(self, coro: Coroutine[Any, Any, None], starter: EagerStarter) -> None:
        """Starts the app's coroutine `coro` with `starter`."""
        self._first_step_done(starter.start(coro, self._guard))

    def _first_step_done(self, task: asyncio.Task[None] | None) -> None:
        """The app's first step is over: `task` runs the rest (None: it returned)."""
        if task is not None:
            self._task = task
            # The loop keeps only weak references to tasks; an app awaiting something
            # only it references (after its response left) must not be collected
            # (`_guard` takes it out: no done callback per request).
            _running.add(task)
        elif not self._complete:
            self._returned()
            self._wake_writer()

    # The app's side ----------------------------------------------------------------

    async def _guard(self, app: Awaitable[None]) -> None:
        """Awaits the rest of the app (its task's coroutine) and answers for what
        it left undone."""
        try:
            await app
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
            self._returned()
        finally:
            if self._task is not None:
                _running.discard(self._task)  # type: ignore[arg-type]
            self._wake_writer()

    def _returned(self) -> None:
        """The app returned: answers for a response it did not complete."""
        # Complete implies started: one check in the usual case.
        if self._complete:
            return
        if not self._started:
            if not self._conn.closed:  # else nobody is waiting for an answer
                log.error("ASGI callable returned without starting response")
            self._answer_500()
        else:
            log.error("ASGI callable returned without completing response")
            self._fail()

    async def _receive_slow(self) -> Message:
        """`receive` when it may have to wait: a body still arriving, or nothing
        left but `http.disconnect`."""
        if not self._body_done and not self._complete:
            stream = self._stream
            assert stream is not None  # else the native side answered
            self._receiving = True
            try:
                body, more = await stream.read_some()
            except ClientDisconnected:
                self._body_done = True
                self._refuse_body()
                return {"type": "http.disconnect"}
            finally:
                self._receiving = False
            if not more:
                self._body_done = True
            return {"type": "http.request", "body": body, "more_body": more}
        if not self._complete and not self._conn.closed:
            await self._gone_future()
        return {"type": "http.disconnect"}

    def _log_short(self) -> None:
        log.error("ASGI response shorter than its content-length: closing")

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
        answer = server_error_answer(self._conn._plan.head_defaults)
        self._set_pending(answer)
        if self._conn.access_log is not None:
            self._conn.access_log.log_rendered(self._request, answer)
        if self._active:
            self._conn.write(self._take_pending() or b"")
            self._wake_writer()

    def _refuse_body(self) -> None:
        """The body broke the server's rules (over the limit, bad chunk framing):
        when nothing of the response has begun, the server answers for it (413,
        400) and closes, as h11 and nginx do; the app, which sees
        `http.disconnect`, then finds the client gone for its own sends."""
        error = self._conn._stream_error
        if error is None or self._started:
            return
        self._started = self._complete = True
        self._keep_alive = False
        answer = self._conn._conn.render_error(error.status, error.message, close=True)
        self._set_pending(answer)
        if self._conn.access_log is not None:
            self._conn.access_log.log_rendered(self._request, answer)
        if self._active:
            self._conn.write(self._take_pending() or b"")
        self.failed = True
        self._wake_writer()

    def _fail(self) -> None:
        if self.failed and self._complete:
            # Failed already, or refused (`_refuse_body`): its answer stays pending.
            return
        # The head may be out: the only honest signal left is to close.
        self.failed = True
        self._complete = True
        self._take_pending()

    def _gone_future(self) -> asyncio.Future[None]:
        gone = self._gone
        if gone is None:
            gone = self._gone = asyncio.get_running_loop().create_future()
            self._conn.lost().add_done_callback(partial(_resolve, gone))
        return gone  # type: ignore[no-any-return]

    # The connection's side (`WriterResponse`) ---------------------------------------

    # `begin` is native (`AsgiCycle.begin`): its turn came; it flushes what the app
    # sent before and lets it write directly; the connection learns the end from
    # `writer_done` unless the response is complete already.

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
        pending = self._take_pending()
        if pending is not None:
            conn.write(pending)
        space = self._space
        if space is not None and not space.done():
            space.set_result(None)
        task = self._task
        if not self._complete and task is not None and not task.done():
            self._writer = writer = asyncio.get_running_loop().create_future()
            await writer
        if self.failed or self._closing or not self._keep_alive:
            return False
        stream = self._stream
        if stream is not None and not self._request._eof:
            if self._receiving:
                return False
            try:
                while (await stream.read_some())[1]:
                    pass
            except ClientDisconnected:
                return False
        return True
