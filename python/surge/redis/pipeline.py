"""`Pipeline`: commands queued, then sent as one batch and answered as one list."""

from __future__ import annotations

import textwrap
from typing import TYPE_CHECKING, Any

from surge._core import RespCodec
from surge.errors import ProtocolError
from surge.redis import replies
from surge.redis.commands import Commands, Reply
from surge.redis.errors import DataError, RedisError, WatchError, make_error

if TYPE_CHECKING:
    from surge.engine import PipelinedConnection
    from surge.redis.client import Redis


async def _then(aw: Any, reply: Any) -> Any:
    return reply(await aw)


class Pipeline(Commands):
    """Queue commands (each method returns the pipeline), then `await execute()`.

    With ``transaction=True`` (the default, as in redis-py) the batch is wrapped
    in MULTI/EXEC. The batch shares the client's connection with other
    coroutines: it is encoded into the same buffer, in one piece, so nothing
    interleaves with it.

    ``await pipe.watch(keys)`` needs a connection of its own (WATCH belongs to a
    connection): the pipeline opens one, runs commands at once there until
    ``pipe.multi()``, sends the transaction on it and closes it. `execute` raises
    `WatchError` when a watched key changed.
    """

    def __init__(self, client: Redis, transaction: bool = True) -> None:
        self._client = client
        self.transaction = transaction
        self._commands: list[tuple[Any, ...]] = []
        self._replies: list[Reply] = []
        self._own: PipelinedConnection | None = None
        self._own_codec: RespCodec | None = None
        self._multi = False

    def _exec(self, reply: Reply, *args: Any) -> Any:
        if reply is replies.raw and self._client.decode_responses:
            # A binary payload inside a decoded batch would fail the whole batch's
            # decoding (EXEC's one array): refused here, before anything is queued.
            raise DataError(
                f"{args[0]}: a binary payload cannot be read in a decode_responses "
                "pipeline; run it on the client (it keeps the payload as bytes)"
            )
        if self._own is not None and not self._multi:
            # Watching, before multi(): the command runs now, on the watching connection.
            assert self._own_codec is not None
            aw = self._own.request(self._own_codec.command, *args)
            return aw if reply is None else _then(aw, reply)
        self._commands.append(args)
        self._replies.append(reply)
        return self

    @property
    def protocol(self) -> int:
        """The client's RESP version."""
        return self._client.protocol

    def _const(self, value: Any) -> Any:
        # Queued as a PING whose reply is replaced: the result keeps its place.
        return self._exec(lambda _: value, "PING")

    def __len__(self) -> int:
        return len(self._commands)

    @property
    def watching(self) -> bool:
        """True between `watch()` and `execute()` / `reset()`."""
        return self._own is not None

    async def watch(self, *names: Any) -> None:
        """WATCH keys (on the pipeline's own connection); then read, `multi()`, queue, execute."""
        if self._multi:
            raise RedisError("WATCH inside MULTI is not allowed")
        if self._own is None:
            c = self._client
            self._own_codec = RespCodec(
                c.decode_responses, False, make_error, DataError, ProtocolError
            )
            self._own = c.new_engine(self._own_codec, reconnect=False)
        assert self._own_codec is not None
        await self._own.request(self._own_codec.command_ok, "WATCH", *names)

    def multi(self) -> None:
        """Start queueing the transaction after `watch()` and the reads it allows."""
        if self._multi:
            raise RedisError("cannot nest MULTI")
        if self._commands:
            raise RedisError("commands were queued before MULTI without a WATCH")
        self._multi = True

    async def unwatch(self) -> None:
        """Forget the watched keys (and the pipeline's own connection)."""
        await self._release()

    async def _release(self) -> None:
        own, self._own, self._own_codec = self._own, None, None
        self._multi = False
        if own is not None:
            await own.close()

    def _clear(self) -> None:
        self._commands, self._replies = [], []

    async def reset(self) -> None:
        """Drop the queued commands and any WATCH."""
        self._clear()
        await self._release()

    async def __aenter__(self) -> Pipeline:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.reset()

    def _send(self, commands: list[tuple[Any, ...]]) -> Any:
        c = self._client
        try:
            return c._req(c._codec.pipeline, commands, self.transaction)
        except DataError:
            # Off the hot path: a memoryview argument is sent as its bytes.
            if not any(isinstance(a, memoryview) for x in commands for a in x):
                raise
            plain = [
                tuple(bytes(a) if isinstance(a, memoryview) else a for a in x) for x in commands
            ]
            return c._req(c._codec.pipeline, plain, self.transaction)

    async def execute(self, raise_on_error: bool = True) -> list[Any]:
        """Send the queued commands; their replies in order. The first error reply
        is raised when `raise_on_error` (else left in the list as an exception)."""
        commands, conversions = self._commands, self._replies
        self._clear()
        own, codec = self._own, self._own_codec
        try:
            if not commands:
                return []
            if own is not None and codec is not None:
                got = await own.request(codec.pipeline, commands, self.transaction)
            else:
                got = await self._send(commands)
        finally:
            if own is not None:
                await self._release()
        if self.transaction:
            result = got[-1]
            if isinstance(result, BaseException):
                # EXECABORT: a command was refused while queueing; its error says why.
                queued = [r for r in got[1:-1] if isinstance(r, BaseException)]
                raise queued[0] if queued else result
            if result is None:
                raise WatchError("watched variable changed: the transaction did not run")
            got = result
        out = []
        for r, conv in zip(got, conversions, strict=True):
            if conv is not None and not isinstance(r, BaseException):
                r = conv(r)
            out.append(r)
        if raise_on_error:
            for i, r in enumerate(out):
                if isinstance(r, BaseException):
                    _annotate(r, i + 1, commands[i])
                    raise r
        return out


def _annotate(err: BaseException, number: int, args: tuple[Any, ...]) -> None:
    """Name the failing command in the error's text as redis-py does (``Command
    # 2 (LPUSH k 1) of pipeline caused error: ...``): a log line then says which
    of the pipeline's commands failed. ``e.message`` keeps the server's text."""
    words = " ".join(a.decode(errors="replace") if isinstance(a, bytes) else str(a) for a in args)
    cmd = textwrap.shorten(words, width=100, placeholder="...", break_long_words=True)
    err.args = (f"Command # {number} ({cmd}) of pipeline caused error: {err.args}", *err.args[1:])
