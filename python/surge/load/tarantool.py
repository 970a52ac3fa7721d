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
import math
import random
import string
from collections.abc import Callable
from typing import Any

from surge.errors import (
    ClosedError,
    ConnectError,
    ConnectionLostError,
    ProtocolError,
    RequestTimeoutError,
)
from surge.load.driver import DriverTarget
from surge.load.recorder import Recorder
from surge.load.target import LoadConfig, LoadError, connect_error_kind

#: Operations of the Tarantool workload, and the seed's mix.
OPS = ("insert", "select", "update", "delete")
DEFAULT_MIX = {"insert": 25.0, "select": 25.0, "update": 25.0, "delete": 25.0}
#: How long setup (connect, create the space, pre-fill) may take.
PREPARE_TIMEOUT = 30.0

CREATE_SPACE = """
local name = ...
if box.space[name] == nil then
    local s = box.schema.space.create(name, {if_not_exists = true,
        format = {{name = 'id', type = 'unsigned'}, {name = 'data', type = 'string'}}})
    s:create_index('primary', {type = 'hash', parts = {1, 'unsigned'}, if_not_exists = true})
end
return box.space[name].id
"""


def mix_ops(mix: dict[str, float] | None) -> list[str]:
    """The operations a mix uses, in the standard order; unknown names are an error."""
    mix = mix or DEFAULT_MIX
    unknown = sorted(set(mix) - set(OPS))
    if unknown:
        raise LoadError(f"unknown Tarantool operations {unknown}; known: {', '.join(OPS)}")
    return [op for op in OPS if mix.get(op, 0) > 0]


def mix_cycle(ops: list[str], weights: list[float]) -> list[str]:
    """The shortest sequence of ops in the mix's exact proportions, interleaved
    (smooth weighted round robin): 25/25/25/25 is insert, select, update, delete."""
    total = sum(weights)
    ints = [round(1000 * w / total) for w in weights]
    g = 0
    for w in ints:
        g = math.gcd(g, w)
    ints = [w // g for w in ints]
    current = [0] * len(ops)
    cycle = []
    for _ in range(sum(ints)):
        for i, w in enumerate(ints):
            current[i] += w
        best = max(range(len(ops)), key=lambda i: current[i])
        current[best] -= sum(ints)
        cycle.append(ops[best])
    return cycle


def error_kind(exc: BaseException) -> str:
    """The report's error kind for a driver exception."""
    if isinstance(exc, RequestTimeoutError):
        return "timeout"
    if isinstance(exc, ConnectError):
        return connect_error_kind(exc.__cause__) if exc.__cause__ else "connect_error"
    if isinstance(exc, ProtocolError):
        return "malformed"
    if isinstance(exc, ConnectionLostError | ClosedError):
        return "disconnect"
    from surge.tarantool.errors import DatabaseError

    if isinstance(exc, DatabaseError):
        return "db_error"
    return "other"


class TarantoolTarget(DriverTarget):
    """Mixed CRUD load on one space through surge's Tarantool driver."""

    def __init__(self, config: LoadConfig, recorder: Recorder) -> None:
        super().__init__(config, recorder)
        from surge.tarantool import connect

        self.ops = mix_ops(config.mix)
        mix = config.mix or DEFAULT_MIX
        weights = [mix[op] for op in self.ops]
        self._cycle = mix_cycle(self.ops, weights)
        self._outstanding = dict.fromkeys(self.ops, 0)
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
        self._next_conn = 0
        size = config.tuple_size
        self._data = [(string.printable[i % len(string.printable)] * size) for i in range(8)]
        # 56-bit random base: workers and runs never share keys.
        self.lo = self.hi = rng.getrandbits(40) << 16
        self._rand = rng.random
        self._issue: dict[str, Callable[[Any], Any]] = {
            "insert": self._insert,
            "select": self._select,
            "update": self._update,
            "delete": self._delete,
        }

    async def prepare(self) -> None:
        try:
            await asyncio.wait_for(self._setup(), PREPARE_TIMEOUT)
        except (ConnectError, TimeoutError, OSError):
            # Unreachable: the run goes on and every request is counted by kind.
            return

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

    # -- the operations -----------------------------------------------------------------

    def _conn(self) -> Any:
        conns = self.conns
        if len(conns) == 1:
            return conns[0]
        self._next_conn = (self._next_conn + 1) % len(conns)
        return conns[self._next_conn]

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
