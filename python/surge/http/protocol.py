"""The server side of one HTTP connection.

Theory of operation: `data_received` hands the bytes to the native
`HttpConnection`, which answers every request it can on its own (sync handler,
known return type, nothing queued ahead) and writes those answers at once. What
it cannot answer comes back as a list, in order; each item gets a slot in
`_queue`, and slots leave the queue strictly in order as they complete, so one
`transport.write` carries every response that is ready. While the queue is not
empty the native side defers everything, which keeps responses in order.

Pipelining is bounded per connection: each `feed` gets a budget (the bytes of
responses it may render: the write high-water mark less what the transport
still holds; and the requests it may hand back: `max_pipeline` less the queue).
When it runs out, the rest of the input stays in the native parser (`held`),
reading pauses, and `_continue` feeds again once the transport has drained or
the queue has shrunk. A client that pipelines thousands of requests for large
responses and never reads pins about one high-water mark, not gigabytes.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import os
import socket
import stat
import traceback
import weakref
from collections import deque
from collections.abc import Callable
from functools import partial
from ssl import SSLContext
from typing import TYPE_CHECKING, Any, cast

from surge._core import (
    AccessLog,
    BatchedTransport,
    HttpConnection,
    ParseError,
    Request,
    WriteBatch,
    encode_response_head,
)

from .conditional import FileReply, file_reply
from .errors import ClientDisconnected, HTTPException
from .response import FileResponse, Response, StreamingResponse, WriterResponse

if TYPE_CHECKING:
    from .server import Server

log = logging.getLogger("surge.http")

_NOT_FOUND = 404
#: The name of every lean-path task (see `HttpProtocol._handle`).
_TASK_NAME = "surge-handler"
_METHOD_NOT_ALLOWED = 405
#: Bytes a connection's writes may wait for the loop iteration's end (`_Batched`).
_BATCH_LIMIT = 64 * 1024
#: Bytes read from a file per write when the loop cannot sendfile.
_FILE_CHUNK = 256 * 1024


#: `_Slot.lazy` when the response is rendered already (None is a handler's result).
_EAGER: Any = object()


class _Slot:
    """One response owed to the client, in request order."""

    __slots__ = ("body", "close", "data", "done", "lazy", "request", "task")

    def __init__(self, request: Request | None) -> None:
        self.request = request
        self.data: bytes | None = None
        #: The handler's result, rendered only when its turn to be written comes
        #: (see `HttpProtocol._finish`); `data` is None meanwhile.
        self.lazy: Any = _EAGER
        self.body: StreamingResponse | FileResponse | WriterResponse | None = None
        self.done = False
        self.close = False
        #: The task running an async handler for this slot (see `_handle`).
        self.task: asyncio.Task[Any] | None = None


class BodyStream:
    """`async for chunk in request.stream()`: the body of a streaming route."""

    __slots__ = ("_protocol", "_ready", "_request", "_waiter")

    def __init__(self, protocol: HttpProtocol, request: Request) -> None:
        self._protocol = protocol
        self._request = request
        self._waiter: asyncio.Future[None] | None = None
        self._ready: deque[bytes] = deque()

    def __aiter__(self) -> BodyStream:
        return self

    async def __anext__(self) -> bytes:
        while True:
            if self._ready:
                return self._ready.popleft()
            chunks = self._request._take_chunks()
            if chunks:
                self._ready.extend(chunks)
                self._protocol._stream_drained()
                continue
            if self._protocol._stream_failed or (self._protocol._closed and not self._request._eof):
                raise ClientDisconnected("the request body ended early")
            if self._request._eof:
                if not self._request._whole:
                    # Cut by a framing error: never end it as if complete.
                    raise ClientDisconnected("the request body ended early")
                if self._protocol._body_stream is self:
                    self._protocol._body_stream = None
                raise StopAsyncIteration
            self._waiter = asyncio.get_running_loop().create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None

    async def read(self) -> bytes:
        """The rest of the body at once."""
        return b"".join([chunk async for chunk in self])

    async def read_some(self) -> tuple[bytes, bool]:
        """Every body byte that has arrived (waiting for some), and whether more follow.

        One call per wakeup rather than one per native chunk: an ASGI app gets
        one `http.request` message for what one read brought.
        """
        try:
            first = await self.__anext__()
        except StopAsyncIteration:
            return b"", False
        parts = [first, *self._ready]
        self._ready.clear()
        chunks = self._request._take_chunks()
        if chunks:
            parts.extend(chunks)
            self._protocol._stream_drained()
        # A body cut by a framing error reports more to come: the next read
        # raises ClientDisconnected rather than the app taking it as complete.
        more = not self._request._whole
        if not more and self._protocol._body_stream is self:
            self._protocol._body_stream = None
        return (b"".join(parts) if len(parts) > 1 else first), more

    @property
    def connection(self) -> HttpProtocol:
        """The connection the body arrives on."""
        return self._protocol

    def _wake(self) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)


class HttpProtocol(asyncio.Protocol):
    __slots__ = (
        "_body_stream",
        "_closed",
        "_conn",
        "_dispatch_read",
        "_dispatcher",
        "_drain",
        "_eof",
        "_held",
        "_high_water",
        "_inline_request",
        "_loop",
        "_lost",
        "_max_pipeline",
        "_paused_queue",
        "_paused_stream",
        "_paused_writing",
        "_plan",
        "_queue",
        "_reading_paused",
        "_resume_scheduled",
        "_routes",
        "_server",
        "_stream_error",
        "_stream_failed",
        "_tasks",
        "_transport",
        "_unsent",
        "_writer_busy",
        "access_log",
        "dispatcher_data",
    )

    def __init__(self, server: Server) -> None:
        self._server = server
        self._plan = plan = server.plan
        self._routes = plan.routes
        self._dispatcher = plan.dispatch
        #: A dispatcher's own handling of a read's requests (see `data_received`).
        self._dispatch_read: Callable[[HttpProtocol, list[Any] | None], bool] | None = None
        self._loop = asyncio.get_running_loop()
        self._queue: deque[_Slot] = deque()
        self._tasks: set[asyncio.Task[Any]] = set()
        self._body_stream: BodyStream | None = None
        self._stream_failed = False
        self._stream_error: ParseError | None = None
        self._closed = False
        self._writer_busy = False
        self._paused_writing = False
        self._paused_queue = False
        self._paused_stream = False
        self._reading_paused = False
        self._drain: asyncio.Future[None] | None = None
        self._eof = False
        limits = plan.limits
        self._high_water = limits.write_high_water
        self._max_pipeline = limits.max_pipeline
        #: The native side stopped on its budget with requests still buffered.
        self._held = False
        self._resume_scheduled = False
        #: Bytes rendered into queued slots and not yet written.
        self._unsent = 0
        #: Resolved in `connection_lost`; made only when a dispatcher asks (`lost`).
        self._lost: asyncio.Future[None] | None = None
        #: What a dispatcher keeps per connection (the ASGI scope's constant part).
        self.dispatcher_data: Any = None
        #: The server's access log, or None: responses the native side encodes
        #: are logged there natively; the rest by whoever completes them (`_flush`,
        #: `_write_body`, the ASGI and WSGI cycles) with `AccessLog.log`.
        self.access_log: AccessLog | None = server.access_log
        #: The request an inline `WriterResponse` is writing for (see `_release`).
        self._inline_request: Request | None = None

    # asyncio callbacks ---------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        transport = cast(asyncio.Transport, transport)
        busy = self._server.over_limit()
        if busy is not None:  # over --limit-concurrency: every request gets a 503
            self._plan, self._routes, self._dispatcher = busy, busy.routes, busy.dispatch
        if self._dispatcher is not None:
            # ASGI/WSGI: writes leave at the end of the loop iteration (see `_Batched`).
            transport = cast(asyncio.Transport, _Batched(transport, self._loop))
            # The ASGI dispatcher takes the usual read (one request, nothing queued)
            # natively (`surge._core.AsgiDispatch.dispatch_read`).
            self._dispatch_read = getattr(self._dispatcher, "dispatch_read", None)
        self._transport = transport
        sock = transport.get_extra_info("socket")
        if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        # pause_writing at the high-water mark: what the kernel has not taken is
        # counted against the next batch's budget (see `_budget`).
        transport.set_write_buffer_limits(high=self._high_water)
        limits = self._plan.limits
        self._conn = HttpConnection(
            self._plan.router,
            transport.write,
            transport.get_extra_info("peername"),
            max_request_line=limits.max_request_line,
            max_header_line=limits.max_header_line,
            max_headers=limits.max_headers,
            max_head=limits.max_head,
            max_body=limits.max_body,
            access_log=self.access_log,
            proxy=self._server.proxy_trust,
            scheme="https" if transport.get_extra_info("sslcontext") is not None else "http",
            head_defaults=self._plan.head_defaults,
        )
        self._server.connection_opened(self)

    def data_received(self, data: bytes) -> None:
        conn = self._conn
        try:
            # The budget (see the module docstring): writing not paused means the
            # transport holds less than the high-water mark, so a full mark may be
            # rendered (a bound of twice the mark, without asking the transport on
            # every read); paused, nothing new.
            deferred = conn.feed(
                data,
                0 if self._paused_writing else self._high_water,
                self._max_pipeline - len(self._queue),
            )
        except Exception:  # a bug on our side must not kill the loop
            log.exception("internal error while handling a request")
            self._transport.abort()
            return
        if deferred is not None or self._body_stream is not None or conn.held:
            fast = self._dispatch_read
            if fast is None or not fast(self, deferred):
                self._after_feed(deferred)

    def _after_feed(self, deferred: list[Any] | None) -> None:
        conn = self._conn
        if deferred and type(deferred[-1]) is ParseError and deferred[-1].streaming:
            # The streamed body broke a rule (its ParseError comes last): known
            # before its reader wakes or its request is dispatched (an ASGI app's
            # first step runs then), so a dispatcher whose response has not begun
            # answers with it (413, 400) rather than the app's own answer.
            self._stream_error = deferred[-1]
        if self._body_stream is not None:
            self._body_stream._wake()
            if conn.stream_buffered > self._plan.limits.stream_buffer:
                self._update_reading()  # pause until the handler catches up
        if deferred is not None:
            self._dispatch(deferred)
        if conn.held and not self._held:
            self._held = True
            self._update_reading()
            self._schedule_continue()

    def _schedule_continue(self) -> None:
        # From the loop, not inline: a client whose responses the kernel takes as
        # fast as they come must not keep this connection in one long call.
        if not self._resume_scheduled and not self._closed:
            self._resume_scheduled = True
            self._loop.call_soon(self._continue)

    def _continue(self) -> None:
        """Hands the held requests to the native side again, if there is room now
        (else `resume_writing` or `_flush` calls back)."""
        self._resume_scheduled = False
        if not self._held or self._closed:
            return
        room = self._high_water - self._transport.get_write_buffer_size()
        slots = self._max_pipeline - len(self._queue)
        if room <= 0 or slots <= 0:
            return
        self._held = False
        try:
            deferred = self._conn.feed(b"", room, slots)
        except Exception:
            log.exception("internal error while handling a request")
            self._transport.abort()
            return
        self._after_feed(deferred)
        if not self._held:
            self._update_reading()
            self._flush_idle()

    def eof_received(self) -> bool:
        # Half-close: answer what is queued (and held), then close (see `_flush`).
        self._eof = True
        if self._body_stream is not None and not self._body_stream._request._eof:
            # A body still being streamed can never complete now.
            self._stream_failed = True
            self._body_stream._wake()
        return bool(self._queue) or self._writer_busy or self._held

    def connection_lost(self, exc: Exception | None) -> None:
        self._closed = True
        self._server.connections.discard(self)
        for task in self._tasks:
            task.cancel()
        for slot in self._queue:
            if slot.task is not None:
                slot.task.cancel()
            _release(slot.request)
        self._release_inline()
        if self._body_stream is not None:
            _release(self._body_stream._request)
            self._body_stream._wake()
        if self._drain is not None and not self._drain.done():
            self._drain.set_exception(ConnectionResetError("client went away"))
            self._drain.exception()  # mark retrieved
        if self._lost is not None and not self._lost.done():
            self._lost.set_result(None)

    def pause_writing(self) -> None:
        self._paused_writing = True
        self._update_reading()

    def resume_writing(self) -> None:
        self._paused_writing = False
        if self._drain is not None and not self._drain.done():
            self._drain.set_result(None)
        if self._closed:
            self._transport.close()  # a close held back until now (see `_close`)
            return
        self._update_reading()
        if self._queue and self._queue[0].done and not self._writer_busy:
            self._flush()  # responses held back at the high-water mark
        if self._held:
            self._schedule_continue()

    # The connection as a `WriterResponse` sees it --------------------------------

    @property
    def closed(self) -> bool:
        """True once the connection is closed or closing."""
        return self._closed or self._transport.is_closing()

    @property
    def writing_paused(self) -> bool:
        """True while the transport holds more than the high-water mark (a writer
        should wait for `drain` before producing more)."""
        return self._paused_writing

    def write(self, data: bytes) -> None:
        """Writes `data` to the client (dropped once the connection is closed)."""
        if not self._closed:
            self._transport.write(data)

    async def drain(self) -> None:
        """Waits while the transport is over its high-water mark; raises
        ConnectionResetError once the client is gone."""
        await self._wait_writable()

    def writer_done(self, keep_alive: bool) -> None:
        """Called by an inline `WriterResponse` (see `WriterResponse.begin`) once its
        response is complete: the next responses may go, or the connection closes."""
        self._writer_busy = False
        req = self._inline_request
        if req is not None:  # `_release_inline`, inline: once per request
            if req._stream is not None:
                req._stream = None
            self._inline_request = None
        if not keep_alive:
            self._drop_queue()
            self._close()
            return
        if self._queue or self._held or self._paused_queue:
            self._flush()
            return
        # `_flush` with nothing queued, without its frame: the connection is idle.
        conn = self._conn
        conn.fast = True
        if conn.continue_owed or conn.closing or self._eof or self._server.closing:
            self._flush()  # a 100 Continue owed, or the connection ends here

    def _release_inline(self) -> None:
        _release(self._inline_request)
        self._inline_request = None

    def lost(self) -> asyncio.Future[None]:
        """A future resolved when the connection is lost."""
        if self._lost is None:
            self._lost = self._loop.create_future()
            if self._closed:  # closing or closed: nothing more reaches the client
                self._lost.set_result(None)
        return self._lost

    def extra_info(self, name: str) -> Any:
        """The transport's `get_extra_info(name)` (sockname, peername, sslcontext...)."""
        return self._transport.get_extra_info(name)

    def body_stream(self, req: Request) -> BodyStream | None:
        """The `BodyStream` a dispatcher reads `req`'s body from (read back-pressure
        follows its pace), or None when the whole body has arrived already: then
        `req._take_chunks()` holds all of it (or `req.body`, for a target no route
        matches, such as `OPTIONS *`) and nothing waits on this connection."""
        if req._whole or req._route < 0:
            return None
        return self._open_stream(req)

    @staticmethod
    def whole_body(req: Request) -> bytes:
        """The body of a request `body_stream` gave no stream for (it had all arrived)."""
        chunks = req._take_chunks()
        if chunks:
            return chunks[0] if len(chunks) == 1 else b"".join(chunks)
        # No route framed it (an `OPTIONS *` target): the parser read it whole.
        return req.body if req._route < 0 else b""

    def _open_stream(self, req: Request) -> BodyStream:
        stream = BodyStream(self, req)
        req._stream = stream
        self._body_stream = stream
        self._stream_failed = False
        return stream

    # Slow path ----------------------------------------------------------------------

    def _dispatch(self, items: list[Any]) -> None:
        for item in items:
            if type(item) is ParseError:
                if self._body_stream is not None:
                    self._stream_failed = True
                    self._body_stream._wake()
                if item.streaming:
                    # The streaming handler sees ClientDisconnected; its request
                    # is answered with this error (see `_answer_exception`).
                    self._stream_error = item
                    break
                slot = _Slot(None)
                slot.data = self._conn.render_error(item.status, item.message, close=True)
                slot.done = slot.close = True
                self._queue.append(slot)
                break
            if self._dispatcher is not None:
                self._handle_dispatched(item, self._dispatcher)
            else:
                self._handle(item)
        queue = self._queue
        if len(queue) >= self._plan.limits.max_pipeline:
            self._paused_queue = True
            self._update_reading()
        if not queue or queue[0].done:
            self._flush()
        # Else nothing can go out yet: the native side stopped answering inline
        # when it deferred these (see HttpConnection.feed), and `_finish` flushes.

    def _handle(self, req: Request) -> None:
        slot = _Slot(req)
        self._queue.append(slot)
        rid = req._route
        if rid < 0:
            self._finish_error(slot, req, HTTPException(_NOT_FOUND if rid == -1 else 405))
            return
        route = self._routes[rid]
        outcome = req._outcome
        if outcome == 1:
            self._start(self._answer_exception(slot, req, req._result))
        elif outcome == 2:
            self._finish(slot, req, req._result)
        elif outcome == 3:
            coro, awaited = req._result
            self._start(self._await_result(slot, req, _Resumed(coro, awaited)))
        elif route.lean:
            # The common async route, on a lean path: the handler's coroutine runs
            # straight in its task (no wrapper checking hooks), and the slot, which
            # stays queued until the task has answered, holds the task, so no done
            # callback (one more loop callback per request) keeps a task set. A
            # name given skips formatting a "Task-N" one per request.
            slot.task = self._loop.create_task(
                self._run_async(slot, req, route.handler), name=_TASK_NAME
            )
        elif route.websocket is not None and self._conn.upgrade and _wants_websocket(req):
            self._upgrade(slot, req, route)
        elif route.is_async or route.threaded or route.stream or self._plan.has_hooks:
            if route.stream:
                self._open_stream(req)
                if not (route.is_async or route.threaded or self._plan.has_hooks):
                    # A plain function reading a streamed body: called at once
                    # (it may return a `WriterResponse`), no task is spent on it.
                    try:
                        result = route.handler(req, **req.path_params)
                    except Exception as exc:
                        self._start(self._answer_exception(slot, req, exc))
                        return
                    if isinstance(result, WriterResponse):
                        slot.body = result
                        slot.done = True
                        if not self._writer_busy and self._queue[0] is slot:
                            self._flush()
                        return
                    self._finish(slot, req, result)
                    return
            self._start(self._run(slot, req, route))
        else:
            self._call_inline(slot, req, route)

    # WebSocket hook (the protocol itself lives in surge.websocket) ------------------

    def _handle_dispatched(self, req: Request, dispatcher: Callable[..., Any]) -> None:
        # A dispatcher taking every request (ASGI): it starts the app and returns
        # its inline `WriterResponse` at once; no route, task or native rendering
        # is involved here. An upgrade to WebSocket goes to the catch-all route's
        # websocket handler.
        if self._conn.upgrade and _wants_websocket(req):
            route = self._routes[0]
            if route.websocket is not None:
                slot = _Slot(req)
                self._queue.append(slot)
                self._upgrade(slot, req, route)
                return
        # Nothing ahead of it: the response may leave as soon as the dispatcher
        # returns, without a queue slot (an ASGI app's first step runs in the
        # dispatcher, so most responses are complete by then). The slot is only
        # made after the call: while the app runs, no other request is dispatched.
        ahead = bool(self._queue) or self._writer_busy
        try:
            writer = dispatcher(req, self)
        except Exception as exc:
            self._dispatch_failed(req, exc)
            return
        if not ahead and not self._queue and not self._writer_busy and not self._closed:
            # (`begin` calls nothing that reads `_writer_busy` back.)
            keep_alive = writer.begin(self)
            if keep_alive is None:
                # `writer_done` follows, once the app has sent the rest.
                self._writer_busy = True
                self._inline_request = req
                return
            if req._stream is not None:  # `_release`, inline: once per request
                req._stream = None
            if not keep_alive:
                self._drop_queue()
                self._close()
            return
        self._queue_dispatched(req, writer)

    def _queue_dispatched(self, req: Request, writer: WriterResponse) -> None:
        """Queues the response `writer` of the dispatched `req` behind those ahead."""
        slot = _Slot(req)
        self._queue.append(slot)
        slot.body = writer
        slot.done = True
        if not self._writer_busy and self._queue[0] is slot:
            self._flush()

    def _dispatch_failed(self, req: Request, exc: Exception) -> None:
        """The dispatcher raised for `req`: it is answered as a handler error."""
        slot = _Slot(req)
        self._queue.append(slot)
        self._start(self._answer_exception(slot, req, exc))

    def _upgrade(self, slot: _Slot, req: Request, route: Any) -> None:
        # The route's `websocket` callable returns an inline WriterResponse that,
        # when its turn comes (every earlier response written), answers the
        # handshake or takes the transport over with `detach`.
        slot.body = route.websocket(req, **req.path_params)
        slot.done = True
        # Until the hand-over the native side only keeps what arrives: stop reading,
        # so a client cannot pile up frames behind slow earlier responses.
        if not self._reading_paused:
            self._reading_paused = True
            self._transport.pause_reading()
        if not self._writer_busy and self._queue[0] is slot:
            self._flush()

    def detach(self) -> tuple[asyncio.Transport, bytes, Server]:
        """Gives the transport up to the protocol an upgrade switched to, with the
        bytes read past the upgrade request's head and the server (which tracks the
        new protocol from now on); this protocol is done."""
        self._closed = True
        self._server.connections.discard(self)
        return self._transport, self._conn.take_rest(), self._server

    def _call_inline(self, slot: _Slot, req: Request, route: Any) -> None:
        try:
            result = route.handler(req, **req.path_params)
        except Exception as exc:
            self._start(self._answer_exception(slot, req, exc))
            return
        self._finish(slot, req, result)

    def _start(self, coro: Any) -> None:
        task = self._loop.create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _run(self, slot: _Slot, req: Request, route: Any) -> None:
        plan = self._plan
        try:
            result: Any = None
            for hook in plan.before_request_hooks:
                result = hook(req)
                if inspect.isawaitable(result):
                    result = await result
                if result is not None:
                    break
            else:
                if route.threaded:
                    call = partial(route.handler, req, **req.path_params)
                    result = await self._loop.run_in_executor(plan.executor.get(), call)
                else:
                    result = route.handler(req, **req.path_params)
                    if inspect.isawaitable(result):
                        result = await result
            if plan.after_request_hooks:
                result = await self._after(req, result)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            await self._answer_exception(slot, req, exc)
            return
        self._finish(slot, req, result)

    async def _run_async(self, slot: _Slot, req: Request, handler: Any) -> None:
        try:
            result = await handler(req, **req.path_params)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            await self._answer_exception(slot, req, exc)
            return
        self._finish(slot, req, result)

    async def _after(self, req: Request, result: Any) -> Any:
        if not isinstance(result, Response | StreamingResponse | FileResponse):
            result = _to_response(result)
        for hook in self._plan.after_request_hooks:
            new = hook(req, result)
            if inspect.isawaitable(new):
                new = await new
            if new is not None:
                result = new
        return result

    def _finish(self, slot: _Slot, req: Request, result: Any) -> None:
        if (
            self._unsent + self._transport.get_write_buffer_size() >= self._high_water
            and not isinstance(result, StreamingResponse | FileResponse | WriterResponse)
            and not inspect.isawaitable(result)
        ):
            # Over the high-water mark: keep the result as the handler made it and
            # render it when it is written (`_flush`), so that pipelined handlers
            # finishing together do not each hold a rendered copy.
            slot.lazy = result
            slot.done = True
            slot.close = not req.keep_alive
            self._flush()
            return
        try:
            data = self._conn.render(req, result)
        except Exception as exc:
            self._start(self._answer_exception(slot, req, exc))
            return
        if data is None:
            # Rendering first: the rare awaitable result is asked about only here.
            if inspect.isawaitable(result):
                # Its value comes back through `_finish`; the slot waits till then.
                self._start(self._await_result(slot, req, result))
                return
            if isinstance(result, StreamingResponse | FileResponse | WriterResponse):
                slot.body = result
            else:
                wrong = TypeError(
                    f"handler for {req.path!r} returned {type(result).__name__}; expected str, "
                    "bytes, dict, list, None or a Response"
                )
                self._start(self._answer_exception(slot, req, wrong))
                return
        else:
            slot.data = data
            self._unsent += len(data)
        slot.done = True
        if not req.keep_alive:
            slot.close = True
        self._flush()

    def _render_late(self, slot: _Slot) -> bytes:
        """A lazy slot's response, rendered as it is written. Its error handlers
        cannot run here (they may be async): a result that fails to render is
        answered with a plain 500 and logged, as a bug in the handler."""
        req, result = slot.request, slot.lazy
        assert req is not None
        slot.lazy = _EAGER
        try:
            data = self._conn.render(req, result)
            if data is None:
                raise TypeError(
                    f"handler for {req.path!r} returned {type(result).__name__}; expected str, "
                    "bytes, dict, list, None or a Response"
                )
        except Exception as exc:
            log.error("unhandled error in %s %s", req.method, req.path, exc_info=exc)
            data = self._conn.render_error(500, "Internal Server Error", req)
        return data

    async def _await_result(self, slot: _Slot, req: Request, result: Any) -> None:
        try:
            value = await result
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            await self._answer_exception(slot, req, exc)
            return
        self._finish(slot, req, value)

    def _finish_error(
        self, slot: _Slot, req: Request, exc: HTTPException, use_handler: bool = True
    ) -> None:
        handler = self._plan.error_handlers.get(exc.status) if use_handler else None
        if handler is not None:
            self._start(self._answer_exception(slot, req, exc))
            return
        headers = list(exc.headers.items()) if exc.headers else []
        if exc.status == _METHOD_NOT_ALLOWED and req._allowed is not None:
            allowed = sorted(set(req._allowed) | ({"HEAD"} if "GET" in req._allowed else set()))
            headers.append(("Allow", ", ".join(allowed)))
        if self._plan.after_request_hooks:
            self._start(
                self._answer_hooked(slot, req, _error_response(exc.status, exc.detail, headers))
            )
            return
        slot.data = self._conn.render_error(exc.status, exc.detail, req, headers=headers)
        slot.done = True
        slot.close = not req.keep_alive
        self._flush()

    async def _answer_exception(self, slot: _Slot, req: Request, exc: BaseException) -> None:
        plan = self._plan
        if isinstance(exc, ClientDisconnected):
            # Not a server error: answer the framing error if there was one, and close.
            error = self._stream_error
            status, message = (400, str(exc)) if error is None else (error.status, error.message)
            slot.data = self._conn.render_error(status, message, close=True)
            slot.done = slot.close = True
            self._flush()
            return
        handler = None
        if isinstance(exc, HTTPException):
            handler = plan.error_handlers.get(exc.status)
        if handler is None:
            for cls in type(exc).__mro__:
                handler = plan.error_handlers.get(cls)
                if handler is not None:
                    break
        if handler is None and not isinstance(exc, HTTPException):
            handler = plan.error_handlers.get(500)
        if handler is not None:
            try:
                result = handler(req, exc)
                if inspect.isawaitable(result):
                    result = await result
                if plan.after_request_hooks:
                    result = await self._after(req, result)
                data = self._conn.render(req, result)
                if data is None:
                    raise TypeError(f"error handler returned {type(result).__name__}")
            except Exception:
                log.exception("error handler failed for %s %s", req.method, req.path)
            else:
                slot.data = data
                slot.done = True
                slot.close = not req.keep_alive
                self._flush()
                return
        if isinstance(exc, HTTPException):
            self._finish_error(slot, req, exc, use_handler=False)
            return
        log.error("unhandled error in %s %s", req.method, req.path, exc_info=exc)
        message = "Internal Server Error"
        if plan.debug:
            message = "".join(traceback.format_exception(exc))
        if plan.after_request_hooks:
            await self._answer_hooked(slot, req, _error_response(500, message, []))
            return
        slot.data = self._conn.render_error(500, message, req)
        slot.done = True
        slot.close = not req.keep_alive
        self._flush()

    async def _answer_hooked(self, slot: _Slot, req: Request, response: Response) -> None:
        """An error response the server made, through the after_request hooks like
        any other (CORS or security headers must be there exactly on errors); a
        hook failing on it leaves a plain 500, logged."""
        try:
            result = await self._after(req, response)
            data = self._conn.render(req, result)
            if data is None:
                raise TypeError(f"after_request hook returned {type(result).__name__}")
        except Exception:
            log.exception("after_request hook failed for %s %s", req.method, req.path)
            data = self._conn.render_error(500, "Internal Server Error", req)
        slot.data = data
        slot.done = True
        slot.close = not req.keep_alive
        self._flush()

    def _flush(self) -> None:
        if self._writer_busy:
            return
        queue = self._queue
        parts: list[bytes] = []
        close = False
        size = 0
        held_back = False
        while queue and queue[0].done:
            slot = queue[0]
            if slot.lazy is not _EAGER:
                if size + self._transport.get_write_buffer_size() >= self._high_water:
                    held_back = True  # rendered once the transport drains
                    break
                slot.data = self._render_late(slot)
            else:
                self._unsent -= len(slot.data) if slot.data is not None else 0
            queue.popleft()
            body = slot.body
            if body is None:
                _release(slot.request)
            else:
                if parts:
                    self._transport.write(b"".join(parts))
                    parts = []
                self._writer_busy = True
                if isinstance(body, WriterResponse) and body.inline:
                    # It writes itself from its own task (no writer task): done
                    # already, or `writer_done` is called once it is.
                    self._inline_request = slot.request
                    keep_alive = body.begin(self)
                    if keep_alive is None:
                        break
                    self._release_inline()
                    self._writer_busy = False
                    if keep_alive:
                        continue
                    close = True
                    self._drop_queue()
                    break
                self._start(self._write_body(slot))
                break
            parts.append(slot.data)  # type: ignore[arg-type]
            size += len(slot.data)  # type: ignore[arg-type]
            if self.access_log is not None:
                if slot.request is not None:
                    self.access_log.log_rendered(slot.request, slot.data)  # type: ignore[arg-type]
                else:  # the answer to bytes that were not a request (a 400, 431, ...)
                    peer = self._transport.get_extra_info("peername")
                    self.access_log.log_unparsed(peer, slot.data)  # type: ignore[arg-type]
            if slot.close:
                close = True
                self._drop_queue()
                break
        if parts and not self._closed:
            self._transport.write(b"".join(parts) if len(parts) > 1 else parts[0])
        if held_back and not self._paused_writing and not self._closed:
            # The kernel took it all (no pause_writing, so no resume_writing will
            # come): look again from the loop.
            self._loop.call_soon(self._flush)
        if self._paused_queue and len(queue) < self._plan.limits.max_pipeline:
            self._paused_queue = False
            self._update_reading()
        idle = not queue and not self._writer_busy
        conn = self._conn
        conn.fast = idle
        if idle and conn.continue_owed and not self._closed:
            # A request behind the ones just answered waits for this to send its body.
            conn.continue_owed = False
            self._transport.write(b"HTTP/1.1 100 Continue\r\n\r\n")
        if close:
            self._close()
        elif self._held:
            self._schedule_continue()
        elif idle and (conn.closing or self._eof or self._server.closing):
            self._close()

    def _flush_idle(self) -> None:
        # After the held requests were all taken: close now if that was all
        # (a half-closed client, a closing server), as `_flush` would have.
        if not self._queue and not self._writer_busy and not self._held:
            conn = self._conn
            conn.fast = True
            if conn.closing or self._eof or self._server.closing:
                self._close()

    def _drop_queue(self) -> None:
        # Nothing behind a closing response will be sent: stop the handlers at work on it.
        for slot in self._queue:
            if slot.task is not None:
                slot.task.cancel()
            _release(slot.request)
        self._queue.clear()
        self._unsent = 0

    def _close(self) -> None:
        if not self._closed:
            self._closed = True
            if self._paused_writing and isinstance(
                self._transport.get_extra_info("sslcontext"), SSLContext
            ):
                # Python's TLS transport starts its shutdown timer (the server's
                # TLS_SHUTDOWN_TIMEOUT, short) at close(), and aborts what it has
                # not sent when it fires: a slow client would lose the end of its
                # response. Closed by `resume_writing` once the backlog has drained.
                return
            self._transport.close()

    async def _write_body(self, slot: _Slot) -> None:
        req = slot.request
        assert req is not None and slot.body is not None
        head_only = req.method == "HEAD"
        http10 = req.version == "1.0"
        keep_alive = req.keep_alive
        try:
            if isinstance(slot.body, FileResponse):
                keep_alive = await self._send_file(slot.body, req, keep_alive, http10, head_only)
            elif isinstance(slot.body, WriterResponse):
                keep_alive = await slot.body.write(self)
            else:
                keep_alive = await self._send_stream(slot.body, keep_alive, http10, head_only, req)
        except asyncio.CancelledError:
            raise
        except Exception:
            # The head is out: the only honest signal left is to cut the connection.
            log.exception("error while streaming a response to %s %s", req.method, req.path)
            self._transport.abort()
            return
        finally:
            self._writer_busy = False
            _release(req)
        if not keep_alive:
            self._drop_queue()
            self._close()
            return
        self._flush()

    async def _wait_writable(self) -> None:
        if self._paused_writing and not self._closed:
            self._drain = self._loop.create_future()
            await self._drain
        # is_closing() turns true as soon as a write fails, before connection_lost
        # runs: an iterator that never awaits would otherwise spin here forever.
        if self._closed or self._transport.is_closing():
            raise ConnectionResetError("client went away")

    async def _send_stream(
        self,
        body: StreamingResponse,
        keep_alive: bool,
        http10: bool,
        head_only: bool,
        req: Request,
    ) -> bool:
        write = self._transport.write
        head = encode_response_head(
            body.status,
            body.headers,
            body.content_type,
            None,
            keep_alive,
            http10,
            ours=self._plan.head_defaults,
        )
        write(head)
        if head_only:
            if self.access_log is not None:
                self.access_log.log(req, body.status, 0, head)
            return keep_alive and not http10
        iterator = body.iterator
        if hasattr(iterator, "__aiter__"):

            async def chunks() -> Any:
                async for c in iterator:  # type: ignore[union-attr]
                    yield c
        else:

            async def chunks() -> Any:
                for c in iterator:  # type: ignore[union-attr]
                    yield c

        sent = 0
        async for chunk in chunks():
            if isinstance(chunk, str):
                chunk = chunk.encode()
            if not chunk:
                continue
            sent += len(chunk)
            if http10:
                write(chunk)
            else:
                write(b"%x\r\n%b\r\n" % (len(chunk), chunk))
            await self._wait_writable()
        if self.access_log is not None:
            self.access_log.log(req, body.status, sent, head)
        if http10:
            return False
        write(b"0\r\n\r\n")
        return keep_alive

    def _not_found(self, req: Request) -> None:
        data = self._conn.render_error(404, "Not Found")
        self._transport.write(data)
        if self.access_log is not None:
            self.access_log.log_rendered(req, data)

    async def _send_file(
        self, body: FileResponse, req: Request, keep_alive: bool, http10: bool, head_only: bool
    ) -> bool:
        try:
            # Non-blocking: opening a FIFO must not stall the loop (it is refused below).
            fd = os.open(body.path, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK)
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
            self._not_found(req)
            return False
        with open(fd, "rb", buffering=0) as f:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                self._not_found(req)
                return False
            if body.status == 200:
                reply = file_reply(req.method, req.headers, st, body.content_type, body.headers)
            else:
                whole: list[Any] = [(0, st.st_size)] if st.st_size else []
                reply = FileReply(body.status, body.headers, body.content_type, whole)
            head = encode_response_head(
                reply.status,
                reply.headers,
                reply.content_type,
                reply.length,
                keep_alive,
                http10,
                ours=self._plan.head_defaults,
            )
            self._transport.write(head)
            if self.access_log is not None:
                self.access_log.log(req, reply.status, 0 if head_only else reply.length, head)
            if not head_only:
                for piece in reply.pieces:
                    if isinstance(piece, bytes):
                        self.write(piece)
                    else:
                        await self.sendfile(f, piece[0], piece[1])
        return keep_alive

    # Flow control -------------------------------------------------------------------

    def _stream_drained(self) -> None:
        self._conn.stream_drained()
        if self._paused_stream:
            self._paused_stream = False
            self._update_reading()

    def _update_reading(self) -> None:
        if self._conn.stream_buffered > self._plan.limits.stream_buffer:
            self._paused_stream = True
        want_paused = (
            self._paused_writing or self._paused_queue or self._paused_stream or self._held
        )
        if want_paused != self._reading_paused and not self._closed:
            self._reading_paused = want_paused
            if want_paused:
                self._transport.pause_reading()
            else:
                # Time spent paused was ours, not the client's.
                self._conn.touch()
                self._transport.resume_reading()

    # Housekeeping (called by the server once a second) -----------------------------

    def check_timeouts(self, header_timeout: float, keepalive_timeout: float) -> None:
        """Closes the connection when a deadline has passed.

        A header block must arrive whole within `header_timeout` (else 408);
        a connection that sent nothing for `keepalive_timeout` is closed, also
        in the middle of a request body, unless a response is still owed.
        """
        if self._reading_paused:
            return  # the server is not reading: the client is not late
        conn = self._conn
        if conn.head_for() > header_timeout:
            if not self._queue and not self._writer_busy:
                self._transport.write(conn.render_error(408, "Request Timeout", close=True))
            self._close()
            return
        if conn.idle_for() <= keepalive_timeout:
            return
        if not conn.idle:
            # Stalled mid-request: nobody can answer it.
            self._stream_failed = True
            if self._body_stream is not None:
                self._body_stream._wake()
            self._close()
        elif not self._queue and not self._writer_busy:
            self._close()

    def close_if_idle(self, linger: float = 0.0) -> bool:
        """Closes the connection if no request is in progress and none came for
        `linger` seconds; True if it did."""
        conn = self._conn
        if not self._queue and not self._writer_busy and conn.idle and conn.idle_for() >= linger:
            self._close()
            return True
        return False

    def stop_keep_alive(self) -> None:
        """The server is shutting down: every response from now on says
        `Connection: close` and the connection closes after it."""
        self._conn.draining = True

    @property
    def draining(self) -> bool:
        """True once `stop_keep_alive` was called (dispatchers then frame their
        responses for a close)."""
        return self._conn.draining

    def abort(self) -> None:
        self._closed = True
        self._transport.abort()

    async def sendfile(self, file: Any, offset: int, count: int) -> None:
        """Writes `count` bytes of the regular file `file` (with a ``fileno()``) from
        `offset`, after everything written before. For a writer that has the
        connection to itself (a `WriterResponse` in its turn): nothing else writes
        meanwhile.

        Plain TCP gets the kernel's sendfile on a duplicate of the socket's
        descriptor (uvloop has no ``loop.sendfile`` and owns the socket's own
        descriptor), once the transport's buffer is empty, waiting for the socket
        to be writable between calls; TLS copies the file in blocks with write
        back-pressure. Raises ConnectionResetError once the client is gone, and
        RuntimeError when the file ends before `count` bytes.
        """
        transport = self._transport
        if isinstance(transport, _Batched):
            transport.flush()  # what was written before goes first
        sock = transport.get_extra_info("socket")
        if sock is None or transport.get_extra_info("sslcontext") is not None:
            while count > 0:
                data = os.pread(file.fileno(), min(count, _FILE_CHUNK), offset)
                if not data:
                    raise RuntimeError(f"file ended {count} bytes early")
                self.write(data)
                offset += len(data)
                count -= len(data)
                await self._wait_writable()
            return
        if transport.get_write_buffer_size():
            # What is buffered goes first: pause_writing now, resume_writing once empty.
            transport.set_write_buffer_limits(high=0)
            try:
                await self._wait_writable()
            finally:
                if not self._closed:
                    transport.set_write_buffer_limits(high=self._high_water)
        # The duplicate keeps the socket open after the transport closes its own
        # descriptor: a lost connection must wake the wait below, not only writability.
        lost = self.lost()
        fd = os.dup(sock.fileno())
        try:
            while count > 0:
                if self._closed or transport.is_closing():
                    raise ConnectionResetError("client went away")
                try:
                    sent = os.sendfile(fd, file.fileno(), offset, count)
                except BlockingIOError:
                    writable = self._loop.create_future()

                    def wake(*_: Any, w: asyncio.Future[None] = writable) -> None:
                        if not w.done():
                            w.set_result(None)

                    self._loop.add_writer(fd, wake)
                    lost.add_done_callback(wake)
                    try:
                        await writable
                    finally:
                        self._loop.remove_writer(fd)
                        lost.remove_done_callback(wake)
                    continue
                except (BrokenPipeError, ConnectionError) as exc:
                    raise ConnectionResetError("client went away") from exc
                if sent == 0:
                    raise RuntimeError(f"file ended {count} bytes early")
                offset += sent
                count -= sent
        finally:
            os.close(fd)


class _Resumed:
    """Awaits a coroutine whose first step already ran (on the native fast path).

    The object it was suspended on is handed up to the task unchanged, exactly
    as `await coro` would have, and then the coroutine is driven on.
    """

    __slots__ = ("_awaited", "_coro")

    def __init__(self, coro: Any, awaited: Any) -> None:
        self._coro = coro
        self._awaited = awaited

    def __await__(self) -> Any:
        coro, awaited = self._coro, self._awaited
        while True:
            try:
                value = yield awaited
            except BaseException as exc:
                try:
                    awaited = coro.throw(exc)
                except StopIteration as stop:
                    return stop.value
            else:
                try:
                    awaited = coro.send(value)
                except StopIteration as stop:
                    return stop.value


class _Batched(BatchedTransport):
    """A transport whose writes leave together at the end of the loop iteration.

    Writing each response as soon as it is ready (inside `data_received`) costs
    the kernel a wake-up of the client for nearly every response when the app is
    slow enough that the client sleeps between them; written in one burst after
    every ready connection was served, the client is woken about once per burst.
    Measured with wrk -c100 against a FastAPI hello (loaded machine): the
    server's kernel time fell from 21-28 to 12-16 us per request; raw ASGI hello
    from 12-15 to 9 us. Every write of the connection goes through here (order
    kept); `close`, `write_eof` and `sendfile` flush first, and so does a write
    that brings what waits to `_BATCH_LIMIT` (the real transport's write
    back-pressure sees a streamed body); the buffer size the back-pressure
    budget reads includes what waits here.

    The batching itself is native (`surge._core.BatchedTransport`, with the
    loop's `WriteBatch`); the ASGI cycle writes into it without a Python call.
    """

    __slots__ = ()

    def __new__(cls, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop) -> _Batched:
        batch = _batches.get(loop)
        if batch is None:
            batch = _batches[loop] = WriteBatch(loop)
        return super().__new__(cls, transport, batch)

    # The rest of asyncio.Transport, delegated one by one. A `__getattr__` instead
    # makes every attribute access on this object go through Python's getattr hook
    # (a lookup of `__getattr__` each, no specialization): a raw ASGI hello cost
    # 60.4k instructions per request in the server with one, 57.7k without
    # (callgrind, 20 connections).

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return self.transport.get_extra_info(name, default)

    def set_protocol(self, protocol: asyncio.BaseProtocol) -> None:
        self.transport.set_protocol(protocol)

    def get_protocol(self) -> asyncio.BaseProtocol:
        return self.transport.get_protocol()

    def is_reading(self) -> bool:
        return self.transport.is_reading()

    def pause_reading(self) -> None:
        self.transport.pause_reading()

    def resume_reading(self) -> None:
        self.transport.resume_reading()

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        self.transport.set_write_buffer_limits(high, low)

    def get_write_buffer_limits(self) -> tuple[int, int]:
        return self.transport.get_write_buffer_limits()

    def writelines(self, list_of_data: Any) -> None:
        for data in list_of_data:
            self.write(data)

    def can_write_eof(self) -> bool:
        return self.transport.can_write_eof()


#: The write batch of each event loop.
_batches: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, WriteBatch] = (
    weakref.WeakKeyDictionary()
)


def _release(req: Request | None) -> None:
    """Drops a finished request's reference to its `BodyStream`. The stream refers
    to the request, and the native Request is not tracked by the cycle collector,
    so the pair (and the read buffer the request's head shares) would never be
    freed: about 270 KB per streamed 10 MB upload, measured before this."""
    if req is not None and req._stream is not None:
        req._stream = None


def _error_response(status: int, message: str, headers: list[tuple[str, str]]) -> Response:
    """The response `render_error` would make, as an object hooks can change."""
    return Response(message, status=status, headers=headers, content_type=_TEXT_PLAIN)


_TEXT_PLAIN = "text/plain; charset=utf-8"


def _wants_websocket(req: Request) -> bool:
    # Only the request the native side stopped at asks for it (see `upgrade`).
    return "websocket" in req.headers.get("upgrade", "").lower()


def _to_response(result: Any) -> Response:
    if isinstance(result, Response):
        return result
    if result is None:
        return Response(None, 204)
    return Response(result)
