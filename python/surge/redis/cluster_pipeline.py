"""`ClusterPipeline`: a cluster's queued commands, each sent to its slot's node."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from surge.redis.cluster import (
    MAX_REDIRECTIONS,
    RETRY_DELAY_MIN,
    ClusterError,
    CrossSlotTransactionError,
    key_slot,
)
from surge.redis.commands import Commands, Reply
from surge.redis.errors import ResponseError

if TYPE_CHECKING:
    from surge.redis.cluster import RedisCluster


class ClusterPipeline(Commands):
    """Queued commands, sent at `execute()`: each to its slot's node, all in the same
    loop iteration (one write per node), MOVED/ASK followed per command. With
    ``transaction=True`` every key must be in one slot (`CrossSlotTransactionError`
    otherwise) and the batch runs in MULTI/EXEC on that slot's primary."""

    def __init__(self, cluster: RedisCluster, transaction: bool = False) -> None:
        self._cluster = cluster
        self.transaction = transaction
        self._queue: list[tuple[Reply, tuple[Any, ...]]] = []

    @property
    def protocol(self) -> int:
        """The cluster's RESP version."""
        return self._cluster.protocol

    def _exec(self, reply: Reply, *args: Any) -> Any:
        self._queue.append((reply, args))
        return self

    def _const(self, value: Any) -> Any:
        self._queue.append((lambda _: value, ("PING",)))
        return self

    def __len__(self) -> int:
        return len(self._queue)

    async def reset(self) -> None:
        """Drop the queued commands."""
        self._queue = []

    async def __aenter__(self) -> ClusterPipeline:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.reset()

    async def execute(self, raise_on_error: bool = True) -> list[Any]:
        """Send the queued commands; their replies in order (the first error raised
        when ``raise_on_error``, else left in the list)."""
        queue, self._queue = self._queue, []
        if not queue:
            return []
        c = self._cluster
        await c.initialize()
        if self.transaction:
            return await self._transaction(queue, raise_on_error)
        got = await asyncio.gather(
            *(c._route(reply, args, False) for reply, args in queue), return_exceptions=True
        )
        if raise_on_error:
            for r in got:
                if isinstance(r, BaseException):
                    raise r
        return list(got)

    async def _transaction(
        self, queue: list[tuple[Reply, tuple[Any, ...]]], raise_on_error: bool
    ) -> list[Any]:
        c = self._cluster
        slots: set[int] = set()
        for _, args in queue:
            keys = await c._all_keys(args)
            slots.update(key_slot(k) for k in keys)
        if len(slots) > 1:
            raise CrossSlotTransactionError(
                "a transaction's keys must all be in one slot (use hash tags: {user1}:a)"
            )
        slot = slots.pop() if slots else None
        for _attempt in range(MAX_REDIRECTIONS):
            node = c.get_default_node() if slot is None else c._target(slot, False)
            pipe = node.redis_connection.pipeline(transaction=True)
            for reply, args in queue:
                pipe._exec(reply, *args)
            try:
                return await pipe.execute(raise_on_error=raise_on_error)
            except ResponseError as exc:
                # A queued command refused with MOVED/ASK: EXEC aborted, nothing ran.
                if exc.prefix not in ("MOVED", "ASK", "TRYAGAIN", "CLUSTERDOWN"):
                    raise
                await c._refresh_soon()
                await asyncio.sleep(RETRY_DELAY_MIN)
        raise ClusterError(f"the transaction's slot {slot} kept moving")
