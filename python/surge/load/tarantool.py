"""Tarantool target: seed 000's mixed insert/select/update/delete on 1.5 KB tuples.

Each worker owns a random key range, so workers never collide. Its live keys are
a window ``[lo, hi)``: insert takes ``hi``, delete takes ``lo``, select and
update pick a key inside; with equal insert and delete weights the space stays
the same size however long the run (memory fixed on both sides). Requests go
through surge's driver: all of a worker's requests share ``connections``
pipelined connections (one by default, as in the seed).
"""

from __future__ import annotations

import asyncio
import random
import string
from collections.abc import Callable
from typing import Any

from surge.load.driver import DriverTarget, engine_error_kind, mix_ops
from surge.load.recorder import Recorder
from surge.load.target import LoadConfig, register

#: Operations of the Tarantool workload, and the seed's mix.
OPS = ("insert", "select", "update", "delete")
DEFAULT_MIX = {"insert": 25.0, "select": 25.0, "update": 25.0, "delete": 25.0}

CREATE_SPACE = """
local name = ...
if box.space[name] == nil then
    local s = box.schema.space.create(name, {if_not_exists = true,
        format = {{name = 'id', type = 'unsigned'}, {name = 'data', type = 'string'}}})
    s:create_index('primary', {type = 'hash', parts = {1, 'unsigned'}, if_not_exists = true})
end
return box.space[name].id
"""
#: Deletes the keys [lo, lo + count) of a space in one request, yielding between
#: batches so other clients are served meanwhile. Keys are 56-bit: `lo + i` keeps
#: them exact (uint64 cdata) where a Lua number loop would round them.
DELETE_RANGE = """
local name, lo, count = ...
local s = box.space[name]
local n = 0
for i = 0, count - 1 do
    if s:delete(lo + i) ~= nil then n = n + 1 end
    if i % 1000 == 999 then require('fiber').yield() end
end
return n
"""


def error_kind(exc: BaseException) -> str:
    """The report's error kind for a driver exception."""
    from surge.tarantool.errors import DatabaseError

    if isinstance(exc, DatabaseError):
        return "db_error"
    return engine_error_kind(exc)


@register("tarantool", "tnt")
class TarantoolTarget(DriverTarget):
    """Mixed CRUD load on one space through surge's Tarantool driver."""

    protocol = "Tarantool"
    default_port = 3301
    example = "tarantool://host:port"

    @classmethod
    def operations(cls, config: LoadConfig) -> list[str]:
        return mix_ops("Tarantool", OPS, config.mix, DEFAULT_MIX)

    def __init__(self, config: LoadConfig, recorder: Recorder) -> None:
        super().__init__(config, recorder)
        from surge.tarantool import connect

        self._use_mix(self.operations(config), config.mix or DEFAULT_MIX)
        rng = random.Random()
        self.space = config.space
        self.conns = [
            connect(
                config.target,
                connect_timeout=config.connect_timeout,
                request_timeout=config.timeout,
            )
            for _ in range(config.connections or 1)
        ]
        size = config.tuple_size
        self._data = [(string.printable[i % len(string.printable)] * size) for i in range(8)]
        # 56-bit random base: workers and runs never share keys.
        self.base = self.lo = self.hi = rng.getrandbits(40) << 16
        self._rand = rng.random
        self._issue: dict[str, Callable[[Any], Any]] = {
            "insert": self._insert,
            "select": self._select,
            "update": self._update,
            "delete": self._delete,
        }

    async def _setup(self) -> None:
        first = self.conns[0]
        await first.connect()
        await first.eval(CREATE_SPACE, (self.space,))
        for c in self.conns:
            await c.connect()
            await c.reload_schema()
        data = self._data[0]
        batch = [first.insert(self.space, (self.hi + i, data)) for i in range(self.config.prefill)]
        await asyncio.gather(*batch)
        self.hi += self.config.prefill

    async def _cleanup(self) -> None:
        # Inserted and pre-filled keys alike are in [base, hi): none is left behind.
        await self.conns[0].eval(DELETE_RANGE, (self.space, self.base, self.hi - self.base))

    # -- the operations -----------------------------------------------------------------

    def _insert(self, conn: Any) -> Any:
        key = self.hi
        self.hi += 1
        return conn.insert(self.space, (key, self._data[key & 7]))

    def _key(self) -> int:
        span = self.hi - self.lo
        return self.lo + int(self._rand() * span) if span > 0 else self.lo

    def _select(self, conn: Any) -> Any:
        return conn.select(self.space, self._key())

    def _update(self, conn: Any) -> Any:
        key = self._key()
        return conn.update(self.space, key, [("=", 1, self._data[(key + 1) & 7])])

    def _delete(self, conn: Any) -> Any:
        key = self.lo
        if self.lo < self.hi:
            self.lo += 1
        return conn.delete(self.space, key)

    def classify(self, exc: BaseException) -> str:
        return error_kind(exc)
