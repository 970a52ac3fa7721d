"""Blocking commands (BLPOP, XREAD BLOCK, WAIT, ...) on connections of their own.

A blocking command holds its connection until the server answers; on the shared
pipelined connection it would hold every other coroutine's replies behind it.
So the client sends it on a connection taken from a small pool beside the
pipelined one: at most `DEFAULT_MAX_BLOCKING_CONNECTIONS` at a time (more callers
wait for a free one, at most ``blocking_pool_timeout`` seconds). A call that ends
without its reply (cancelled, timed out, connection lost) drops its connection,
so the server unblocks it and a late reply (a popped item) never reaches the
connection's next user.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from surge._core import RespCodec
from surge.errors import ProtocolError, RequestTimeoutError
from surge.redis.errors import DataError, RedisError, make_error

if TYPE_CHECKING:
    from surge.engine import PipelinedConnection
    from surge.redis.client import Redis

#: Connections for blocking commands at most, per client (a BLPOP waiting holds one).
DEFAULT_MAX_BLOCKING_CONNECTIONS = 16
#: Seconds a blocking command waits for a free connection before RequestTimeoutError.
DEFAULT_BLOCKING_POOL_TIMEOUT = 30.0

#: Commands that may wait on the server whatever their arguments.
BLOCKING_COMMANDS = frozenset(
    (
        "BLPOP",
        "BRPOP",
        "BLMOVE",
        "BRPOPLPUSH",
        "BLMPOP",
        "BZPOPMIN",
        "BZPOPMAX",
        "BZMPOP",
        "WAIT",
        "WAITAOF",
    )
)
#: Commands that wait only with a BLOCK argument.
BLOCK_OPTION_COMMANDS = frozenset(("XREAD", "XREADGROUP"))


def _word(v: Any) -> str | None:
    if isinstance(v, str):
        return v.upper()
    if isinstance(v, bytes | bytearray | memoryview):
        return bytes(v).decode("latin-1").upper()
    return None


def is_blocking(args: tuple[Any, ...]) -> bool:
    """True when the command ``args`` may make the server wait before replying."""
    if not args:
        return False
    name = _word(args[0])
    if name in BLOCKING_COMMANDS:
        return True
    return name in BLOCK_OPTION_COMMANDS and any(_word(a) == "BLOCK" for a in args[1:])


class _Slot:
    __slots__ = ("codec", "engine")

    def __init__(self, codec: RespCodec, engine: PipelinedConnection) -> None:
        self.codec, self.engine = codec, engine


class BlockingPool:
    """Up to `size` connections, each running one blocking command at a time."""

    def __init__(self, client: Redis, size: int, timeout: float | None) -> None:
        if size < 1:
            raise DataError(f"max_blocking_connections must be >= 1, not {size!r}")
        self._client = client
        self.size = size
        self.timeout = timeout
        self._idle: list[_Slot] = []
        self._busy = 0
        self._waiters: list[asyncio.Future] = []
        self._closing: set[asyncio.Task] = set()
        self._running: set[_Slot] = set()

    @property
    def in_use(self) -> int:
        """Connections running a blocking command now."""
        return self._busy

    def _new(self) -> _Slot:
        c = self._client
        codec = RespCodec(c.decode_responses, False, make_error, DataError, ProtocolError)
        # No reconnect: a lost connection is dropped from the pool, a new one is
        # opened. The client's request_timeout bounds blocking commands too (a
        # BLPOP 0 under request_timeout=5 fails after 5 s, as under redis-py's
        # socket_timeout), and its connection is dropped then.
        return _Slot(codec, c.new_engine(codec, reconnect=False))

    async def _acquire(self) -> _Slot:
        if self._busy >= self.size:
            loop = asyncio.get_running_loop()
            deadline = None if self.timeout is None else loop.time() + self.timeout
            while self._busy >= self.size:
                w = loop.create_future()
                self._waiters.append(w)
                left = None if deadline is None else deadline - loop.time()
                try:
                    if left is not None and left <= 0:
                        raise TimeoutError
                    await asyncio.wait_for(w, left)
                except TimeoutError:
                    raise RequestTimeoutError(
                        f"no free connection for a blocking command within {self.timeout} s"
                        f" ({self.size} in use; see max_blocking_connections)"
                    ) from None
                finally:
                    if w in self._waiters:
                        self._waiters.remove(w)
        self._busy += 1
        while self._idle:
            slot = self._idle.pop()
            if slot.engine.is_connected:
                return slot
            self._discard(slot)
        return self._new()

    def _release(self, slot: _Slot | None) -> None:
        self._busy -= 1
        if slot is not None:
            self._idle.append(slot)
        for w in self._waiters:
            if not w.done():
                w.set_result(None)
                break

    def _discard(self, slot: _Slot) -> None:
        # Dropped at once (the server unblocks the command when it sees the close);
        # the engine's own cleanup runs in the background.
        slot.engine.abort()
        task = asyncio.get_running_loop().create_task(slot.engine.close())
        self._closing.add(task)
        task.add_done_callback(self._closing.discard)

    async def run(self, reply: Callable[[Any], Any] | None, args: tuple[Any, ...]) -> Any:
        """Send one blocking command on a pooled connection; its (converted) reply."""
        slot = await self._acquire()
        self._running.add(slot)
        keep: _Slot | None = None
        try:
            try:
                value = await slot.engine.request(slot.codec.command, *args)
            except RedisError:
                keep = slot  # an error reply: the connection is in step
                raise
            except BaseException:
                self._discard(slot)
                raise
            keep = slot
        finally:
            self._running.discard(slot)
            self._release(keep)
        return value if reply is None else reply(value)

    async def close(self) -> None:
        """Close every pooled connection (commands running on them fail)."""
        idle, self._idle = self._idle, []
        for slot in [*idle, *self._running]:
            await slot.engine.close()
        for task in list(self._closing):
            await task
