"""`Pool`: one pipelined connection per Tarantool instance, with routing and failover.

Each instance gets one `Connection` (pipelining makes more pointless). A health
check task asks every instance each `health_interval` seconds for `box.info.ro`
(and `box.info.id`), so requests go to instances that answered last time.

Routing, by mode (the pool's default, or ``mode=`` per call):

* ``"rw"``: the master (an instance with ``read_only = false``). Writes (insert,
  replace, update, upsert, delete) always go there; `call`, `eval` and `execute`
  too unless told otherwise, since they may write.
* ``"ro"``: replicas (read-only instances), round-robin; the master when no
  replica is up.
* ``"any"``: every healthy instance, round-robin.

`select` and `ping` use the pool's ``mode`` ("rw" by default: reads see the
pool's own writes; ``"ro"`` spreads them over replicas, which lag a little).

Failover: a request that fails to *connect* is retried on the next candidate; a
request lost in flight is not retried (it may have run) and raises
`ConnectionLostError`. A write that finds no master raises
`NoHealthyInstanceError` at once (never waits) until a replica is promoted
(``box.cfg{read_only = false}``); the pool then finds it at the next health check,
which every such failure also starts early, so writes flow again within
``health_interval`` plus a round trip. A write answered ER_READONLY (its instance
was demoted) did not run: the pool checks every instance and sends it once more
to the master it finds.

State changes are logged on the ``surge.tarantool`` logger, one line each: a
WARNING with the reason when an instance goes down, an INFO when it is back (or
changes role); nothing for the failed checks in between. A health check is never
cancelled: one still running when the next round starts (a host that does not
answer) is waited for again rather than started anew, and its outcome is always
read. Connections refuse to retry a refused connect (``retry_connect=False``):
the pool has other instances to try, and the health checks find the way back.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence
from typing import Any

from surge.errors import ConnectError, InterfaceError, SurgeConnectionError
from surge.tarantool.connection import Connection, connect
from surge.tarantool.errors import ReadOnlyError
from surge.tarantool.faults import describe, log, traceback_of

#: Seconds between health checks of every instance.
DEFAULT_HEALTH_INTERVAL = 1.0
#: A health check that takes longer than this marks the instance down.
DEFAULT_HEALTH_TIMEOUT = 1.0

MODES = ("rw", "ro", "any")
_HEALTH_LUA = "return box.info.ro, box.info.id"


class NoHealthyInstanceError(SurgeConnectionError):
    """No instance of the pool can serve the request right now (nothing was sent)."""


class _Instance:
    __slots__ = ("address", "check", "conn", "healthy", "id", "ro")

    def __init__(self, address: str, conn: Connection) -> None:
        self.address = address
        self.conn = conn
        self.healthy = True  # optimistic until the first check says otherwise
        self.ro = False
        #: The server's box.info.id (its number in the replica set), once checked.
        self.id: int | None = None
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
        _check_mode(mode)
        if not addresses:
            raise InterfaceError("a pool needs at least one address")
        connect_kwargs.setdefault("connect_timeout", 1.0)
        connect_kwargs.setdefault("retry_connect", False)
        self.mode = mode
        self.health_interval = health_interval
        self.health_timeout = health_timeout
        self.instances = [_Instance(a, connect(a, **connect_kwargs)) for a in addresses]
        self._rr = dict.fromkeys(MODES, 0)
        # Candidates by mode, rebuilt when an instance changes state (not per call).
        self._cands: dict[str, list[_Instance]] = {}
        self._rebuild()
        self._health: asyncio.Task | None = None
        self._early: asyncio.Task | None = None
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
        for task in (self._health, self._early):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        await asyncio.gather(*(i.conn.close() for i in self.instances), return_exceptions=True)

    # -- health -----------------------------------------------------------------------

    async def check_health(self) -> None:
        """Ask every instance now for its `box.info.ro` (never raises)."""
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
            ro, iid = await inst.conn.eval(_HEALTH_LUA)
        except Exception as exc:  # never raises: nobody may be waiting for it
            self._down(inst, exc)
        else:
            ro = bool(ro)
            if inst.healthy and ro != inst.ro and not self._closed:
                log.info("tarantool %s is now %s", inst.name, "read-only" if ro else "read-write")
            changed = ro != inst.ro
            inst.ro, inst.id = ro, iid
            self._up(inst)
            if changed:
                self._rebuild()

    def _down(self, inst: _Instance, exc: BaseException) -> None:
        if inst.healthy and not self._closed:
            log.warning(
                "tarantool %s is down: %s", inst.name, describe(exc), exc_info=traceback_of(exc)
            )
        if inst.healthy:
            inst.healthy = False
            self._rebuild()

    def _up(self, inst: _Instance) -> None:
        if not inst.healthy and not self._closed:
            log.info("tarantool %s is up%s", inst.name, " (read-only)" if inst.ro else "")
        if not inst.healthy:
            inst.healthy = True
            self._rebuild()

    async def _health_loop(self) -> None:
        while not self._closed:
            await asyncio.sleep(self.health_interval)
            await self.check_health()

    def _check_soon(self) -> None:
        """Start a health check now, in the background (one at a time)."""
        if self._closed or (self._early is not None and not self._early.done()):
            return
        self._early = asyncio.get_running_loop().create_task(self.check_health())

    # -- routing ----------------------------------------------------------------------

    def _rebuild(self) -> None:
        healthy = [i for i in self.instances if i.healthy]
        self._cands = {
            "rw": [i for i in healthy if not i.ro],
            "ro": [i for i in healthy if i.ro] or healthy,
            "any": healthy,
        }

    def _candidates(self, mode: str) -> list[_Instance]:
        return self._cands[mode]

    def _pick(self, mode: str) -> _Instance:
        cands = self._candidates(mode)
        if not cands:
            self._check_soon()
            if mode == "rw":
                known = [i.name for i in self.instances if not i.ro]
                raise NoHealthyInstanceError(
                    f"no read-write instance is up among {[i.name for i in self.instances]}"
                    + (f" (the last master, {known[0]}, is down)" if known else "")
                    + ": writes fail until one is promoted (box.cfg{read_only = false})"
                )
            raise NoHealthyInstanceError(
                f"no instance is up among {[i.name for i in self.instances]}"
            )
        n = self._rr[mode] = (self._rr[mode] + 1) % len(cands)
        return cands[n]

    def instance(self, write: bool = True, *, mode: str | None = None) -> Connection:
        """The connection the next request would use (round-robin): the master for a
        write, else by ``mode`` (the pool's by default)."""
        if mode is None:
            mode = "rw" if write else self.mode
        _check_mode(mode)
        return self._pick(mode).conn

    @property
    def master(self) -> Connection | None:
        """The master's connection as of the last health check (None when none is up)."""
        rw = self._candidates("rw")
        return rw[0].conn if rw else None

    async def _run(self, mode: str, method: str, *args: Any, **kwargs: Any) -> Any:
        tried = 0
        readonly_retried = False
        if not self._cands[mode]:
            # None known up for this mode: the last check may have caught a
            # switchover half-way (the old master read-only, the new one not yet
            # promoted). Look once more (bounded by `health_timeout`) before failing.
            await self.check_health()
        while True:
            inst = self._pick(mode)
            try:
                return await getattr(inst.conn, method)(*args, **kwargs)
            except ConnectError as exc:
                # Never sent: safe to try another instance.
                self._down(inst, exc)
                self._check_soon()
                tried += 1
                if tried >= len(self.instances):
                    raise
            except ReadOnlyError:
                # ER_READONLY: it did not run. The master moved: look again, once.
                if mode != "rw" or readonly_retried:
                    raise
                readonly_retried = True
                inst.ro = True
                self._rebuild()
                await self.check_health()
            except SurgeConnectionError:
                self._check_soon()  # lost in flight: may have run, so not retried
                raise

    # -- requests (the Connection's, routed) -----------------------------------------

    def ping(self, *, mode: str | None = None, timeout: float | None = None) -> Any:
        """Round trip to an instance picked by ``mode`` (the pool's by default)."""
        return self._run(_mode(mode, self.mode), "ping", timeout=timeout)

    def select(
        self, space: int | str, key: Any = None, *, mode: str | None = None, **kwargs: Any
    ) -> Any:
        """`Connection.select` on an instance picked by ``mode`` (the pool's by default)."""
        mode = self.mode if mode is None else _mode(mode, self.mode)
        if not self._cands[mode]:
            return self._run(mode, "select", space, key, **kwargs)  # raises when awaited
        conn = self._pick(mode).conn
        if conn.engine._ready:
            # The hot path: connected, so it cannot fail to connect, and a read is
            # never refused as read-only: nothing to retry, no coroutine around it.
            return conn.select(space, key, **kwargs)
        return self._run(mode, "select", space, key, **kwargs)

    def insert(self, space: int | str, t: Sequence[Any], *, timeout: float | None = None) -> Any:
        """`Connection.insert` on the master."""
        return self._run("rw", "insert", space, t, timeout=timeout)

    def replace(self, space: int | str, t: Sequence[Any], *, timeout: float | None = None) -> Any:
        """`Connection.replace` on the master."""
        return self._run("rw", "replace", space, t, timeout=timeout)

    def update(self, space: int | str, key: Any, ops: Sequence[Any], **kwargs: Any) -> Any:
        """`Connection.update` on the master."""
        return self._run("rw", "update", space, key, ops, **kwargs)

    def upsert(
        self,
        space: int | str,
        t: Sequence[Any],
        ops: Sequence[Any],
        *,
        timeout: float | None = None,
    ) -> Any:
        """`Connection.upsert` on the master."""
        return self._run("rw", "upsert", space, t, ops, timeout=timeout)

    def delete(self, space: int | str, key: Any, **kwargs: Any) -> Any:
        """`Connection.delete` on the master."""
        return self._run("rw", "delete", space, key, **kwargs)

    def call(
        self,
        function: str,
        args: Sequence[Any] = (),
        *,
        mode: str = "rw",
        timeout: float | None = None,
    ) -> Any:
        """`Connection.call`; on the master unless ``mode`` says it only reads."""
        return self._run(_mode(mode, "rw"), "call", function, args, timeout=timeout)

    def eval(
        self, expr: str, args: Sequence[Any] = (), *, mode: str = "rw", timeout: float | None = None
    ) -> Any:
        """`Connection.eval`; on the master unless ``mode`` says it only reads."""
        return self._run(_mode(mode, "rw"), "eval", expr, args, timeout=timeout)

    def execute(
        self,
        query: str | int,
        params: Any = (),
        *,
        mode: str = "rw",
        timeout: float | None = None,
    ) -> Any:
        """`Connection.execute` (SQL); on the master unless ``mode`` says it only reads."""
        return self._run(_mode(mode, "rw"), "execute", query, params, timeout=timeout)


def _check_mode(mode: str) -> None:
    if mode not in MODES:
        raise InterfaceError(f"mode must be one of {MODES}, not {mode!r}")


def _mode(mode: str | None, default: str) -> str:
    if mode is None:
        return default
    _check_mode(mode)
    return mode
