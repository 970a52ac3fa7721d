"""`Monitor`: MONITOR on a connection of its own, each command the server runs
as redis-py's dict ``{time, db, client_address, client_port, client_type, command}``.

``async with r.monitor() as m: async for cmd in m.listen(): ...``
"""

from __future__ import annotations

import asyncio
import re
from collections import deque
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from surge._core import RespCodec
from surge.errors import ProtocolError
from surge.redis.errors import DataError, RedisError, make_error

if TYPE_CHECKING:
    from surge.engine import PipelinedConnection
    from surge.redis.client import Redis

#: ``1700000000.123456 [0 127.0.0.1:5555] "SET" "k" "v"`` (or ``[0 lua]``, ``[0 unix:/path]``).
_LINE = re.compile(r"^(\d+\.\d+) \[(\d+) (.*?)\] (.*)$", re.S)
_ARG = re.compile(r'"((?:[^"\\]|\\.)*)"')
#: Lines waiting for `next_command` at most; older ones are dropped (a busy server
#: would otherwise fill memory while nobody reads).
DEFAULT_MAX_QUEUED = 100_000


def _unescape(s: str) -> str:
    return s.encode("latin-1", "backslashreplace").decode("unicode_escape", "replace")


def parse_line(line: str) -> dict[str, Any]:
    """One MONITOR line as redis-py's dict."""
    m = _LINE.match(line)
    if m is None:
        raise RedisError(f"unexpected MONITOR line: {line[:200]!r}")
    ts, db, client, rest = m.groups()
    if client == "lua":
        ctype, addr, port = "lua", None, None
    elif client.startswith("unix:"):
        ctype, addr, port = "unix", client[5:], None
    else:
        ctype = "tcp"
        addr, _, port = client.rpartition(":")
    command = " ".join(_unescape(a) for a in _ARG.findall(rest))
    return {
        "time": float(ts),
        "db": int(db),
        "client_address": addr,
        "client_port": port,
        "client_type": ctype,
        "command": command,
    }


class Monitor:
    """The commands the server runs, from the moment `__aenter__` returns."""

    def __init__(self, client: Redis, max_queued: int = DEFAULT_MAX_QUEUED) -> None:
        self._client = client
        self._codec = RespCodec(False, False, make_error, DataError, ProtocolError)
        self._engine: PipelinedConnection | None = None
        self._lines: deque[Any] = deque(maxlen=max_queued)
        self._waiter: asyncio.Future | None = None
        self._lost: BaseException | None = None

    async def __aenter__(self) -> Monitor:
        self._engine = self._client.new_engine(
            self._codec,
            reconnect=False,
            on_out_of_band=self._on_line,
            on_lost=self._on_lost,
            keep_connected=lambda: True,
        )
        await self._engine.request(self._codec.command_ok, "MONITOR")
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._engine is not None:
            await self._engine.close()
            self._engine = None

    def _on_line(self, value: Any) -> None:
        self._lines.append(value)
        self._wake()

    def _on_lost(self, err: BaseException) -> None:
        self._lost = err
        self._wake()

    def _wake(self) -> None:
        w = self._waiter
        if w is not None and not w.done():
            w.set_result(None)

    async def next_command(self) -> dict[str, Any]:
        """The next command the server ran."""
        while not self._lines:
            if self._lost is not None:
                raise self._lost
            if self._engine is None:
                raise RedisError("the monitor is closed")
            self._waiter = asyncio.get_running_loop().create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None
        v = self._lines.popleft()
        text = v.decode("utf-8", "backslashreplace") if isinstance(v, bytes) else str(v)
        return parse_line(text)

    async def listen(self) -> AsyncIterator[dict[str, Any]]:
        """Every command, as it comes."""
        while True:
            yield await self.next_command()
