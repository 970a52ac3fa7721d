"""Redis target: GET/SET (seed 003's Redis) through surge's Redis driver.

Each worker owns a random key prefix and a window of ``prefill`` keys, filled
before the clock starts; SET rewrites and GET reads a random key of the window,
so the data set stays the same size however long the run. Values are
``tuple_size`` bytes. All of a worker's requests share ``connections``
pipelined connections (one by default).
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
from collections.abc import Callable
from functools import partial
from typing import Any

from surge.errors import ConnectError
from surge.load.recorder import Recorder
from surge.load.tarantool import error_kind as _engine_error_kind
from surge.load.tarantool import mix_cycle
from surge.load.target import LoadConfig, LoadError, Target

#: Operations of the Redis workload, and the default mix.
OPS = ("get", "set")
DEFAULT_MIX = {"get": 50.0, "set": 50.0}
#: How long setup (connect, pre-fill) may take.
PREPARE_TIMEOUT = 30.0


def mix_ops(mix: dict[str, float] | None) -> list[str]:
    """The operations a mix uses, in the standard order; unknown names are an error."""
    mix = mix or DEFAULT_MIX
    unknown = sorted(set(mix) - set(OPS))
    if unknown:
        raise LoadError(f"unknown Redis operations {unknown}; known: {', '.join(OPS)}")
    return [op for op in OPS if mix.get(op, 0) > 0]


def error_kind(exc: BaseException) -> str:
    """The report's error kind for a driver exception."""
    from surge.redis import RedisError

    if isinstance(exc, RedisError):
        return "db_error"
    return _engine_error_kind(exc)


class RedisTarget(Target):
    """GET/SET load through surge's Redis driver."""

    def __init__(self, config: LoadConfig, recorder: Recorder) -> None:
        super().__init__(config, recorder)
        from surge.redis import connect

        self.ops = mix_ops(config.mix)
        mix = config.mix or DEFAULT_MIX
        self._cycle = mix_cycle(self.ops, [mix[op] for op in self.ops])
        self._i = 0
        self.conns = [
            connect(
                config.target,
                connect_timeout=config.connect_timeout,
                request_timeout=config.timeout,
            )
            for _ in range(config.connections or 1)
        ]
        self._next_conn = 0
        rng = random.Random()
        prefix = f"surge:load:{rng.getrandbits(48):012x}:"
        self._keys = [f"{prefix}{i}" for i in range(max(1, config.prefill))]
        self._value = b"x" * config.tuple_size
        self._rand = rng.random
        self._outstanding = dict.fromkeys(self.ops, 0)
        self._abandoned = False
        self._issue: dict[str, Callable[[Any], Any]] = {"get": self._get, "set": self._set}

    async def prepare(self) -> None:
        try:
            await asyncio.wait_for(self._setup(), PREPARE_TIMEOUT)
        except (ConnectError, TimeoutError, OSError):
            # Unreachable: the run goes on and every request is counted by kind.
            return

    async def _setup(self) -> None:
        for c in self.conns:
            await c.connect()
        first = self.conns[0]
        await asyncio.gather(*(first.set(k, self._value) for k in self._keys))

    def _conn(self) -> Any:
        conns = self.conns
        if len(conns) == 1:
            return conns[0]
        self._next_conn = (self._next_conn + 1) % len(conns)
        return conns[self._next_conn]

    def _key(self) -> str:
        keys = self._keys
        return keys[int(self._rand() * len(keys))]

    def _get(self, conn: Any) -> Any:
        return conn.get(self._key())

    def _set(self, conn: Any) -> Any:
        return conn.set(self._key(), self._value)

    def _start(self, due_ns: int, closed: bool) -> None:
        cycle = self._cycle
        op = cycle[self._i]
        self._i = (self._i + 1) % len(cycle)
        self._outstanding[op] += 1
        try:
            aw = self._issue[op](self._conn())
        except Exception as exc:  # bad input raised before sending
            self._end(op, due_ns, closed, exc)
            return
        if not asyncio.isfuture(aw):
            aw = asyncio.ensure_future(aw)
        aw.add_done_callback(partial(self._done, op, due_ns, closed))

    def _done(self, op: str, due_ns: int, closed: bool, fut: asyncio.Future) -> None:
        exc = None if not fut.cancelled() else asyncio.CancelledError()
        if exc is None:
            exc = fut.exception()
        self._end(op, due_ns, closed, exc)

    def _end(self, op: str, due_ns: int, closed: bool, exc: BaseException | None) -> None:
        if self._abandoned:
            return
        self._outstanding[op] -= 1
        if exc is None:
            self.recorder.ok(op, time.monotonic_ns() - due_ns)
        else:
            self.recorder.error(op, error_kind(exc))
        if closed and not self.stopping:
            self._start(time.monotonic_ns(), True)

    # -- Target -------------------------------------------------------------------------

    def issue(self, due_ns: int) -> None:
        self._start(due_ns, False)

    def start_closed(self) -> None:
        now = time.monotonic_ns()
        for _ in range(len(self.conns) * self.config.pipeline):
            self._start(now, True)

    def outstanding(self) -> int:
        return sum(self._outstanding.values())

    def abandon(self) -> None:
        # Late replies are ignored from now on; what is left counts as timed out.
        self._abandoned = True
        for op, n in self._outstanding.items():
            for _ in range(n):
                self.recorder.error(op, "timeout")
            self._outstanding[op] = 0

    async def close(self) -> None:
        self.stopping = True
        for c in self.conns:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(c.close(), 2.0)
