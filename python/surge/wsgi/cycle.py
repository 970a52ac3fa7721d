"""One WSGI request/response cycle: the app runs in a pool thread, the loop writes.

Theory of operation: the dispatcher's handler (`surge.wsgi.app`) makes a
`WsgiCycle` on the event loop and returns it at once, so the connection queues
it (in request order) while the app runs in the plan's thread pool. The thread
calls the app, iterates its response and frames every chunk itself; framed
bytes go into `_queue` under a lock, and the loop is poked through the
pool's `Wakeups` once per batch (not per chunk; cycles finishing together share
one poke). When every earlier response
has left, the connection calls `write`, which writes what is queued and waits
for the transport to drain. The thread blocks on `_gate` once a high-water
mark's worth is queued and not written (before its turn, or while the client
is slow to read): write back-pressure reaches the app's iterator, and the loop
never waits on a thread.

A `wsgi.file_wrapper` over a regular file is not copied through the queue: the
thread frames it (the head, a chunk-size line when chunked), queues that, and
hands the file to the loop (`_file`), which sends it with the kernel's sendfile
(`HttpProtocol.sendfile`) in its turn, after every byte queued before it; the
thread waits for that before it goes on (to the last chunk, and to close()).

`start_response` checks the status and headers and encodes the head in one
native call (`wsgi_response_head`). PEP 3333's rules are kept: the head leaves
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

from surge._core import http_date, wsgi_response_head
from surge.http.errors import ClientDisconnected
from surge.http.response import WriterResponse

from .input import FileWrapper, InputStream

if TYPE_CHECKING:
    from surge._core import Request
    from surge.http.protocol import BodyStream, HttpProtocol

    from .pool import Wakeups, WsgiPool

log = logging.getLogger("surge.wsgi")

StartResponse = Callable[..., Callable[[bytes], None]]
WSGIApp = Callable[[dict[str, Any], StartResponse], Iterable[bytes]]

_ERROR_500 = b"Internal Server Error"
#: Block size for `wsgi.file_wrapper` bodies copied by the thread.
_FILE_BLOCK = 64 * 1024

# How the body is framed, chosen when the head is built (`wsgi_response_head`).
_NONE, _LENGTH, _CHUNKED, _UNTIL_CLOSE = 0, 1, 2, 3
#: `wsgi.input` of a request without a body (its reads change nothing: shared).
_NO_BODY = InputStream(None, None, b"", False)


#: Tasks finishing a response `_pump` could not (held here: the loop keeps weak ones).
_carrying: set[asyncio.Task[None]] = set()


class _Gone(Exception):
    """The client left: the app's iteration stops (never seen by the app)."""


def _answer_500() -> bytes:
    return (
        b"HTTP/1.1 500 Internal Server Error\r\ndate: %s\r\nserver: surge\r\n"
        b"content-type: text/plain; charset=utf-8\r\ncontent-length: %d\r\n"
        b"connection: close\r\n\r\n%s" % (http_date().encode(), len(_ERROR_500), _ERROR_500)
    )


class WsgiCycle(WriterResponse):
    """Runs one request through a WSGI app in a thread; written in its turn."""

    __slots__ = (
        "_app",
        "_closing",
        "_conn",
        "_done",
        "_environ",
        "_failed",
        "_file",
        "_file_sent",
        "_framing",
        "_gate",
        "_gone",
        "_head",
        "_head_only",
        "_head_sent",
        "_high_water",
        "_http10",
        "_keep_alive",
        "_lock",
        "_notified",
        "_pumping",
        "_queue",
        "_queued",
        "_remaining",
        "_request",
        "_reuse",
        "_sent",
        "_status",
        "_stream",
        "_wakeup",
        "_wakeups",
        "_watching",
    )

    inline = True

    def __init__(
        self,
        app: WSGIApp,
        environ: dict[str, Any],
        request: Request,
        stream: BodyStream | None,
        conn: HttpProtocol,
        pool: WsgiPool,
        wakeups: Wakeups,
        high_water: int,
    ) -> None:
        self._app = app
        self._environ = environ
        self._conn = conn
        self._request = request
        self._stream = stream
        self._wakeups = wakeups
        self._http10 = request.version == "1.0"
        self._head_only = request.method == "HEAD"
        self._keep_alive = request.keep_alive
        # Response state, touched by the thread only; `_head` is encoded by
        # `start_response` (and kept for the access log), `_reuse` is whether
        # the connection may stay open after it.
        self._status: str | None = None
        self._head = b""
        self._head_sent = False
        self._framing = _NONE
        self._remaining = 0
        self._reuse = False
        self._sent = 0  # body bytes, for the access log
        # Shared with the loop, under `_lock`: one lock for every cycle of the loop
        # (held for a few attribute updates only; no lock is made per request).
        self._lock = wakeups.lock
        self._queue: list[bytes] = []
        self._queued = 0
        self._high_water = high_water
        self._notified = False
        self._done = False
        self._failed = False  # the response is cut short: close after what was sent
        self._closing = False  # complete, but not framed for keep-alive
        self._gone = False
        # Made only when needed (most responses never wait): the thread waits on
        # `_gate` while a high-water mark's worth is queued and not written.
        self._gate: threading.Event | None = None
        # A file for the loop to sendfile: (file, offset, count, bytes after it);
        # `_file_sent` is set once it is sent, or will never be.
        self._file: tuple[Any, int, int, bytes] | None = None
        self._file_sent: threading.Event | None = None
        self._wakeup: asyncio.Future[None] | None = None
        #: Its turn has come and the loop writes from `_wake`, without a task.
        self._pumping = False
        #: `_on_lost` is a callback of the connection's `lost()` future. Only a
        #: thread that may wait (a response not complete at its first wake-up)
        #: needs it: most responses never register one.
        self._watching = False
        if stream is None:  # it had all arrived at dispatch (`body_stream`)
            if request._route < 0:
                body = conn.whole_body(request)
            else:  # `conn.whole_body`'s common case, without its frame
                chunks = request._take_chunks()
                body = (chunks[0] if len(chunks) == 1 else b"".join(chunks)) if chunks else b""
            environ["wsgi.input"] = (
                InputStream(wakeups.loop, None, body, False) if body else _NO_BODY
            )
        else:
            environ["wsgi.input"] = InputStream(wakeups.loop, stream, *self._prefetch(stream))
        pool.submit(self._run)

    def _prefetch(self, stream: BodyStream) -> tuple[bytes, bool]:
        """The whole body when it has already arrived, else (b"", True)."""
        if not self._request._eof:
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

    # The thread's side ---------------------------------------------------------------

    def _run(self) -> None:
        app, environ = self._app, self._environ
        result: Any = None
        try:
            result = app(environ, self._start_response)
            chunks: Iterable[bytes] = result
            if isinstance(result, FileWrapper):
                if self._offer_file(result):
                    chunks = ()
                else:
                    read = result.filelike.read
                    chunks = iter(lambda: read(max(result.blksize, _FILE_BLOCK)), b"")
            for chunk in chunks:
                if chunk:
                    self._send(chunk)
            self._finish()
        except _Gone:
            log.debug("WSGI response stopped: the client went away")
            self._end(failed=True)
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
        if not size or self._status is None:
            return False  # not a regular file, nothing left to send, or an app error
        head = b"" if self._head_sent else self._head
        self._head_sent = True
        framing = self._framing
        if framing == _NONE:  # HEAD, 204, 304: no body to read at all
            if head:
                self._put(head)
            return True
        count = min(size, self._remaining) if framing == _LENGTH else size
        if framing == _LENGTH:
            self._remaining -= count
        self._sent += count
        if count == 0:
            if head:
                self._put(head)
            return True
        prefix, tail = (b"%x\r\n" % count, b"\r\n") if framing == _CHUNKED else (b"", b"")
        if head or prefix:
            self._put(head + prefix)
        file = wrapper.filelike
        offset = file.tell()
        with self._lock:
            if self._gone:
                raise _Gone
            self._file = (file, offset, count, tail)
            sent = self._file_sent = threading.Event()
            notify = not self._notified
            self._notified = True
        if notify:
            self._poke()
        sent.wait()
        with self._lock:
            if self._gone or self._file is not None:
                raise _Gone  # not (wholly) sent: the response is cut short
        file.seek(offset + count)
        return True

    def _app_failed(self, exc: BaseException) -> None:
        log.error("Exception in WSGI application", exc_info=exc)
        if self._head_sent:
            self._end(failed=True)
        else:
            self._keep_alive = False
            answer = _answer_500()
            if self._conn.access_log is not None:
                self._conn.access_log.log_rendered(self._request, answer)
            self._end(answer)

    def _start_response(
        self, status: str, headers: list[tuple[str, str]], exc_info: Any = None
    ) -> Callable[[bytes], None]:
        """PEP 3333's start_response: sets status and headers; returns `write`."""
        if exc_info is not None:
            try:
                if self._head_sent:
                    raise exc_info[1].with_traceback(exc_info[2])
            finally:
                exc_info = None  # no cycle through the traceback's frames
        elif self._status is not None:
            raise AssertionError("start_response() called again without exc_info")
        # Checked and encoded natively; it raises TypeError/ValueError on a broken rule.
        self._head, self._framing, self._remaining, self._reuse = wsgi_response_head(
            status,
            headers,
            self._head_only,
            self._http10,
            # The server shutting down: this response is the connection's last.
            self._keep_alive and not self._conn.draining,
        )
        self._status = status
        return self._send

    def _send(self, data: bytes) -> None:
        """The `write` callable, and each chunk of the iterable: framed and queued."""
        if self._status is None:
            raise AssertionError("response body sent before start_response()")
        if type(data) is not bytes:
            if not isinstance(data, bytearray | memoryview):
                raise TypeError(f"WSGI response chunks must be bytes, got {type(data).__name__}")
            data = bytes(data)
        if not data:
            return
        framing = self._framing
        if framing == _LENGTH:
            if len(data) > self._remaining:
                # More than Content-Length promised: the rest cannot be framed.
                data = data[: self._remaining]
            self._remaining -= len(data)
            out = data
        elif framing == _CHUNKED:
            out = b"%x\r\n%b\r\n" % (len(data), data)
        elif framing == _UNTIL_CLOSE:
            out = data
        else:
            out = b""
        if framing != _NONE:
            self._sent += len(data)
        if not self._head_sent:
            self._head_sent = True
            out = self._head + out
        if not out:
            return
        # `_put(out)`, without its frame when no wait for room follows.
        with self._lock:
            if self._gone:
                raise _Gone
            queued = self._queued + len(out)
            if queued >= self._high_water:
                wait = True
            else:
                wait = False
                self._queue.append(out)
                self._queued = queued
                notify = not self._notified
                self._notified = True
        if wait:
            self._put(out)
        elif notify:
            self._wakeups.add(self)

    def _finish(self) -> None:
        if self._status is None:
            raise AssertionError("the WSGI application returned without calling start_response()")
        out = b"" if self._head_sent else self._head
        self._head_sent = True
        if self._framing == _CHUNKED:
            out += b"0\r\n\r\n"
        elif self._framing == _LENGTH and self._remaining > 0:
            log.error("WSGI response shorter than its Content-Length: closing the connection")
            self._closing = True
        access_log = self._conn.access_log
        if access_log is not None:
            access_log.log(self._request, int(self._status[:3]), self._sent, self._head)
        # `_end(out)`, without its frame (once per request).
        with self._lock:
            if out:
                self._queue.append(out)
            self._done = True
            notify = not self._notified
            self._notified = True
        if notify:
            self._wakeups.add(self)

    def _put(self, data: bytes) -> None:
        """Queues bytes for the loop; blocks while a high-water mark's worth waits."""
        with self._lock:
            if self._gone:
                raise _Gone
            self._queue.append(data)
            self._queued += len(data)
            gate = None
            if self._queued >= self._high_water:
                gate = self._gate = threading.Event()
            notify = not self._notified
            self._notified = True
        if notify:
            self._wakeups.add(self)
        if gate is not None:
            gate.wait()
            if self._gone:
                raise _Gone

    def _end(self, data: bytes = b"", failed: bool = False) -> None:
        """Queues the last bytes and marks the response complete (or cut short)."""
        with self._lock:
            if data:
                self._queue.append(data)
            self._failed = failed
            self._done = True
            notify = not self._notified
            self._notified = True
        if notify:
            self._poke()

    def _poke(self) -> None:
        self._wakeups.add(self)

    # The loop's side -----------------------------------------------------------------

    def _wake(self) -> None:
        with self._lock:
            self._notified = False
            done = self._done
            # The common case, written here without `_pump`'s frame: the response is
            # complete, its turn has come and no file is to be sent.
            last = done and self._pumping and self._file is None
            if last:
                queue, self._queue, self._queued = self._queue, [], 0
        if last:
            conn = self._conn
            if queue:
                conn.write(queue[0] if len(queue) == 1 else b"".join(queue))
            reusable = self._reuse and self._keep_alive and not (self._failed or self._closing)
            if reusable and self._stream is not None and not self._request._eof:
                # The rest of the body is to be read away first: `_pump` hands that on.
                keep_alive = self._pump()
                if keep_alive is not None:
                    conn.writer_done(keep_alive)
                return
            self._pumping = False
            if self._watching:
                self._unwatch()
            conn.writer_done(reusable)
            return
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

    def _on_lost(self, _lost: object = None) -> None:
        with self._lock:
            self._gone = True
            self._open_gate()
            if self._file_sent is not None:
                self._file_sent.set()

    def _open_gate(self) -> None:
        # Under `_lock`: a thread waiting for room may go on.
        if self._gate is not None:
            self._gate.set()
            self._gate = None

    def begin(self, conn: HttpProtocol) -> bool | None:
        """Its turn came: writes what the thread queued; from then on each batch
        the thread hands over is written from `_wake`, with no task, while the
        transport keeps up (see `_pump`)."""
        self._pumping = True
        # Read without the lock: should the thread queue something right after,
        # its poke (pending, or to come) runs `_wake`, which pumps it.
        if not self._queue and not self._done and self._file is None:
            return None  # nothing to write yet (the usual case: the app runs)
        return self._pump()

    def _pump(self) -> bool | None:
        """Writes what is queued. Returns whether the connection may stay open once
        the response is complete; None while more is to come, or when the rest
        needs waiting (the transport's drain, a file, a body to read away): then
        a task carries on (`_carry_on`) and calls ``writer_done``."""
        conn = self._conn
        with self._lock:
            queue, self._queue, self._queued = self._queue, [], 0
            done = self._done
            file = self._file
        if queue:
            conn.write(queue[0] if len(queue) == 1 else b"".join(queue))
        if file is None:
            if done:
                # `_reusable()` and `_body_read()`, without their frames.
                reusable = self._reuse and self._keep_alive and not (self._failed or self._closing)
                if not reusable or self._stream is None or self._request._eof:
                    self._pumping = False
                    if self._watching:
                        self._unwatch()
                    return reusable
            if not done and not conn.writing_paused and not conn.closed:
                with self._lock:
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

    def _reusable(self) -> bool:
        return self._reuse and self._keep_alive and not (self._failed or self._closing)

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
            with self._lock:
                queue, self._queue, self._queued = self._queue, [], 0
                done = self._done
                file = self._file
            if queue:
                conn.write(queue[0] if len(queue) == 1 else b"".join(queue))
            if file is not None and not await self._send_file(conn, *file):
                return False
            if done:
                break
            try:
                await conn.drain()
            except ConnectionResetError:
                self._on_lost()
                return False
            with self._lock:
                self._open_gate()
                idle = not self._queue and not self._done and self._file is None
                if idle:
                    self._wakeup = self._wakeups.loop.create_future()
            if idle:
                assert self._wakeup is not None
                try:
                    await self._wakeup
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
        with self._lock:
            self._file = None
            if self._file_sent is not None:
                self._file_sent.set()
        return True
