"""A TCP proxy between a driver and the real server, for fault tests: it relays
both ways, and a hook sees each piece of the server's reply bytes on a
connection before they are passed on, to change them or to cut the connection
after them (the idea of asyncpg's ``_testbase/fuzzer.py``)."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable, Iterator

#: A connection's reply hook: (bytes to pass on, whether to cut after them).
ReplyHook = Callable[[bytes], tuple[bytes, bool]]


class RelayProxy:
    """Relays to ``host:port``; subclasses give `replies` to meddle with the stream."""

    def __init__(self, host: str, port: int) -> None:
        self.host, self.port = host, port
        self.server: asyncio.Server | None = None
        #: Connections accepted so far (a driver's own, and any CancelRequest's).
        self.accepted = 0

    def replies(self) -> ReplyHook:
        """The hook for one new connection's reply bytes (default: pass them on)."""
        return lambda data: (data, False)

    async def start(self) -> int:
        """Listen on a free loopback port; returns it."""
        self.server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        return self.server.sockets[0].getsockname()[1]

    async def _handle(self, cr: asyncio.StreamReader, cw: asyncio.StreamWriter) -> None:
        self.accepted += 1
        sr, sw = await asyncio.open_connection(self.host, self.port)
        hook = self.replies()

        async def pump(
            r: asyncio.StreamReader, w: asyncio.StreamWriter, on: ReplyHook | None
        ) -> None:
            with contextlib.suppress(OSError, asyncio.CancelledError):
                while data := await r.read(65536):
                    cut = False
                    if on is not None:
                        data, cut = on(data)
                    w.write(data)
                    if cut:
                        break
                    await w.drain()
            for t in (cw, sw):
                t.transport.abort()

        await asyncio.gather(pump(cr, sw, None), pump(sr, cw, hook))

    def close(self) -> None:
        """Stop listening (relayed connections end with their peers)."""
        if self.server is not None:
            self.server.close()


@contextlib.contextmanager
def in_thread(proxy: RelayProxy) -> Iterator[int]:
    """Runs ``proxy`` on a loop of its own in a thread, so it keeps relaying while
    the test's loop is blocked on purpose; yields its port."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        yield asyncio.run_coroutine_threadsafe(proxy.start(), loop).result(10)
    finally:
        asyncio.run_coroutine_threadsafe(_stop(proxy), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()


async def _stop(proxy: RelayProxy) -> None:
    """Stops listening and ends the relayed connections still open."""
    proxy.close()
    others = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
    for t in others:
        t.cancel()
    await asyncio.gather(*others, return_exceptions=True)
