"""`Pipeline`: commands queued, then sent as one batch and answered as one list."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from surge.redis.commands import Commands, Reply
from surge.redis.errors import WatchError

if TYPE_CHECKING:
    from surge.redis.client import Redis


class Pipeline(Commands):
    """Queue commands (each method returns the pipeline), then `await execute()`.

    With ``transaction=True`` (the default, as in redis-py) the batch is wrapped
    in MULTI/EXEC. The batch shares the client's connection with other
    coroutines: it is encoded into the same buffer, in one piece, so nothing
    interleaves with it. WATCH is not supported (it needs a connection of its own).
    """

    def __init__(self, client: Redis, transaction: bool = True) -> None:
        self._client = client
        self.transaction = transaction
        self._commands: list[tuple[Any, ...]] = []
        self._replies: list[Reply] = []

    def _exec(self, reply: Reply, *args: Any) -> Pipeline:
        self._commands.append(args)
        self._replies.append(reply)
        return self

    def __len__(self) -> int:
        return len(self._commands)

    def reset(self) -> None:
        """Drop the queued commands."""
        self._commands, self._replies = [], []

    async def __aenter__(self) -> Pipeline:
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.reset()

    async def execute(self, raise_on_error: bool = True) -> list[Any]:
        """Send the queued commands; their replies in order. The first error reply
        is raised when `raise_on_error` (else left in the list as an exception)."""
        commands, conversions = self._commands, self._replies
        self.reset()
        if not commands:
            return []
        c = self._client
        got = await c._req(c._codec.pipeline, commands, self.transaction)
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
            for r in out:
                if isinstance(r, BaseException):
                    raise r
        return out
