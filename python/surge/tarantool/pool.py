"""`Pool`: one pipelined connection per Tarantool instance, with routing and failover.

Each instance gets one `Connection` (pipelining makes more pointless). A health
check task pings every instance each `health_interval` seconds and reads
`box.info.ro`, so requests go to instances that answered last time: writes to a
read-write one, reads round-robin over all (``mode="any"``) or replicas first
(``mode="ro"``). A request that fails to *connect* is retried on the next instance;
a request lost in flight is not retried (it may have run) and raises.

State changes are logged on the ``surge.tarantool`` logger, one line each: a
WARNING with the reason when an instance goes down, an INFO when it is back;
nothing for the failed checks in between. A health check is never cancelled:
one still running when the next round starts (a host that does not answer) is
waited for again rather than started anew, and its outcome is always read.
Connections refuse to retry a refused connect (``retry_connect=False``): the
pool has other instances to try, and the health checks find the way back.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence
from typing import Any

from surge.errors import ConnectError, InterfaceError, SurgeConnectionError
from surge.tarantool.connection import Connection, connect
from surge.tarantool.faults import describe, log, traceback_of

#: Seconds between health checks of every instance.
DEFAULT_HEALTH_INTERVAL = 1.0
#: A health check that takes longer than this marks the instance down.
DEFAULT_HEALTH_TIMEOUT = 1.0

_READS = frozenset({"select", "ping"})
MODES = ("rw", "ro", "any")


class NoHealthyInstanceError(SurgeConnectionError):
    """No instance of the pool can serve the request right now."""


class _Instance:
    __slots__ = ("address", "check", "conn", "healthy", "ro")

    def __init__(self, address: str, conn: Connection) -> None:
        self.address = address
        self.conn = conn
        self.healthy = True  # optimistic until the first check says otherwise
        self.ro = False
        #: The health check under way (or the last one).
        self.check: asyncio.Task | None = None

    @property
    def name(self) -> str:
        """host:port for the log (the address may carry a password)."""
        e = self.conn.engine
        return f"{e.host}:{e.port}"


class Pool:
    """Connections to several instances; `await pool.select(...)` like a Connection."""

    def __init__(
        self,
        addresses: Sequence[str],
        *,
        mode: str = "rw",
        health_interval: float = DEFAULT_HEALTH_INTERVAL,
        health_timeout: float = DEFAULT_HEALTH_TIMEOUT,
        **connect_kwargs: Any,
    ) -> None:
        if mode not in MODES:
            raise InterfaceError(f"mode must be one of {MODES}, not {mode!r}")
        if not addresses:
            raise InterfaceError("a pool needs at least one address")
        connect_kwargs.setdefault("connect_timeout", 1.0)
        connect_kwargs.setdefault("retry_connect", False)
        self.mode = mode
        self.health_interval = health_interval
        self.health_timeout = health_timeout
        self.instances = [_Instance(a, connect(a, **connect_kwargs)) for a in addresses]
        self._rr = 0
        self._health: asyncio.Task | None = None
        self._closed = False

    async def connect(self) -> Pool:
        """Check every instance once and start the health checks."""
        await self.check_health()
        if self._health is None:
            self._health = asyncio.get_running_loop().create_task(self._health_loop())
        return self

    async def __aenter__(self) -> Pool:
        return await self.connect()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        """Stop health checks and close every connection."""
        self._closed = True
        if self._health is not None:
            self._health.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._health
        await asyncio.gather(*(i.conn.close() for i in self.instances), return_exceptions=True)

    async def check_health(self) -> None:
        """Ping every instance now and read its `box.info.ro`."""
        checks: dict[asyncio.Task, _Instance] = {}
        for inst in self.instances:
            if inst.check is None or inst.check.done():
                inst.check = asyncio.get_running_loop().create_task(self._check(inst))
            checks[inst.check] = inst
        # Not wait_for: cancelling a check that waits for a connect would leave the
        # engine's connect task to fail with nobody reading its error.
        _, late = await asyncio.wait(checks, timeout=self.health_timeout)
        for task in late:
            self._down(checks[task], TimeoutError(f"no answer within {self.health_timeout} s"))

    async def _check(self, inst: _Instance) -> None:
        try:
            (ro,) = await inst.conn.eval("return box.info.ro")
        except Exception as exc:  # never raises: nobody may be waiting for it
            self._down(inst, exc)
        else:
            inst.ro = bool(ro)
            self._up(inst)

    def _down(self, inst: _Instance, exc: BaseException) -> None:
        if inst.healthy and not self._closed:
            log.warning(
                "tarantool %s is down: %s", inst.name, describe(exc), exc_info=traceback_of(exc)
            )
        inst.healthy = False

    def _up(self, inst: _Instance) -> None:
        if not inst.healthy and not self._closed:
            log.info("tarantool %s is up%s", inst.name, " (read-only)" if inst.ro else "")
        inst.healthy = True

    async def _health_loop(self) -> None:
        while not self._closed:
            await asyncio.sleep(self.health_interval)
            await self.check_health()

    def _candidates(self, write: bool) -> list[_Instance]:
        healthy = [i for i in self.instances if i.healthy]
        if write or self.mode == "rw":
            return [i for i in healthy if not i.ro]
        if self.mode == "ro":
            replicas = [i for i in healthy if i.ro]
            return replicas or healthy
        return healthy

    def instance(self, write: bool = True) -> Connection:
        """The connection the next request would use (round-robin)."""
        cands = self._candidates(write)
        if not cands:
            raise NoHealthyInstanceError(
                f"no {'read-write' if write else 'healthy'} instance among "
                f"{[i.address for i in self.instances]}"
            )
        self._rr = (self._rr + 1) % len(cands)
        return cands[self._rr].conn

    async def _run(self, method: str, *args: Any, **kwargs: Any) -> Any:
        write = method not in _READS
        tried = 0
        while True:
            conn = self.instance(write)
            try:
                return await getattr(conn, method)(*args, **kwargs)
            except ConnectError as exc:
                # Never sent: safe to try another instance.
                for inst in self.instances:
                    if inst.conn is conn:
                        self._down(inst, exc)
                tried += 1
                if tried >= len(self.instances):
                    raise

    def ping(self) -> Any:
        return self._run("ping")

    def select(self, space: int | str, key: Any = None, **kwargs: Any) -> Any:
        return self._run("select", space, key, **kwargs)

    def insert(self, space: int | str, t: Sequence[Any]) -> Any:
        return self._run("insert", space, t)

    def replace(self, space: int | str, t: Sequence[Any]) -> Any:
        return self._run("replace", space, t)

    def update(self, space: int | str, key: Any, ops: Sequence[Any], **kwargs: Any) -> Any:
        return self._run("update", space, key, ops, **kwargs)

    def upsert(self, space: int | str, t: Sequence[Any], ops: Sequence[Any]) -> Any:
        return self._run("upsert", space, t, ops)

    def delete(self, space: int | str, key: Any, **kwargs: Any) -> Any:
        return self._run("delete", space, key, **kwargs)

    def call(self, function: str, args: Sequence[Any] = ()) -> Any:
        return self._run("call", function, args)

    def eval(self, expr: str, args: Sequence[Any] = ()) -> Any:
        return self._run("eval", expr, args)

    def execute(self, query: str | int, params: Any = ()) -> Any:
        return self._run("execute", query, params)
