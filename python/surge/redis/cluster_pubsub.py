"""`ClusterPubSub`: SUBSCRIBE/PSUBSCRIBE on one node of a cluster (every node
hears every PUBLISH), SSUBSCRIBE on the node that owns each shard channel's slot."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Iterable
from typing import TYPE_CHECKING, Any

from surge.errors import ConnectError, ConnectionLostError
from surge.redis.client import Redis
from surge.redis.cluster import (
    RETRY_DELAY_MAX,
    RETRY_DELAY_MIN,
    RedisClusterException,
    _text,
    key_slot,
)
from surge.redis.commands import flatten_names
from surge.redis.pubsub import PubSub

if TYPE_CHECKING:
    from surge.redis.cluster import RedisCluster


def _by_slot(channels: Iterable[Any]) -> list[list[Any]]:
    groups: dict[int, list[Any]] = {}
    for ch in channels:
        groups.setdefault(key_slot(ch), []).append(ch)
    return list(groups.values())


class _ShardSubscriber(PubSub):
    """SSUBSCRIBE on one node: shard channels kept apart, subscribed again on reconnect."""

    def __init__(self, client: Redis, ignore_subscribe_messages: bool) -> None:
        super().__init__(client, ignore_subscribe_messages)
        self.shard_channels: dict[Any, Any] = {}
        #: Shard channels the server ended unasked (their slot moved away), with
        #: their handlers: `ClusterPubSub` subscribes them again at the new owner.
        self.moved: dict[Any, Any] = {}

    @property
    def subscribed(self) -> bool:
        """True while subscribed to a shard channel."""
        return bool(self.shard_channels)

    async def _handshake(self, engine: Any) -> None:
        await self._client._handshake(engine)
        for group in _by_slot(self.shard_channels):
            await engine.submit_raw(self._codec.pubsub_command, len(group), "SSUBSCRIBE", *group)

    async def ssubscribe(self, *channels: Any, **handlers: Any) -> None:
        new: dict[Any, Any] = dict.fromkeys(flatten_names(channels))
        new.update(handlers)
        await self._engine.connect()
        self.shard_channels.update(new)
        # One SSUBSCRIBE per slot: the server refuses channels of several slots.
        for group in _by_slot(new):
            await self._send(len(group), "SSUBSCRIBE", *group)

    async def sunsubscribe(self, *channels: Any) -> None:
        names = flatten_names(channels) or list(self.shard_channels)
        for n in names:
            self.shard_channels.pop(n, None)
            self.shard_channels.pop(_text(n), None)
        if self._engine.is_connected:
            for group in _by_slot(names):
                await self._send(len(group), "SUNSUBSCRIBE", *group)

    def _message(self, raw: list[Any]) -> tuple[dict[str, Any] | None, Any]:
        if len(raw) >= 2 and _text(raw[0]).lower() == "sunsubscribe":
            # `sunsubscribe` drops a channel before asking, so one still here was
            # not asked for: the server ended it because its slot moved.
            for key in (raw[1], _text(raw[1])):
                if key in self.shard_channels:
                    self.moved[key] = self.shard_channels.pop(key)
                    break
        msg, handler = super()._message(raw)
        if msg is not None and msg["type"] == "smessage":
            ch = msg["channel"]
            handler = self.shard_channels.get(ch) or self.shard_channels.get(_text(ch))
        return msg, handler


class ClusterPubSub:
    """redis-py's cluster pub/sub: `subscribe`/`psubscribe` on one node (every
    node hears every PUBLISH), `ssubscribe` on the node owning each shard
    channel's slot; `get_message`/`listen` read from all of them."""

    def __init__(self, cluster: RedisCluster, ignore_subscribe_messages: bool = False) -> None:
        self._cluster = cluster
        self.ignore_subscribe_messages = ignore_subscribe_messages
        self._plain: PubSub | None = None
        self._shards: dict[str, _ShardSubscriber] = {}

    async def _plain_sub(self, first: Any) -> PubSub:
        if self._plain is None:
            c = self._cluster
            await c.initialize()
            node = c._target(key_slot(first), False)
            self._plain = PubSub(node.redis_connection, self.ignore_subscribe_messages)
        return self._plain

    async def subscribe(self, *channels: Any, **handlers: Any) -> None:
        """SUBSCRIBE (keyword arguments: channels with handlers)."""
        names = flatten_names(channels) or list(handlers)
        sub = await self._plain_sub(names[0] if names else "")
        await sub.subscribe(*channels, **handlers)

    async def psubscribe(self, *patterns: Any, **handlers: Any) -> None:
        """PSUBSCRIBE to glob-style patterns."""
        names = flatten_names(patterns) or list(handlers)
        sub = await self._plain_sub(names[0] if names else "")
        await sub.psubscribe(*patterns, **handlers)

    async def unsubscribe(self, *channels: Any) -> None:
        """UNSUBSCRIBE (all channels when none are named)."""
        if self._plain is not None:
            await self._plain.unsubscribe(*channels)

    async def punsubscribe(self, *patterns: Any) -> None:
        """PUNSUBSCRIBE (all patterns when none are named)."""
        if self._plain is not None:
            await self._plain.punsubscribe(*patterns)

    async def ssubscribe(self, *channels: Any, **handlers: Any) -> None:
        """SSUBSCRIBE to shard channels, each on its slot's primary."""
        c = self._cluster
        await c.initialize()
        groups: dict[str, tuple[list[Any], dict[str, Any]]] = {}
        for ch in flatten_names(channels):
            node = c._target(key_slot(ch), False)
            groups.setdefault(node.name, ([], {}))[0].append(ch)
        for ch, h in handlers.items():
            node = c._target(key_slot(ch), False)
            groups.setdefault(node.name, ([], {}))[1][ch] = h
        for name, (chs, hs) in groups.items():
            sub = self._shards.get(name)
            if sub is None:
                node = c._nodes[name]
                sub = self._shards[name] = _ShardSubscriber(
                    node.redis_connection, self.ignore_subscribe_messages
                )
            await sub.ssubscribe(*chs, **hs)

    async def sunsubscribe(self, *channels: Any) -> None:
        """SUNSUBSCRIBE (all shard channels when none are named)."""
        names = flatten_names(channels)
        for sub in self._shards.values():
            mine = [n for n in names if n in sub.shard_channels or _text(n) in sub.shard_channels]
            if mine or not names:
                await sub.sunsubscribe(*mine)

    @property
    def subscribed(self) -> bool:
        """True while subscribed to anything."""
        return any(s.subscribed for s in self._subs())

    def _subs(self) -> list[PubSub]:
        return [*([self._plain] if self._plain is not None else []), *self._shards.values()]

    async def get_message(
        self, ignore_subscribe_messages: bool = False, timeout: float | None = 0.0
    ) -> dict[str, Any] | None:
        """The next message from any node, or None after ``timeout`` seconds. A
        subscriber whose node went away has its subscriptions moved to the nodes
        the cluster names now (messages published meanwhile are lost, as with any
        pub/sub reconnect)."""
        deadline = None if timeout is None else time.monotonic() + (timeout or 0.0)
        while True:
            subs = self._subs()
            for s in subs:
                msg = await self._read(s, ignore_subscribe_messages)
                if msg is not None:
                    return msg
            left = None if deadline is None else deadline - time.monotonic()
            if not subs or (left is not None and left <= 0):
                return None
            # Wait on every subscriber's queue at once; the first message wins.
            waits = [asyncio.ensure_future(_queued(s, left)) for s in subs]
            try:
                await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for w in waits:
                    w.cancel()

    async def _read(self, sub: PubSub, ignore: bool) -> dict[str, Any] | None:
        try:
            msg = await sub.get_message(ignore, timeout=0.0)
        except (ConnectionLostError, ConnectError):
            await self._move(sub)
            return None
        if isinstance(sub, _ShardSubscriber) and sub.moved:
            moved, sub.moved = sub.moved, {}
            gone = f"{sub._client.host}:{sub._client.port}"
            await self._wait_owners(moved, gone, False)
            await self._place(moved)
        return msg

    async def _wait_owners(self, shard: dict[Any, Any], gone: str, plain: bool) -> list[Any]:
        """Refresh the map until every shard channel's slot has an owner other than
        ``gone`` (and, with ``plain``, some other primary is up); those primaries."""
        c = self._cluster
        deadline = time.monotonic() + c.retry_timeout
        delay = RETRY_DELAY_MIN
        while True:
            with contextlib.suppress(RedisClusterException):
                await c._refresh_soon()
            owners = [c._slots[key_slot(ch)] for ch in shard]
            alive = [n for n in c.get_primaries() if n.name != gone]
            if (alive or not plain) and all(
                o is not None and o.primary.name != gone for o in owners
            ):
                return alive
            if time.monotonic() >= deadline:
                raise ConnectionLostError(f"no node took the subscriptions of {gone}")
            await asyncio.sleep(delay)
            delay = min(delay * 2, RETRY_DELAY_MAX)

    async def _place(self, shard: dict[Any, Any]) -> None:
        """SSUBSCRIBE ``shard`` (channel -> handler) on the nodes owning their slots."""
        c = self._cluster
        by_node: dict[str, dict[Any, Any]] = {}
        for ch, handler in shard.items():
            shard_of = c._slots[key_slot(ch)]
            assert shard_of is not None
            by_node.setdefault(shard_of.primary.name, {})[ch] = handler
        for name, group in by_node.items():
            sub = self._shards.get(name)
            if sub is None:
                sub = self._shards[name] = _ShardSubscriber(
                    c._nodes[name].redis_connection, self.ignore_subscribe_messages
                )
                sub.shard_channels.update(group)
                await sub._engine.connect()  # its handshake subscribes to them all
            else:
                sub.shard_channels.update(group)
                for g in _by_slot(group):
                    await sub._send(len(g), "SSUBSCRIBE", *g)

    async def _move(self, old: PubSub) -> None:
        """``old``'s node is gone: subscribe its channels again where the map says
        now (waiting, within the cluster's ``retry_timeout``, for a new owner)."""
        gone = f"{old._client.host}:{old._client.port}"
        channels, patterns = dict(old.channels), dict(old.patterns)
        shard = dict(old.shard_channels) if isinstance(old, _ShardSubscriber) else {}
        await old.close()
        if old is self._plain:
            self._plain = None
        self._shards = {k: v for k, v in self._shards.items() if v is not old}
        alive = await self._wait_owners(shard, gone, bool(channels or patterns))
        if channels or patterns:
            new = PubSub(alive[0].redis_connection, self.ignore_subscribe_messages)
            new.channels.update(channels)
            new.patterns.update(patterns)
            await new._engine.connect()  # its handshake subscribes to them all
            self._plain = new
        await self._place(shard)

    async def listen(self) -> AsyncIterator[dict[str, Any]]:
        """Every message, as long as something is subscribed."""
        while self.subscribed:
            msg = await self.get_message(timeout=None)
            if msg is not None:
                yield msg

    async def close(self) -> None:
        """Close every subscriber's connection."""
        for s in self._subs():
            await s.close()
        self._plain, self._shards = None, {}

    aclose = reset = close

    async def __aenter__(self) -> ClusterPubSub:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


async def _queued(sub: PubSub, timeout: float | None) -> None:
    """Returns once ``sub`` has something queued (or lost its connection)."""
    if sub._queue or sub._lost is not None:
        return
    sub._waiter = asyncio.get_running_loop().create_future()
    try:
        await asyncio.wait_for(sub._waiter, timeout)
    except TimeoutError:
        pass
    finally:
        sub._waiter = None
