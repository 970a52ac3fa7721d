"""What the driver targets (Tarantool, Redis, PostgreSQL) share: setup before the
clock starts, issuing an operation of the mix on a connection, timing it from its
due time, the closed loop, the mix itself and the error kinds of the engine.

A subclass sets its mix with `_use_mix` (the operations, `_cycle`: the mix as a
repeating list of operation names, see `mix_cycle`, and `_outstanding`), sets
`conns`, `_issue` (operation name -> function of a connection that returns an
awaitable) and implements `_setup` (connect, create, pre-fill), `classify` (exception -> error
kind) and, if it leaves data behind, `_cleanup`.

Setup first opens one plain TCP connection to the target: a closed port or an
unreachable host is known at once, and the run then takes its nominal duration
with every request counted as that connect error (the drivers themselves would
retry for their whole connect timeout). A server that accepts but does not speak
the protocol is a `LoadError` with what was tried, before the clock starts.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
from collections.abc import Callable, Iterable, Mapping
from functools import partial
from typing import Any, ClassVar
from urllib.parse import urlsplit

from surge.errors import (
    ClosedError,
    ConnectError,
    ConnectionLostError,
    ProtocolError,
    RequestTimeoutError,
)
from surge.load.recorder import Recorder
from surge.load.target import LoadConfig, LoadError, Target, connect_error_kind

#: How long setup (connect, create, pre-fill) may take before the run fails.
PREPARE_TIMEOUT = 30.0
#: How long removing a worker's data at the end may take.
CLEANUP_TIMEOUT = 10.0


def mix_ops(
    kind: str, known: Iterable[str], mix: Mapping[str, float] | None, default: Mapping[str, float]
) -> list[str]:
    """The operations a mix uses, in the order of `known`; unknown names are an error."""
    known = tuple(known)
    mix = mix or default
    unknown = sorted(set(mix) - set(known))
    if unknown:
        raise LoadError(f"unknown {kind} operations {unknown}; known: {', '.join(known)}")
    return [op for op in known if mix.get(op, 0) > 0]


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


def engine_error_kind(exc: BaseException) -> str:
    """The report's error kind for an error of surge's connection engine."""
    if isinstance(exc, RequestTimeoutError):
        return "timeout"
    if isinstance(exc, ConnectError):
        return connect_error_kind(exc.__cause__) if exc.__cause__ else "connect_error"
    if isinstance(exc, ProtocolError):
        return "malformed"
    if isinstance(exc, ConnectionLostError | ClosedError):
        return "disconnect"
    return "other"


def endpoint_of(url: str, default_port: int) -> tuple[str, int] | None:
    """(host, port) of a one-host URL, None for what a plain TCP probe cannot
    reach (several hosts, a Unix socket)."""
    try:
        parts = urlsplit(url)
        host, port = parts.hostname, parts.port
    except ValueError:
        return None
    if not host or "," in parts.netloc:
        return None
    return host, port or default_port


class DriverTarget(Target):
    """Base of the targets that load a database through a surge driver."""

    #: The protocol's name in messages ("Tarantool") and its default port.
    protocol: ClassVar[str] = ""
    default_port: ClassVar[int] = 0

    conns: list[Any]
    _cycle: list[str]
    _issue: dict[str, Callable[[Any], Any]]

    def __init__(self, config: LoadConfig, recorder: Recorder) -> None:
        super().__init__(config, recorder)
        self._i = 0
        self._outstanding: dict[str, int] = {}  # per operation; set with the mix
        self._abandoned = False
        #: Why requests cannot be sent (an error kind), when setup could not connect.
        self._not_ready: str | None = None
        self._ready = False

    def _use_mix(self, ops: list[str], mix: Mapping[str, float]) -> None:
        """Run `ops` (from `mix_ops`) in the proportions of `mix` (weight by operation)."""
        self.ops = ops
        self._cycle = mix_cycle(ops, [mix[op] for op in ops])
        self._outstanding = dict.fromkeys(ops, 0)

    def _conn(self) -> Any:
        conns = self.conns
        if len(conns) == 1:
            return conns[0]
        self._next_conn = (getattr(self, "_next_conn", 0) + 1) % len(conns)
        return conns[self._next_conn]

    def classify(self, exc: BaseException) -> str:
        """The report's error kind for a driver exception."""
        return engine_error_kind(exc)

    async def _setup(self) -> None:
        """Connect, create what the workload needs and pre-fill it."""

    async def _cleanup(self) -> None:
        """Remove what this worker added (called once, connections still open)."""

    async def prepare(self) -> None:
        where = endpoint_of(self.config.target, self.default_port)
        if where is not None:
            try:
                _, writer = await asyncio.wait_for(
                    asyncio.open_connection(*where), self.config.connect_timeout
                )
            except (OSError, TimeoutError) as exc:
                self._not_ready = connect_error_kind(exc)
                return
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()
        try:
            await asyncio.wait_for(self._setup(), PREPARE_TIMEOUT)
        except Exception as exc:
            kind = self.classify(exc)
            if kind == "db_error":
                # The server answered with an error (no such database, bad
                # password): every request is counted as one.
                self._not_ready = kind
                return
            if where is None and kind.startswith("connect_"):
                self._not_ready = kind
                return
            await self._close_conns()
            why = str(exc) or f"no answer within {PREPARE_TIMEOUT:g} s"
            raise LoadError(
                f"{self.config.target}: accepts connections but setup failed ({why}); "
                f"is it a {self.protocol} server?"
            ) from None
        self._ready = True

    def _start(self, due_ns: int, closed: bool) -> None:
        cycle = self._cycle
        op = cycle[self._i]
        self._i = (self._i + 1) % len(cycle)
        if self._not_ready is not None:
            # Not connected: the request fails at once (and a closed loop stops).
            if not self._abandoned:
                self.recorder.error(op, self._not_ready)
            return
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
        exc: BaseException | None = None if not fut.cancelled() else asyncio.CancelledError()
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
            self.recorder.error(op, self.classify(exc))
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

    def abandon(self, kind: str = "timeout") -> None:
        # Late replies are ignored from now on; what is left counts as `kind`.
        self._abandoned = True
        for op, n in self._outstanding.items():
            for _ in range(n):
                self.recorder.error(op, kind)
            self._outstanding[op] = 0

    async def close(self) -> None:
        self.stopping = True
        if self._ready:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._cleanup(), CLEANUP_TIMEOUT)
        await self._close_conns()

    async def _close_conns(self) -> None:
        for c in self.conns:
            if c is None:
                continue
            with contextlib.suppress(Exception):
                await asyncio.wait_for(c.close(), 2.0)
