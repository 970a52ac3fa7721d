"""`Sentinel`: find a monitored master (and its replicas) through Redis Sentinel,
redis-py's names: ``Sentinel([(host, port), ...]).master_for("mymaster")``.

A client from `master_for` / `slave_for` is a plain pipelined `Redis` whose
engine asks the sentinels where to connect at the start of every connect round
(`surge.engine.PipelinedConnection.resolve`). After a failover the old
master's connections are gone (killed, or closed by Sentinel's ``CLIENT KILL``
when it is demoted): commands in flight fail with `ConnectionLostError` (they
may have run: never sent twice), the next command reconnects to the master the
sentinels name now.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Sequence
from typing import Any

from surge.endpoint import Endpoint
from surge.errors import ConnectError, SurgeError
from surge.redis.client import Redis
from surge.redis.errors import ResponseError

#: Seconds to wait for one sentinel's answer before asking the next.
DEFAULT_SENTINEL_TIMEOUT = 1.0


class MasterNotFoundError(ConnectError):
    """No sentinel knows a healthy master by that name (redis-py's name)."""


class SlaveNotFoundError(ConnectError):
    """No replica (and no master to fall back on) for that name (redis-py's name)."""


def _text(v: Any) -> str:
    return v.decode() if isinstance(v, bytes) else str(v)


def _as_dict(v: Any) -> dict[str, str]:
    if isinstance(v, dict):
        return {_text(k): _text(x) for k, x in v.items()}
    return {_text(v[i]): _text(v[i + 1]) for i in range(0, len(v) - 1, 2)}


#: Flags that make a sentinel's view of a server unusable (redis-py's rule: a
#: master the sentinel is merely reconnecting to, "disconnected", still counts).
_DOWN = frozenset(("s_down", "o_down"))


class Sentinel:
    """Sentinels to ask (``[(host, port), ...]``); ``sentinel_kwargs`` go to the
    connections to the sentinels, ``connection_kwargs`` to the clients of
    `master_for` / `slave_for`. ``min_other_sentinels``: a master is trusted only
    from a sentinel that sees at least that many others (redis-py's meaning)."""

    def __init__(
        self,
        sentinels: Iterable[tuple[str, int]],
        min_other_sentinels: int = 0,
        sentinel_kwargs: dict[str, Any] | None = None,
        *,
        sentinel_timeout: float = DEFAULT_SENTINEL_TIMEOUT,
        **connection_kwargs: Any,
    ) -> None:
        opts: dict[str, Any] = {
            "connect_timeout": sentinel_timeout,
            "request_timeout": sentinel_timeout,
        }
        opts.update(sentinel_kwargs or {})
        self.sentinels: list[Redis] = []
        for host, port in sentinels:
            r = Redis(host, int(port), **opts)
            r.engine.retry_connect = False  # a dead sentinel: ask the next at once
            self.sentinels.append(r)
        if not self.sentinels:
            raise ValueError("Sentinel needs at least one (host, port)")
        self.min_other_sentinels = min_other_sentinels
        self.connection_kwargs = connection_kwargs

    def __repr__(self) -> str:
        where = ",".join(f"{s.host}:{s.port}" for s in self.sentinels)
        return f"<surge.redis.Sentinel {where}>"

    def check_master_state(self, state: dict[str, str], service_name: str) -> bool:
        """True when a sentinel's view of the master is usable (up, enough peers)."""
        flags = set(state.get("flags", "").split(","))
        if "master" not in flags or flags & _DOWN:
            return False
        return int(state.get("num-other-sentinels", 0)) >= self.min_other_sentinels

    async def discover_master(self, service_name: str) -> tuple[str, int]:
        """(host, port) of the master, from the first sentinel that knows it healthy
        (that sentinel is asked first next time, as redis-py does)."""
        errors: list[str] = []
        for i, s in enumerate(self.sentinels):
            try:
                state = _as_dict(await s.execute_command("SENTINEL", "MASTER", service_name))
            except (SurgeError, OSError) as exc:
                errors.append(f"{s.host}:{s.port}: {exc}")
                continue
            if self.check_master_state(state, service_name):
                if i:
                    self.sentinels.insert(0, self.sentinels.pop(i))
                return state["ip"], int(state["port"])
            errors.append(f"{s.host}:{s.port}: master {state.get('flags')}")
        raise MasterNotFoundError(f"no master found for {service_name!r}: " + "; ".join(errors))

    async def discover_slaves(self, service_name: str) -> list[tuple[str, int]]:
        """(host, port) of the healthy replicas, from the first sentinel that answers."""
        for s in self.sentinels:
            try:
                rows = await s.execute_command("SENTINEL", "REPLICAS", service_name)
            except ResponseError:
                continue  # that sentinel does not monitor the name
            except (SurgeError, OSError):
                continue
            out = []
            for row in rows:
                st = _as_dict(row)
                if not set(st.get("flags", "").split(",")) & _DOWN:
                    out.append((st["ip"], int(st["port"])))
            if out:
                return out
        return []

    discover_replicas = discover_slaves

    def master_for(
        self, service_name: str, redis_class: type[Redis] = Redis, **kwargs: Any
    ) -> Redis:
        """A client of ``service_name``'s master, wherever it is now (lazy)."""
        return self._managed(service_name, redis_class, True, kwargs)

    def slave_for(
        self, service_name: str, redis_class: type[Redis] = Redis, **kwargs: Any
    ) -> Redis:
        """A client of one of ``service_name``'s replicas (the master when none is up)."""
        return self._managed(service_name, redis_class, False, kwargs)

    replica_for = slave_for

    def _managed(
        self, name: str, redis_class: type[Redis], master: bool, kwargs: dict[str, Any]
    ) -> Redis:
        opts = {**self.connection_kwargs, **kwargs}
        client = redis_class(**opts)
        tls, tag = client.endpoint.tls, client.endpoint.tag

        async def resolve() -> Sequence[Endpoint]:
            if master:
                found = [await self.discover_master(name)]
            else:
                found = await self.discover_slaves(name)
                random.shuffle(found)
                try:
                    found.append(await self.discover_master(name))
                except MasterNotFoundError:
                    if not found:
                        raise SlaveNotFoundError(f"no replica found for {name!r}") from None
            return [Endpoint(h, p, tls=tls, tag=tag) for h, p in found]

        _follow(client, resolve)
        return client

    async def close(self) -> None:
        """Close the connections to the sentinels."""
        for s in self.sentinels:
            await s.close()

    aclose = close

    async def __aenter__(self) -> Sentinel:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


def _follow(client: Redis, resolve: Any) -> None:
    """Make every connection of ``client`` (pipelined, blocking pool, pub/sub) ask
    ``resolve`` where to go on each connect."""
    client.engine.resolve = resolve
    make = client.new_engine

    def new_engine(codec: Any, **kwargs: Any) -> Any:
        engine = make(codec, **kwargs)
        engine.resolve = resolve
        return engine

    client.new_engine = new_engine  # type: ignore[method-assign]
