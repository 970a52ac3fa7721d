"""A WSGI app reporting where each call ran: on the event loop's thread (inline)
or in a pool thread, for tests of `surge.wsgi.inline`."""

from __future__ import annotations

import asyncio
import contextvars
import threading
import time

closed: list[str] = []
leaked: contextvars.ContextVar[int] = contextvars.ContextVar("leaked", default=0)


class Body:
    """A response iterable of `n` chunks of `size` bytes that records its close()."""

    def __init__(self, n: int, size: int) -> None:
        self.n, self.size = n, size

    def __iter__(self):
        for i in range(self.n):
            yield bytes([65 + i % 26]) * self.size

    def close(self) -> None:
        closed.append(threading.current_thread().name)


async def _answer() -> int:
    return 42


def app(environ, start_response):
    where = threading.current_thread().name.encode()
    query = environ["QUERY_STRING"]
    if environ["PATH_INFO"] == "/closed":
        body = ",".join(closed).encode()
    elif query.startswith("sleep="):  # same key as the fast calls: /fast
        time.sleep(float(query[6:]))
        body = where
    elif query.startswith("big="):
        n = int(query[4:])
        start_response("200 OK", [("Content-Type", "text/plain")])
        return Body(n, 64 * 1024)
    elif query == "asyncio":
        # As in a pool thread: no running loop here, asyncio.run works.
        body = b"%s %d %d" % (where, asyncio.run(_answer()), leaked.get())
        leaked.set(leaked.get() + 1)  # never reset: must not leak into the loop's tasks
    elif environ["PATH_INFO"] == "/slow":
        time.sleep(0.005)
        body = where
    else:
        body = where
    start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", str(len(body)))])
    return [body]
