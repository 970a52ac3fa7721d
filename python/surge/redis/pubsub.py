"""`PubSub`: a subscriber on a connection of its own.

Messages arrive out of band (RESP2 pub/sub arrays on a subscribed connection,
RESP3 pushes) and wait in a queue for `get_message()` / `listen()`. On a lost
connection the next `get_message()` raises the engine's ConnectionLostError once;
the call after it reconnects and subscribes again to every channel and pattern.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections import deque
from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING, Any

from surge._core import RespCodec
from surge.engine import PipelinedConnection
from surge.errors import ProtocolError
from surge.redis.commands import flatten_names
from surge.redis.errors import DataError, PubSubError, make_error

if TYPE_CHECKING:
    from surge.redis.client import Redis

Handler = Callable[[dict[str, Any]], Any] | None

_SUBSCRIBE_KINDS = frozenset(
    ("subscribe", "psubscribe", "ssubscribe", "unsubscribe", "punsubscribe", "sunsubscribe")
)


def _text(v: Any) -> Any:
    return v.decode("utf-8", "replace") if isinstance(v, bytes) else v


class PubSub:
    """Subscribe to channels and patterns; read messages as redis-py's dicts:
    ``{"type": "message", "pattern": None, "channel": b"ch", "data": b"hi"}``."""

    def __init__(self, client: Redis, ignore_subscribe_messages: bool = False) -> None:
        self.ignore_subscribe_messages = ignore_subscribe_messages
        self._client = client
        self._codec = RespCodec(client.decode_responses, True, make_error, DataError, ProtocolError)
        self._engine: PipelinedConnection = client.new_engine(
            self._codec,
            on_connect=self._handshake,
            on_lost=self._on_lost,
            on_out_of_band=self._on_push,
            # Subscribed, it has nothing pending: the engine keeps it connected
            # (and its handshake subscribes again) without waiting for a read.
            keep_connected=lambda: self.subscribed,
        )
        self.channels: dict[Any, Handler] = {}
        self.patterns: dict[Any, Handler] = {}
        self._queue: deque[Any] = deque()
        self._waiter: asyncio.Future | None = None
        self._lost: BaseException | None = None

    @property
    def subscribed(self) -> bool:
        """True while subscribed to a channel or a pattern."""
        return bool(self.channels or self.patterns)

    async def _handshake(self, engine: PipelinedConnection) -> None:
        await self._client._handshake(engine)
        subs = []
        if self.channels:
            subs.append(
                engine.submit_raw(
                    self._codec.pubsub_command, len(self.channels), "SUBSCRIBE", *self.channels
                )
            )
        if self.patterns:
            subs.append(
                engine.submit_raw(
                    self._codec.pubsub_command, len(self.patterns), "PSUBSCRIBE", *self.patterns
                )
            )
        for f in subs:
            await f

    def _on_push(self, value: Any) -> None:
        self._queue.append(value)
        self._wake()

    def _on_lost(self, err: BaseException) -> None:
        self._lost = err
        self._wake()

    def _wake(self) -> None:
        w = self._waiter
        if w is not None and not w.done():
            w.set_result(None)

    async def _send(self, confirms: int, *args: Any) -> None:
        await self._engine.request(self._codec.pubsub_command, confirms, *args)

    async def subscribe(self, *channels: Any, **handlers: Handler) -> None:
        """SUBSCRIBE; keyword arguments name channels whose messages go to a handler
        instead of `get_message()`."""
        new: dict[Any, Handler] = dict.fromkeys(flatten_names(channels))
        new.update(handlers)
        if not new:
            raise DataError("subscribe: no channels")
        await self._engine.connect()
        self.channels.update(new)
        await self._send(len(new), "SUBSCRIBE", *new)

    async def psubscribe(self, *patterns: Any, **handlers: Handler) -> None:
        """PSUBSCRIBE to glob-style patterns."""
        new: dict[Any, Handler] = dict.fromkeys(flatten_names(patterns))
        new.update(handlers)
        if not new:
            raise DataError("psubscribe: no patterns")
        await self._engine.connect()
        self.patterns.update(new)
        await self._send(len(new), "PSUBSCRIBE", *new)

    async def unsubscribe(self, *channels: Any) -> None:
        """UNSUBSCRIBE from the channels (all of them when none are named)."""
        names = flatten_names(channels) or list(self.channels)
        for n in names:
            self.channels.pop(n, None)
            self.channels.pop(_text(n), None)
        if self._engine.is_connected:
            await self._send(max(1, len(names)), "UNSUBSCRIBE", *names)

    async def punsubscribe(self, *patterns: Any) -> None:
        """PUNSUBSCRIBE from the patterns (all of them when none are named)."""
        names = flatten_names(patterns) or list(self.patterns)
        for n in names:
            self.patterns.pop(n, None)
            self.patterns.pop(_text(n), None)
        if self._engine.is_connected:
            await self._send(max(1, len(names)), "PUNSUBSCRIBE", *names)

    def _message(self, raw: list[Any]) -> tuple[dict[str, Any] | None, Handler]:
        kind = _text(raw[0]).lower()
        if kind == "pmessage":
            msg = {"type": kind, "pattern": raw[1], "channel": raw[2], "data": raw[3]}
            handler = self.patterns.get(raw[1]) or self.patterns.get(_text(raw[1]))
        elif len(raw) >= 3:
            # (un)subscribe confirmations too, patterns included: redis-py
            # names the pattern in "channel" and leaves "pattern" None.
            msg = {"type": kind, "pattern": None, "channel": raw[1], "data": raw[2]}
            handler = (
                self.channels.get(raw[1]) or self.channels.get(_text(raw[1]))
                if kind in ("message", "smessage")
                else None
            )
        else:
            return None, None
        if kind in _SUBSCRIBE_KINDS and self.ignore_subscribe_messages:
            return None, None
        return msg, handler

    async def get_message(
        self, ignore_subscribe_messages: bool = False, timeout: float | None = 0.0
    ) -> dict[str, Any] | None:
        """The next message, or None after `timeout` seconds (None: wait for one)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            while self._queue:
                raw = self._queue.popleft()
                if not isinstance(raw, list) or not raw:
                    continue
                msg, handler = self._message(raw)
                if msg is None:
                    continue
                if handler is not None:
                    # An async def handler is awaited (as redis-py does), in order.
                    result = handler(msg)
                    if inspect.isawaitable(result):
                        await result
                    continue
                if ignore_subscribe_messages and msg["type"] in _SUBSCRIBE_KINDS:
                    continue
                return msg
            if self._lost is not None:
                err, self._lost = self._lost, None
                raise err
            if self.subscribed and not self._engine.is_connected:
                await self._engine.connect()  # subscribes again
                continue
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                return None
            self._waiter = asyncio.get_running_loop().create_future()
            try:
                await asyncio.wait_for(self._waiter, left)
            except TimeoutError:
                return None
            finally:
                self._waiter = None

    async def listen(self) -> AsyncIterator[dict[str, Any]]:
        """Every message, as long as something is subscribed."""
        while self.subscribed or self._queue:
            msg = await self.get_message(timeout=None)
            if msg is not None:
                yield msg

    async def run(
        self,
        *,
        exception_handler: Callable[[BaseException, PubSub], Any] | None = None,
        poll_timeout: float = 1.0,
    ) -> None:
        """Call every message's handler until cancelled (redis-py's loop for
        subscriptions made with handlers, ``asyncio.create_task(p.run())``); an
        error goes to ``exception_handler(error, pubsub)`` if given, else stops it."""
        for kind, subs in (("Channel", self.channels), ("Pattern", self.patterns)):
            for name, handler in subs.items():
                if handler is None:
                    raise PubSubError(f"{kind}: {_text(name)!r} has no handler registered")
        while True:
            try:
                await self.get_message(ignore_subscribe_messages=True, timeout=poll_timeout)
            except asyncio.CancelledError:
                raise
            except BaseException as e:
                if exception_handler is None:
                    raise
                handled = exception_handler(e, self)
                if inspect.isawaitable(handled):
                    await handled
            await asyncio.sleep(0)

    async def close(self) -> None:
        """Close the subscriber's connection."""
        self.channels.clear()
        self.patterns.clear()
        await self._engine.close()

    aclose = reset = close

    async def __aenter__(self) -> PubSub:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
