"""`RedisCluster`: commands routed by key slot to the node that owns it, each node
on one pipelined surge `Redis` connection.

Theory of operation
-------------------
The slot map (16384 slots -> shard: a primary and its replicas) comes from
``CLUSTER SHARDS`` (``CLUSTER SLOTS`` on servers without it), asked of any node
that answers. Where a command's keys are comes from the server's own ``COMMAND``
table (first key, last key, step; ``COMMAND GETKEYS`` for commands whose keys
move, EVAL's keys read directly), fetched once. A command goes to its slot's
primary (or, with ``read_from_replicas``, a read-only command round-robins over
the primary and its online replicas, which get ``READONLY``) through that node's
`Redis` client, whose engine coalesces every coroutine's commands into one write
per node per event-loop iteration. A single-slot command whose reply needs no
conversion (GET, SET, HINCRBY, ...) to a connected node is that node's own future,
made by its native lane (`RespLane.routed`): no coroutine per command. Its
redirections do not answer it but come back out of band, and are followed as below
by a task that then resolves the same future.

Every command runs at most once. It is sent again only when the reply proves
it did not run:

* ``MOVED slot addr``: the slot's entry is fixed at once and a full refresh of
  the map starts in the background; the command goes to ``addr``;
* ``ASK slot addr`` (a slot migrating): ``ASKING`` and the command go to ``addr``
  together, in one write on one connection; the map is not changed;
* ``TRYAGAIN`` (a multi-key command during a migration), ``CLUSTERDOWN``: sent
  again after a short pause, within ``retry_timeout``;
* the node cannot be reached (`surge.errors.ConnectError`: nothing was written):
  the map is refreshed from the other nodes and the command goes where it says,
  within ``retry_timeout``; so a killed primary is followed to its promoted
  replica as soon as the cluster has promoted it.

A connection lost with the command on the wire (`ConnectionLostError`) is not
retried: the command may have run. The caller gets the error, the map is
refreshed. (redis-py's RedisCluster retries there, and a HINCRBY by 1 on a fresh
key has been seen to answer 2.) At most `MAX_REDIRECTIONS` redirections per command.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import itertools
import random
import time
from binascii import crc_hqx
from collections.abc import AsyncIterator, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from surge.engine import chain
from surge.errors import ConnectError, ConnectionLostError, SurgeError
from surge.redis import replies
from surge.redis.blocking import is_blocking
from surge.redis.client import DEFAULT_PORT, Redis, url_options
from surge.redis.commands import Commands, Reply, _plain_set, flatten_names
from surge.redis.errors import DataError, RedisError, ResponseError

if TYPE_CHECKING:
    from surge.redis.cluster_pipeline import ClusterPipeline
    from surge.redis.cluster_pubsub import ClusterPubSub

#: Slots in a Redis Cluster.
SLOTS = 16384
#: Redirections (MOVED, ASK) one command may follow before it fails (redis-py: 16).
MAX_REDIRECTIONS = 16
#: Seconds a command keeps being retried while its node cannot be reached (nothing
#: sent) or the cluster answers TRYAGAIN / CLUSTERDOWN. Above a failover with
#: ``cluster-node-timeout`` 5 s (detection plus election), so such a command waits
#: for the promoted replica instead of failing.
DEFAULT_RETRY_TIMEOUT = 10.0
#: First and largest pause between those retries, in seconds.
RETRY_DELAY_MIN = 0.05
RETRY_DELAY_MAX = 0.5

PRIMARY = "primary"
REPLICA = "replica"


class RedisClusterException(RedisError):
    """A command the cluster cannot run as given (keys in different slots, no node
    for a slot, no node answering); redis-py's name."""


class ClusterError(RedisError):
    """The cluster kept refusing a command (too many redirections, TRYAGAIN or
    CLUSTERDOWN past ``retry_timeout``)."""


class ClusterDownError(ClusterError, ResponseError):
    """CLUSTERDOWN: the cluster cannot serve the slot now."""


class SlotNotCoveredError(RedisClusterException):
    """No node serves the key's slot."""


class CrossSlotTransactionError(RedisClusterException):
    """A cluster pipeline with ``transaction=True`` whose keys are in several slots."""


def _bytes(key: Any) -> bytes:
    # As the codec sends it (redis-py's encoder): bytes as is, str as UTF-8,
    # numbers as their text.
    if isinstance(key, bytes):
        return key
    if isinstance(key, str):
        return key.encode()
    if isinstance(key, bytearray | memoryview):
        return bytes(key)
    if isinstance(key, bool) or not isinstance(key, int | float):
        raise DataError(f"invalid key {key!r}: bytes, str, int or float")
    return repr(key).encode()


def key_slot(key: Any) -> int:
    """The cluster slot of a key: CRC16 (XMODEM, as ``binascii.crc_hqx`` with 0)
    of the key, or of its hash tag (the text between the first ``{`` and the
    next ``}``, when not empty), modulo 16384."""
    k = _bytes(key)
    start = k.find(b"{")
    if start != -1:
        end = k.find(b"}", start + 1)
        if end > start + 1:
            k = k[start + 1 : end]
    return crc_hqx(k, 0) & (SLOTS - 1)


def _text(v: Any) -> str:
    return v.decode("utf-8", "replace") if isinstance(v, bytes | bytearray) else str(v)


def _word(v: Any) -> str:
    return _text(v).upper() if isinstance(v, bytes | bytearray | str) else ""


def _pairs(v: Any) -> dict[str, Any]:
    # A RESP3 map or a RESP2 flat list of name, value.
    if isinstance(v, dict):
        return {_text(k): x for k, x in v.items()}
    return {_text(v[i]): v[i + 1] for i in range(0, len(v) - 1, 2)}


class ClusterNode:
    """One cluster node: where it is, its role, and its `Redis` client."""

    __slots__ = ("host", "name", "port", "redis_connection", "server_type")

    def __init__(self, host: str, port: int, server_type: str, client: Redis) -> None:
        self.host, self.port = host, port
        self.name = f"{host}:{port}"
        self.server_type = server_type
        #: The node's pipelined client (redis-py's attribute name).
        self.redis_connection = client

    def __repr__(self) -> str:
        return f"<ClusterNode {self.name} {self.server_type}>"


class _Shard:
    """A slot range's primary and the replicas reads may go to."""

    __slots__ = ("primary", "readers", "replicas")

    def __init__(self, primary: ClusterNode, replicas: list[ClusterNode]) -> None:
        self.primary = primary
        self.replicas = replicas
        self.readers = itertools.cycle([primary, *replicas])


class _ReplicaRedis(Redis):
    """A replica's client: READONLY on every (re)connect, so it serves reads."""

    async def _handshake(self, engine: Any) -> None:
        await super()._handshake(engine)
        await engine.submit_raw(engine.codec.command_ok, "READONLY")


#: Commands without keys sent to every primary, and how their replies combine.
_ALL_PRIMARIES: dict[str, Any] = {
    "FLUSHALL": all,
    "FLUSHDB": all,
    "DBSIZE": sum,
    "KEYS": lambda rs: [k for r in rs for k in r],
    "SCRIPT LOAD": lambda rs: rs[0],
    "SCRIPT FLUSH": all,
    "SCRIPT EXISTS": lambda rs: [all(col) for col in zip(*rs, strict=True)],
    "FUNCTION LOAD": lambda rs: rs[0],
    "FUNCTION FLUSH": all,
    "FUNCTION DELETE": all,
}
#: Commands redis-py splits by slot when their keys are in several (replies summed).
_SPLIT_AND_SUM = frozenset(("DEL", "UNLINK", "EXISTS", "TOUCH"))
#: Command names remembered by the hot path (bounded: names come from callers).
_FAST_NAMES = 1024
#: Key-position entry: first key, last key (negative: from the end), step, keys move.
Spec = tuple[int, int, int, bool]


class RedisCluster(Commands):
    """A Redis Cluster client with redis-py's names: ``RedisCluster(host=, port=)``
    or ``RedisCluster(startup_nodes=[ClusterNode...])`` or `from_url`; made outside a
    loop, it connects on first use. Command methods return awaitables.

    Keyword arguments that `Redis` takes (password, username, decode_responses,
    protocol, ssl options, timeouts, ...) apply to every node's client.
    ``read_from_replicas``: read-only commands round-robin over each slot's
    primary and online replicas. ``retry_timeout``: how long a command that was
    not sent (node down) or was refused before running (TRYAGAIN, CLUSTERDOWN)
    keeps being retried (`DEFAULT_RETRY_TIMEOUT`).

    Where it differs from redis-py: a command whose connection is lost after it was
    written fails with `ConnectionLostError` instead of being sent again (it may
    have run); keyless commands go to the default node unless listed in
    ``_ALL_PRIMARIES`` (FLUSHDB, DBSIZE, KEYS, SCRIPT LOAD, ...).
    """

    PRIMARIES = "primaries"
    REPLICAS = "replicas"
    ALL_NODES = "all"
    RANDOM = "random"
    DEFAULT_NODE = "default-node"

    def __init__(
        self,
        host: str | None = None,
        port: int = DEFAULT_PORT,
        *,
        startup_nodes: Iterable[ClusterNode | tuple[str, int]] | None = None,
        read_from_replicas: bool = False,
        retry_timeout: float = DEFAULT_RETRY_TIMEOUT,
        require_full_coverage: bool = True,
        **kwargs: Any,
    ) -> None:
        seeds: list[tuple[str, int]] = []
        for n in startup_nodes or ():
            seeds.append((n.host, n.port) if isinstance(n, ClusterNode) else (n[0], int(n[1])))
        if host is not None:
            seeds.insert(0, (host, port))
        if not seeds:
            raise RedisClusterException("RedisCluster needs host= and port= or startup_nodes")
        if kwargs.get("db"):
            raise RedisClusterException("a cluster has only database 0")
        kwargs.pop("db", None)
        self._seeds = seeds
        self._options = kwargs
        self._tls = bool(kwargs.get("ssl"))
        self.read_from_replicas = read_from_replicas
        self.retry_timeout = retry_timeout
        self.require_full_coverage = require_full_coverage
        self.decode_responses: bool = kwargs.get("decode_responses", False)
        self._protocol: int = kwargs.get("protocol", 2)
        self._nodes: dict[str, ClusterNode] = {}
        self._slots: list[_Shard | None] = [None] * SLOTS
        self._shards: list[_Shard] = []
        self._specs: dict[str, Spec] = {}
        #: Command name as sent -> (first, last, step) of its keys, or None.
        self._fast: dict[Any, tuple[int, int, int] | None] = {}
        self._readonly: frozenset[str] = frozenset()
        self._subcommands: frozenset[str] = frozenset()
        self._default: ClusterNode | None = None
        self._ready = False
        self._init_task: asyncio.Task | None = None
        self._refresh_task: asyncio.Task | None = None
        self._closed = False
        #: Counters: map refreshes, MOVED and ASK replies followed, retries.
        self.stats = dict.fromkeys(("refreshes", "moved", "ask", "retries"), 0)
        for h, p in seeds:
            self._node(h, p, PRIMARY)

    @property
    def protocol(self) -> int:
        """The RESP version every node's client speaks (2 or 3)."""
        return self._protocol

    @classmethod
    def from_url(cls, url: str, **kwargs: Any) -> RedisCluster:
        """``redis://[[user]:password@]host:port`` or ``rediss://...`` (redis-py's
        ``ssl_*`` options in the query too): the node to start from."""
        # Parsed as Redis parses it; the ssl_* options stay options (not a context
        # made from them), so the nodes' TLS can run natively.
        opts = url_options(url)
        if opts.pop("unix_socket_path", None) is not None:
            raise RedisClusterException("a cluster is reached over TCP, not a Unix socket")
        opts.update(kwargs)
        return cls(**opts)

    # -- nodes and the slot map --------------------------------------------------

    def _node(self, host: str, port: int, server_type: str) -> ClusterNode:
        name = f"{host}:{port}"
        node = self._nodes.get(name)
        if node is not None:
            node.server_type = server_type  # a failover swaps roles, not clients
            return node
        # With read_from_replicas every node's client sends READONLY (a primary
        # ignores it), so a node keeps its client when its role changes.
        cls = _ReplicaRedis if self.read_from_replicas else Redis
        client = cls(host, port, **self._options)
        # A node that refuses connections is reported at once (ConnectError: the
        # command was not sent), so the map can be refreshed and the command sent
        # where the cluster says, instead of retrying the dead address.
        client.engine.retry_connect = False
        node = self._nodes[name] = ClusterNode(host, port, server_type, client)
        client._on_redirect = functools.partial(self._redirected_direct, node)
        client._on_connection_lost = functools.partial(self._node_lost, node)
        return node

    def _node_lost(self, node: ClusterNode) -> None:
        # Commands lost on the wire are not sent again (they may have run), but the
        # map may have changed (a failover): read it again from the other nodes.
        if self._ready and not self._closed:
            with contextlib.suppress(RuntimeError):  # no running loop: nothing to do
                self._refresh_soon(avoid=node)

    def get_nodes(self) -> list[ClusterNode]:
        """Every node known."""
        return list(self._nodes.values())

    def get_primaries(self) -> list[ClusterNode]:
        """The primaries that serve slots."""
        return [s.primary for s in self._shards]

    def get_replicas(self) -> list[ClusterNode]:
        """The replicas of the slot-serving primaries."""
        return [r for s in self._shards for r in s.replicas]

    def get_node(
        self, host: str | None = None, port: int | None = None, node_name: str | None = None
    ) -> ClusterNode | None:
        """The node named ``host:port`` (or by ``node_name``), if known."""
        return self._nodes.get(node_name or f"{host}:{port}")

    def get_default_node(self) -> ClusterNode:
        """Where keyless commands go."""
        if self._default is None:
            raise RedisClusterException("the cluster is not initialized")
        return self._default

    def set_default_node(self, node: ClusterNode) -> None:
        """Send keyless commands to ``node`` from now on."""
        self._default = node

    def keyslot(self, key: Any) -> int:
        """The slot of ``key`` (see `key_slot`)."""
        return key_slot(key)

    def get_node_from_key(self, key: Any, replica: bool = False) -> ClusterNode | None:
        """The primary (or first replica) serving ``key``'s slot."""
        shard = self._slots[key_slot(key)]
        if shard is None:
            return None
        if replica:
            return shard.replicas[0] if shard.replicas else None
        return shard.primary

    async def initialize(self) -> None:
        """Read the slot map and the command table (done on first use anyway)."""
        if self._ready:
            return
        if self._init_task is None:
            self._init_task = asyncio.get_running_loop().create_task(self._initialize())
        task = self._init_task
        try:
            await asyncio.shield(task)
        except BaseException:
            if task.done():
                self._init_task = None
            raise

    async def _initialize(self) -> None:
        await self._refresh()
        await self._load_commands()
        self._ready = True

    async def _load_commands(self) -> None:
        table = await self.get_default_node().redis_connection.execute_command("COMMAND")
        specs: dict[str, Spec] = {}
        readonly: set[str] = set()
        subs: set[str] = set()

        def add(entry: list[Any]) -> None:
            name = _text(entry[0]).upper().replace("|", " ")
            flags = {_text(f) for f in entry[2]}
            specs[name] = (int(entry[3]), int(entry[4]), int(entry[5]), "movablekeys" in flags)
            if "readonly" in flags:
                readonly.add(name)
            if len(entry) > 9 and entry[9]:
                subs.add(name)
                for sub in entry[9]:
                    add(sub)

        for entry in table:
            add(entry)
        self._specs, self._readonly, self._subcommands = specs, frozenset(readonly), frozenset(subs)
        self._fast = {}

    async def _refresh(self, avoid: ClusterNode | None = None) -> None:
        """Read the map from the first node that answers (known primaries first)."""
        known = list(self._nodes.values())
        random.shuffle(known)
        known.sort(key=lambda n: (n is avoid, n.server_type != PRIMARY))
        seeds = [self._node(h, p, PRIMARY) for h, p in self._seeds if f"{h}:{p}" not in self._nodes]
        errors: list[str] = []
        for node in [*known, *seeds]:
            try:
                layout = await self._ask_layout(node)
            except (SurgeError, OSError) as exc:
                errors.append(f"{node.name}: {exc}")
                continue
            self._apply(layout)
            self.stats["refreshes"] += 1
            return
        raise RedisClusterException(
            "no cluster node answered CLUSTER SHARDS/SLOTS: " + "; ".join(errors)
        )

    async def _ask_layout(self, node: ClusterNode) -> list[tuple[list[int], Any, list[Any]]]:
        """[(slot ranges flat, primary (host, port), [replica (host, port)])]."""
        client = node.redis_connection
        timeout = client._engine_options["connect_timeout"]
        try:
            shards = await asyncio.wait_for(client.execute_command("CLUSTER", "SHARDS"), timeout)
        except ResponseError:
            return await self._ask_slots(client, node)
        layout = []
        for raw in shards:
            shard = _pairs(raw)
            slots = [int(s) for s in shard.get("slots") or []]
            if not slots:
                continue
            primary, replicas, fallback = None, [], None
            for rn in shard["nodes"]:
                n = _pairs(rn)
                host = _text(n.get("endpoint") or "") or _text(n.get("ip") or "")
                if host in ("", "?"):
                    host = _text(n.get("ip") or node.host)
                ports = (n.get("tls-port"), n.get("port"))
                port = int(next(p for p in (ports if self._tls else ports[::-1]) if p))
                health = _text(n.get("health", "online"))
                if _text(n.get("role")) == "master":
                    if health == "online":
                        primary = (host, port)
                    else:
                        fallback = (host, port)
                elif health != "fail":
                    # 7.0 says "loading" for a synced replica that has seen no
                    # writes yet; one really loading answers LOADING.
                    replicas.append((host, port))
            primary = primary or fallback
            if primary is not None:
                layout.append((slots, primary, replicas))
        return layout

    async def _ask_slots(self, client: Redis, node: ClusterNode) -> list[Any]:
        rows = await client.execute_command("CLUSTER", "SLOTS")
        layout = []
        for row in rows:
            addrs = [(_text(a[0]) or node.host, int(a[1])) for a in row[2:]]
            layout.append(([int(row[0]), int(row[1])], addrs[0], addrs[1:]))
        return layout

    def _apply(self, layout: list[tuple[list[int], Any, list[Any]]]) -> None:
        slots: list[_Shard | None] = [None] * SLOTS
        shards: dict[str, _Shard] = {}
        for ranges, (host, port), reps in layout:
            primary = self._node(host, port, PRIMARY)
            shard = shards.get(primary.name)
            if shard is None:
                replicas = [self._node(h, p, REPLICA) for h, p in reps]
                shard = shards[primary.name] = _Shard(primary, replicas)
            for i in range(0, len(ranges) - 1, 2):
                for s in range(ranges[i], ranges[i + 1] + 1):
                    slots[s] = shard
        if self.require_full_coverage and not self._ready and None in slots:
            missing = slots.index(None)
            raise SlotNotCoveredError(f"slot {missing} is not served by any node")
        self._slots, self._shards = slots, list(shards.values())
        if self._default is None or self._default.name not in shards:
            self._default = self._shards[0].primary if self._shards else None

    def _refresh_soon(self, avoid: ClusterNode | None = None) -> asyncio.Task:
        """One refresh at a time: callers that need one share the running one."""
        task = self._refresh_task
        if task is None or task.done():
            task = self._refresh_task = asyncio.get_running_loop().create_task(self._refresh(avoid))
            task.add_done_callback(_retrieve)
        return task

    # -- routing -------------------------------------------------------------------

    def _keys(self, args: tuple[Any, ...]) -> list[Any] | None:
        """The key arguments of a command; None when only the server can tell."""
        name = _word(args[0])
        if name in self._subcommands and len(args) > 1:
            name = f"{name} {_word(args[1])}"
        spec = self._specs.get(name)
        if spec is None:
            return []
        first, last, step, movable = spec
        if movable:
            if name in ("EVAL", "EVALSHA", "EVAL_RO", "EVALSHA_RO", "FCALL", "FCALL_RO"):
                return list(args[3 : 3 + int(args[2])])
            return None
        if first <= 0:
            return []
        end = len(args) + last if last < 0 else last
        return list(args[first : end + 1 : step])

    async def _all_keys(self, args: tuple[Any, ...]) -> list[Any]:
        keys = self._keys(args)
        if keys is None:
            # Movable keys (ZUNIONSTORE, XREAD, SORT ... STORE, MIGRATE): the server
            # says which; GETKEYS runs nothing.
            try:
                keys = await self.get_default_node().redis_connection.execute_command(
                    "COMMAND", "GETKEYS", *args
                )
            except ResponseError as exc:
                if "no key arguments" in str(exc).lower():
                    return []
                raise
        return keys

    def _slot_of(self, args: tuple[Any, ...], keys: list[Any]) -> int | None:
        if not keys:
            return None
        slot = key_slot(keys[0])
        for k in keys[1:]:
            if key_slot(k) != slot:
                raise RedisClusterException(
                    f"{_text(args[0]).upper()} - all keys must map to the same key slot"
                )
        return slot

    def _target(self, slot: int, read: bool) -> ClusterNode:
        shard = self._slots[slot]
        if shard is None:
            raise SlotNotCoveredError(f"slot {slot} is not served by any known node")
        if read:
            return next(shard.readers)
        return shard.primary

    def _redirected(self, exc: ResponseError, node: ClusterNode) -> ClusterNode:
        # "MOVED 3999 127.0.0.1:6381" (an empty host: the one asked).
        parts = exc.message.split()
        host, _, port = parts[2].rpartition(":")
        return self._node(host or node.host, int(port), PRIMARY)

    def _exec(self, reply: Reply, *args: Any) -> Any:
        return self._route(reply, args, False)

    def _exec_blocking(self, reply: Reply, *args: Any) -> Any:
        return self._route(reply, args, True)

    def _route(self, reply: Reply, args: tuple[Any, ...], blocking: bool) -> Any:
        # The hot path: a command of a known shape whose keys are in one slot of a
        # known map goes straight to its node's lane (no conversion, node connected:
        # its own future) or to `_send` (one coroutine per command); anything else
        # (not initialized, keys that move, no keys, several slots) takes `_run`.
        if self._ready:
            try:
                spec = self._fast[args[0]]
            except (KeyError, TypeError, IndexError):
                spec = self._learn(args[0] if args else None)
            if spec:
                first, last, _step = spec
                if first == last and len(args) > first:
                    k = args[first]
                    if type(k) is str and "{" not in k:
                        slot = crc_hqx(k.encode(), 0) & (SLOTS - 1)
                    else:
                        slot = key_slot(k)
                    read = self.read_from_replicas and self._is_read(args)
                    if not blocking and (reply is None or reply is replies.ok):
                        # The common case: the slot's node is known and connected, and
                        # the reply needs no conversion: the node's own future, no
                        # coroutine. A redirection comes back to `_redirected_direct`.
                        shard = self._slots[slot]
                        if shard is not None:
                            node = next(shard.readers) if read else shard.primary
                            routed = node.redis_connection._routed
                            if routed is not None:
                                fut = routed(reply is not None, *args)
                                if fut is not None:
                                    return fut
                    return self._send(reply, args, slot, read, blocking)
                keys = self._keys(args)
                if keys:
                    slot = key_slot(keys[0])
                    if all(key_slot(k) == slot for k in keys):
                        read = self.read_from_replicas and self._is_read(args)
                        return self._send(reply, args, slot, read, blocking)
        return self._run(reply, args, blocking)

    def _redirected_direct(
        self, node: ClusterNode, fut: asyncio.Future, exc: ResponseError, args: tuple, ok: bool
    ) -> None:
        """A command sent on `_route`'s direct path was redirected by ``node`` (it did
        not run there): `_send` follows the redirection, and ``fut`` gets its outcome."""
        reply = replies.ok if ok else None
        slot = self._slot_of(args, self._keys(args) or [])
        assert slot is not None  # the direct path takes only commands with keys
        task = asyncio.get_running_loop().create_task(
            self._send(reply, args, slot, False, False, node=node, redirected=exc)
        )
        chain(task, fut)

    def _learn(self, name: Any) -> tuple[int, int, int] | None:
        """The fixed key positions of a command named ``name`` as sent (None: no
        fast path: a container command, keys that move, no keys, unknown)."""
        word = _word(name)
        spec = self._specs.get(word)
        fast = None
        if word not in self._subcommands and spec is not None and not spec[3] and spec[0] > 0:
            fast = spec[:3]
        if isinstance(name, str | bytes) and len(self._fast) < _FAST_NAMES:
            self._fast[name] = fast
        return fast

    def _const(self, value: Any) -> Any:
        return _value(value)

    def execute_command(self, *args: Any, target_nodes: Any = None) -> Any:
        """Any command, routed by its keys (or to ``target_nodes``: a node, a list of
        them, or PRIMARIES / REPLICAS / ALL_NODES / RANDOM / DEFAULT_NODE)."""
        if target_nodes is not None:
            return self._on_nodes(args, target_nodes)
        return self._route(None, args, is_blocking(args))

    async def _on_nodes(self, args: tuple[Any, ...], target: Any) -> Any:
        await self.initialize()
        if isinstance(target, ClusterNode):
            return await target.redis_connection.execute_command(*args)
        if target == self.PRIMARIES:
            nodes = self.get_primaries()
        elif target == self.REPLICAS:
            nodes = self.get_replicas()
        elif target == self.ALL_NODES:
            nodes = [*self.get_primaries(), *self.get_replicas()]
        elif target == self.RANDOM:
            nodes = [random.choice(self.get_primaries())]
        elif target == self.DEFAULT_NODE:
            nodes = [self.get_default_node()]
        else:
            nodes = list(target)
        got = await asyncio.gather(*(n.redis_connection.execute_command(*args) for n in nodes))
        return {n.name: r for n, r in zip(nodes, got, strict=True)} if len(nodes) > 1 else got[0]

    async def _run(self, reply: Reply, args: tuple[Any, ...], blocking: bool) -> Any:
        if not self._ready:
            await self.initialize()
        keys = self._keys(args)
        if keys is None:
            keys = await self._all_keys(args)
        try:
            slot = self._slot_of(args, keys)
        except RedisClusterException:
            name = _word(args[0])
            if name not in _SPLIT_AND_SUM:
                raise
            return await self._split(reply, name, keys)
        if slot is None:
            return await self._keyless(reply, args, blocking)
        read = self.read_from_replicas and self._is_read(args)
        return await self._send(reply, args, slot, read, blocking)

    def _is_read(self, args: tuple[Any, ...]) -> bool:
        name = _word(args[0])
        if name in self._subcommands and len(args) > 1:
            name = f"{name} {_word(args[1])}"
        return name in self._readonly

    async def _split(self, reply: Reply, name: str, keys: list[Any]) -> Any:
        by_slot: dict[int, list[Any]] = {}
        for k in keys:
            by_slot.setdefault(key_slot(k), []).append(k)
        got = await asyncio.gather(
            *(self._send(None, (name, *ks), slot, False, False) for slot, ks in by_slot.items())
        )
        total = sum(got)
        return reply(total) if reply is not None else total

    async def _keyless(self, reply: Reply, args: tuple[Any, ...], blocking: bool) -> Any:
        name = _word(args[0])
        if len(args) > 1 and name in ("SCRIPT", "FUNCTION"):
            name = f"{name} {_word(args[1])}"
        merge = _ALL_PRIMARIES.get(name)
        if merge is None:
            node = self.get_default_node()
            client = node.redis_connection
            if blocking:
                return await client._exec_blocking(reply, *args)
            return await client._exec(reply, *args)
        got = await asyncio.gather(
            *(n.redis_connection._exec(reply, *args) for n in self.get_primaries())
        )
        return merge(got)

    async def _send(
        self,
        reply: Reply,
        args: tuple[Any, ...],
        slot: int,
        read: bool,
        blocking: bool,
        node: ClusterNode | None = None,
        redirected: ResponseError | None = None,
    ) -> Any:
        # ``node`` and ``redirected``: the command was sent to ``node`` already, which
        # answered with the redirection ``redirected`` (`_redirected_direct`).
        if node is None:
            shard = self._slots[slot]
            if shard is not None:
                node = next(shard.readers) if read else shard.primary
            else:
                node = await self._retarget(slot, read, time.monotonic() + self.retry_timeout)
        asking = False
        redirects = 0
        deadline = 0.0
        delay = RETRY_DELAY_MIN
        while True:
            client = node.redis_connection
            try:
                if redirected is not None:
                    exc, redirected = redirected, None
                    raise exc
                if asking:
                    return await self._asking(client, reply, args)
                if blocking:
                    return await client._exec_blocking(reply, *args)
                return await client._exec(reply, *args)
            except ResponseError as exc:
                kind = exc.prefix
                if kind == "MOVED":
                    self.stats["moved"] += 1
                    node = self._redirected(exc, node)
                    shard = self._slots[slot]
                    if shard is None or shard.primary is not node:
                        self._slots[slot] = _Shard(node, [])
                    self._refresh_soon()
                    asking, read = False, False
                elif kind == "ASK":
                    self.stats["ask"] += 1
                    node = self._redirected(exc, node)
                    asking = True
                elif kind in ("TRYAGAIN", "CLUSTERDOWN"):
                    if not deadline:
                        deadline = time.monotonic() + self.retry_timeout
                    if time.monotonic() >= deadline:
                        if kind == "CLUSTERDOWN":
                            raise ClusterDownError(exc.message) from None
                        raise ClusterError(
                            f"still {exc.message!r} after {self.retry_timeout}s"
                        ) from exc
                    self.stats["retries"] += 1
                    await asyncio.sleep(delay)
                    delay = min(delay * 2, RETRY_DELAY_MAX)
                    if kind == "CLUSTERDOWN":
                        with contextlib.suppress(RedisClusterException):
                            await self._refresh_soon()
                    node, asking = await self._retarget(slot, read, deadline), False
                    continue
                else:
                    raise
                redirects += 1
                if redirects > MAX_REDIRECTIONS:
                    raise ClusterError(
                        f"more than {MAX_REDIRECTIONS} redirections for slot {slot}"
                    ) from exc
            except ConnectError:
                # Nothing was written: ask the other nodes where the slot went.
                if not deadline:
                    deadline = time.monotonic() + self.retry_timeout
                if time.monotonic() >= deadline:
                    raise
                self.stats["retries"] += 1
                # Nobody may answer yet: then pause and try again.
                with contextlib.suppress(RedisClusterException):
                    await self._refresh_soon(avoid=node)
                await asyncio.sleep(delay)
                delay = min(delay * 2, RETRY_DELAY_MAX)
                node, asking = await self._retarget(slot, read, deadline), False
            except ConnectionLostError:
                # It may have run: not sent again. The map may have changed.
                self._refresh_soon(avoid=node)
                raise

    async def _retarget(self, slot: int, read: bool, deadline: float) -> ClusterNode:
        """The slot's node now; while no node serves it (mid-failover), the map is
        read again until ``deadline``, then `SlotNotCoveredError`."""
        delay = RETRY_DELAY_MIN
        while True:
            shard = self._slots[slot]
            if shard is not None:
                return next(shard.readers) if read else shard.primary
            if time.monotonic() >= deadline:
                raise SlotNotCoveredError(f"slot {slot} is not served by any known node")
            with contextlib.suppress(RedisClusterException):
                await self._refresh_soon()
            await asyncio.sleep(delay)
            delay = min(delay * 2, RETRY_DELAY_MAX)

    @staticmethod
    async def _asking(client: Redis, reply: Reply, args: tuple[Any, ...]) -> Any:
        # ASKING and the command in one batch on one connection, in this order.
        pipe = client.pipeline(transaction=False)
        pipe.execute_command("ASKING")
        pipe._exec(reply, *args)
        got = await pipe.execute(raise_on_error=False)
        if isinstance(got[1], BaseException):
            raise got[1]
        return got[1]

    # -- commands that differ from one server's ---------------------------------------

    def _direct(self, name: Any) -> Any:
        """The lane of the primary serving str key ``name`` when `_route` would send
        it there directly (no hash tag, no replica reads), else None."""
        if type(name) is str and "{" not in name and not self.read_from_replicas:
            shard = self._slots[crc_hqx(name.encode(), 0) & (SLOTS - 1)]
            if shard is not None:
                return shard.primary.redis_connection._routed
        return None

    def get(self, name: Any) -> Any:
        """GET: the value or None."""
        # `_route`'s direct path with two Python frames fewer (~2/3 of the client's
        # instructions per cluster GET/SET were Python routing).
        routed = self._direct(name)
        if routed is not None and (fut := routed(False, "GET", name)) is not None:
            return fut
        return self._exec(None, "GET", name)

    def set(
        self,
        name: Any,
        value: Any,
        ex: Any = None,
        px: Any = None,
        nx: bool = False,
        xx: bool = False,
        keepttl: bool = False,
        get: bool = False,
        exat: Any = None,
        pxat: Any = None,
    ) -> Any:
        """SET with redis-py's options (see `Commands.set`)."""
        if _plain_set(ex, px, nx, xx, keepttl, get, exat, pxat):
            routed = self._direct(name)
            if routed is not None and (fut := routed(True, "SET", name, value)) is not None:
                return fut
        return Commands.set(self, name, value, ex, px, nx, xx, keepttl, get, exat, pxat)

    def spublish(self, shard_channel: Any, message: Any) -> Any:
        """SPUBLISH to a shard channel (on the node owning its slot); receivers."""
        return self._route(None, ("SPUBLISH", shard_channel, message), False)

    async def mget_nonatomic(self, keys: Any, *args: Any) -> list[Any]:
        """MGET of keys in any slots: one MGET per slot, values in the keys' order."""
        names = flatten_names((keys, *args))
        by_slot: dict[int, list[int]] = {}
        for i, k in enumerate(names):
            by_slot.setdefault(key_slot(k), []).append(i)
        got = await asyncio.gather(*(self.mget([names[i] for i in ix]) for ix in by_slot.values()))
        out: list[Any] = [None] * len(names)
        for ix, values in zip(by_slot.values(), got, strict=True):
            for i, v in zip(ix, values, strict=True):
                out[i] = v
        return out

    async def mset_nonatomic(self, mapping: Mapping[Any, Any]) -> bool:
        """MSET of keys in any slots: one MSET per slot (not atomic across them)."""
        by_slot: dict[int, dict[Any, Any]] = {}
        for k, v in mapping.items():
            by_slot.setdefault(key_slot(k), {})[k] = v
        await asyncio.gather(*(self.mset(m) for m in by_slot.values()))
        return True

    async def scan_iter(
        self, match: Any = None, count: int | None = None, _type: str | None = None
    ) -> AsyncIterator[Any]:
        """Every key of every primary, SCAN by SCAN."""
        await self.initialize()
        for node in self.get_primaries():
            async for k in node.redis_connection.scan_iter(match=match, count=count, _type=_type):
                yield k

    def pipeline(self, transaction: bool = False) -> ClusterPipeline:
        """Commands queued and sent together by `execute()`, split by node; with
        ``transaction=True`` all keys must be in one slot (MULTI/EXEC on its node)."""
        from surge.redis.cluster_pipeline import ClusterPipeline

        return ClusterPipeline(self, transaction)

    def pubsub(self, ignore_subscribe_messages: bool = False) -> ClusterPubSub:
        """A subscriber: SUBSCRIBE/PSUBSCRIBE on one node (the cluster forwards
        every PUBLISH), SSUBSCRIBE on each shard channel's node."""
        from surge.redis.cluster_pubsub import ClusterPubSub

        return ClusterPubSub(self, ignore_subscribe_messages)

    # -- lifecycle -------------------------------------------------------------------

    async def connect(self) -> RedisCluster:
        """Read the map now rather than on first use."""
        await self.initialize()
        return self

    def __await__(self) -> Any:
        return self.connect().__await__()

    async def close(self) -> None:
        """Close every node's client; pending commands fail with ClosedError."""
        self._closed = True
        for t in (self._refresh_task, self._init_task):
            if t is not None and not t.done():
                t.cancel()
        await asyncio.gather(
            *(n.redis_connection.close() for n in self._nodes.values()), return_exceptions=True
        )

    aclose = close

    async def __aenter__(self) -> RedisCluster:
        return await self.connect()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def __repr__(self) -> str:
        return f"<surge.redis.RedisCluster {len(self._shards)} shards>"


async def _value(v: Any) -> Any:
    return v


def _retrieve(task: asyncio.Task) -> None:
    if not task.cancelled():
        task.exception()
