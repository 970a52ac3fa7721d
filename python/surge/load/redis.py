"""Redis target: GET/SET (seed 003's Redis) through surge's Redis driver.

Each worker owns a random key prefix and a window of ``prefill`` keys, filled
before the clock starts; SET rewrites and GET reads a random key of the window,
so the data set stays the same size however long the run. Values are
``tuple_size`` bytes. All of a worker's requests share ``connections``
pipelined connections (one by default).
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable
from typing import Any

from surge.load.driver import DriverTarget, engine_error_kind, mix_ops
from surge.load.recorder import Recorder
from surge.load.target import LoadConfig, register

#: Operations of the Redis workload, and the default mix.
OPS = ("get", "set")
DEFAULT_MIX = {"get": 50.0, "set": 50.0}
#: Keys per DEL when a worker removes its keys at the end.
DELETE_BATCH = 1000


def error_kind(exc: BaseException) -> str:
    """The report's error kind for a driver exception."""
    from surge.redis import RedisError

    if isinstance(exc, RedisError):
        return "db_error"
    return engine_error_kind(exc)


@register("redis")
class RedisTarget(DriverTarget):
    """GET/SET load through surge's Redis driver."""

    protocol = "Redis"
    default_port = 6379
    example = "redis://host:port"

    @classmethod
    def operations(cls, config: LoadConfig) -> list[str]:
        return mix_ops("Redis", OPS, config.mix, DEFAULT_MIX)

    def __init__(self, config: LoadConfig, recorder: Recorder) -> None:
        super().__init__(config, recorder)
        from surge.redis import connect

        self._use_mix(self.operations(config), config.mix or DEFAULT_MIX)
        self.conns = [
            connect(
                config.target,
                connect_timeout=config.connect_timeout,
                request_timeout=config.timeout,
            )
            for _ in range(config.connections or 1)
        ]
        rng = random.Random()
        prefix = f"surge:load:{rng.getrandbits(48):012x}:"
        self._keys = [f"{prefix}{i}" for i in range(max(1, config.prefill))]
        self._value = b"x" * config.tuple_size
        self._rand = rng.random
        self._issue: dict[str, Callable[[Any], Any]] = {"get": self._get, "set": self._set}

    async def _setup(self) -> None:
        for c in self.conns:
            await c.connect()
        first = self.conns[0]
        await asyncio.gather(*(first.set(k, self._value) for k in self._keys))

    async def _cleanup(self) -> None:
        keys = self._keys
        first = self.conns[0]
        await asyncio.gather(
            *(first.delete(*keys[i : i + DELETE_BATCH]) for i in range(0, len(keys), DELETE_BATCH))
        )

    def _key(self) -> str:
        keys = self._keys
        return keys[int(self._rand() * len(keys))]

    def _get(self, conn: Any) -> Any:
        return conn.get(self._key())

    def _set(self, conn: Any) -> Any:
        return conn.set(self._key(), self._value)

    def classify(self, exc: BaseException) -> str:
        return error_kind(exc)
