"""One WSGI request/response cycle: the app runs in a pool thread, the loop writes.

Theory of operation: the dispatcher's handler (`surge.wsgi.app`) makes a
`WsgiCycle` on the event loop and returns it at once, so the connection queues
it (in request order) while the app runs in the plan's thread pool. The thread
calls the app, iterates its response and frames every chunk itself; framed
bytes are gathered in the cycle's native buffer, and the loop is poked through
the loop's `surge._core.WsgiWakeups` once per batch (not per chunk; cycles
finishing together share one poke). When every earlier response has left, the
connection calls `begin`; from then on each batch the thread hands over is
written from `_wake`, and once the transport must drain a task carries on
(`write`). The thread blocks on a gate once a high-water mark's worth is
queued and not written (before its turn, or while the client is slow to
read): write back-pressure reaches the app's iterator, and the loop never
waits on a thread.

The state shared by the thread and the loop, and the common path of both
sides (`start_response`, `_send`, `_finish`, `_wake`, `begin`), are native
(`surge._core.WsgiCycle`, the base class; the GIL is its lock): in Python they
cost about a dozen frames and four lock round trips per request.

A `wsgi.file_wrapper` over a regular file is not copied through the queue: the
thread frames it (the head, a chunk-size line when chunked), queues that, and
hands the file to the loop (`_hand_file`), which sends it with the kernel's sendfile
(`HttpProtocol.sendfile`) in its turn, after every byte queued before it; the
thread waits for that before it goes on (to the last chunk, and to close()).

`start_response` checks the status and headers and encodes the head
natively. PEP 3333's rules are kept: the head leaves
with the first non-empty body chunk (so `start_response` with `exc_info` may
still replace it until then), the
iterable's `close()` is always called, an error before the headers left is
answered with a 500, and one after closes the connection.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from surge._core import WsgiCycle as _WsgiCycle
from surge._core import WsgiGone as _Gone
from surge.http.errors import ClientDisconnected
from surge.http.response import WriterResponse, server_error_answer

from .input import FileWrapper, InputStream

if TYPE_CHECKING:
    from surge._core import Request
    from surge.http.protocol import BodyStream, HttpProtocol


log = logging.getLogger("surge.wsgi")

StartResponse = Callable[..., Callable[[bytes], None]]
WSGIApp = Callable[[dict[str, Any], StartResponse], Iterable[bytes]]

#: Block size for `wsgi.file_wrapper` bodies copied by the thread.
_FILE_BLOCK = 64 * 1024

#: `wsgi.input` of a request without a body (its reads change nothing: shared).
_NO_BODY = InputStream(None, None, b"", False)


#: Tasks finishing a response `_pump` could not (held here: the loop keeps weak ones).
_carrying: set[asyncio.Task[None]] = set()


class WsgiCycle(_WsgiCycle, WriterResponse):
    """Runs one request through a WSGI app in a thread; written in its turn.

    The state and the common path are native (`surge._core.WsgiCycle`, the
    base class: `start_response`, `_send`, `_finish`, `_end`, `_wake`,
    `begin`); here are the thread's run and the rare paths (a file to send,
    waiting for the transport, a body to read away, app errors). Its pool
    calls it (`__call__`) in a thread.
    """

    __slots__ = ()

    inline = True

    # The thread's side ---------------------------------------------------------------

    def __call__(self) -> None:
        result: Any = None
        try:
            result = self._app(self._environ, self.start_response)
            chunks: Iterable[bytes] = result
            if isinstance(result, FileWrapper):
                if self._offer_file(result):
                    chunks = ()
                else:
                    read = result.filelike.read
                    chunks = iter(lambda: read(max(result.blksize, _FILE_BLOCK)), b"")
            send = self._send
            for chunk in chunks:
                if chunk:
                    send(chunk)
            self._finish()
        except _Gone:
            log.debug("WSGI response stopped: the client went away")
            self._end(b"", failed=True)
        except BaseException as exc:
            self._app_failed(exc)
        finally:
            close = getattr(result, "close", None)
            if close is not None:
                try:
                    close()
                except Exception:
                    log.exception("Exception in the WSGI response's close()")

    def _offer_file(self, wrapper: FileWrapper) -> bool:
        """Has the loop sendfile the rest of a regular file (waiting until it is
        sent); False when the file is to be read and queued like any body."""
        size = wrapper.size_left()
        if not size:
            return False  # not a regular file, or nothing left to send
        framed = self._frame_file(size)
        if framed is None:
            return False  # an app error: no head
        before, count, tail = framed
        if before:
            self._put(before)
        if not count:
            return True  # HEAD, 204, 304, or a Content-Length already met
        file = wrapper.filelike
        offset = file.tell()
        sent = threading.Event()
        self._hand_file((file, offset, count, tail), sent)
        sent.wait()
        if not self._file_taken():
            raise _Gone  # not (wholly) sent: the response is cut short
        file.seek(offset + count)
        return True

    def _app_failed(self, exc: BaseException) -> None:
        error = self._conn._stream_error
        if isinstance(exc, ClientDisconnected) and error is not None:
            # `wsgi.input` raised because the body broke the server's rules (over
            # the limit, bad chunk framing): answered as such (413, 400), not 500.
            log.debug("WSGI request body refused: %s", error.message)
        else:
            error = None
            log.error("Exception in WSGI application", exc_info=exc)
        if self._head_sent:
            self._end(b"", failed=True)
        else:
            if error is not None:
                answer = self._conn._conn.render_error(error.status, error.message, close=True)
            else:
                answer = server_error_answer(self._conn._plan.head_defaults)
            access_log = self._conn.access_log
            if access_log is not None:
                access_log.log_rendered(self._request, answer)
            self._end(answer, closing=True)

    # The loop's side -----------------------------------------------------------------

    def _wake_slow(self, done: bool) -> None:
        """`_wake` beyond its common case (complete, its turn, no file)."""
        if not done and not self._watching:
            # The thread may wait from now on (for room, for a file to be sent):
            # it must learn if the client leaves (see `_watching`).
            self._watching = True
            self._conn.lost().add_done_callback(self._on_lost)
        if self._pumping:
            keep_alive = self._pump()
            if keep_alive is not None:
                self._conn.writer_done(keep_alive)
            return
        waiter = self._wakeup
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def _pump(self) -> bool | None:
        """Writes what is queued. Returns whether the connection may stay open once
        the response is complete; None while more is to come, or when the rest
        needs waiting (the transport's drain, a file, a body to read away): then
        a task carries on (`_carry_on`) and calls ``writer_done``."""
        conn = self._conn
        data, done, file = self._take()
        if data:
            conn.write(data)
        if file is None:
            if done:
                reusable = self._reusable()
                if not reusable or self._body_read():
                    self._pumping = False
                    if self._watching:
                        self._unwatch()
                    return reusable
            if not done and not conn.writing_paused and not conn.closed:
                self._open_gate()
                return None
        self._pumping = False
        task = self._wakeups.loop.create_task(self._carry_on(conn))
        _carrying.add(task)
        task.add_done_callback(_carrying.discard)
        return None

    def _body_read(self) -> bool:
        """True once the whole request body has been taken from the connection."""
        return self._stream is None or self._request._eof

    async def _carry_on(self, conn: HttpProtocol) -> None:
        keep_alive = await self.write(conn)
        conn.writer_done(keep_alive)

    async def write(self, conn: HttpProtocol) -> bool:
        """Writes what the thread queued until the response is complete."""
        try:
            return await self._write(conn)
        finally:
            self._unwatch()

    def _unwatch(self) -> None:
        if self._watching:
            self._watching = False
            self._conn.lost().remove_done_callback(self._on_lost)

    async def _write(self, conn: HttpProtocol) -> bool:
        while True:
            data, done, file = self._take()
            if data:
                conn.write(data)
            if file is not None and not await self._send_file(conn, *file):
                return False
            if done:
                break
            try:
                await conn.drain()
            except ConnectionResetError:
                self._on_lost()
                return False
            if self._idle_after_drain():
                # (The thread's wake-up runs `_wake` on this loop: not before this.)
                self._wakeup = waiter = self._wakeups.loop.create_future()
                try:
                    await waiter
                finally:
                    self._wakeup = None
        if not self._reusable():
            return False
        if not self._body_read():
            # The app answered without reading the whole body: read the rest away
            # so the next request can be parsed (its thread has finished reading).
            assert self._stream is not None
            try:
                while (await self._stream.read_some())[1]:
                    pass
            except ClientDisconnected:
                return False
        return True

    async def _send_file(
        self, conn: HttpProtocol, file: Any, offset: int, count: int, tail: bytes
    ) -> bool:
        """Sends the file the thread handed over; False when the connection must end."""
        try:
            await conn.sendfile(file, offset, count)
        except ConnectionResetError:
            self._on_lost()
            return False
        except Exception:
            # The head is out: the only honest signal left is to cut the connection.
            log.exception("error while sending a wsgi.file_wrapper file")
            self._on_lost()
            return False
        if tail:
            conn.write(tail)
        self._file_done()
        return True


def body_input(
    environ: dict[str, Any],
    request: Request,
    stream: BodyStream | None,
    conn: HttpProtocol,
    loop: asyncio.AbstractEventLoop,
) -> None:
    """Sets `environ["wsgi.input"]` for `request`'s body."""
    if stream is None:  # it had all arrived at dispatch (`body_stream`)
        if request._route < 0:
            body = conn.whole_body(request)
        else:  # `conn.whole_body`'s common case, without its frame
            chunks = request._take_chunks()
            body = (chunks[0] if len(chunks) == 1 else b"".join(chunks)) if chunks else b""
        environ["wsgi.input"] = InputStream(loop, None, body, False) if body else _NO_BODY
    else:
        environ["wsgi.input"] = InputStream(loop, stream, *_prefetch(request, stream))


def _prefetch(request: Request, stream: BodyStream) -> tuple[bytes, bool]:
    """The whole body when it has already arrived, else (b"", True)."""
    if not request._whole:
        return b"", True
    # With the body complete, read_some never suspends: run it to its end here.
    coro = stream.read_some()
    try:
        coro.send(None)
    except StopIteration as stop:
        return stop.value  # type: ignore[no-any-return]
    except Exception:
        return b"", True  # the thread's first read raises it again
    coro.close()
    return b"", True
