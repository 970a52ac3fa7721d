"""Out-of-band pushes (``box.session.push``) of one call or eval, as asynctnt's
``push_subscribe=True`` and ``PushIterator``::

    fut = conn.call("report_progress", push_subscribe=True)
    async for item in surge.tarantool.PushIterator(fut):
        ...                     # each push's data, as it arrives
    result = await fut          # the function's return values

The server tags each push (IPROTO_CHUNK) with the request's sync; the
connection hands it to the `PushFuture` registered under that sync (pushes of
requests made without ``push_subscribe`` are dropped, as in asynctnt). Pushes
all come before the request's reply, so once it is in, nothing more comes.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import AsyncIterator, Callable, Generator
from typing import Any


class PushFuture:
    """What ``call``/``eval`` with ``push_subscribe=True`` return: awaited, the
    request's reply; `PushIterator` over it yields its pushes."""

    __slots__ = ("_items", "_reply", "_wake", "sync")

    def __init__(self) -> None:
        #: The request's sync (set when it is encoded).
        self.sync: int | None = None
        self._items: deque[Any] = deque()
        self._wake = asyncio.Event()
        self._reply: asyncio.Future[Any] | None = None

    def track(self, reply: Any, registry: dict[int, PushFuture]) -> PushFuture:
        """Follow the request's reply (an awaitable); unregister once it is in."""
        fut = self._reply = asyncio.ensure_future(reply)

        def done(_: object) -> None:
            if self.sync is not None and registry.get(self.sync) is self:
                del registry[self.sync]
            self._wake.set()

        fut.add_done_callback(done)
        return self

    def push(self, data: Any) -> None:
        """A push of this request arrived."""
        self._items.append(data)
        self._wake.set()

    def _future(self) -> asyncio.Future[Any]:
        assert self._reply is not None, "made by Connection.call/eval"
        return self._reply

    def __await__(self) -> Generator[Any, None, Any]:
        return self._future().__await__()

    def done(self) -> bool:
        """True once the reply is in."""
        return self._future().done()

    def result(self) -> Any:
        """The reply (as `asyncio.Future.result`)."""
        return self._future().result()

    def cancel(self) -> bool:
        """Stop waiting for the reply (its pushes stop too)."""
        return self._future().cancel()

    async def _pushes(self) -> AsyncIterator[Any]:
        fut = self._future()
        while True:
            while self._items:
                yield self._items.popleft()
            if fut.done():
                if not fut.cancelled() and fut.exception() is not None:
                    raise fut.exception()  # type: ignore[misc]
                return
            self._wake.clear()
            await self._wake.wait()


def encode_subscribed(
    registry: dict[int, PushFuture], sub: PushFuture, encode: Callable[..., int], *args: Any
) -> int:
    """``encode(*args)``, registering ``sub`` under the sync it returns (what the
    engine is given to encode a subscribed request: one function for all of them,
    as the engine counts requests by encoder)."""
    sync = encode(*args)
    sub.sync = sync
    registry[sync] = sub
    return sync


def PushIterator(fut: Any) -> AsyncIterator[Any]:
    """The pushes of a request made with ``push_subscribe=True``, in order; ends
    when its reply is in, raising the request's error if it failed."""
    if not isinstance(fut, PushFuture):
        raise ValueError(
            "Future is invalid. Make sure to call with a future returned from a method"
            " with push_subscribe=True flag"
        )
    return fut._pushes()
